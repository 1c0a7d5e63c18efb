/*
 * trace.c - the engine inside a traced process: the public marker API, the
 * per-thread rings, and the shipper thread.
 *
 * The training thread's side is kept as small as we can make it. A marker
 * reads the clock and writes one event into the calling thread's ring;
 * nesting depth and the start of the outermost call live in thread-local
 * storage, so a begin/end pair becomes a single "span" event written at the
 * end. No allocation, lock or system call besides the clock (vDSO).
 *
 * Rings come from a fixed pool claimed once per thread with a CAS; a thread
 * that exits gives its ring back through a pthread key destructor and the
 * shipper recycles it after draining it.
 *
 * The shipper is a native thread that never touches Python. Every few
 * milliseconds it drains the rings, assembles step records (assemble.c) and
 * hands them on: over the wire to the aggregator named by TRACEML_ADDR, or,
 * when the process was started without a launcher, straight into an
 * aggregator living in this process, which writes the run folder at
 * shutdown. Delivery failures drop records and count them; they never reach
 * the training loop.
 *
 * Two more background pieces hang off the shipper. GPU clock: a thread that
 * called tml_set_cuda_stream() also records a CUDA event per boundary (one
 * cuEventRecord, no wait); its completed step records wait in a small
 * per-ring queue until the shipper sees every event of the step completed
 * (cuEventQuery, never a synchronize) and fills the gpu_* fields, or gives
 * up on them after a few seconds. Resources: a sampler thread
 * (sample/sampler.c) reads /proc and NVML every interval and the shipper
 * forwards its samples; the shipper also reads the process RSS once per
 * pass and stamps it on the steps that completed in that pass.
 */
#include "base/clock.h"
#include "traceml/traceml.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "agg/agg.h"
#include "agg/rundir.h"
#include "core/assemble.h"
#include "core/client.h"
#include "core/ring.h"
#include "gpu/cuda.h"
#include "model/sample.h"
#include "sample/sampler.h"
#include "wire/wire.h"

#define MAX_RINGS 64
#define SHIP_INTERVAL_NS 10000000L     /* 10 ms while steps stream in */
#define SHIP_IDLE_NS 80000000L         /* up to 80 ms when they trickle */
#define STATS_INTERVAL_NS 1000000000L  /* 1 s */
#define RECONNECT_NS 1000000000L
#define GPU_POOL_EVENTS 4096
#define GPU_PENDING 256               /* steps waiting for their events */
#define GPU_GIVE_UP_NS 5000000000L    /* events not done after 5 s: no GPU figures */
#define GPU_FINAL_WAIT_NS 2000000000L /* at shutdown, for the last steps' events */

enum { ST_OFF = 0, ST_ON = 1, ST_DISABLED = 2, ST_DONE = 3 };
enum { SLOT_FREE = 0, SLOT_USED = 1, SLOT_RETIRED = 2 };

/* A step record waiting for its CUDA events. */
typedef struct gpending {
    tml_step_record rec;
    tml_gpu_marks marks;
    int64_t since_ns;
} gpending;

typedef struct slot {
    tml_ring ring;
    _Atomic int state;
    tml_assembler as;          /* shipper only */
    /* GPU clock: the event pool of the thread that owns this ring (kept
     * across threads and inits: events belong to a CUDA context) */
    _Atomic(tml_gpu_pool *) gpu;
    gpending *pend;            /* shipper only: ring of GPU_PENDING */
    size_t phead, plen;
} slot;

typedef struct tls_state {
    slot *s;
    uint32_t gen;              /* engine generation the slot belongs to */
    uint32_t step_depth;
    uint64_t next_step;
    uint32_t depth[TML_PHASE_COUNT];
    int64_t t0[TML_PHASE_COUNT];
    tml_gpu_pool *gpu;         /* set by tml_set_cuda_stream */
    void *stream;
    int64_t gseq[TML_PHASE_COUNT];
    int64_t gstep;
} tls_state;

static struct engine {
    _Atomic int state;
    _Atomic uint32_t gen;
    /* Identity: from the environment, else set later by tml_set_rank()
     * (packed rank << 32 | world size, never 0; 0 = none). Without an identity
     * from the environment the handshake waits for the first step, so a
     * rank that learns who it is from torch.distributed says so first. */
    _Atomic int64_t pending_identity;
    /* Loader settings from tml_set_loader_config (packed workers << 1 |
     * pin_memory, plus one; 0 = none); the shipper puts them into its hello, or
     * sends an IDENTITY frame when the handshake is done already. */
    _Atomic int64_t pending_loader;
    int identity_from_env;
    int saw_events;
    slot slots[MAX_RINGS];
    _Atomic uint64_t no_slot_drops;   /* events from threads beyond MAX_RINGS */

    /* configuration, fixed between init and shutdown */
    char run_name[128], logs_dir[PATH_MAX], run_dir[PATH_MAX];
    char addr[300];
    uint32_t instrumented;
    int opts_disabled;
    int explicit_name, explicit_logs;
    tml_hello hello;
    pid_t pid;

    /* shipper */
    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    int fd;                       /* -1 when disconnected */
    int auth_failed;
    int64_t next_connect_ns;
    tml_agg *agg;                 /* in-process mode */
    tml_rank_stats stats;
    tml_step_record *batch;
    size_t nbatch;
    tml_strbuf out;

    int64_t rss_prev, rss_prev_ns; /* shipper: the last pass's RSS reading, -1 none */
    int64_t pair_cost_ns;         /* one begin/end pair through the API */
    _Atomic int64_t call_cost_ns; /* the caller's glue, per call */
    int64_t start_unix_ms;
    char *summary_text;

    /* resources */
    tml_sampler *sampler;
    tml_sample *sbuf;             /* shipper: samples in flight */
    uint64_t samples_dropped;
    _Atomic int64_t cuda_bytes[3];   /* allocated, reserved, device total; -1 unknown */

