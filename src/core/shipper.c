/*
 * shipper.c - the shipper thread: from the rings to the sink.
 *
 * A native thread that never touches Python. Every 10-80 ms it drains the
 * rings, assembles step records (assemble.c), stamps each with the
 * process's RSS, lets GPU-timed steps wait for their CUDA events
 * (gpuclock.c), and hands records, resource samples and the rank's
 * counters to the sink (sink.h): the wire client under a launcher, the
 * in-process aggregator without one. Delivery failures drop records and
 * count them; they never reach the training loop.
 *
 * Identity first: a process that learns its rank from torch.distributed
 * (no RANK in its environment) says hello only once tml_set_rank() was
 * called or its first steps are ready, so the aggregator hears the right
 * rank. Until then samples stay in the sampler's queue.
 */
#include "core/engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/fs.h"
#include "base/strbuf.h"

#define SHIP_INTERVAL_NS 10000000L     /* 10 ms while steps stream in */
#define SHIP_IDLE_NS 80000000L         /* up to 80 ms when they trickle */
#define STATS_INTERVAL_NS 1000000000L  /* 1 s */
#define GPU_FINAL_WAIT_NS 2000000000L  /* at shutdown, for the last steps' events */

tml_shipper tml__ship = {.mu = PTHREAD_MUTEX_INITIALIZER};
static tml_shipper *const S = &tml__ship;

static tml_sink *sink(void)
{
    return tml__setup.sink;
}

void tml__engine_log(const char *what, const char *why)
{
    if (!tml__setup.run_dir[0])
        return;
    char path[PATH_MAX + 16], who[32];
    snprintf(path, sizeof(path), "%s/traceml.log", tml__setup.run_dir);
    snprintf(who, sizeof(who), "rank %d", (int)tml__setup.hello.info.rank);
    tml__log_line(path, who, "%s: %s", what, why);   /* timed, as every line there */
}

int tml_log_note(const char *text)
{
    if (!text || atomic_load_explicit(&tml__setup.state, memory_order_relaxed) != TML_ST_ON ||
        !tml__setup.run_dir[0])
        return TML_ESTATE;
    tml__engine_log("note", text);
    return 0;
}

/* ---- who we are ------------------------------------------------------ */

/* A tml_set_rank() that came before the hello. */
static void apply_identity(void)
{
    int64_t id = atomic_exchange(&tml__req.identity, 0);
    if (id <= 0)
        return;
    tml__setup.hello.info.rank = (int32_t)(id >> 32);
    tml__setup.hello.info.world_size = (int32_t)(id & 0x7fffffff);
    tml__setup.identity_from_env = 1;
}

/* 1 once the sink knows who we are: the identity is settled (from the
 * environment or tml_set_rank, or else the first steps are ready, or the
 * run ends) and the sink took the hello (a wire sink that cannot connect
 * yet is asked again on the next pass). A launcher says it only once it
 * trained itself, a step ended: an evaluation after its children joined
 * (mnist_hogwild's test()) makes no rank of it. */
static int say_hello(void)
{
    if (atomic_load_explicit(&tml__req.hello_sent, memory_order_relaxed))
        return 1;
    apply_identity();
    if (atomic_load(&tml__req.launcher) ? !S->saw_steps
                                        : !S->saw_events && !tml__setup.identity_from_env &&
                                              !S->stop)
        return 0;
    if (sink()->ops->hello(sink(), &tml__setup.hello) < 0)
        return 0;
    atomic_store(&tml__req.hello_sent, 1);
    return 1;
}

/* New loader settings or auto-timed models: in the next hello, or a
 * hello again. */
static void apply_loader(void)
{
    tml_rank_info *i = &tml__setup.hello.info;
    int64_t v = atomic_exchange(&tml__req.loader, 0) - 1;
    int models = tml__take_auto_models(i->auto_models, sizeof(i->auto_models));
    if (v >= 0) {
        i->loader_known = 1;
        i->loader_workers = (int32_t)(v >> 1);
        i->loader_pin_memory = (int32_t)(v & 1);
    }
    if ((v >= 0 || models) && atomic_load(&tml__req.hello_sent))
        sink()->ops->hello(sink(), &tml__setup.hello);
}

