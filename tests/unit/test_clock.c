/*
 * base/clock: the deadlines the shipper and the sampler sleep to, and the
 * CPU-time clocks they report (one conversion each, in clock.c).
 */
#include <time.h>

#include "base/clock.h"
#include "harness.h"

static int64_t ts_ns(struct timespec t)
{
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* ns from now on the monotonic clock, normalized, for any ns: across a
 * second boundary, several seconds, zero and a negative one (now). */
static void test_mono_deadline(void)
{
    static const int64_t ns[] = {0, 1, 999999999, 1000000000, 1500000000, 5000000000LL, -7};
    for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
        int64_t want = ns[i] > 0 ? ns[i] : 0;
        int64_t before = tml__mono_ns();
        struct timespec t = tml__mono_deadline(ns[i]);
        int64_t after = tml__mono_ns();
        CHECK(t.tv_nsec >= 0 && t.tv_nsec < 1000000000);
        CHECK(ts_ns(t) >= before + want);
        CHECK(ts_ns(t) <= after + want);
    }
}

static void test_clock_ns(void)
{
    CHECK(tml__clock_ns(CLOCK_THREAD_CPUTIME_ID) >= 0);
    CHECK(tml__clock_ns(CLOCK_PROCESS_CPUTIME_ID) >= 0);
    CHECK_EQ_INT(tml__clock_ns((clockid_t)1000), -1);   /* no such clock (Linux has 16) */
    int64_t wall = tml__unix_ms();
    CHECK(wall > 1700000000000LL);   /* after 2023 */
}

#define TESTS X(test_mono_deadline) X(test_clock_ns)
#include "harness.h"