    /* tml_summary_json(): a caller asks (sum_req++), the shipper answers
     * (sum_done = the request it served) under mu, signalling sum_cv. */
    pthread_cond_t sum_cv;
    uint64_t sum_req, sum_done;
    char *sum_json;
    int sum_rc;
} E = {.mu = PTHREAD_MUTEX_INITIALIZER};   /* all zero: .bss, not 12 MB of .data;
                                             * fd is set to -1 by tml_init() */

static _Thread_local tls_state T;
static pthread_key_t exit_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

int64_t tml_now_ns(void)
{
    return tml__mono_ns();
}

const char *tml_version(void)
{
    return TML_VERSION_STRING;
}

/* ---- the hot path ---------------------------------------------------- */

static void on_thread_exit(void *p)
{
    slot *s = p;
    if (s)
        atomic_store_explicit(&s->state, SLOT_RETIRED, memory_order_release);
}

static void make_key(void)
{
    pthread_key_create(&exit_key, on_thread_exit);
}

/* Slow path, once per thread: claim a ring from the pool. */
static slot *claim_slot(void)
{
    uint32_t gen = atomic_load_explicit(&E.gen, memory_order_acquire);
    for (int i = 0; i < MAX_RINGS; i++) {
        int expect = SLOT_FREE;
        if (atomic_compare_exchange_strong(&E.slots[i].state, &expect, SLOT_USED)) {
            pthread_once(&key_once, make_key);
            pthread_setspecific(exit_key, &E.slots[i]);
            memset(&T, 0, sizeof(T));
            T.s = &E.slots[i];
            T.gen = gen;
            return T.s;
        }
    }
    return NULL;
}

static inline slot *my_slot(void)
{
    if (__builtin_expect(T.s != NULL &&
                         T.gen == atomic_load_explicit(&E.gen, memory_order_relaxed), 1))
        return T.s;
    return claim_slot();
}

static inline int push(uint32_t kind, uint32_t arg, int64_t t0, int64_t t1)
{
    slot *s = my_slot();
    if (__builtin_expect(!s, 0)) {
        atomic_fetch_add_explicit(&E.no_slot_drops, 1, memory_order_relaxed);
        return TML_EFULL;
    }
    return tml__ring_push(&s->ring, kind, arg, t0, t1) < 0 ? TML_EFULL : 0;
}

static inline int check_on(void)
{
    int st = atomic_load_explicit(&E.state, memory_order_relaxed);
    if (__builtin_expect(st == ST_ON, 1))
        return 0;
    return st == ST_DISABLED ? TML_EDISABLED : TML_ESTATE;
}

int tml_step_begin(void)
{
    int rc = check_on();
    if (rc)
        return rc;
    int64_t t = tml_now_ns();
    if (!my_slot())
        return push(TML_EV_STEP_BEGIN, 0, t, 0);
    if (T.step_depth++ > 0)
        return 0;
    if (T.gpu)
        T.gstep = tml__gpu_pool_record(T.gpu, T.stream);
    return push(TML_EV_STEP_BEGIN, 0, t, (int64_t)T.next_step++);
}

static int step_end(uint32_t flags)
{
    int rc = check_on();
    if (rc)
        return rc;
    int64_t t = tml_now_ns();
    if (!my_slot() || T.step_depth == 0)
        return TML_ESTATE;
    if (--T.step_depth > 0)
        return 0;
    /* A phase left open by an exception must not leak into the next step. */
    for (int p = 0; p < TML_PHASE_COUNT; p++)
        T.depth[p] = 0;
    if (T.gpu)
        push(TML_EV_GPU_STEP, 0, T.gstep, tml__gpu_pool_record(T.gpu, T.stream));
    return push(TML_EV_STEP_END, flags, t, 0);
}

int tml_step_end(void)
{
    return step_end(0);
}

int tml_step_abort(void)
{
    return step_end(TML_STEP_ABORTED);
}

int tml_phase_begin(tml_phase phase)
{
    int rc = check_on();
    if (rc)
        return rc;
    if ((unsigned)phase >= TML_PHASE_COUNT)
        return TML_EINVAL;
    if (!my_slot())
        return TML_EFULL;
    if (T.depth[phase]++ == 0) {
        if (T.gpu)
            T.gseq[phase] = tml__gpu_pool_record(T.gpu, T.stream);
        T.t0[phase] = tml_now_ns();
    }
    return 0;
}

int tml_phase_end(tml_phase phase)
{
    int rc = check_on();
    if (rc)
        return rc;
    if ((unsigned)phase >= TML_PHASE_COUNT)
        return TML_EINVAL;
    if (!my_slot() || T.depth[phase] == 0)
        return 0;
    if (--T.depth[phase] > 0)
        return 0;
    int64_t t = tml_now_ns();
    if (!T.gpu)
        return push(TML_EV_SPAN, (uint32_t)phase, T.t0[phase], t);
    int64_t e = tml__gpu_pool_record(T.gpu, T.stream);
    rc = push(TML_EV_SPAN, (uint32_t)phase, T.t0[phase], t);
    push(TML_EV_GPU_SPAN, (uint32_t)phase, T.gseq[phase], e);
    return rc;
}

int tml_phase_cancel(tml_phase phase)
{
    int rc = check_on();
    if (rc)
        return rc;
    if ((unsigned)phase >= TML_PHASE_COUNT)
        return TML_EINVAL;
    if (my_slot() && T.depth[phase] > 0)
        T.depth[phase]--;
    return 0;
}

