/*
 * toy_train.c - a training loop in plain C, traced through the C API.
 *
 * Fits y = 3x - 2 (plus noise) with a tiny two-parameter linear model and
 * mini-batch SGD. "Loading" a batch generates it and, to make the example
 * diagnose something, sleeps --load-ms milliseconds (default 4), so the run
 * comes out INPUT-BOUND. Each batch's samples (tml_step_samples) and the
 * FLOPs of a sample (tml_set_flops: the forward's 2,000 multiply-adds,
 * times 3 for forward and backward) give the summary its throughput.
 *
 *     traceml run -- ./build/examples/toy_train [--steps N] [--load-ms MS]
 *
 * Started without `traceml run` it writes logs/<run>/ itself and prints
 * the summary.
 */
#define _POSIX_C_SOURCE 200809L   /* nanosleep, clock_gettime under -std=c11 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <traceml/traceml.h>

#define BATCH 256

typedef struct batch {
    double x[BATCH], y[BATCH];
} batch;

static unsigned long long rng_state = 88172645463325252ull;

static double uniform(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static void load_batch(batch *b, long load_ms)
{
    for (int i = 0; i < BATCH; i++) {
        b->x[i] = uniform() * 2.0 - 1.0;
        b->y[i] = 3.0 * b->x[i] - 2.0 + (uniform() - 0.5) * 0.1;
    }
    struct timespec ts = {load_ms / 1000, (load_ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static long parse_long(const char *s, const char *what)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 0) {
        fprintf(stderr, "toy_train: bad %s: %s\n", what, s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    long steps = 300, load_ms = 4;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--steps") == 0 && i + 1 < argc)
            steps = parse_long(argv[++i], "--steps");
        else if (strcmp(argv[i], "--load-ms") == 0 && i + 1 < argc)
            load_ms = parse_long(argv[++i], "--load-ms");
        else {
            fprintf(stderr, "usage: toy_train [--steps N] [--load-ms MS]\n");
            return 2;
        }
    }

    int rc = tml_init(NULL);
    if (rc < 0 && rc != TML_EDISABLED)
        fprintf(stderr, "toy_train: tracing off: %s\n", tml_strerror(rc));

    tml_set_flops(3 * 2000 * 2.0, TML_FLOPS_GIVEN, NULL);
    double w = 0.0, b0 = 0.0, lr = 0.1, loss = 0.0;
    double pred[BATCH], gw, gb;
    batch bt;
    for (long s = 0; s < steps; s++) {
        tml_phase_begin(TML_PHASE_INPUT);
        load_batch(&bt, load_ms);
        tml_phase_end(TML_PHASE_INPUT);
        tml_step_samples(BATCH, -1);

        tml_step_begin();
        tml_phase_begin(TML_PHASE_FORWARD);
        loss = 0.0;
        for (int k = 0; k < 2000; k++) {          /* a little real work */
            for (int i = 0; i < BATCH; i++)
                pred[i] = w * bt.x[i] + b0;
        }
        for (int i = 0; i < BATCH; i++)
            loss += (pred[i] - bt.y[i]) * (pred[i] - bt.y[i]) / BATCH;
        tml_phase_end(TML_PHASE_FORWARD);

        tml_phase_begin(TML_PHASE_BACKWARD);
        gw = gb = 0.0;
        for (int i = 0; i < BATCH; i++) {
            double d = 2.0 * (pred[i] - bt.y[i]) / BATCH;
            gw += d * bt.x[i];
            gb += d;
        }
        tml_phase_end(TML_PHASE_BACKWARD);

        tml_phase_begin(TML_PHASE_OPTIMIZER);
        w -= lr * gw;
        b0 -= lr * gb;
        tml_phase_end(TML_PHASE_OPTIMIZER);
        tml_step_end();

        if (s % 100 == 0)
            printf("step %ld loss %.5f\n", s, loss);
    }
    printf("final w=%.3f b=%.3f loss=%.5f\n", w, b0, loss);
    fflush(stdout);

    tml_shutdown();
    if (tml_summary_text())
        fputs(tml_summary_text(), stdout);
    return 0;
}
