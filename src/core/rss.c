/*
 * rss.c - each step's RSS, from the shipper's readings.
 *
 * The hot path makes no system call (SPEC 8), so the shipper reads
 * /proc/self/statm once a pass. The growth since the last pass's reading
 * is spread over the time the pass's steps ran, so the last step gets the
 * reading and idle time around the steps (start-up, a pause, the pass's
 * own delay) takes none. Without an earlier reading a pass's steps all get
 * its reading (a flat start made a creeping series' slope 16% short on a
 * fast machine before the first pass read one).
 *
 * A drop is never dated back: the steps keep the earlier reading, as the
 * memory a loop frees and takes again within its steps was theirs. Unless
 * the reading came late: no step had ended for four times the pass's
 * longest step, and the thread had pushed nothing since its ring was read
 * (shipper.c, RSS_LATE_STEPS). The loop had stopped (main() returned and
 * let go of its memory before the atexit stop, or an evaluation ran), and
 * the drop says nothing of the steps since the earlier reading, so their
 * RSS is missing. Keeping the earlier one made the last 80 ms of a run
 * flat, and a 260 ms run creeping 4 MiB a step measured 3.4.
 */
#include "core/assemble.h"
#include "model/record.h"

int64_t tml__rss_at(int64_t end, int64_t prev, int64_t now, int64_t from, int64_t to, int late)
{
    if (prev < 0 || now < 0)
        return now;
    if (end <= from)
        return prev;
    if (now < prev)
        return late ? TML_MISSING : prev;
    if (end >= to)
        return now;
    return prev + (int64_t)((double)(now - prev) * (double)(end - from) / (double)(to - from));
}

int64_t tml__asm_last_end(const tml_event *ev, uint32_t n, int64_t prev, int64_t *longest)
{
    int64_t last = 0;
    *longest = 0;
    for (uint32_t k = 0; k < n; k++) {
        if (ev[k].kind != TML_EV_STEP_END)
            continue;
        if (prev > 0 && ev[k].t0 - prev > *longest)
            *longest = ev[k].t0 - prev;
        prev = last = ev[k].t0;
    }
    return last;
}
