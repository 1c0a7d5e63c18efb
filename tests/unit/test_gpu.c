/*
 * test_gpu.c - the NVML and CUDA loaders against the fake libraries the
 * build makes (build/fakes, next to this binary's folder): deterministic
 * figures, NOT_SUPPORTED, a lost GPU, missing symbols, a missing library,
 * CUDA_VISIBLE_DEVICES by index and UUID; the event pool's order, its
 * NOT_READY retries and its full-pool behaviour.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu/peak.h"

#include "gpu/cuda.h"
#include "gpu/nvml.h"
#include "traceml/traceml.h"
#include "harness.h"

static char fakes[PATH_MAX + 16];

static const char *fake(const char *name)
{
    static char path[PATH_MAX + 96];
    if (!fakes[0]) {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        exe[n > 0 ? n : 0] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = '\0';
        snprintf(fakes, sizeof(fakes), "%s/../fakes", exe);
    }
    snprintf(path, sizeof(path), "%s/%s", fakes, name);
    return path;
}

static void nvml_env(const char *lib)
{
    setenv("TRACEML_LIBNVML", fake(lib), 1);
    unsetenv("FAKE_NVML_NOT_SUPPORTED");
    unsetenv("FAKE_NVML_LOST");
    unsetenv("FAKE_NVML_INIT_FAIL");
    unsetenv("FAKE_NVML_PIDS");
    setenv("FAKE_NVML_DEVICES", "3", 1);
    setenv("FAKE_NVML_UTIL", "25", 1);
    setenv("FAKE_NVML_TEMP", "42", 1);
}

static void test_nvml_readings(void)
{
    tml_nvml *n;
    tml_gpu_reading r;
    nvml_env("libnvidia-ml.so.1");
    CHECK_EQ_INT(tml__nvml_open(getenv("TRACEML_LIBNVML"), &n), 0);
    CHECK_EQ_INT(tml__nvml_count(n), 3);
    CHECK_EQ_INT(tml__nvml_read(n, 1, &r), 0);
    CHECK_EQ_INT(r.valid, TML_GPU_UTIL | TML_GPU_MEM | TML_GPU_TEMP | TML_GPU_POWER | TML_GPU_POWER_LIMIT);
    CHECK_NEAR(r.util_percent, 26, 1e-9);         /* util + device index */
    CHECK_NEAR(r.mem_used_bytes, 3000e6, 1);
    CHECK_NEAR(r.mem_total_bytes, 16000e6, 1);
    CHECK_NEAR(r.temp_c, 42, 1e-9);
    CHECK_NEAR(r.power_w, 58.0, 1e-9);            /* milliwatts -> watts */
    CHECK_NEAR(r.power_limit_w, 250.0, 1e-9);
    CHECK_EQ_INT(r.lost, 0);
    CHECK_EQ_INT(tml__nvml_read(n, -1, &r), TML_EINVAL);
    tml__nvml_close(n);
}

static void test_nvml_not_supported_is_not_zero(void)
{
    tml_nvml *n;
    tml_gpu_reading r;
    nvml_env("libnvidia-ml.so.1");
    setenv("FAKE_NVML_NOT_SUPPORTED", "temp,power", 1);
    CHECK_EQ_INT(tml__nvml_open(getenv("TRACEML_LIBNVML"), &n), 0);
    CHECK_EQ_INT(tml__nvml_read(n, 0, &r), 0);
    CHECK(!(r.valid & TML_GPU_TEMP));
    CHECK(!(r.valid & TML_GPU_POWER));
    CHECK(r.valid & TML_GPU_UTIL);
    CHECK(r.valid & TML_GPU_POWER_LIMIT);
    tml__nvml_close(n);
}

