/*
 * requests.c - what other threads ask the shipper thread, and wait for.
 *
 * A summary so far (tml_summary_json: the sink's answer, after the steps
 * this process completed before the call) and a flush (tml_flush: every
 * step out now, for a process about to exec). Each is a pair of counters
 * under the shipper's mutex: the asking thread bumps the request and waits
 * on a condition, with a deadline, until the shipper's pass has served
 * that number; the shipper serves after its drain, so the answer holds
 * every step that ended before the call. The training thread never waits
 * for anything but this, and only when it asked.
 */
#include "core/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"

static tml_shipper *const S = &tml__ship;

/* The request to serve now (its counter ahead of the one served), or 0. */
static uint64_t pending(const uint64_t *req, const uint64_t *done)
{
    pthread_mutex_lock(&S->mu);
    uint64_t r = *req != *done ? *req : 0;
    pthread_mutex_unlock(&S->mu);
    return r;
}

/* Under S->mu: asks the shipper and waits until it served this request
 * (it answers within ~3 s at worst; 5 s here): 0, or TML_ECONN. */
static int ask(uint64_t *req, const uint64_t *done)
{
    struct timespec until = tml__mono_deadline(5 * 1000000000LL);
    uint64_t mine = ++*req;
    pthread_cond_signal(&S->cv);
    int rc = 0;
    while (*done < mine && rc == 0)
        rc = pthread_cond_timedwait(&S->sum_cv, &S->mu, &until);
    return *done >= mine ? 0 : TML_ECONN;
}

/*
 * Answers a pending tml_summary_json() request, after this pass's drain so
 * the summary holds every step completed before the call (the wire sink
 * asks over this rank's own connection, after the steps it sent).
 */
void tml__serve_summary(int final)
{
    uint64_t req = pending(&S->sum_req, &S->sum_done);
    if (!req)
        return;
    tml_sink *sink = tml__setup.sink;
    char *json = NULL;
    int rc = final ? TML_ESTATE   /* shutting down: the final summary comes next */
                   : sink->ops->summary(sink, &json);
    pthread_mutex_lock(&S->mu);
    free(S->sum_json);
    S->sum_json = json;
    S->sum_rc = rc;
    S->sum_done = req;
    pthread_cond_broadcast(&S->sum_cv);
    pthread_mutex_unlock(&S->mu);
}

int tml__shipper_summary(char **out)
{
    /* the resources up to now, however short the run so far */
    tml__sampler_tick_now(S->sampler, 500 * 1000000LL);
    pthread_mutex_lock(&S->mu);
    int rc = ask(&S->sum_req, &S->sum_done);
    if (rc == 0) {
        rc = S->sum_rc;
        if (rc == 0 && S->sum_json) {
            *out = strdup(S->sum_json);
            if (!*out)
                rc = TML_ENOMEM;
        } else if (rc == 0) {
            rc = TML_ESTATE;
        }
    }
    pthread_mutex_unlock(&S->mu);
    return rc;
}

/*
 * Answers a pending tml_flush(): every step that ended before the call,
 * the samples and the counters so far. No goodbye: the process goes on,
 * or becomes a new image (os.exec*) that says hello again and that the
 * aggregator takes as the same rank restarted (tml__agg_hello).
 */
void tml__serve_flush(void)
{
    uint64_t req = pending(&S->flush_req, &S->flush_done);
    if (!req)
        return;
    tml__ship_all();
    tml__ship_stats();
    pthread_mutex_lock(&S->mu);
    S->flush_done = req;
    pthread_cond_broadcast(&S->sum_cv);
    pthread_mutex_unlock(&S->mu);
}

int tml__shipper_flush(void)
{
    pthread_mutex_lock(&S->mu);
    int rc = ask(&S->flush_req, &S->flush_done);
    pthread_mutex_unlock(&S->mu);
    return rc;
}

/* Flags for the next step to end on the calling thread (markers.c keeps
 * them with the thread's other marker state). */
int tml_mark_epoch_start(void)
{
    return tml__mark_next(TML_STEP_EPOCH_START);
}

int tml_mark_deep_dive(void)
{
    return tml__mark_next(TML_STEP_DEEP_DIVE);
}

/*
 * The deep dive's rows (tml_deep_dive()): copied here on the caller's thread
 * and left for the shipper, which delivers them in its next pass (woken
 * now) or its last; the caller never waits, so the training pays the copy
 * only, inside the profiled window.
 */
static int copy_deep_dive(tml_dd_window *d, const char *skipped, const tml_deep_dive_row *rows,
                          size_t n)
{
    snprintf(d->skipped, sizeof(d->skipped), "%s", skipped ? skipped : "");
    for (size_t i = 0; i < n && d->nrows < TML_DD_MAX_ROWS; i++)
        if (rows[i].self_ns > 0)
            tml__dd_add(d, rows[i].module, rows[i].op, rows[i].self_ns, rows[i].calls);
    return 0;
}

int tml_deep_dive(uint64_t first_step, uint64_t last_step, int64_t wall_ns, int cuda,
                  const char *skipped, const tml_deep_dive_row *rows, size_t n)
{
    tml_setup *c = &tml__setup;
    int st = atomic_load(&c->state);
    if (st == TML_ST_DISABLED)
        return TML_EDISABLED;
    if (st != TML_ST_ON || c->pid != getpid() || !S->started)
        return TML_ESTATE;
    if ((n && !rows) || (skipped && skipped[0] && n) || last_step < first_step)
        return TML_EINVAL;
    tml_dd_window *d = tml__dd_new();
    if (!d)
        return TML_ENOMEM;
    d->first_step = first_step;
    d->last_step = last_step;
    d->wall_ns = wall_ns < 0 ? 0 : wall_ns;
    d->cuda = cuda != 0;
    copy_deep_dive(d, skipped, rows, n);
    pthread_mutex_lock(&S->mu);
    tml__dd_free(S->dd);        /* one not yet delivered: the latest wins */
    S->dd = d;
    pthread_cond_signal(&S->cv);
    pthread_mutex_unlock(&S->mu);
    return 0;
}

/* Delivers the deep dive left by tml_deep_dive(), if any (after the
 * hello: the sink knows the rank). */
void tml__serve_deep_dive(void)
{
    if (!atomic_load(&tml__req.hello_sent))
        return;
    pthread_mutex_lock(&S->mu);
    tml_dd_window *d = S->dd;
    S->dd = NULL;
    pthread_mutex_unlock(&S->mu);
    if (!d)
        return;
    if (d->skipped[0])          /* the box says it too; the log keeps it with the run's */
        tml__engine_log("deep dive skipped", d->skipped);
    tml_sink *sink = tml__setup.sink;
    int rc = sink->ops->deep_dive ? sink->ops->deep_dive(sink, tml__setup.hello.info.rank, d)
                                  : TML_ESTATE;
    if (rc)
        tml__engine_log("deep dive not delivered", tml_strerror(rc));
    tml__dd_free(d);
}