int tml_cuda_memory(int64_t allocated_bytes, int64_t reserved_bytes,
                    int64_t allocated_peak_bytes, int64_t reserved_peak_bytes,
                    int64_t device_total_bytes)
{
    int rc = check_on();
    if (rc)
        return rc;
    if (allocated_bytes >= 0)
        atomic_store_explicit(&E.cuda_bytes[0], allocated_bytes, memory_order_relaxed);
    if (reserved_bytes >= 0)
        atomic_store_explicit(&E.cuda_bytes[1], reserved_bytes, memory_order_relaxed);
    if (device_total_bytes > 0)
        atomic_store_explicit(&E.cuda_bytes[2], device_total_bytes, memory_order_relaxed);
    if (allocated_bytes >= 0)
        rc = push(TML_EV_MEM, 0, allocated_bytes, allocated_peak_bytes >= 0 ? allocated_peak_bytes : -1);
    if (reserved_bytes >= 0 && rc == 0)
        rc = push(TML_EV_MEM, 1, reserved_bytes, reserved_peak_bytes >= 0 ? reserved_peak_bytes : -1);
    return rc;
}

int tml_set_cuda_stream(void *stream)
{
    int rc = check_on();
    if (rc)
        return rc;
    slot *sl = my_slot();
    if (!sl)
        return TML_EFULL;
    tml_cuda *cu = tml__cuda_get();
    if (!cu)
        return TML_EIO;
    tml_gpu_pool *p = atomic_load(&sl->gpu);
    if (!p) {
        rc = tml__gpu_pool_new(cu, GPU_POOL_EVENTS, &p);
        if (rc < 0)
            return rc;
        atomic_store(&sl->gpu, p);
    }
    T.stream = stream;
    T.gpu = p;
    return 0;
}

int tml_unset_cuda_stream(void)
{
    int rc = check_on();
    if (rc)
        return rc;
    if (!my_slot())
        return TML_EFULL;
    T.gpu = NULL;
    T.stream = NULL;
    return 0;
}

int tml_phase_span(tml_phase phase, int64_t begin_ns, int64_t end_ns)
{
    int rc = check_on();
    if (rc)
        return rc;
    if ((unsigned)phase >= TML_PHASE_COUNT || end_ns < begin_ns)
        return TML_EINVAL;
    return push(TML_EV_SPAN, (uint32_t)phase, begin_ns, end_ns);
}

int tml_set_rank(int32_t rank, int32_t world_size)
{
    if (rank < 0 || world_size < 1 || rank >= world_size)
        return TML_EINVAL;
    int st = atomic_load(&E.state);
    if (st == ST_DISABLED)
        return TML_EDISABLED;
    if (st == ST_ON && (E.fd >= 0 || E.saw_events || E.agg))
        return TML_ESTATE;     /* too late: the aggregator knows us already */
    atomic_store(&E.pending_identity, ((int64_t)rank << 32) | world_size);
    return 0;
}

int tml_set_loader_config(int32_t num_workers, int pin_memory)
{
    if (num_workers < 0)
        return TML_EINVAL;
    int st = atomic_load(&E.state);
    if (st == ST_DISABLED)
        return TML_EDISABLED;
    if (st != ST_ON)
        return TML_ESTATE;
    atomic_store(&E.pending_loader, (((int64_t)num_workers << 1) | (pin_memory ? 1 : 0)) + 1);
    return 0;
}

int tml_set_call_cost_ns(int64_t ns)
{
    if (ns < 0)
        return TML_EINVAL;
    atomic_store(&E.call_cost_ns, ns);
    return 0;
}

/* ---- the shipper ----------------------------------------------------- */

static void log_line(const char *what, const char *why)
{
    if (!E.run_dir[0])
        return;
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/traceml.log", E.run_dir);
    FILE *f = fopen(path, "a");
    if (!f)
        return;
    fprintf(f, "rank %d pid %d: ", (int)E.hello.info.rank, (int)E.pid);
    fprintf(f, "%s: %s\n", what, why);
    fclose(f);
}

static void apply_identity(tml_rank_info *i)
{
    int64_t id = atomic_exchange(&E.pending_identity, 0);
    if (id <= 0)
        return;
    i->rank = (int32_t)(id >> 32);
    i->world_size = (int32_t)(id & 0x7fffffff);
    E.identity_from_env = 1;
}

static int handshake_deferred(void)
{
    return !E.identity_from_env && !E.saw_events && !E.stop;
}

static void try_connect(int64_t now)
{
    if (E.fd >= 0 || E.auth_failed || !E.addr[0] || now < E.next_connect_ns)
        return;
    apply_identity(&E.hello.info);
    if (handshake_deferred())
        return;
    E.next_connect_ns = now + RECONNECT_NS;
    int fd = tml__client_connect(E.addr, &E.hello, 1000);
    if (fd >= 0) {
        E.fd = fd;
        return;
    }
    if (fd == TML_EAUTH || fd == TML_EPROTO) {
        E.auth_failed = 1;
        log_line("aggregator refused this process", tml_strerror(fd));
    }
}

static void send_out(void)
{
    if (E.out.len == 0)
        return;
    if (E.fd >= 0 && tml__client_send(E.fd, E.out.buf, E.out.len) < 0) {
        close(E.fd);
        E.fd = -1;
        log_line("lost the aggregator, dropping telemetry", "send failed");
    }
    tml__sb_reset(&E.out);
}

/* Applies new loader settings; tells the aggregator if it knows us already. */
static void apply_loader(void)
{
    int64_t v = atomic_exchange(&E.pending_loader, 0) - 1;
    if (v < 0)
        return;
    E.hello.info.loader_known = 1;
    E.hello.info.loader_workers = (int32_t)(v >> 1);
    E.hello.info.loader_pin_memory = (int32_t)(v & 1);
    if (E.agg) {
        tml__agg_hello(E.agg, &E.hello.info);
    } else if (E.fd >= 0) {
        tml__wire_identity(&E.out, TML_FRAME_IDENTITY, &E.hello);
        send_out();
    }
}