/* ---- delivery ---------------------------------------------------------- */

static void deliver_batch(void)
{
    if (S->nbatch == 0)
        return;
    int ok = say_hello() &&
             sink()->ops->steps(sink(), tml__setup.hello.info.rank, S->batch, S->nbatch) == 0;
    if (ok)
        S->stats.records_sent += S->nbatch;
    else
        S->stats.records_dropped += S->nbatch;
    S->nbatch = 0;
}

void tml__ship_record(const tml_step_record *r)
{
    S->saw_steps |= !(r->flags & TML_STEP_ABORTED);
    S->batch[S->nbatch] = *r;
    if (++S->nbatch == TML_WIRE_MAX_STEPS)
        deliver_batch();
}

static void update_stats(void)
{
    uint64_t dropped = atomic_load(&tml__rings.no_slot_drops) + tml__comm_dropped();
    uint64_t events = 0, glue = 0;
    for (int i = 0; i < TML_MAX_RINGS; i++) {
        dropped += atomic_load(&tml__rings.slot[i].ring.dropped);
        events += tml__rings.slot[i].as.events_in_steps;
        glue += atomic_load_explicit(&tml__rings.slot[i].glue_calls, memory_order_relaxed);
    }
    S->stats.events_dropped = dropped;
    uint64_t steps = S->stats.records_sent + S->stats.records_dropped;
    int64_t call = atomic_load(&tml__req.call_cost_ns);
    int64_t per_event = tml__setup.pair_cost_ns + 2 * call;
    /* what the training thread pays: every marker pair with its glue, and
     * the glue calls that recorded nothing (docs/performance.md) */
    double paid = (double)events * (double)per_event +
                  (double)glue * 2.0 * (double)call;
    S->stats.overhead_ns_per_step = steps ? (int64_t)(paid / (double)steps) : -1;
    /* the background: this thread and the sampler's */
    int64_t self = tml__clock_ns(CLOCK_THREAD_CPUTIME_ID);
    if (self >= 0) {
        int64_t sampler = S->sampler ? tml__sampler_cpu_ns(S->sampler) : -1;
        S->stats.shipper_cpu_ns = self + (sampler > 0 ? sampler : 0);
    }
}

static void send_stats(int bye)
{
    update_stats();
    if (say_hello())
        sink()->ops->stats(sink(), tml__setup.hello.info.rank, &S->stats, bye);
}

/* The sampler's samples; kept in its queue until we said who we are,
 * dropped and counted when the sink does not take them. */
static void deliver_samples(void)
{
    size_t n;
    if (!S->sampler || !atomic_load(&tml__req.hello_sent))
        return;
    if (!S->sbuf) {
        S->sbuf = malloc(TML_WIRE_MAX_SAMPLES * sizeof(*S->sbuf));
        if (!S->sbuf)
            return;
    }
    while ((n = tml__sampler_take(S->sampler, S->sbuf, TML_WIRE_MAX_SAMPLES)) > 0) {
        for (size_t k = 0; k < n; k++)
            S->sbuf[k].rank = tml__setup.hello.info.rank;   /* the identity may have come late */
        if (sink()->ops->samples(sink(), S->sbuf, n) < 0)
            S->samples_dropped += n;
    }
}

/* ---- draining the rings -------------------------------------------------- */

/* A reading is late (the loop had stopped) when no step ended for this
 * many times the pass's longest step: beside other processes one step can
 * take three times the one before it (CI 35's healthy run, whose readings
 * mid-step were taken for late ones), and a loop's end was 13 ms after
 * 1.7 ms steps. */
#define RSS_LATE_STEPS 4

/* This pass's RSS reading: taken when its first step is assembled, or at
 * its end when none was (bytes -2: not yet), so the next pass has an
 * anchor even for its first steps. A ring's steps share it, spread over
 * the time they ran (tml__rss_at). */
typedef struct rss_pass {
    int64_t bytes, ns;
} rss_pass;

static void rss_read(rss_pass *rp)
{
    if (rp->bytes == -2) {
        rp->bytes = tml__rss_bytes();
        rp->ns = tml__mono_ns();
    }
}

