/*
 * harness.h - the unit-test harness: CHECK macros and a main() that runs
 * the TESTS list and prints "<name>: N passed, N failed" (tests/run sums
 * these lines into the suite's single closing line).
 *
 *     static void test_something(void) { CHECK(1 + 1 == 2); CHECK_EQ_INT(a, b); }
 *     #define TESTS X(test_something) X(test_other)
 *     #include "harness.h"   -- after the tests, it defines main()
 *
 * A test counts as failed when any CHECK in it fails.
 */
#ifndef TML_HARNESS_H
#define TML_HARNESS_H

#include <stdio.h>
#include <string.h>
#include <math.h>

static int harness_failures;

#define CHECK(cond) do { if (!(cond)) { harness_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECK_EQ_INT(a, b) do { long long a_ = (long long)(a), b_ = (long long)(b); \
    if (a_ != b_) { harness_failures++; fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", \
    __FILE__, __LINE__, #a, #b, a_, b_); } } while (0)
#define CHECK_NEAR(a, b, tol) do { double a_ = (a), b_ = (b); \
    if (!(fabs(a_ - b_) <= (tol))) { harness_failures++; fprintf(stderr, "%s:%d: %s ~= %s failed: %g vs %g\n", \
    __FILE__, __LINE__, #a, #b, a_, b_); } } while (0)
#define CHECK_STR(a, b) do { const char *a_ = (a), *b_ = (b); \
    if (!a_ || !b_ || strcmp(a_, b_) != 0) { harness_failures++; fprintf(stderr, "%s:%d: %s == %s failed: \"%s\" != \"%s\"\n", \
    __FILE__, __LINE__, #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); } } while (0)

#endif

#ifdef TESTS
#define X(fn) static void fn(void);
TESTS
#undef X
int main(int argc, char **argv)
{
    int passed = 0, failed = 0;
    const char *only = argc > 1 ? argv[1] : NULL;
#define X(fn) if (!only || strcmp(only, #fn) == 0) { int before = harness_failures; fn(); \
    if (harness_failures == before) passed++; else { failed++; fprintf(stderr, "FAIL %s\n", #fn); } }
    TESTS
#undef X
    const char *name = strrchr(argv[0], '/');
    printf("%s: %d passed, %d failed\n", name ? name + 1 : argv[0], passed, failed);
    return failed ? 1 : 0;
}
#endif