static void deliver_batch(void)
{
    if (E.nbatch == 0)
        return;
    if (!E.agg && E.fd < 0)
        try_connect(tml_now_ns());   /* a deferred handshake: now we have steps */
    if (E.agg) {
        if (tml__agg_steps(E.agg, E.hello.info.rank, E.batch, E.nbatch) == 0)
            E.stats.records_sent += E.nbatch;
        else
            E.stats.records_dropped += E.nbatch;
    } else if (E.fd >= 0) {
        tml__wire_steps(&E.out, E.batch, E.nbatch);
        size_t before = E.nbatch;
        send_out();
        if (E.fd >= 0)
            E.stats.records_sent += before;
        else
            E.stats.records_dropped += before;
    } else {
        E.stats.records_dropped += E.nbatch;
    }
    E.nbatch = 0;
}

static void update_stats(void)
{
    uint64_t dropped = atomic_load(&E.no_slot_drops), events = 0, lost = 0;
    for (int i = 0; i < MAX_RINGS; i++) {
        dropped += atomic_load(&E.slots[i].ring.dropped);
        events += E.slots[i].as.events_in_steps;
        lost += E.slots[i].as.records_lost;
    }
    E.stats.events_dropped = dropped;
    uint64_t steps = E.stats.records_sent + E.stats.records_dropped;
    int64_t per_event = E.pair_cost_ns + 2 * atomic_load(&E.call_cost_ns);
    E.stats.overhead_ns_per_step =
        steps ? (int64_t)((double)events / (double)steps * (double)per_event) : -1;
    (void)lost;
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
        E.stats.shipper_cpu_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void send_stats(int bye)
{
    update_stats();
    if (E.agg) {
        tml__agg_stats(E.agg, E.hello.info.rank, &E.stats, bye);
    } else if (E.fd >= 0) {
        tml__wire_stats(&E.out, bye ? TML_FRAME_BYE : TML_FRAME_STATS, &E.stats);
        send_out();
    }
}

static void add_record(const tml_step_record *r)
{
    E.batch[E.nbatch] = *r;
    if (++E.nbatch == TML_WIRE_MAX_STEPS)
        deliver_batch();
}

/* ---- GPU clock: turning a step's events into gpu_* durations ---------- */

/* 1: resolved (figures filled, or given up); 0: some event is not done. */
static int gpu_resolve(tml_gpu_pool *p, gpending *g, int give_up)
{
    tml_step_record *r = &g->rec;
    const tml_gpu_marks *m = &g->marks;
    int64_t maxseq = -1, bracket = 0, inside_input = 0, ns;
    int64_t phase[TML_PHASE_COUNT] = {0};
    uint32_t pairs[TML_PHASE_COUNT] = {0};
    int ok = p && !m->overflow && m->step_b >= 0 && m->step_e >= 0;

    for (uint32_t i = 0; i < m->nspans; i++) {
        if (m->span[i].b > maxseq)
            maxseq = m->span[i].b;
        if (m->span[i].e > maxseq)
            maxseq = m->span[i].e;
    }
    if (m->step_e > maxseq)
        maxseq = m->step_e;
    if (m->step_b > maxseq)
        maxseq = m->step_b;
    for (uint32_t i = 0; ok && i < m->nspans; i++)
        if (m->span[i].b < 0 || m->span[i].e < 0)
            ok = 0;
    if (ok) {
        /* Events on one stream complete in order, so the last one usually
         * decides; every event is still asked (a span may have been
         * recorded on another stream). Not done yet: try again next pass. */
        int d = tml__gpu_pool_done(p, maxseq);
        if (d == 1)
            d = tml__gpu_pool_done(p, m->step_b) == 1 && tml__gpu_pool_done(p, m->step_e) == 1;
        for (uint32_t i = 0; d == 1 && i < m->nspans; i++) {
            int x = tml__gpu_pool_done(p, m->span[i].b), y = tml__gpu_pool_done(p, m->span[i].e);
            d = x < 0 || y < 0 ? -1 : (x == 1 && y == 1);
        }
        if (d == 0 && !give_up)
            return 0;
        ok = d == 1;
    }
    if (ok)
        ok = tml__gpu_pool_elapsed(p, m->step_b, m->step_e, &bracket) == 0;
    for (uint32_t i = 0; ok && i < m->nspans; i++) {
        const tml_gpu_span *sp = &m->span[i];
        if (tml__gpu_pool_elapsed(p, sp->b, sp->e, &ns) < 0) {
            ok = 0;
            break;
        }
        phase[sp->phase] += ns;
        pairs[sp->phase]++;
        if (sp->phase == TML_PHASE_INPUT && sp->inside)
            inside_input += ns;
    }
    /* every CPU span of the step needs its GPU pair, else the step's GPU
     * figures would silently leave a phase out */
    for (int k = 0; ok && k < TML_PHASE_COUNT; k++)
        if (pairs[k] != m->cpu_spans[k])
            ok = 0;
    if (ok) {
        r->gpu_traced_ns = bracket > inside_input ? bracket - inside_input : 0;
        for (int k = 0; k < TML_PHASE_COUNT; k++)
            r->gpu_phase_ns[k] = phase[k];
    }
    if (p && maxseq >= 0)
        tml__gpu_pool_release(p, (uint64_t)maxseq + 1);
    return 1;
}

/* Delivers the slot's waiting steps whose events are done (all of them,
 * with or without GPU figures, when final). */
static void gpu_flush(slot *s, int64_t now, int final)
{
    if (!s->pend || s->plen == 0)
        return;
    tml_gpu_pool *p = atomic_load(&s->gpu);
    if (p && tml__gpu_pool_bind(p) < 0)
        p = NULL;
    while (s->plen) {
        gpending *g = &s->pend[s->phead];
        int give_up = final || now - g->since_ns > GPU_GIVE_UP_NS;
        if (!gpu_resolve(p, g, give_up))
            break;
        add_record(&g->rec);
        s->phead = (s->phead + 1) % GPU_PENDING;
        s->plen--;
    }
}

static void gpu_wait(slot *s, const tml_step_record *r, int64_t now)
{
    if (!s->pend) {
        s->pend = calloc(GPU_PENDING, sizeof(*s->pend));
        if (!s->pend) {
            add_record(r);
            return;
        }
    }
    if (s->plen == GPU_PENDING) {
        /* the GPU is far behind: the oldest step goes without GPU figures */
        gpending *old = &s->pend[s->phead];
        gpu_resolve(atomic_load(&s->gpu), old, 1);
        add_record(&old->rec);
        s->phead = (s->phead + 1) % GPU_PENDING;
        s->plen--;
    }
    gpending *g = &s->pend[(s->phead + s->plen) % GPU_PENDING];
    g->rec = *r;
    g->marks = s->as.gpu;
    g->since_ns = now;
    s->plen++;
}

static size_t gpu_waiting(void)
{
    size_t n = 0;
    for (int i = 0; i < MAX_RINGS; i++)
        n += E.slots[i].plen;
    return n;
}

/* A step's RSS at its end, from the shipper's readings (one a pass, never
 * on the hot path): interpolated between the last pass's and this one's.
 * A drop is never dated back: the steps before it keep the earlier
 * reading, so the memory a script frees as it ends (after its last step,
 * before the last pass) is not charged to its last steps. */
static int64_t rss_at(int64_t end_ns, int64_t rss, int64_t rss_ns)
{
    if (E.rss_prev < 0 || rss < 0 || rss_ns <= E.rss_prev_ns)
        return rss;
    if (rss < E.rss_prev || end_ns <= E.rss_prev_ns)
        return E.rss_prev;
    if (end_ns >= rss_ns)
        return rss;
    return E.rss_prev + (int64_t)((double)(rss - E.rss_prev) * (double)(end_ns - E.rss_prev_ns) /
                                  (double)(rss_ns - E.rss_prev_ns));
}

/* One pass over every ring; returns the most events any ring held, which
 * sets how long the shipper may sleep next (shipper_main). */
static uint32_t drain_final(int final)
{
    uint32_t busiest = 0;
    tml_event ev[512];
    tml_step_record rec;
    int64_t rss = -2, rss_ns = 0, now = tml_now_ns();
    for (int i = 0; i < MAX_RINGS; i++) {
        slot *s = &E.slots[i];
        int st = atomic_load_explicit(&s->state, memory_order_acquire);
        if (st == SLOT_FREE)
            continue;
        uint32_t n, popped = 0;
        while ((n = tml__ring_pop(&s->ring, ev, 512)) > 0) {
            E.saw_events = 1;
            popped += n;
            for (uint32_t k = 0; k < n; k++) {
                if (!tml__asm_feed(&s->as, &ev[k], &rec))
                    continue;
                if (rss == -2) {      /* once per pass, never per marker */
                    rss = tml__rss_bytes();
                    rss_ns = tml_now_ns();
                }
                rec.rss_bytes = rss_at(rec.start_ns + rec.traced_ns, rss, rss_ns);
                if (tml__gpu_marks_any(&s->as.gpu))
                    gpu_wait(s, &rec, now);
                else
                    add_record(&rec);
            }
        }
        if (popped > busiest)
            busiest = popped;
        gpu_flush(s, now, final);
        if (st == SLOT_RETIRED && s->plen)
            continue;          /* recycle once its steps are out */
        if (st == SLOT_RETIRED) {
            /* The thread is gone and its ring is empty: recycle it. */
            uint64_t lost = s->as.records_lost, evs = s->as.events_in_steps;
            tml__asm_init(&s->as);
            s->as.records_lost = lost;
            s->as.events_in_steps = evs;
            atomic_store(&s->state, SLOT_FREE);
        }
    }
    if (rss >= 0) {
        E.rss_prev = rss;
        E.rss_prev_ns = rss_ns;
    }
    deliver_batch();
    return busiest;
}

static uint32_t drain(void)
{
    return drain_final(0);
}

/* Forwards the sampler's samples (dropped and counted without a path). */
static void deliver_samples(void)
{
    size_t n;
    if (!E.sampler || (!E.agg && E.fd < 0 && handshake_deferred()))
        return;   /* kept in the sampler's queue until we know who we are */
    if (!E.sbuf) {
        E.sbuf = malloc(TML_WIRE_MAX_SAMPLES * sizeof(*E.sbuf));
        if (!E.sbuf)
            return;
    }
    while ((n = tml__sampler_take(E.sampler, E.sbuf, TML_WIRE_MAX_SAMPLES)) > 0) {
        for (size_t k = 0; k < n; k++)
            E.sbuf[k].rank = E.hello.info.rank;   /* the identity may have come late */
        if (E.agg) {
            tml__agg_samples(E.agg, E.sbuf, n);
        } else if (E.fd >= 0) {
            tml__wire_samples(&E.out, E.sbuf, n);
            send_out();
            if (E.fd < 0)
                E.samples_dropped += n;
        } else {
            E.samples_dropped += n;
        }
    }
}

/*
 * Answers a pending tml_summary_json() request, after this pass's drain so
 * the summary holds every step completed before the call: in-process from
 * the local aggregator (which only this thread touches), under a launcher
 * by asking the aggregator over this rank's own connection, so the request
 * arrives after the steps already sent. The answer is bounded in time.
 */
static void serve_summary(int final)
{
    pthread_mutex_lock(&E.mu);
    uint64_t req = E.sum_req;
    int pending = req != E.sum_done;
    pthread_mutex_unlock(&E.mu);
    if (!pending)
        return;
    char *json = NULL;
    int rc = TML_ESTATE;
    if (final) {
        rc = TML_ESTATE;       /* shutting down: the final summary comes next */
    } else if (E.agg) {
        tml_strbuf sb = TML_STRBUF_INIT;
        rc = tml__agg_summary_json(E.agg, &sb);
        if (rc == 0 && sb.failed)
            rc = TML_ENOMEM;
        json = rc == 0 ? tml__sb_detach(&sb, NULL) : NULL;
        tml__sb_release(&sb);
    } else if (E.fd >= 0) {
        send_out();
        rc = E.fd >= 0 ? tml__client_summary(E.fd, 3000, &json) : TML_ECONN;
        if (rc == TML_ECONN && E.fd >= 0) {
            close(E.fd);
            E.fd = -1;
            log_line("summary request failed", "reconnecting");
        }
    } else {
        rc = TML_ECONN;
    }
    pthread_mutex_lock(&E.mu);
    free(E.sum_json);
    E.sum_json = json;
    E.sum_rc = rc;
    E.sum_done = req;
    pthread_cond_broadcast(&E.sum_cv);
    pthread_mutex_unlock(&E.mu);
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
    int64_t next_stats = tml_now_ns() + STATS_INTERVAL_NS;
    int64_t wait_ns = SHIP_INTERVAL_NS;
    pthread_mutex_lock(&E.mu);
    while (!E.stop) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += wait_ns / 1000000000L;
        until.tv_nsec += wait_ns % 1000000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&E.cv, &E.mu, &until);
        if (E.stop)
            break;
        pthread_mutex_unlock(&E.mu);
        int64_t now = tml_now_ns();
        try_connect(now);
        apply_loader();
        if (drain() > TML_RING_CAP / 16)
            wait_ns = SHIP_INTERVAL_NS;
        else if ((wait_ns *= 2) > SHIP_IDLE_NS)
            wait_ns = SHIP_IDLE_NS;
        deliver_samples();
        serve_summary(0);
        if (now >= next_stats) {
            send_stats(0);
            next_stats = now + STATS_INTERVAL_NS;
        }
        pthread_mutex_lock(&E.mu);
    }
    pthread_mutex_unlock(&E.mu);
    try_connect(tml_now_ns());
    drain();
    /* The last steps' CUDA events may still be in flight: poll them for a
     * moment (this is the end of the run, not the training loop). */
    int64_t deadline = tml_now_ns() + GPU_FINAL_WAIT_NS;
    while (gpu_waiting() && tml_now_ns() < deadline) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
        drain();
    }
    drain_final(1);
    deliver_samples();
    if (E.samples_dropped)
        log_line("resource samples dropped (no aggregator)", "see the sampler");
    send_stats(1);
    serve_summary(1);
    return NULL;
}

