/*
 * sampler.c - the resource sampler thread (see sampler.h).
 *
 * Why a thread of its own rather than a job for the shipper: NVML calls
 * can take milliseconds, and on a GPU in trouble much longer; the shipper
 * must keep draining the rings whatever the GPU does. The sampler sleeps
 * on a condition variable against the monotonic clock, so stopping it is
 * immediate and a wall-clock jump cannot make it spin.
 *
 * CPU percentages are deltas between two readings, so the first tick only
 * takes a baseline. A reading that fails (a /proc file that cannot be
 * read, a metric NVML does not support) produces no sample at all: the
 * aggregator then reports n/a, never a zero.
 */
#include "sample/sampler.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "gpu/nvml.h"
#include "sample/proc.h"
#include "traceml/traceml.h"

#define QUEUE_CAP 4096
/* CPU shares are deltas of 10 ms clock ticks: over a shorter span than
 * this they are noise (a summary asked just after a tick, the last tick
 * at stop: 514% over 2 ms), so the baselines wait for a longer one. The
 * last tick has no later one to wait for: a run shorter than the first
 * span (a launcher whose script failed at once) keeps what it measured
 * over 20 ms or more. */
#define CPU_SPAN_MIN_NS 90000000LL     /* 90 ms: an interval of 0.1 s passes */
#define CPU_SPAN_LAST_NS 20000000LL

struct tml_sampler {
    tml_sampler_opts o;
    pthread_t thread;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_cond_t ticked;         /* a tick asked by tml__sampler_tick_now is done */
    int stop;
    uint64_t tick_req, tick_done;
    tml_sample q[QUEUE_CAP];
    size_t qhead, qlen;
    clockid_t cpu_clock;
    _Atomic int have_cpu_clock;    /* cleared by halt while the shipper may read it */

    /* sampler thread only */
    tml_nvml *nvml;
    int gpu_index;              /* -1 none */
    long ncpu, page, hz;
    int64_t cpu_prev_ns;        /* when the CPU baselines were read; 0 never */
    int have_host_prev, have_proc_prev;
    tml_cpu_times host_prev;
    uint64_t proc_ticks_prev;
    int64_t proc_mono_prev_ns;
    int have_tree_prev;
    uint64_t tree_ticks_prev;
    int64_t tree_mono_prev_ns;
    int have_runq_prev;
    uint64_t runq_wait_prev_ns;
    int64_t runq_mono_prev_ns;
};

int64_t tml__rss_bytes(void)
{
    char buf[256];
    size_t n;
    int64_t pages;
    long page = sysconf(_SC_PAGESIZE);
    if (tml__proc_read("/proc/self/statm", buf, sizeof(buf), &n) < 0 ||
        tml__proc_parse_statm(buf, n, &pages) < 0 || page <= 0)
        return -1;
    return pages * page;
}

/* Called with the sampler thread's batch; takes the lock once. */
static void enqueue(tml_sampler *s, const tml_sample *v, size_t n)
{
    pthread_mutex_lock(&s->mu);
    for (size_t i = 0; i < n; i++) {
        if (s->qlen == QUEUE_CAP)
            continue;   /* full: the shipper has not taken the queue for a while */
        s->q[(s->qhead + s->qlen) % QUEUE_CAP] = v[i];
        s->qlen++;
    }
    pthread_mutex_unlock(&s->mu);
}

typedef struct batch {
    tml_sample v[32];
    size_t n;
    int64_t ts;
    const tml_sampler *s;
} batch;

static void add(batch *b, uint32_t metric, int32_t gpu, double value)
{
    if (b->n >= sizeof(b->v) / sizeof(b->v[0]) || !isfinite(value))
        return;
    tml_sample *x = &b->v[b->n++];
    x->ts_unix_ms = b->ts;
    x->node = b->s->o.node;
    x->rank = b->s->o.rank;
    x->gpu = gpu;
    x->metric = metric;
    x->value = value;
}

