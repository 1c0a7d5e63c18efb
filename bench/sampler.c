/*
 * sampler.c - what the resource sampler costs: CPU time of its thread per
 * tick, and as a share of one core at the default 1 s interval (target
 * < 0.5%).
 *
 * Prints a table of medians over repeats, for host + process sampling (a
 * CPU-only machine, local rank 0) and, when a libnvidia-ml is found
 * ($TRACEML_LIBNVML, e.g. build/fakes/libnvidia-ml.so.1), with one GPU.
 * Each repeat runs the sampler at a short interval (to get many ticks in
 * little time) and reads the thread's CPU clock:
 *
 *     ./build/bench/sampler [repeats] [seconds]
 *     TRACEML_LIBNVML=build/fakes/libnvidia-ml.so.1 ./build/bench/sampler
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sample/proc.h"
#include "sample/sampler.h"

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

/* CPU ns per tick of one sampler run at `interval` for `seconds`. */
static double per_tick_ns(int gpu, double interval, double seconds, size_t *samples_out)
{
    tml_sampler *s;
    tml_sampler_opts o = { .interval_s = interval, .rank = 0, .node = 0, .local_rank = 0,
                           .host = 1, .gpu = gpu, .cuda_bytes = NULL,
                           .libnvml = getenv("TRACEML_LIBNVML") };
    if (tml__sampler_start(&o, &s) < 0)
        return -1;
    struct timespec ts = { (time_t)seconds, (long)((seconds - (long)seconds) * 1e9) };
    nanosleep(&ts, NULL);
    int64_t cpu = tml__sampler_cpu_ns(s);
    tml_sample buf[4096];
    size_t n, total = 0;
    while ((n = tml__sampler_take(s, buf, 4096)) > 0)
        total += n;
    tml__sampler_stop(s);
    *samples_out = total;
    double ticks = 1.0 + seconds / interval;       /* the first tick runs at start */
    return cpu < 0 ? -1 : (double)cpu / ticks;
}

static void *idle_thread(void *arg)
{
    (void)arg;
    pause();
    return NULL;
}

/* CPU time of one process-tree reading (the sampler's per-tick
 * process.tree_cpu_percent), by the children files and by a /proc scan,
 * with `workers` sleeping children (DataLoader workers) and `threads`
 * idle threads in this process (torch's pools). */
static void tree_costs(int repeats)
{
    enum { WORKERS = 4, THREADS = 8, CALLS = 500 };
    pid_t kids[WORKERS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, idle_thread, NULL);
    for (int i = 0; i < WORKERS; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            pause();
            _exit(0);
        }
    }
    usleep(100000);
    for (int scan = 0; scan < 2; scan++) {
        double v[64];
        size_t procs = 0;
        for (int r = 0; r < repeats && r < 64; r++) {
            struct timespec a, b;
            uint64_t ticks;
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
            for (int i = 0; i < CALLS; i++)
                (void)(scan ? tml__proc_tree_ticks_scan(getpid(), &ticks, &procs)
                            : tml__proc_tree_ticks(getpid(), &ticks, &procs));
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
            v[r] = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / CALLS;
        }
        double ns = median(v, repeats < 64 ? repeats : 64);
        char name[64];
        snprintf(name, sizeof(name), "process tree, %s", scan ? "/proc scan" : "children files");
        printf("%-28s %9zu pr %9.1f us %17.4f%%  (%d threads + %d children)\n", name, procs,
               ns / 1000.0, ns / 1e9 * 100.0, THREADS + 1, WORKERS);
    }
    for (int i = 0; i < WORKERS; i++) {
        kill(kids[i], SIGKILL);
        waitpid(kids[i], NULL, 0);
    }
}

int main(int argc, char **argv)
{
    int repeats = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 5;
    double seconds = argc > 2 ? atof(argv[2]) : 2.0;
    double interval = 0.02;
    if (repeats < 1)
        repeats = 1;
    printf("resource sampler, %d repeats of %.1f s at a %.0f ms interval (medians)\n",
           repeats, seconds, interval * 1000);
    printf("%-28s %14s %12s %18s\n", "configuration", "samples/tick", "CPU/tick", "CPU @ 1 s interval");
    for (int gpu = 0; gpu < 2; gpu++) {
        double v[64];
        size_t samples = 0;
        if (gpu && !getenv("TRACEML_LIBNVML")) {
            printf("%-28s %14s %12s %18s\n", "host + process + 1 GPU", "-", "-",
                   "(set TRACEML_LIBNVML)");
            continue;
        }
        for (int r = 0; r < repeats && r < 64; r++)
            v[r] = per_tick_ns(gpu, interval, seconds, &samples);
        double ns = median(v, repeats < 64 ? repeats : 64);
        double ticks = 1.0 + seconds / interval;
        printf("%-28s %14.1f %9.1f us %17.4f%%\n",
               gpu ? "host + process + 1 GPU" : "host + process (CPU only)",
               (double)samples / ticks, ns / 1000.0, ns / 1e9 * 100.0);
    }
    /* per-step RSS: the shipper reads /proc/self/statm at most once per
     * 10 ms pass that completed a step */
    double v[64];
    for (int r = 0; r < repeats && r < 64; r++) {
        struct timespec a, b;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
        for (int i = 0; i < 2000; i++)
            (void)tml__rss_bytes();
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
        v[r] = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / 2000.0;
    }
    double ns = median(v, repeats < 64 ? repeats : 64);
    printf("%-28s %14s %9.1f us %17.4f%%  (worst case: 100 reads/s)\n", "per-step RSS read (shipper)",
           "-", ns / 1000.0, ns * 100.0 / 1e9 * 100.0);
    tree_costs(repeats);
    return 0;
}
