/*
 * clock.c - the wall clock for timestamps (clock.h).
 */
#include "base/clock.h"

#include <stdio.h>

int64_t tml__unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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
