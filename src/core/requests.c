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

#include <stdlib.h>
#include <string.h>

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