/* ---- init and shutdown ---------------------------------------------- */

static int env_int(const char *name, int def)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || x < 0 || x > INT32_MAX)
        return def;
    return (int)x;
}

static int env_first_int(const char *a, const char *b, const char *c, int def)
{
    int v = env_int(a, -1);
    if (v < 0 && b)
        v = env_int(b, -1);
    if (v < 0 && c)
        v = env_int(c, -1);
    return v < 0 ? def : v;
}

static void fill_rank_info(tml_rank_info *i)
{
    memset(i, 0, sizeof(*i));
    E.identity_from_env = getenv("RANK") || getenv("SLURM_PROCID");
    i->rank = env_first_int("RANK", "SLURM_PROCID", NULL, 0);
    i->local_rank = env_first_int("LOCAL_RANK", "SLURM_LOCALID", NULL, 0);
    i->world_size = env_first_int("WORLD_SIZE", "SLURM_NTASKS", NULL, 1);
    i->node_rank = env_first_int("GROUP_RANK", "NODE_RANK", "SLURM_NODEID", 0);
    i->nnodes = env_first_int("TRACEML_NNODES", "SLURM_NNODES", NULL, 1);
    i->pid = (int32_t)getpid();
    i->instrumented = E.instrumented;
    gethostname(i->host, sizeof(i->host) - 1);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    i->cpu_count = cores > 0 && cores < INT32_MAX ? (int32_t)cores : 0;
    apply_identity(i);
}