static void sample_host(tml_sampler *s, batch *b, int cpu)
{
    char buf[16384];
    size_t n;
    tml_cpu_times now;
    tml_meminfo mi;

    if (cpu && tml__proc_read("/proc/stat", buf, sizeof(buf), &n) == 0 &&
        tml__proc_parse_stat(buf, n, &now) == 0) {
        if (s->have_host_prev)
            add(b, TML_S_HOST_CPU_PERCENT, -1, tml__cpu_busy_percent(&s->host_prev, &now));
        s->host_prev = now;
        s->have_host_prev = 1;
    }
    if (tml__proc_read("/proc/meminfo", buf, sizeof(buf), &n) == 0 &&
        tml__proc_parse_meminfo(buf, n, &mi) == 0) {
        add(b, TML_S_HOST_RAM_USED_BYTES, -1, (double)(mi.total_bytes - mi.available_bytes));
        add(b, TML_S_HOST_RAM_TOTAL_BYTES, -1, (double)mi.total_bytes);
    }
}

/* How long the training's main thread waited for a core since the last
 * sample, of the wall time: on a saturated host, what tells a rank that
 * falls behind for want of CPU from one that does more work (diag/rule_straggler.c). */
static void sample_runqueue(tml_sampler *s, batch *b, int64_t now)
{
    char buf[128];
    size_t n;
    uint64_t run, wait;
    if (tml__proc_read("/proc/self/schedstat", buf, sizeof(buf), &n) < 0 ||
        tml__proc_parse_schedstat(buf, n, &run, &wait) < 0)
        return;
    if (s->have_runq_prev && now > s->runq_mono_prev_ns && wait >= s->runq_wait_prev_ns) {
        double pct = 100.0 * (double)(wait - s->runq_wait_prev_ns) /
                     (double)(now - s->runq_mono_prev_ns);
        add(b, TML_S_PROC_RUNQ_WAIT_PERCENT, -1, pct > 100.0 ? 100.0 : pct);
    }
    s->runq_wait_prev_ns = wait;
    s->runq_mono_prev_ns = now;
    s->have_runq_prev = 1;
}

/* The process with its descendants (its DataLoader workers): what the
 * training's own tree takes of the cores, against what the host's other
 * processes take (report/resources.c). */
static void sample_tree(tml_sampler *s, batch *b, int64_t now)
{
    uint64_t ticks;
    size_t nprocs;
    if (tml__proc_tree_ticks((int32_t)getpid(), &ticks, &nprocs) < 0)
        return;
    if (s->have_tree_prev && now > s->tree_mono_prev_ns && ticks >= s->tree_ticks_prev &&
        s->hz > 0) {
        double cpu_s = (double)(ticks - s->tree_ticks_prev) / (double)s->hz;
        double wall_s = (double)(now - s->tree_mono_prev_ns) / 1e9;
        add(b, TML_S_PROC_TREE_CPU_PERCENT, -1, 100.0 * cpu_s / wall_s);
    }
    s->tree_ticks_prev = ticks;
    s->tree_mono_prev_ns = now;
    s->have_tree_prev = 1;
}