static void test_nvml_lost_gpu(void)
{
    tml_nvml *n;
    tml_gpu_reading r;
    nvml_env("libnvidia-ml.so.1");
    CHECK_EQ_INT(tml__nvml_open(getenv("TRACEML_LIBNVML"), &n), 0);
    setenv("FAKE_NVML_LOST", "1", 1);
    /* the fake reads the variable at init: re-init through a second open */
    tml_nvml *n2;
    CHECK_EQ_INT(tml__nvml_open(getenv("TRACEML_LIBNVML"), &n2), 0);
    CHECK_EQ_INT(tml__nvml_read(n2, 0, &r), 0);
    CHECK_EQ_INT(r.lost, 1);
    CHECK_EQ_INT(r.valid, 0);
    /* asked again: still lost, and no value */
    CHECK_EQ_INT(tml__nvml_read(n2, 0, &r), 0);
    CHECK_EQ_INT(r.lost, 1);
    CHECK_EQ_INT(r.valid, 0);
    tml__nvml_close(n2);
    tml__nvml_close(n);
}

static void test_nvml_missing_symbols_and_library(void)
{
    tml_nvml *n;
    tml_gpu_reading r;
    /* old library: only unversioned names, no temperature or power */
    nvml_env("libnvidia-ml-min.so.1");
    CHECK_EQ_INT(tml__nvml_open(getenv("TRACEML_LIBNVML"), &n), 0);
    CHECK_EQ_INT(tml__nvml_read(n, 0, &r), 0);
    CHECK_EQ_INT(r.valid, TML_GPU_UTIL | TML_GPU_MEM);
    /* no UUID lookup there: a UUID entry is invalid, so none are visible */
    int idx[8];
    CHECK_EQ_INT(tml__nvml_visible(n, "GPU-fake-1", idx, 8), 0);
    tml__nvml_close(n);

    setenv("TRACEML_LIBNVML", "/nonexistent/libnvidia-ml.so.1", 1);
    n = (tml_nvml *)1;
    CHECK_EQ_INT(tml__nvml_open(getenv("TRACEML_LIBNVML"), &n), TML_EIO);
    CHECK(n == NULL);
    nvml_env("libnvidia-ml.so.1");
    setenv("FAKE_NVML_INIT_FAIL", "1", 1);
    CHECK_EQ_INT(tml__nvml_open(getenv("TRACEML_LIBNVML"), &n), TML_EIO);
    unsetenv("FAKE_NVML_INIT_FAIL");
}

static void test_nvml_visible_devices(void)
{
    tml_nvml *n;
    int idx[8];
    nvml_env("libnvidia-ml.so.1");
    CHECK_EQ_INT(tml__nvml_open(getenv("TRACEML_LIBNVML"), &n), 0);
    CHECK_EQ_INT(tml__nvml_visible(n, NULL, idx, 8), 3);
    CHECK_EQ_INT(idx[2], 2);
    CHECK_EQ_INT(tml__nvml_visible(n, "", idx, 8), 0);
    CHECK_EQ_INT(tml__nvml_visible(n, "2,0", idx, 8), 2);
    CHECK_EQ_INT(idx[0], 2);
    CHECK_EQ_INT(idx[1], 0);
    CHECK_EQ_INT(tml__nvml_visible(n, "GPU-fake-1, 2", idx, 8), 2);
    CHECK_EQ_INT(idx[0], 1);
    CHECK_EQ_INT(idx[1], 2);
    /* CUDA stops at the first invalid entry */
    CHECK_EQ_INT(tml__nvml_visible(n, "1,7,0", idx, 8), 1);
    CHECK_EQ_INT(tml__nvml_visible(n, "-1", idx, 8), 0);
    CHECK_EQ_INT(tml__nvml_visible(n, "GPU-nope", idx, 8), 0);
    tml__nvml_close(n);
}

