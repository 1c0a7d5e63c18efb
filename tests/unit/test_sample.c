/*
 * test_sample.c - the sampler's parts: /proc parsers on captured fixtures
 * (tests/fixtures/proc, incl. process names with spaces and parentheses,
 * an old kernel's meminfo, truncated input and every prefix of each file),
 * the per-place series, SAMPLES frames, and the step assembler's GPU marks
 * and per-step CUDA memory. Run from the repository root.
 */
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/assemble.h"
#include "sample/proc.h"
#include "sample/sampler.h"
#include "model/sample.h"
#include "model/series.h"
#include "traceml/traceml.h"
#include "wire/wire.h"
#include "harness.h"

static size_t fixture(const char *name, char *buf, size_t cap)
{
    char path[256];
    size_t n = 0;
    snprintf(path, sizeof(path), "tests/fixtures/proc/%s", name);
    CHECK_EQ_INT(tml__proc_read(path, buf, cap, &n), 0);
    return n;
}

/* Under qemu-user (scripts/wheels --test sets TML_TEST_EMULATOR), the
 * process's own /proc/self/stat is made up by the emulator: RSS 0, no
 * children's times. Other processes' files are the kernel's. */
static int emulated(void)
{
    const char *e = getenv("TML_TEST_EMULATOR");
    return e && *e;
}

static void test_stat(void)
{
    char b[8192];
    tml_cpu_times a, z;
    size_t n = fixture("stat", b, sizeof(b));
    CHECK_EQ_INT(tml__proc_parse_stat(b, n, &a), 0);
    /* cpu  117703 0 16528 433763 974 0 973 169 0 0 */
    CHECK_EQ_INT(a.busy, 117703 + 16528 + 973 + 169);
    CHECK_EQ_INT(a.total, a.busy + 433763 + 974);
    n = fixture("stat_a", b, sizeof(b));
    CHECK_EQ_INT(tml__proc_parse_stat(b, n, &a), 0);
    n = fixture("stat_b", b, sizeof(b));
    CHECK_EQ_INT(tml__proc_parse_stat(b, n, &z), 0);
    CHECK_NEAR(tml__cpu_busy_percent(&a, &z), 80.0, 1e-9);   /* 80 busy of 100 ticks */
    CHECK(isnan(tml__cpu_busy_percent(&z, &a)));               /* backwards: unknown */
    CHECK(isnan(tml__cpu_busy_percent(&a, &a)));               /* no tick: unknown */
    CHECK_EQ_INT(tml__proc_parse_stat("cpu0 1 2 3 4\n", 13, &a), TML_EPROTO);
    CHECK_EQ_INT(tml__proc_parse_stat("cpu  1 2\n", 9, &a), TML_EPROTO);
}

static void test_meminfo(void)
{
    char b[8192];
    tml_meminfo m;
    size_t n = fixture("meminfo", b, sizeof(b));
    CHECK_EQ_INT(tml__proc_parse_meminfo(b, n, &m), 0);
    CHECK_EQ_INT(m.total_bytes, 24684092LL * 1024);
    CHECK_EQ_INT(m.available_bytes, 24294652LL * 1024);
    n = fixture("meminfo_old_kernel", b, sizeof(b));
    CHECK_EQ_INT(tml__proc_parse_meminfo(b, n, &m), 0);
    CHECK_EQ_INT(m.total_bytes, 8000000LL * 1024);
    CHECK_EQ_INT(m.available_bytes, 3000000LL * 1024);   /* free + buffers + cached */
    CHECK_EQ_INT(tml__proc_parse_meminfo("MemFree: 1 kB\n", 14, &m), TML_EPROTO);
    CHECK_EQ_INT(tml__proc_parse_meminfo("MemTotal: 12 MB\nMemFree: 1 kB\n", 30, &m), TML_EPROTO);
}

