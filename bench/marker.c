/*
 * marker.c - what one phase marker costs on the hot path.
 *
 * Prints a table of medians over repeats: the clock alone, a begin/end
 * pair, a step (begin + end), and a begin/end pair while the shipper drains
 * concurrently. Targets: <= 50 ns per marker (a pair is two markers).
 *
 *     OMP_NUM_THREADS=1 ./build/bench/marker [repeats]
 *
 * TraceML runs in its normal remote mode towards a closed port, so events
 * flow through the ring and the shipper exactly as in a run, and are then
 * dropped and counted because nobody listens.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <traceml/traceml.h>

#define N 200000

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static volatile int64_t sink;

static double run_clock(void)
{
    int64_t t0 = tml_now_ns();
    for (int i = 0; i < N; i++)
        sink += tml_now_ns();
    return (double)(tml_now_ns() - t0) / N;
}

static double run_pair(void)
{
    int64_t t0 = tml_now_ns();
    for (int i = 0; i < N; i++) {
        tml_phase_begin(TML_PHASE_FORWARD);
        tml_phase_end(TML_PHASE_FORWARD);
        if ((i & 1023) == 1023) {       /* let the shipper keep up */
            tml_step_begin();
            tml_step_end();
        }
    }
    return (double)(tml_now_ns() - t0) / N;
}

static double run_step(void)
{
    int64_t t0 = tml_now_ns();
    for (int i = 0; i < N / 8; i++) {
        tml_step_begin();
        tml_step_end();
    }
    return (double)(tml_now_ns() - t0) / (N / 8);
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 9;
    if (reps < 1 || reps > 100)
        reps = 9;
    setenv("TRACEML_ADDR", "127.0.0.1:9", 1);   /* discard port: nobody listens */
    int rc = tml_init(NULL);
    if (rc < 0) {
        fprintf(stderr, "marker: tml_init: %s\n", tml_strerror(rc));
        return 1;
    }
    double clk[100], pair[100], step[100];
    for (int r = 0; r < reps; r++) {
        clk[r] = run_clock();
        pair[r] = run_pair();
        step[r] = run_step();
    }
    double c = median(clk, reps), p = median(pair, reps), s = median(step, reps);
    printf("| what | ns | per marker ns | per marker beyond the clock ns |\n|---|---:|---:|---:|\n");
    printf("| clock_gettime(CLOCK_MONOTONIC) | %.1f | | |\n", c);
    printf("| phase begin + end | %.1f | %.1f | %.1f |\n", p, p / 2, p / 2 - c);
    printf("| step begin + end | %.1f | %.1f | %.1f |\n", s, s / 2, s / 2 - c);
    printf("(medians of %d repeats of %d iterations)\n", reps, N);
    tml_shutdown();
    return 0;
}
