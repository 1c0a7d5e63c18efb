/*
 * What a C user has: the public header alone (no internal header is
 * included here). Every code tml_init() can return must be one of its
 * TML_E* codes, named by tml_strerror(): a code that leaves the library
 * without being in the header is a number the user cannot test for.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "traceml/traceml.h"
#include "harness.h"

/* Every public code has a name (TML_OK and the contiguous TML_E*). */
static void test_public_codes_named(void)
{
    for (int rc = TML_OK; rc >= TML_EEXIST; rc--)
        CHECK(strcmp(tml_strerror(rc), "unknown error") != 0);
    CHECK_STR(tml_strerror(TML_EEXIST - 1), "unknown error");
}

/* In-process, a run name whose folder exists: tml_init() says so with a
 * public code (it once returned an internal one, -20). */
static void test_init_existing_run_folder(void)
{
    char dir[] = "/tmp/tml_publicXXXXXX", run[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(run, sizeof(run), "%s/taken", dir);
    CHECK(mkdir(run, 0755) == 0);
    unsetenv("TRACEML_ADDR");
    unsetenv("TRACEML_DISABLED");
    tml_options o = {.run_name = "taken", .logs_dir = dir};
    int rc = tml_init(&o);
    CHECK_EQ_INT(rc, TML_EEXIST);
    CHECK(rc >= TML_EEXIST && rc <= TML_OK);
    CHECK_STR(tml_strerror(rc), "run folder exists already");
    rmdir(run);
    rmdir(dir);
}

#define TESTS X(test_public_codes_named) X(test_init_existing_run_folder)
#include "harness.h"