static void test_pid_stat_odd_names(void)
{
    char b[4096];
    tml_pid_stat s;
    size_t n = fixture("pid_stat_parens", b, sizeof(b));
    CHECK_EQ_INT(tml__proc_parse_pid_stat(b, n, &s), 0);
    CHECK_EQ_INT(s.pid, 4242);
    CHECK_STR(s.comm, "python3 train (v2).py");
    CHECK_EQ_INT(s.state, 'S');
    CHECK_EQ_INT(s.utime_ticks, 1500);
    CHECK_EQ_INT(s.stime_ticks, 250);
    CHECK_EQ_INT(s.ppid, 1);
    CHECK_EQ_INT(s.cutime_ticks, 0);
    CHECK_EQ_INT(s.rss_pages, 262144);
    n = fixture("pid_stat_spaces", b, sizeof(b));
    CHECK_EQ_INT(tml__proc_parse_pid_stat(b, n, &s), 0);
    CHECK_STR(s.comm, "a b ) c");
    CHECK_EQ_INT(s.utime_ticks, 42);
    CHECK_EQ_INT(s.stime_ticks, 8);
    CHECK_EQ_INT(s.rss_pages, 512);
    n = fixture("pid_stat_cat", b, sizeof(b));
    CHECK_EQ_INT(tml__proc_parse_pid_stat(b, n, &s), 0);
    CHECK_STR(s.comm, "cat");
    CHECK_EQ_INT(s.rss_pages, 408);
    n = fixture("pid_stat_truncated", b, sizeof(b));
    CHECK_EQ_INT(tml__proc_parse_pid_stat(b, n, &s), TML_EPROTO);
}

/* The children files, and the training's tree: a child that burns CPU
 * counts in its parent's tree while it runs, and its time stays counted
 * once it ended and was waited for (cutime), without a jump. */