static void test_cuda_pool(void)
{
    tml_gpu_pool *p;
    int64_t ns;
    setenv("TRACEML_LIBCUDA", fake("libcuda.so.1"), 1);
    unsetenv("FAKE_CUDA_NOT_READY");
    tml_cuda *cu = tml__cuda_get(getenv("TRACEML_LIBCUDA"));
    CHECK(cu != NULL);
    if (!cu)
        return;
    setenv("FAKE_CUDA_NO_CONTEXT", "1", 1);
    CHECK_EQ_INT(tml__gpu_pool_new(cu, 16, &p), TML_EIO);
    unsetenv("FAKE_CUDA_NO_CONTEXT");
    CHECK_EQ_INT(tml__gpu_pool_new(cu, 10, &p), 0);
    CHECK_EQ_INT(p->cap, 16);
    int64_t a = tml__gpu_pool_record(p, NULL);
    struct timespec ts = {0, 3000000};
    nanosleep(&ts, NULL);
    int64_t b = tml__gpu_pool_record(p, NULL);
    CHECK_EQ_INT(a, 0);
    CHECK_EQ_INT(b, 1);
    CHECK_EQ_INT(tml__gpu_pool_bind(p), 0);
    CHECK_EQ_INT(tml__gpu_pool_done(p, b), 1);
    CHECK_EQ_INT(tml__gpu_pool_elapsed(p, a, b, &ns), 0);
    CHECK(ns >= 3000000 && ns < 50000000);
    tml__gpu_pool_release(p, 2);
    CHECK_EQ_INT(tml__gpu_pool_done(p, a), TML_EINVAL);   /* given back */

    /* NOT_READY while the (fake) GPU lags 30 ms behind; asking never waits */
    setenv("FAKE_CUDA_NOT_READY", "30", 1);
    int64_t c = tml__gpu_pool_record(p, NULL);
    unsetenv("FAKE_CUDA_NOT_READY");
    CHECK_EQ_INT(tml__gpu_pool_done(p, c), 0);
    CHECK_EQ_INT(tml__gpu_pool_done(p, c), 0);
    struct timespec lag = {0, 40000000};
    nanosleep(&lag, NULL);
    CHECK_EQ_INT(tml__gpu_pool_done(p, c), 1);
    tml__gpu_pool_release(p, (uint64_t)c + 1);

    /* a full pool records nothing (and counts it) until events are given back */
    int64_t first = -1, last = -1;
    for (int i = 0; i < 16; i++) {
        last = tml__gpu_pool_record(p, NULL);
        if (i == 0)
            first = last;
        CHECK(last >= 0);
    }
    CHECK_EQ_INT(tml__gpu_pool_record(p, NULL), -1);
    CHECK_EQ_INT(atomic_load(&p->failed), 1);
    tml__gpu_pool_release(p, (uint64_t)first + 1);
    CHECK(tml__gpu_pool_record(p, NULL) == last + 1);
    tml__gpu_pool_free(p);
}

/* The compute processes on a GPU: the v3 struct (full library) and the
 * v1 struct (only the unversioned name), none, a list larger than the
 * first buffer (INSUFFICIENT_SIZE, asked again), a device that does not
 * support the call, a library without it. */
static void test_nvml_pids(void)
{
    tml_nvml *n;
    uint32_t pids[64];
    size_t k;
    char list[512];
    const char *libs[2] = { "libnvidia-ml.so.1", "libnvidia-ml-min.so.1" };
    for (int l = 0; l < 2; l++) {
        nvml_env(libs[l]);
        setenv("FAKE_NVML_PIDS", "self,4242,77", 1);
        CHECK_EQ_INT(tml__nvml_open(getenv("TRACEML_LIBNVML"), &n), 0);
        CHECK_EQ_INT(tml__nvml_pids(n, 1, pids, 64, &k), 0);
        CHECK_EQ_INT(k, 3);
        CHECK_EQ_INT(pids[0], (uint32_t)getpid());
        CHECK_EQ_INT(pids[1], 4242);     /* read with the struct size of the version */
        CHECK_EQ_INT(pids[2], 77);
        CHECK_EQ_INT(tml__nvml_pids(n, -1, pids, 64, &k), TML_EINVAL);
        tml__nvml_close(n);
    }
    nvml_env("libnvidia-ml.so.1");
    CHECK_EQ_INT(tml__nvml_open(getenv("TRACEML_LIBNVML"), &n), 0);
    k = 9;
    CHECK_EQ_INT(tml__nvml_pids(n, 0, pids, 64, &k), 0);    /* nobody: known, empty */
    CHECK_EQ_INT(k, 0);
    tml__nvml_close(n);

    /* 50 processes: more than the first buffer's 32 */
    size_t at = 0;
    for (int i = 0; i < 50; i++)
        at += (size_t)snprintf(list + at, sizeof(list) - at, "%s%d", i ? "," : "", 1000 + i);
    setenv("FAKE_NVML_PIDS", list, 1);
    CHECK_EQ_INT(tml__nvml_open(getenv("TRACEML_LIBNVML"), &n), 0);
    CHECK_EQ_INT(tml__nvml_pids(n, 0, pids, 64, &k), 0);
    CHECK_EQ_INT(k, 50);
    CHECK_EQ_INT(pids[49], 1049);
    CHECK_EQ_INT(tml__nvml_pids(n, 0, pids, 10, &k), 0);     /* more than cap: the count */
    CHECK_EQ_INT(k, 50);
    CHECK_EQ_INT(pids[9], 1009);
    tml__nvml_close(n);

    setenv("FAKE_NVML_NOT_SUPPORTED", "procs", 1);
    CHECK_EQ_INT(tml__nvml_open(getenv("TRACEML_LIBNVML"), &n), 0);
    CHECK_EQ_INT(tml__nvml_pids(n, 0, pids, 64, &k), TML_EIO);
    tml__nvml_close(n);
    unsetenv("FAKE_NVML_NOT_SUPPORTED");

    setenv("FAKE_NVML_LOST", "1", 1);
    CHECK_EQ_INT(tml__nvml_open(getenv("TRACEML_LIBNVML"), &n), 0);
    CHECK_EQ_INT(tml__nvml_pids(n, 0, pids, 64, &k), TML_EIO);
    tml__nvml_close(n);
    unsetenv("FAKE_NVML_LOST");
    unsetenv("FAKE_NVML_PIDS");
}