/* Everything in one ring into records; the number of events it held. */
static uint32_t drain_slot(tml_slot *s, int64_t now, rss_pass *rp)
{
    tml_event *ev = S->events;
    tml_step_record rec;
    uint32_t n = tml__ring_pop(&s->ring, ev, TML_RING_CAP);
    int64_t longest, from = -1, to = tml__asm_last_end(ev, n, s->as.last_end_ns, &longest);
    int late = -1;                     /* -1: not known before the reading */
    if (n)
        S->saw_events = 1;
    for (uint32_t k = 0; k < n; k++) {
        if (!tml__asm_feed(&s->as, &ev[k], &rec))
            continue;
        rss_read(rp);                  /* once per pass, never per marker */
        if (from < 0)
            from = rec.start_ns > S->rss_prev_ns ? rec.start_ns : S->rss_prev_ns;
        if (late < 0)   /* no step for RSS_LATE_STEPS of its longest, no event since the pop */
            late = longest > 0 && rp->ns - to > RSS_LATE_STEPS * longest &&
                   atomic_load_explicit(&s->ring.head, memory_order_acquire) ==
                       atomic_load_explicit(&s->ring.tail, memory_order_relaxed);
        rec.rss_bytes = tml__rss_at(rec.start_ns + rec.traced_ns, S->rss_prev, rp->bytes,
                                    from, to < rp->ns ? to : rp->ns, late);
        if (tml__gpu_marks_any(&s->as.gpu))
            tml__gpu_wait(s, &rec, now);
        else
            tml__ship_record(&rec);
    }
    return n;
}

/* A ring whose thread is gone, once drained and its steps out, goes back
 * to the pool. */
static void recycle(tml_slot *s)
{
    uint64_t lost = s->as.records_lost, evs = s->as.events_in_steps;
    tml__asm_init(&s->as);
    s->as.records_lost = lost;
    s->as.events_in_steps = evs;
    atomic_store(&s->state, TML_SLOT_FREE);
}

/* One pass over every ring; returns the most events any ring held, which
 * sets how long the shipper may sleep next (shipper_main). */
static uint32_t drain(int final)
{
    uint32_t busiest = 0;
    rss_pass rp = { -2, 0 };
    int64_t now = tml__mono_ns();
    for (int i = 0; i < TML_MAX_RINGS; i++) {
        tml_slot *s = &tml__rings.slot[i];
        int st = atomic_load_explicit(&s->state, memory_order_acquire);
        if (st == TML_SLOT_FREE)
            continue;
        uint32_t popped = drain_slot(s, now, &rp);
        if (popped > busiest)
            busiest = popped;
        tml__gpu_flush(s, now, final);
        if (st == TML_SLOT_RETIRED && s->plen == 0)
            recycle(s);
    }
    rss_read(&rp);          /* no step ended: still a reading, the next pass's anchor */
    if (rp.bytes >= 0) {
        S->rss_prev = rp.bytes;
        S->rss_prev_ns = rp.ns;
    }
    deliver_batch();
    return busiest;
}

/* ---- everything out ------------------------------------------------------ */

/* Every step out, waiting a moment for the last CUDA events (never the
 * training loop's time; then they go without GPU figures), and the
 * samples so far. For the last pass and tml_flush() (requests.c). */
void tml__ship_all(void)
{
    drain(0);
    int64_t deadline = tml__mono_ns() + GPU_FINAL_WAIT_NS;
    while (tml__gpu_waiting() && tml__mono_ns() < deadline) {
        tml__sleep_ms(2);
        drain(0);
    }
    drain(1);
    deliver_samples();
}

void tml__ship_stats(void)
{
    send_stats(0);
}

/* ---- the thread ---------------------------------------------------------- */

/* The end of the run: every step out, the last samples and the goodbye
 * (a flush asked meanwhile is answered on the way). */
static void last_pass(void)
{
    apply_loader();
    say_hello();
    tml__serve_flush();
    tml__ship_all();
    tml__serve_deep_dive();
    if (S->samples_dropped)
        tml__engine_log("resource samples dropped (no aggregator)", "see the sampler");
    send_stats(1);
    tml__serve_summary(1);
}