/* The script's stem from /proc/self/cmdline: "python3 train.py" -> "train". */
static void cmdline_stem(char *out, size_t cap)
{
    char buf[4096];
    out[0] = '\0';
    FILE *f = fopen("/proc/self/cmdline", "r");
    if (!f)
        return;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *arg0 = buf, *arg = buf;
    const char *base = strrchr(arg0, '/');
    base = base ? base + 1 : arg0;
    if (strncmp(base, "python", 6) == 0) {
        /* skip the interpreter and its options */
        const char *p = arg0 + strlen(arg0) + 1;
        while (p < buf + n && *p == '-')
            p += strlen(p) + 1;
        arg = p < buf + n ? p : "";
    }
    base = strrchr(arg, '/');
    base = base ? base + 1 : arg;
    snprintf(out, cap, "%s", base);
    char *dot = strrchr(out, '.');
    if (dot && strcmp(dot, ".py") == 0)
        *dot = '\0';
}

/* Cost of a begin/end pair through the real code path, on a scratch ring
 * so no event reaches the run. */
static int64_t calibrate_pair(void)
{
    static tml_ring scratch;
    enum { N = 4000 };
    int64_t t0 = tml_now_ns();
    for (int i = 0; i < N; i++) {
        int64_t a = tml_now_ns();
        tml__ring_push(&scratch, TML_EV_SPAN, 0, a, tml_now_ns());
        atomic_store_explicit(&scratch.tail, atomic_load(&scratch.head), memory_order_relaxed);
    }
    return (tml_now_ns() - t0) / N;
}

/* The shipper sleeps on a condition variable against the monotonic clock
 * (the default, CLOCK_REALTIME, would turn its sleep into a busy loop or
 * a hang when the wall clock jumps). */
