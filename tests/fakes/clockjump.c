/*
 * clockjump.c - a wall clock that jumps, for the tests of durations.
 *
 * LD_PRELOAD'ed with TRACEML_TEST_CLOCK_FILE set to a file, it adds the
 * number of seconds that file holds (signed, "86400", "-3600"; missing or
 * empty: 0) to every reading of the wall clock: clock_gettime() of
 * CLOCK_REALTIME (and its _COARSE variant), gettimeofday() and time().
 * The file is read at each call, so a test moves the clock of every
 * process of a run (launcher, aggregator, training) mid-run, without
 * root, by rewriting it. The monotonic clocks are left alone: what TraceML
 * reports as a duration must not move. Never installed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static long long offset_s(void)
{
    const char *path = getenv("TRACEML_TEST_CLOCK_FILE");
    char buf[32];
    if (!path)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    return strtoll(buf, NULL, 10);
}

static int real_clock_gettime(clockid_t id, struct timespec *ts)
{
    static clock_gettime_fn real;
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "clock_gettime");
    return real ? real(id, ts) : -1;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    int rc = real_clock_gettime(id, ts);
    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
        ts->tv_sec += (time_t)offset_s();
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    struct timespec ts;
    (void)tz;
    if (clock_gettime(CLOCK_REALTIME, &ts) < 0)
        return -1;
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *out)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) < 0)
        return (time_t)-1;
    if (out)
        *out = ts.tv_sec;
    return ts.tv_sec;
}