/* The shipper wakes every 10 ms while a ring fills quickly, and sleeps up
 * to 80 ms (doubling) while steps trickle in: on a virtual machine each
 * wake-up costs tens of µs of kernel time, ~1% of a core at 100 a second.
 * The bound keeps every ring under a sixteenth full at the rate it saw,
 * so an 8x faster loop still fits (TML_RING_CAP); requests (summary,
 * shutdown) signal the condition and are served at once. */
static void *shipper_main(void *arg)
{
    (void)arg;
    int64_t next_stats = tml__mono_ns() + STATS_INTERVAL_NS;
    int64_t wait_ns = SHIP_INTERVAL_NS;
    pthread_mutex_lock(&S->mu);
    while (!S->stop) {
        struct timespec until = tml__mono_deadline(wait_ns);
        pthread_cond_timedwait(&S->cv, &S->mu, &until);
        if (S->stop)
            break;
        pthread_mutex_unlock(&S->mu);
        int64_t now = tml__mono_ns();
        say_hello();
        apply_loader();
        if (drain(0) > TML_RING_CAP / 16)
            wait_ns = SHIP_INTERVAL_NS;
        else if ((wait_ns *= 2) > SHIP_IDLE_NS)
            wait_ns = SHIP_IDLE_NS;
        deliver_samples();
        tml__serve_summary(0);
        tml__serve_flush();
        tml__serve_deep_dive();
        if (now >= next_stats) {
            send_stats(0);
            next_stats = now + STATS_INTERVAL_NS;
        }
        pthread_mutex_lock(&S->mu);
    }
    pthread_mutex_unlock(&S->mu);
    last_pass();
    return NULL;
}

/* The shipper sleeps on condition variables against the monotonic clock
 * (the default, CLOCK_REALTIME, would turn its sleep into a busy loop or
 * a hang when the wall clock jumps). */
static void init_cond(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&S->cv, &ca);
    pthread_cond_init(&S->sum_cv, &ca);
    pthread_condattr_destroy(&ca);
}

int tml__shipper_start(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_cond);
    if (!S->batch)
        S->batch = malloc(TML_WIRE_MAX_STEPS * sizeof(*S->batch));
    if (!S->events)
        S->events = malloc(TML_RING_CAP * sizeof(*S->events));
    if (!S->batch || !S->events)
        return TML_ENOMEM;
    memset(&S->stats, 0, sizeof(S->stats));
    S->stats.overhead_ns_per_step = -1;
    S->stop = 0;
    S->saw_events = 0;
    S->saw_steps = 0;
    S->nbatch = 0;
    S->rss_prev = -1;
    S->samples_dropped = 0;
    /* Resources: this process always; the host once per node (local rank
     * 0); the rank's GPU through NVML. A sampler that cannot start only
     * means n/a in the summary. Started before the shipper, which reads
     * S->sampler from then on. */
    const tml_rank_info *i = &tml__setup.hello.info;
    tml_setup *c = &tml__setup;
    tml_sampler_opts so = {.interval_s = c->interval_s, .rank = i->rank, .node = i->node_rank,
                           .local_rank = i->local_rank, .host = i->local_rank == 0,
                           .gpu = 1, .cuda_bytes = tml__req.cuda_bytes,
                           .libnvml = c->libnvml,
                           .visible_devices = c->visible_devices_set ? c->visible_devices : NULL};
    if (tml__sampler_start(&so, &S->sampler) < 0) {
        S->sampler = NULL;
        tml__engine_log("resource sampler", "could not start; system and process metrics are n/a");
    }
    if (pthread_create(&S->thread, NULL, shipper_main, NULL) != 0) {
        tml__sampler_stop(S->sampler);
        S->sampler = NULL;
        return TML_ENOMEM;
    }
    S->started = 1;
    return 0;
}

void tml__shipper_stop(void)
{
    /* the sampler first: its last samples go out with the shipper's last pass */
    tml__sampler_halt(S->sampler);
    pthread_mutex_lock(&S->mu);
    S->stop = 1;
    pthread_cond_signal(&S->cv);
    pthread_mutex_unlock(&S->mu);
    pthread_join(S->thread, NULL);
    S->started = 0;
    tml__sampler_stop(S->sampler);
    S->sampler = NULL;
}