static void init_cond(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&E.cv, &ca);
    pthread_cond_init(&E.sum_cv, &ca);
    pthread_condattr_destroy(&ca);
}

static void on_fork_child(void)
{
    /* A forked child (e.g. a DataLoader worker) has no shipper thread;
     * its markers become no-ops. */
    atomic_store(&E.state, ST_DONE);
    E.thread_started = 0;
    E.agg = NULL;
    E.sampler = NULL;     /* its thread is not in the child */
    E.fd = -1;
}

static int same_config(const tml_options *o)
{
    if (o->logs_dir && strcmp(o->logs_dir, E.logs_dir) != 0)
        return 0;
    if (o->run_name && strcmp(o->run_name, E.run_name) != 0)
        return 0;
    uint32_t ins = o->instrumented ? o->instrumented : TML_PHASES_ALL;
    return ins == E.instrumented;
}

static int start_local(void)
{
    int rc = tml__rundir_create(E.logs_dir, E.run_name, E.run_dir, sizeof(E.run_dir));
    for (int k = 2; rc == TML_EEXIST && !E.explicit_name && k < 100; k++) {
        char base[100];
        snprintf(base, sizeof(base), "%.90s", E.run_name);
        snprintf(E.run_name, sizeof(E.run_name), "%s_%d", base, k);
        rc = tml__rundir_create(E.logs_dir, E.run_name, E.run_dir, sizeof(E.run_dir));
    }
    if (rc < 0)
        return rc;
    char run_id[33];
    tml__random_hex(run_id, 16);
    snprintf(E.hello.run_id, sizeof(E.hello.run_id), "%s", run_id);
    tml_agg_opts ao = {.run_name = E.run_name, .run_id = run_id, .run_dir = E.run_dir,
                       .world_size = E.hello.info.world_size, .nnodes = E.hello.info.nnodes};
    rc = tml__agg_new(&ao, &E.agg);
    if (rc < 0)
        return rc;
    /* TRACEML_HTML_REPORT=1: final_summary.html too (traceml run --html-report
     * does the same for launched runs) */
    const char *html = getenv("TRACEML_HTML_REPORT");
    tml__agg_set_html_report(E.agg, html && *html && strcmp(html, "0") != 0);
    tml_manifest m = {.run_name = E.run_name, .run_id = run_id, .status = "running",
                      .start_unix_ms = E.start_unix_ms,
                      .world_size = E.hello.info.world_size, .nnodes = E.hello.info.nnodes};
    tml__manifest_write(E.run_dir, &m);
    return tml__agg_hello(E.agg, &E.hello.info);
}

int tml_init(const tml_options *opts)
{
    tml_options def = {0};
    const tml_options *o = opts ? opts : &def;
    int st = atomic_load(&E.state);
    if (st == ST_ON || st == ST_DISABLED)
        return same_config(o) ? (st == ST_ON ? 0 : TML_EDISABLED) : TML_ECONFIG;
    if (st == ST_DONE && E.pid == getpid() && E.thread_started)
        return TML_ESTATE;

    const char *dis = getenv("TRACEML_DISABLED");
    E.instrumented = o->instrumented ? o->instrumented & TML_PHASES_ALL : TML_PHASES_ALL;
    const char *env_logs = getenv("TRACEML_LOGS_DIR");
    const char *env_name = getenv("TRACEML_RUN_NAME");
    snprintf(E.logs_dir, sizeof(E.logs_dir), "%s",
             o->logs_dir ? o->logs_dir : env_logs && *env_logs ? env_logs : "logs");
    E.explicit_name = o->run_name || (env_name && *env_name);
    if (o->run_name)
        snprintf(E.run_name, sizeof(E.run_name), "%s", o->run_name);
    else if (env_name && *env_name)
        snprintf(E.run_name, sizeof(E.run_name), "%s", env_name);
    else {
        char stem[128];
        cmdline_stem(stem, sizeof(stem));
        tml__run_name_generate(stem[0] ? stem : NULL, E.run_name, sizeof(E.run_name));
    }
    if (o->disabled || (dis && strcmp(dis, "0") != 0 && *dis)) {
        atomic_store(&E.state, ST_DISABLED);
        return TML_EDISABLED;
    }
    if (!tml__run_name_valid(E.run_name))
        return TML_EINVAL;

    E.pid = getpid();
    E.start_unix_ms = (int64_t)time(NULL) * 1000;
    fill_rank_info(&E.hello.info);
    memset(&E.stats, 0, sizeof(E.stats));
    E.stats.overhead_ns_per_step = -1;
    E.stop = 0;
    E.saw_events = 0;
    E.rss_prev = -1;
    E.fd = -1;
    E.auth_failed = 0;
    E.next_connect_ns = 0;
    E.nbatch = 0;
    free(E.summary_text);
    E.summary_text = NULL;
    E.run_dir[0] = '\0';
    for (int i = 0; i < MAX_RINGS; i++) {
        atomic_store(&E.slots[i].ring.head, 0);
        atomic_store(&E.slots[i].ring.tail, 0);
        atomic_store(&E.slots[i].ring.dropped, 0);
        atomic_store(&E.slots[i].state, SLOT_FREE);
        tml__asm_init(&E.slots[i].as);
    }
    atomic_fetch_add(&E.gen, 1);
    if (!E.batch)
        E.batch = malloc(TML_WIRE_MAX_STEPS * sizeof(*E.batch));
    if (!E.batch)
        return TML_ENOMEM;
    E.pair_cost_ns = calibrate_pair();

    const char *addr = getenv("TRACEML_ADDR");
    int rc;
    if (addr && *addr) {
        snprintf(E.addr, sizeof(E.addr), "%s", addr);
        const char *id = getenv("TRACEML_RUN_ID"), *secret = getenv("TRACEML_SECRET");
        const char *rd = getenv("TRACEML_RUN_DIR");
        snprintf(E.hello.run_id, sizeof(E.hello.run_id), "%s", id ? id : "");
        snprintf(E.hello.secret, sizeof(E.hello.secret), "%s", secret ? secret : "");
        snprintf(E.run_dir, sizeof(E.run_dir), "%s", rd ? rd : "");
        try_connect(tml_now_ns());   /* failure is not fatal: retried */
    } else {
        E.addr[0] = '\0';
        rc = start_local();
        if (rc < 0) {
            if (E.agg)
                tml__agg_free(E.agg);
            E.agg = NULL;
            return rc;
        }
    }
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_cond);
    static int atfork_done;
    if (!atfork_done) {
        pthread_atfork(NULL, NULL, on_fork_child);
        atfork_done = 1;
    }
    atomic_store(&E.state, ST_ON);
    if (pthread_create(&E.thread, NULL, shipper_main, NULL) != 0) {
        atomic_store(&E.state, ST_OFF);
        return TML_ENOMEM;
    }
    E.thread_started = 1;
    for (int k = 0; k < 3; k++)
        atomic_store(&E.cuda_bytes[k], -1);
    E.samples_dropped = 0;
    /* Resources: this process always; the host once per node (local rank
     * 0); the rank's GPU through NVML. A sampler that cannot start only
     * means n/a in the summary. */
    tml_sampler_opts so = {.interval_s = 0, .rank = E.hello.info.rank,
                           .node = E.hello.info.node_rank,
                           .local_rank = E.hello.info.local_rank,
                           .host = E.hello.info.local_rank == 0, .gpu = 1,
                           .cuda_bytes = E.cuda_bytes};
    if (tml__sampler_start(&so, &E.sampler) < 0) {
        E.sampler = NULL;
        log_line("resource sampler", "could not start; system and process metrics are n/a");
    }
    return 0;
}