static void sample_process(tml_sampler *s, batch *b, int cpu)
{
    char buf[2048];
    size_t n;
    tml_pid_stat ps;
    int64_t now = tml__mono_ns();

    if (tml__proc_read("/proc/self/stat", buf, sizeof(buf), &n) == 0 &&
        tml__proc_parse_pid_stat(buf, n, &ps) == 0) {
        uint64_t ticks = ps.utime_ticks + ps.stime_ticks;
        if (cpu && s->have_proc_prev && now > s->proc_mono_prev_ns &&
            ticks >= s->proc_ticks_prev && s->hz > 0) {
            double cpu_s = (double)(ticks - s->proc_ticks_prev) / (double)s->hz;
            double wall_s = (double)(now - s->proc_mono_prev_ns) / 1e9;
            double pct = 100.0 * cpu_s / wall_s;
            add(b, TML_S_PROC_CPU_PERCENT, -1, pct);
            if (s->ncpu > 0)
                add(b, TML_S_PROC_CPU_CAPACITY, -1, pct / (double)s->ncpu);
        }
        if (cpu) {
            s->proc_ticks_prev = ticks;
            s->proc_mono_prev_ns = now;
            s->have_proc_prev = 1;
        }
        if (ps.rss_pages >= 0 && s->page > 0)
            add(b, TML_S_PROC_RSS_BYTES, -1, (double)ps.rss_pages * (double)s->page);
    }
    if (cpu) {
        sample_tree(s, b, now);
        sample_runqueue(s, b, now);
    }
    if (s->o.cuda_bytes) {
        static const uint32_t m[3] = {
            TML_S_PROC_CUDA_ALLOCATED, TML_S_PROC_CUDA_RESERVED, TML_S_PROC_CUDA_DEVICE_TOTAL
        };
        for (int k = 0; k < 3; k++) {
            int64_t v = atomic_load_explicit(&s->o.cuda_bytes[k], memory_order_relaxed);
            if (v >= 0)
                add(b, m[k], -1, (double)v);
        }
    }
}

int tml__gpu_other_procs(const uint32_t *pids, size_t n, int32_t self)
{
    int own = 0, others = 0;
    for (size_t i = 0; i < n; i++) {
        if ((int32_t)pids[i] == self)
            own = 1;
        else if (!tml__proc_descends_from((int32_t)pids[i], self))
            others++;
    }
    return n && !own ? -1 : others;
}

static void sample_gpu(tml_sampler *s, batch *b)
{
    tml_gpu_reading r;
    if (!s->nvml || s->gpu_index < 0 || tml__nvml_read(s->nvml, s->gpu_index, &r) < 0)
        return;
    int g = s->gpu_index;
    if (r.valid & TML_GPU_UTIL)
        add(b, TML_S_GPU_UTIL_PERCENT, g, r.util_percent);
    if (r.valid & TML_GPU_MEM) {
        add(b, TML_S_GPU_MEM_USED_BYTES, g, r.mem_used_bytes);
        add(b, TML_S_GPU_MEM_TOTAL_BYTES, g, r.mem_total_bytes);
    }
    if (r.valid & TML_GPU_TEMP)
        add(b, TML_S_GPU_TEMP_C, g, r.temp_c);
    if (r.valid & TML_GPU_POWER)
        add(b, TML_S_GPU_POWER_W, g, r.power_w);
    if (r.valid & TML_GPU_POWER_LIMIT)
        add(b, TML_S_GPU_POWER_LIMIT_W, g, r.power_limit_w);
    uint32_t pids[256];
    size_t np;
    if (!r.lost && tml__nvml_pids(s->nvml, g, pids, 256, &np) == 0 && np <= 256) {
        int others = tml__gpu_other_procs(pids, np, (int32_t)getpid());
        if (others >= 0)
            add(b, TML_S_GPU_OTHER_PROCS, g, others);
    }
}

static void tick(tml_sampler *s, int last)
{
    batch b = { .n = 0, .ts = tml__unix_ms(), .s = s };   /* a sample's "when" */
    int64_t now = tml__mono_ns();
    int cpu = s->cpu_prev_ns == 0 ||
              now - s->cpu_prev_ns >= (last ? CPU_SPAN_LAST_NS : CPU_SPAN_MIN_NS);
    if (cpu)
        s->cpu_prev_ns = now;
    if (s->o.host)
        sample_host(s, &b, cpu);
    sample_process(s, &b, cpu);
    sample_gpu(s, &b);
    if (b.n)
        enqueue(s, b.v, b.n);
}

