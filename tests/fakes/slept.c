/*
 * slept.c - what a C training really slept, for the accuracy tests.
 *
 * LD_PRELOAD'ed by a test with TRACEML_TEST_SLEPT set to a folder, it times
 * every nanosleep() of the process's main thread and appends "<asked ms>
 * <slept ms>" to <folder>/<pid>, as tests/e2e/slept/sitecustomize.py does
 * for Python's time.sleep(). The test then compares TraceML's figure with
 * what the scheduler really gave the training, not with the delay it asked
 * for: a loaded machine overshoots that. Only the main thread's sleeps
 * are kept (TraceML's own threads wait too), and with
 * TRACEML_TEST_SLEPT_PROG only a program of that name's (not the
 * launcher's, which waits in 5 ms sleeps). Never installed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef int (*nanosleep_fn)(const struct timespec *, struct timespec *);

static double ms_between(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

static void note(const struct timespec *req, double slept_ms)
{
    const char *dir = getenv("TRACEML_TEST_SLEPT"), *prog = getenv("TRACEML_TEST_SLEPT_PROG");
    char path[4096];
    if (!dir || !req || syscall(SYS_gettid) != getpid() ||
        (prog && strcmp(prog, program_invocation_short_name) != 0))
        return;
    snprintf(path, sizeof(path), "%s/%d", dir, (int)getpid());
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    fprintf(f, "%.6f %.6f\n", (double)req->tv_sec * 1e3 + (double)req->tv_nsec / 1e6, slept_ms);
    fclose(f);
}

int nanosleep(const struct timespec *req, struct timespec *rem)
{
    static nanosleep_fn real;
    struct timespec a, b;
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "nanosleep");
    if (!real)
        return -1;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int rc = real(req, rem);
    clock_gettime(CLOCK_MONOTONIC, &b);
    note(req, ms_between(&a, &b));
    return rc;
}
