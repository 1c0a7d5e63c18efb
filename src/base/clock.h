/*
 * clock.h - the clocks: monotonic for durations (never wall time), the
 * wall clock only for what a person reads (timestamps in files).
 */
#ifndef TML_CLOCK_H
#define TML_CLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in ns: every duration TraceML measures. Inline: the
 * markers read it on the hot path. */
static inline int64_t tml__mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t tml__mono_ms(void)
{
    return tml__mono_ns() / 1000000;
}

/* The CLOCK_MONOTONIC time ns from now, as pthread_cond_timedwait() wants
 * it for a condition variable on that clock (pthread_condattr_setclock). */
struct timespec tml__mono_deadline(int64_t ns);
/* Any clock in ns (the CPU-time ones: CLOCK_PROCESS_CPUTIME_ID,
 * CLOCK_THREAD_CPUTIME_ID, pthread_getcpuclockid()'s); -1 when it cannot
 * be read. */
int64_t tml__clock_ns(clockid_t id);

/* Seconds since start_ns, a tml__mono_ns() reading of this host (the
 * monotonic clock is one per host: never subtract another host's). */
static inline double tml__mono_s_since(int64_t start_ns)
{
    return (double)(tml__mono_ns() - start_ns) / 1e9;
}

/* Wall clock, ms since the epoch: for manifests, logs and reports. */
int64_t tml__unix_ms(void);
/* "2026-11-30T18:04:02.123Z" into out. */
void tml__iso_time(int64_t unix_ms, char *out, size_t cap);
/* Sleeps ms milliseconds (a signal may cut it short). */
void tml__sleep_ms(int ms);

#endif