static void gpu_setup(tml_sampler *s)
{
    int idx[64];
    s->gpu_index = -1;
    if (!s->o.gpu || tml__nvml_open(s->o.libnvml, &s->nvml) < 0)
        return;
    size_t n = tml__nvml_visible(s->nvml, s->o.visible_devices, idx, 64);
    if (n == 0) {
        tml__nvml_close(s->nvml);
        s->nvml = NULL;
        return;
    }
    size_t pos = s->o.local_rank >= 0 && (size_t)s->o.local_rank < n ? (size_t)s->o.local_rank : 0;
    s->gpu_index = idx[pos];
}

static void *sampler_main(void *arg)
{
    tml_sampler *s = arg;
    int64_t period = (int64_t)(s->o.interval_s * 1e9);

    tick(s, 0);                /* baselines, and the first RAM/GPU figures */
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        struct timespec until = tml__mono_deadline(period);
        while (!s->stop && s->tick_req == s->tick_done) {
            int rc = pthread_cond_timedwait(&s->cv, &s->mu, &until);
            if (rc == ETIMEDOUT)
                break;
        }
        if (s->stop)
            break;
        uint64_t req = s->tick_req;
        pthread_mutex_unlock(&s->mu);
        tick(s, 0);
        pthread_mutex_lock(&s->mu);
        s->tick_done = req;
        pthread_cond_broadcast(&s->ticked);
    }
    pthread_mutex_unlock(&s->mu);
    tick(s, 1);                /* the end of the run is part of it */
    return NULL;
}

int tml__sampler_start(const tml_sampler_opts *o, tml_sampler **out)
{
    *out = NULL;
    tml_sampler *s = calloc(1, sizeof(*s));
    if (!s)
        return TML_ENOMEM;
    s->o = *o;
    if (!(s->o.interval_s > 0))
        s->o.interval_s = 1.0;
    s->ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    s->page = sysconf(_SC_PAGESIZE);
    s->hz = sysconf(_SC_CLK_TCK);
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_cond_init(&s->ticked, &ca);
    pthread_condattr_destroy(&ca);
    gpu_setup(s);
    if (pthread_create(&s->thread, NULL, sampler_main, s) != 0) {
        tml__nvml_close(s->nvml);
        pthread_cond_destroy(&s->cv);
        pthread_cond_destroy(&s->ticked);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return TML_ENOMEM;
    }
    s->started = 1;
    s->have_cpu_clock = pthread_getcpuclockid(s->thread, &s->cpu_clock) == 0;
    *out = s;
    return 0;
}

void tml__sampler_halt(tml_sampler *s)
{
    if (!s || !s->started)
        return;
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    s->started = 0;
    s->have_cpu_clock = 0;
}

void tml__sampler_stop(tml_sampler *s)
{
    if (!s)
        return;
    tml__sampler_halt(s);
    tml__nvml_close(s->nvml);
    pthread_cond_destroy(&s->cv);
    pthread_cond_destroy(&s->ticked);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void tml__sampler_tick_now(tml_sampler *s, int64_t wait_ns)
{
    if (!s)
        return;
    struct timespec until = tml__mono_deadline(wait_ns);
    pthread_mutex_lock(&s->mu);
    uint64_t mine = ++s->tick_req;
    pthread_cond_signal(&s->cv);
    while (s->started && !s->stop && s->tick_done < mine)
        if (pthread_cond_timedwait(&s->ticked, &s->mu, &until) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&s->mu);
}

size_t tml__sampler_take(tml_sampler *s, tml_sample *out, size_t cap)
{
    size_t n = 0;
    if (!s)
        return 0;
    pthread_mutex_lock(&s->mu);
    while (n < cap && s->qlen) {
        out[n++] = s->q[s->qhead];
        s->qhead = (s->qhead + 1) % QUEUE_CAP;
        s->qlen--;
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

int64_t tml__sampler_cpu_ns(const tml_sampler *s)
{
    if (!s || !s->have_cpu_clock)
        return -1;
    return tml__clock_ns(s->cpu_clock);
}