/* The peak table: by the device's name as CUDA gives it and the dtype;
 * a word matches whole ("A10" is not an A100, "L40" not an L40S). */
static void test_peak_table(void)
{
    CHECK_EQ_INT(tml__gpu_peak_flops("NVIDIA H100 80GB HBM3", TML_FLOPS_16BIT), 989400000000000LL);
    CHECK_EQ_INT(tml__gpu_peak_flops("NVIDIA H100 PCIe", TML_FLOPS_16BIT), 756000000000000LL);
    CHECK_EQ_INT(tml__gpu_peak_flops("NVIDIA H100 80GB HBM3", TML_FLOPS_TF32), 494700000000000LL);
    CHECK_EQ_INT(tml__gpu_peak_flops("NVIDIA A100-SXM4-80GB", TML_FLOPS_FP32), 19500000000000LL);
    CHECK_EQ_INT(tml__gpu_peak_flops("NVIDIA A100-SXM4-80GB", TML_FLOPS_COUNTED | TML_FLOPS_16BIT),
                 312000000000000LL);
    CHECK_EQ_INT(tml__gpu_peak_flops("NVIDIA A10", TML_FLOPS_16BIT), 125000000000000LL);
    CHECK_EQ_INT(tml__gpu_peak_flops("NVIDIA L40S", TML_FLOPS_16BIT), 362000000000000LL);
    CHECK_EQ_INT(tml__gpu_peak_flops("NVIDIA L40", TML_FLOPS_16BIT), 181000000000000LL);
    CHECK_EQ_INT(tml__gpu_peak_flops("NVIDIA L4", TML_FLOPS_16BIT), 121000000000000LL);
    CHECK_EQ_INT(tml__gpu_peak_flops("Tesla V100-SXM2-32GB", TML_FLOPS_TF32), 15700000000000LL);
    CHECK_EQ_INT(tml__gpu_peak_flops("Tesla T4", TML_FLOPS_16BIT), 65000000000000LL);
    CHECK_EQ_INT(tml__gpu_peak_flops("NVIDIA GeForce RTX 4090", TML_FLOPS_16BIT), 0);
    CHECK_EQ_INT(tml__gpu_peak_flops("", TML_FLOPS_16BIT), 0);
    CHECK_EQ_INT(tml__gpu_peak_flops(NULL, TML_FLOPS_16BIT), 0);
}

#define TESTS X(test_peak_table) X(test_nvml_readings) X(test_nvml_not_supported_is_not_zero) X(test_nvml_lost_gpu) \
    X(test_nvml_missing_symbols_and_library) X(test_nvml_visible_devices) X(test_nvml_pids) \
    X(test_cuda_pool)
#include "harness.h"