static void test_process_tree(void)
{
    int32_t kids[4];
    CHECK_EQ_INT(tml__proc_parse_children("12 345 \n", 8, kids, 4), 2);
    CHECK_EQ_INT(kids[0], 12);
    CHECK_EQ_INT(kids[1], 345);
    CHECK_EQ_INT(tml__proc_parse_children("", 0, kids, 4), 0);
    CHECK_EQ_INT(tml__proc_parse_children("1 2 3 4 5 6", 11, kids, 4), 6);   /* more than cap */
    CHECK_EQ_INT(kids[3], 4);

    uint64_t before, during, after, scan;
    size_t n, ns;
    char p[64];
    snprintf(p, sizeof(p), "/proc/self/task/%d/children", (int)getpid());
    if (access(p, R_OK) != 0) {
        fprintf(stderr, "  (no /proc/.../children here: tree test skipped)\n");
        return;
    }
    CHECK_EQ_INT(tml__proc_tree_ticks((int32_t)getpid(), &before, &n), 0);
    CHECK_EQ_INT(n, 1);
    int fds[2];
    CHECK_EQ_INT(pipe(fds), 0);
    pid_t c = fork();
    if (c == 0) {
        /* burn 0.3 s of CPU, then wait to be killed */
        struct timespec a, z;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
        do
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &z);
        while ((z.tv_sec - a.tv_sec) * 1000000000L + (z.tv_nsec - a.tv_nsec) < 300000000L);
        if (write(fds[1], "x", 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char x;
    CHECK_EQ_INT((int)read(fds[0], &x, 1), 1);
    CHECK_EQ_INT(tml__proc_tree_ticks((int32_t)getpid(), &during, &n), 0);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(tml__proc_tree_ticks_scan((int32_t)getpid(), &scan, &ns), 0);
    CHECK_EQ_INT(ns, 2);
    long hz = sysconf(_SC_CLK_TCK);
    CHECK(during - before >= (uint64_t)(hz / 5));   /* 0.3 s of the child's CPU, in ticks */
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
    CHECK_EQ_INT(tml__proc_tree_ticks((int32_t)getpid(), &after, &n), 0);
    CHECK_EQ_INT(n, 1);
    if (!emulated())                                 /* moved into cutime: no drop */
        CHECK(after >= during);
    close(fds[0]);
    close(fds[1]);
    CHECK_EQ_INT(tml__proc_tree_ticks(0x7ffffff0, &after, &n), TML_EIO);
}

/* The processes on the rank's GPU that are not the training's: the rank
 * and its children are the training's; a process elsewhere (pid 1) is
 * another; a list without the rank is another pid namespace: unknown. */
static void test_gpu_other_procs(void)
{
    int32_t self = (int32_t)getpid();
    pid_t c = fork();
    if (c == 0) {
        pause();
        _exit(0);
    }
    uint32_t none[1] = { 0 };
    uint32_t own[2] = { (uint32_t)self, (uint32_t)c };
    uint32_t shared[3] = { (uint32_t)self, (uint32_t)c, 1 };
    uint32_t foreign[2] = { 1, (uint32_t)c };
    CHECK_EQ_INT(tml__gpu_other_procs(none, 0, self), 0);
    CHECK_EQ_INT(tml__gpu_other_procs(own, 1, self), 0);
    CHECK_EQ_INT(tml__gpu_other_procs(own, 2, self), 0);      /* its worker */
    CHECK_EQ_INT(tml__gpu_other_procs(shared, 3, self), 1);
    CHECK_EQ_INT(tml__gpu_other_procs(foreign, 2, self), -1); /* not our namespace */
    CHECK_EQ_INT(tml__proc_descends_from((int32_t)c, self), 1);
    CHECK_EQ_INT(tml__proc_descends_from(self, self), 1);
    CHECK_EQ_INT(tml__proc_descends_from((int32_t)getppid(), self), 0);
    CHECK_EQ_INT(tml__proc_descends_from(0x7ffffff0, self), 0);
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
    CHECK_EQ_INT(tml__gpu_other_procs(own, 2, self), 1);      /* gone: not ours any more */
    /* the metric's name and range */
    CHECK_STR(tml__sample_metric_name(TML_S_GPU_OTHER_PROCS), "gpu.other_processes");
    CHECK_EQ_INT(tml__sample_metric_scope(TML_S_GPU_OTHER_PROCS), 2);
}

static void test_statm_and_live_files(void)
{
    char b[8192];
    int64_t pages;
    size_t n = fixture("statm", b, sizeof(b));
    CHECK_EQ_INT(tml__proc_parse_statm(b, n, &pages), 0);
    CHECK_EQ_INT(pages, 441);
    CHECK_EQ_INT(tml__proc_parse_statm("12", 2, &pages), TML_EPROTO);
    /* this machine's own files parse too */
    tml_pid_stat s;
    CHECK_EQ_INT(tml__proc_read("/proc/self/stat", b, sizeof(b), &n), 0);
    CHECK_EQ_INT(tml__proc_parse_pid_stat(b, n, &s), 0);
    if (!emulated())
        CHECK(s.rss_pages > 0);
    CHECK_EQ_INT(tml__proc_read("/nonexistent", b, sizeof(b), &n), TML_EIO);
    /* schedstat: run and run-queue wait, in ns */
    uint64_t run, wait;
    n = fixture("schedstat", b, sizeof(b));
    CHECK_EQ_INT(tml__proc_parse_schedstat(b, n, &run, &wait), 0);
    CHECK(run == 1171580075ULL && wait == 3550002640ULL);
    CHECK_EQ_INT(tml__proc_parse_schedstat("12", 2, &run, &wait), TML_EPROTO);
    if (tml__proc_read("/proc/self/schedstat", b, sizeof(b), &n) == 0)   /* CONFIG_SCHED_INFO */
        CHECK_EQ_INT(tml__proc_parse_schedstat(b, n, &run, &wait), 0);
}

/* Every prefix of every fixture: parsed or refused, never read past. */
static void test_prefixes_never_overrun(void)
{
    static const char *files[] = { "stat", "meminfo", "meminfo_old_kernel", "pid_stat_parens",
                                   "pid_stat_spaces", "pid_stat_cat", "statm", "schedstat" };
    for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
        char b[8192];
        size_t n = fixture(files[f], b, sizeof(b));
        for (size_t k = 0; k <= n; k++) {
            char *c = malloc(k ? k : 1);       /* exact size: ASan sees any overrun */
            memcpy(c, b, k);
            tml_cpu_times t;
            tml_meminfo m;
            tml_pid_stat s;
            int64_t pg;
            (void)tml__proc_parse_stat(c, k, &t);
            (void)tml__proc_parse_meminfo(c, k, &m);
            (void)tml__proc_parse_pid_stat(c, k, &s);
            (void)tml__proc_parse_statm(c, k, &pg);
            uint64_t run, wait;
            (void)tml__proc_parse_schedstat(c, k, &run, &wait);
            free(c);
        }
    }
}

static tml_sample smp(int32_t node, int32_t rank, int32_t gpu, uint32_t m, double v)
{
    tml_sample x = { 1700000000000, node, rank, gpu, m, v };
    return x;
}

static void test_series(void)
{
    tml_series_set s;
    tml__series_init(&s);
    tml_sample a = smp(0, 0, -1, TML_S_HOST_CPU_PERCENT, 10);
    tml_sample b = smp(0, 1, -1, TML_S_HOST_CPU_PERCENT, 30);   /* host: any rank */
    tml_sample g = smp(0, 1, 3, TML_S_GPU_UTIL_PERCENT, 50);
    tml_sample p = smp(0, 1, -1, TML_S_PROC_RSS_BYTES, 1e9);
    tml_sample bad = smp(0, 1, -1, 999, 1);
    tml_sample nan = smp(0, 1, -1, TML_S_PROC_RSS_BYTES, NAN);
    CHECK_EQ_INT(tml__series_add(&s, &a), 0);
    CHECK_EQ_INT(tml__series_add(&s, &b), 0);
    CHECK_EQ_INT(tml__series_add(&s, &g), 0);
    CHECK_EQ_INT(tml__series_add(&s, &p), 0);
    CHECK_EQ_INT(tml__series_add(&s, &bad), 0);
    CHECK_EQ_INT(tml__series_add(&s, &nan), 0);
    CHECK_EQ_INT(s.samples, 4);
    const tml_series *h = tml__series_find(&s, 0, -1, -1, TML_S_HOST_CPU_PERCENT);
    CHECK(h && h->n == 2);
    CHECK_NEAR(tml__series_mean(h), 20, 1e-9);
    CHECK_NEAR(h->max, 30, 1e-9);
    CHECK(tml__series_find(&s, 0, -1, 3, TML_S_GPU_UTIL_PERCENT) != NULL);
    CHECK(tml__series_find(&s, 0, 1, -1, TML_S_PROC_RSS_BYTES) != NULL);
    CHECK(tml__series_find(&s, 0, 0, -1, TML_S_PROC_RSS_BYTES) == NULL);
    CHECK_EQ_INT(tml__series_rank_gpu(&s, 1), 3);
    CHECK_EQ_INT(tml__series_rank_gpu(&s, 0), -1);
    CHECK(isnan(tml__series_mean(NULL)));
    CHECK_STR(tml__sample_metric_name(TML_S_GPU_TEMP_C), "gpu.temperature_c");
    CHECK_EQ_INT(tml__sample_metric_id("process.rss_bytes"), TML_S_PROC_RSS_BYTES);
    CHECK_EQ_INT(tml__sample_metric_id("nope"), 0);
    tml__series_release(&s);
}

static void test_wire_samples(void)
{
    tml_sample v[3] = { smp(1, 2, -1, TML_S_HOST_RAM_USED_BYTES, 6.2e9),
                        smp(1, 2, 5, TML_S_GPU_TEMP_C, 42.5),
                        smp(0, 0, -1, TML_S_PROC_CPU_CAPACITY, 0.125) };
    tml_strbuf sb = TML_STRBUF_INIT;
    tml_frame_header h;
    size_t n;
    tml__wire_samples(&sb, v, 3);
    CHECK_EQ_INT(tml__wire_header((const uint8_t *)sb.buf, sb.len, &h), 0);
    CHECK_EQ_INT(h.type, TML_FRAME_SAMPLES);
    const uint8_t *p = (const uint8_t *)sb.buf + TML_WIRE_HEADER;
    CHECK_EQ_INT(tml__wire_parse_samples(p, h.len, &n), 0);
    CHECK_EQ_INT(n, 3);
    for (size_t i = 0; i < n; i++) {
        tml_sample x;
        tml__wire_parse_sample(p, i, &x);
        CHECK(memcmp(&x, &v[i], sizeof(x)) == 0 ||
              (x.ts_unix_ms == v[i].ts_unix_ms && x.node == v[i].node && x.rank == v[i].rank &&
               x.gpu == v[i].gpu && x.metric == v[i].metric && x.value == v[i].value));
    }
    /* a count that does not match the length is refused */
    CHECK_EQ_INT(tml__wire_parse_samples(p, h.len - 1, &n), TML_EPROTO);
    CHECK_EQ_INT(tml__wire_parse_samples(p, 3, &n), TML_EPROTO);
    tml__sb_release(&sb);
}

static tml_event ev(uint32_t kind, uint32_t arg, int64_t t0, int64_t t1)
{
    tml_event e = { t0, t1, kind, arg };
    return e;
}

static void test_assembler_gpu_marks(void)
{
    tml_assembler a;
    tml_step_record r;
    tml__asm_init(&a);
    /* fetch before the bracket with its GPU pair (events 0, 1) */
    CHECK_EQ_INT(tml__asm_feed(&a, &(tml_event){100, 200, TML_EV_SPAN, TML_PHASE_INPUT}, &r), 0);
    tml_event e = ev(TML_EV_GPU_SPAN, TML_PHASE_INPUT, 0, 1);
    CHECK_EQ_INT(tml__asm_feed(&a, &e, &r), 0);
    e = ev(TML_EV_STEP_BEGIN, 0, 210, 0);
    tml__asm_feed(&a, &e, &r);
    e = ev(TML_EV_SPAN, TML_PHASE_FORWARD, 220, 300);
    tml__asm_feed(&a, &e, &r);
    e = ev(TML_EV_GPU_SPAN, TML_PHASE_FORWARD, 3, 4);
    tml__asm_feed(&a, &e, &r);
    e = ev(TML_EV_GPU_STEP, 0, 2, 5);
    tml__asm_feed(&a, &e, &r);
    e = ev(TML_EV_STEP_END, 0, 400, 0);
    CHECK_EQ_INT(tml__asm_feed(&a, &e, &r), 1);
    CHECK(tml__gpu_marks_any(&a.gpu));
    CHECK_EQ_INT(a.gpu.step_b, 2);
    CHECK_EQ_INT(a.gpu.step_e, 5);
    CHECK_EQ_INT(a.gpu.nspans, 2);
    CHECK_EQ_INT(a.gpu.span[0].phase, TML_PHASE_INPUT);
    CHECK_EQ_INT(a.gpu.span[0].inside, 0);
    CHECK_EQ_INT(a.gpu.span[1].phase, TML_PHASE_FORWARD);
    CHECK_EQ_INT(a.gpu.span[1].inside, 1);
    CHECK_EQ_INT(a.gpu.cpu_spans[TML_PHASE_INPUT], 1);
    CHECK_EQ_INT(a.gpu.cpu_spans[TML_PHASE_FORWARD], 1);
    CHECK_EQ_INT(r.gpu_traced_ns, -1);          /* the shipper fills it later */
    /* a step without GPU events carries no marks */
    e = ev(TML_EV_STEP_BEGIN, 0, 500, 1);
    tml__asm_feed(&a, &e, &r);
    e = ev(TML_EV_STEP_END, 0, 600, 0);
    CHECK_EQ_INT(tml__asm_feed(&a, &e, &r), 1);
    CHECK(!tml__gpu_marks_any(&a.gpu));
}

static void test_assembler_cuda_memory_peaks(void)
{
    tml_assembler a;
    tml_step_record r;
    tml_event e;
    tml__asm_init(&a);
    /* before any step: the allocator's peak is 5 GB (model loading) */
    e = ev(TML_EV_MEM, 0, 1000, 5000);
    tml__asm_feed(&a, &e, &r);
    /* step 0: currents 2000 and 3000, peak unchanged -> 3000 */
    e = ev(TML_EV_STEP_BEGIN, 0, 10, 0);
    tml__asm_feed(&a, &e, &r);
    e = ev(TML_EV_MEM, 0, 2000, 5000);
    tml__asm_feed(&a, &e, &r);
    e = ev(TML_EV_MEM, 0, 3000, 5000);
    tml__asm_feed(&a, &e, &r);
    e = ev(TML_EV_STEP_END, 0, 20, 0);
    CHECK_EQ_INT(tml__asm_feed(&a, &e, &r), 1);
    CHECK_EQ_INT(r.cuda_allocated_peak_bytes, 3000);
    CHECK_EQ_INT(r.cuda_reserved_peak_bytes, -1);
    /* step 1: the peak grew to 7000 during the step: that is its peak */
    e = ev(TML_EV_STEP_BEGIN, 0, 30, 1);
    tml__asm_feed(&a, &e, &r);
    e = ev(TML_EV_MEM, 0, 2500, 7000);
    tml__asm_feed(&a, &e, &r);
    e = ev(TML_EV_MEM, 1, 8000, 8000);
    tml__asm_feed(&a, &e, &r);
    e = ev(TML_EV_STEP_END, 0, 40, 0);
    CHECK_EQ_INT(tml__asm_feed(&a, &e, &r), 1);
    CHECK_EQ_INT(r.cuda_allocated_peak_bytes, 7000);
    /* the first reserved figure ever: its peak cannot be placed in this step */
    CHECK_EQ_INT(r.cuda_reserved_peak_bytes, 8000);
    /* step 2: unknown peaks (-1) -> the currents */
    e = ev(TML_EV_STEP_BEGIN, 0, 50, 2);
    tml__asm_feed(&a, &e, &r);
    e = ev(TML_EV_MEM, 0, 1500, -1);
    tml__asm_feed(&a, &e, &r);
    e = ev(TML_EV_STEP_END, 0, 60, 0);
    CHECK_EQ_INT(tml__asm_feed(&a, &e, &r), 1);
    CHECK_EQ_INT(r.cuda_allocated_peak_bytes, 1500);
}

/* How many of the queued samples are of metric m (the rest dropped). */
static int taken(tml_sampler *s, uint32_t m)
{
    static tml_sample v[256];
    int hits = 0;
    size_t n;
    while ((n = tml__sampler_take(s, v, 256)) > 0)
        for (size_t i = 0; i < n; i++)
            hits += v[i].metric == m;
    return hits;
}

static void busy_ms(int ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}

/* A summary asked mid-run gets a sample taken then, however long the
 * interval (tml__sampler_tick_now); a CPU share over a few clock ticks
 * (under 90 ms) is noise, so a second one at once has none, and its
 * baseline waits. */
static void test_tick_now(void)
{
    tml_sampler_opts o = {.interval_s = 600, .rank = 0, .node = 0, .local_rank = 0, .host = 1};
    tml_sampler *s = NULL;
    CHECK_EQ_INT(tml__sampler_start(&o, &s), 0);
    busy_ms(150);
    tml__sampler_tick_now(s, 5 * 1000000000LL);
    CHECK_EQ_INT(taken(s, TML_S_HOST_CPU_PERCENT), 1);
    tml__sampler_tick_now(s, 5 * 1000000000LL);
    CHECK_EQ_INT(taken(s, TML_S_HOST_CPU_PERCENT), 0);
    busy_ms(150);
    tml__sampler_tick_now(s, 5 * 1000000000LL);
    CHECK_EQ_INT(taken(s, TML_S_HOST_CPU_PERCENT), 1);
    tml__sampler_stop(s);
    tml__sampler_tick_now(NULL, 0);
}

#define TESTS X(test_stat) X(test_meminfo) X(test_pid_stat_odd_names) X(test_process_tree) \
    X(test_gpu_other_procs) X(test_statm_and_live_files) X(test_prefixes_never_overrun) X(test_series) \
    X(test_wire_samples) X(test_assembler_gpu_marks) X(test_assembler_cuda_memory_peaks) \
    X(test_tick_now)
#include "harness.h"
