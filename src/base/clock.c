/*
 * clock.c - the wall clock for timestamps, deadlines and the CPU-time
 * clocks (clock.h); the monotonic clock itself is inline in clock.h.
 */
#include "base/clock.h"

#include <stdio.h>

int64_t tml__clock_ns(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) < 0)
        return -1;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t tml__unix_ms(void)
{
    return tml__clock_ns(CLOCK_REALTIME) / 1000000;
}

struct timespec tml__mono_deadline(int64_t ns)
{
    int64_t at = tml__mono_ns() + (ns > 0 ? ns : 0);
    return (struct timespec){.tv_sec = (time_t)(at / 1000000000),
                             .tv_nsec = (long)(at % 1000000000)};
}

void tml__iso_time(int64_t unix_ms, char *out, size_t cap)
{
    time_t t = (time_t)(unix_ms / 1000);
    struct tm tm;
    char tmp[32];
    if (!gmtime_r(&t, &tm) || strftime(tmp, sizeof(tmp), "%Y-%m-%dT%H:%M:%S", &tm) == 0)
        tmp[0] = '\0';
    snprintf(out, cap, "%s.%03dZ", tmp, (int)(unix_ms % 1000));
}

void tml__sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}
