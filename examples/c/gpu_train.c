/*
 * gpu_train.c - a training loop in C with the GPU clock and per-step CUDA
 * memory, for checking TraceML's GPU paths end to end.
 *
 *     traceml run -- ./build/examples/gpu_train --steps 120 --h2d-ms 3
 *
 * It loads the CUDA driver itself (libcuda.so.1, or $TRACEML_LIBCUDA: the
 * tests point both at build/fakes/libcuda.so.1), makes device 0's primary
 * context current, and hands TraceML the default stream. Each phase then
 * "runs" for the given milliseconds (the host sleeps; on a real GPU the
 * stream is idle, so its events complete as they are recorded and the GPU
 * clock matches the sleeps). After the forward and at the end of each step
 * it reports CUDA memory figures it makes up: --reserved-mb, growing by
 * --creep-mb per step, and --device-mb of device memory; under torchrun
 * (--no-python), --rank1-reserved-mb for rank 1 instead.
 */
#define _POSIX_C_SOURCE 200809L   /* nanosleep, clock_gettime under -std=c11 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <traceml/traceml.h>

static void sleep_ms(double ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = { (time_t)(ms / 1000.0), (long)((ms - 1000.0 * (long)(ms / 1000.0)) * 1e6) };
    nanosleep(&ts, NULL);
}

/* CUDA driver: init, device 0, its primary context current. */
static int cuda_context(void)
{
    const char *path = getenv("TRACEML_LIBCUDA");
    void *lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW);
    if (!lib)
        return -1;
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(lib, "cuInit");
    int (*get)(int *, int) = (int (*)(int *, int))dlsym(lib, "cuDeviceGet");
    int (*retain)(void **, int) = (int (*)(void **, int))dlsym(lib, "cuDevicePrimaryCtxRetain");
    int (*set)(void *) = (int (*)(void *))dlsym(lib, "cuCtxSetCurrent");
    int dev;
    void *ctx;
    if (!init || !get || !retain || !set || init(0) || get(&dev, 0) || retain(&ctx, dev) ||
        set(ctx))
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    int steps = 120;
    double load = 1, h2d = 0, fwd = 2, bwd = 3, opt = 1, reserved_mb = 3200, alloc_mb = 2900,
           creep_mb = 0, device_mb = 16000;
    for (int i = 1; i + 1 < argc; i += 2) {
        double v = strtod(argv[i + 1], NULL);
        if (strcmp(argv[i], "--steps") == 0) steps = (int)v;
        else if (strcmp(argv[i], "--load-ms") == 0) load = v;
        else if (strcmp(argv[i], "--h2d-ms") == 0) h2d = v;
        else if (strcmp(argv[i], "--fwd-ms") == 0) fwd = v;
        else if (strcmp(argv[i], "--bwd-ms") == 0) bwd = v;
        else if (strcmp(argv[i], "--opt-ms") == 0) opt = v;
        else if (strcmp(argv[i], "--reserved-mb") == 0) reserved_mb = v;
        else if (strcmp(argv[i], "--allocated-mb") == 0) alloc_mb = v;
        else if (strcmp(argv[i], "--creep-mb") == 0) creep_mb = v;
        else if (strcmp(argv[i], "--device-mb") == 0) device_mb = v;
        else if (strcmp(argv[i], "--rank1-reserved-mb") == 0) {
            /* a rank that holds more than its peers (RANK from torchrun) */
            const char *r = getenv("RANK");
            if (r && strcmp(r, "1") == 0)
                reserved_mb = v;
        } else {
            fprintf(stderr, "gpu_train: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    int rc = tml_init(NULL);
    if (rc < 0 && rc != TML_EDISABLED)
        fprintf(stderr, "gpu_train: traceml: %s\n", tml_strerror(rc));
    if (cuda_context() < 0)
        fprintf(stderr, "gpu_train: no CUDA driver: GPU clock off\n");
    else if ((rc = tml_set_cuda_stream(NULL)) < 0)
        fprintf(stderr, "gpu_train: tml_set_cuda_stream: %s\n", tml_strerror(rc));

    const double mb = 1024.0 * 1024.0;
    for (int s = 0; s < steps; s++) {
        tml_phase_begin(TML_PHASE_INPUT);
        sleep_ms(load);
        tml_phase_end(TML_PHASE_INPUT);
        tml_step_begin();
        if (h2d > 0) {
            tml_phase_begin(TML_PHASE_H2D);
            sleep_ms(h2d);
            tml_phase_end(TML_PHASE_H2D);
        }
        tml_phase_begin(TML_PHASE_FORWARD);
        sleep_ms(fwd);
        tml_phase_end(TML_PHASE_FORWARD);
        int64_t resv = (int64_t)((reserved_mb + creep_mb * s) * mb);
        int64_t alloc = (int64_t)((alloc_mb + creep_mb * s) * mb);
        tml_cuda_memory(alloc, resv, -1, -1, (int64_t)(device_mb * mb));
        tml_phase_begin(TML_PHASE_BACKWARD);
        sleep_ms(bwd);
        tml_phase_end(TML_PHASE_BACKWARD);
        tml_phase_begin(TML_PHASE_OPTIMIZER);
        sleep_ms(opt);
        tml_phase_end(TML_PHASE_OPTIMIZER);
        tml_cuda_memory(alloc / 2, resv, -1, -1, (int64_t)(device_mb * mb));
        tml_step_end();
    }
    tml_shutdown();
    if (tml_summary_text())
        fputs(tml_summary_text(), stdout);
    printf("gpu_train: %d steps done\n", steps);
    return 0;
}