int tml_shutdown_with(const char *status, int exit_code)
{
    int st = atomic_load(&E.state);
    if (st == ST_DISABLED) {
        atomic_store(&E.state, ST_OFF);
        return 0;
    }
    if (st != ST_ON || E.pid != getpid())
        return TML_ESTATE;
    atomic_store(&E.state, ST_DONE);
    /* the sampler first: its last samples go out with the shipper's last pass */
    tml__sampler_halt(E.sampler);
    pthread_mutex_lock(&E.mu);
    E.stop = 1;
    pthread_cond_signal(&E.cv);
    pthread_mutex_unlock(&E.mu);
    pthread_join(E.thread, NULL);
    E.thread_started = 0;
    tml__sampler_stop(E.sampler);
    E.sampler = NULL;
    if (E.fd >= 0) {
        close(E.fd);
        E.fd = -1;
    }
    tml__sb_release(&E.out);
    int rc = 0;
    if (E.agg) {
        int width = 0;
        struct winsize ws;
        if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0)
            width = ws.ws_col;
        rc = tml__agg_finalize(E.agg, status ? status : "completed", exit_code, width,
                               &E.summary_text);
        tml__agg_free(E.agg);
        E.agg = NULL;
        tml_manifest m = {.run_name = E.run_name, .run_id = E.hello.run_id,
                          .status = status ? status : "completed", .exit_code = exit_code,
                          .start_unix_ms = E.start_unix_ms,
                          .end_unix_ms = (int64_t)time(NULL) * 1000,
                          .world_size = E.hello.info.world_size,
                          .nnodes = E.hello.info.nnodes};
        tml__manifest_write(E.run_dir, &m);
    }
    return rc;
}

int tml_shutdown(void)
{
    return tml_shutdown_with("completed", 0);
}

const char *tml_summary_text(void)
{
    return E.summary_text;
}

const char *tml_run_dir(void)
{
    return E.run_dir[0] ? E.run_dir : NULL;
}

/* After the run: the final_summary.json this process's run wrote. */
static int read_final(char **out)
{
    char path[PATH_MAX + 32];
    if (!E.run_dir[0])
        return TML_ESTATE;
    snprintf(path, sizeof(path), "%s/final_summary.json", E.run_dir);
    FILE *f = fopen(path, "rb");
    if (!f)
        return TML_EIO;
    tml_strbuf sb = TML_STRBUF_INIT;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        tml__sb_add(&sb, buf, n);
    int bad = ferror(f);
    fclose(f);
    if (bad || sb.failed || sb.len == 0) {
        tml__sb_release(&sb);
        return bad || sb.len == 0 ? TML_EIO : TML_ENOMEM;
    }
    *out = tml__sb_detach(&sb, NULL);
    return 0;
}

int tml_summary_json(char **out)
{
    if (!out)
        return TML_EINVAL;
    *out = NULL;
    int st = atomic_load(&E.state);
    if (st == ST_DISABLED)
        return TML_EDISABLED;
    if (st != ST_ON || E.pid != getpid() || !E.thread_started)
        return st == ST_DONE && E.pid == getpid() ? read_final(out) : TML_ESTATE;

    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += 5;       /* the shipper answers within ~3 s at worst */
    pthread_mutex_lock(&E.mu);
    uint64_t req = ++E.sum_req;
    pthread_cond_signal(&E.cv);
    int rc = 0;
    while (E.sum_done < req && rc == 0)
        rc = pthread_cond_timedwait(&E.sum_cv, &E.mu, &until);
    if (E.sum_done < req) {
        rc = TML_ECONN;
    } else {
        rc = E.sum_rc;
        if (rc == 0 && E.sum_json) {
            *out = strdup(E.sum_json);
            if (!*out)
                rc = TML_ENOMEM;
        } else if (rc == 0) {
            rc = TML_ESTATE;
        }
    }
    pthread_mutex_unlock(&E.mu);
    if (rc == TML_ESTATE && atomic_load(&E.state) == ST_DONE)
        return read_final(out);
    return rc;
}

void tml_free(void *p)
{
    free(p);
}
