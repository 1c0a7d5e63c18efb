/*
 * fake_cuda.c - a stand-in for libcuda.so.1 (the few driver functions the
 * GPU clock uses), for the tests (TRACEML_LIBCUDA points at the built file).
 *
 * An event's GPU timestamp is the CPU monotonic clock when it was
 * recorded, so GPU-clock durations equal the CPU-clock ones of the same
 * boundaries: deterministic, and checkable against what the test slept.
 * Environment:
 *   FAKE_CUDA_NOT_READY=K   the "GPU" lags K ms behind: an event answers
 *                           NOT_READY until K ms after it was recorded (in
 *                           stream order, like a busy GPU; exercises retries)
 *   FAKE_CUDA_NO_CONTEXT=1  cuCtxGetCurrent returns no context
 *   FAKE_CUDA_INIT_FAIL=1   cuInit fails
 * fake_cuda_stats() reports counters for tests to check (no synchronize
 * function exists here at all: calling one would not link).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef void *CUcontext;
typedef void *CUstream;
typedef struct fake_event {
    long long t_ns;
    int recorded, queries_left, live;
} fake_event;
typedef fake_event *CUevent;

static int ctx_tag;
static __thread CUcontext current;
static int not_ready;
static long records, queries, created, destroyed;

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

CUresult cuInit(unsigned int flags);
CUresult cuCtxGetCurrent(CUcontext *c);
CUresult cuCtxSetCurrent(CUcontext c);
CUresult cuEventCreate(CUevent *e, unsigned int flags);
CUresult cuEventRecord(CUevent e, CUstream s);
CUresult cuEventQuery(CUevent e);
CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b);
CUresult cuEventDestroy_v2(CUevent e);
void fake_cuda_stats(long *rec, long *qry, long *live);
CUresult cuDeviceGet(int *dev, int ordinal);
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, int dev);

CUresult cuInit(unsigned int flags)
{
    (void)flags;
    const char *v = getenv("FAKE_CUDA_INIT_FAIL");
    return v && *v == '1' ? 100 : 0;
}

CUresult cuCtxGetCurrent(CUcontext *c)
{
    const char *v = getenv("FAKE_CUDA_NO_CONTEXT");
    *c = v && *v == '1' ? NULL : (current ? current : (CUcontext)&ctx_tag);
    return 0;
}

CUresult cuCtxSetCurrent(CUcontext c)
{
    current = c;
    return 0;
}

CUresult cuEventCreate(CUevent *e, unsigned int flags)
{
    (void)flags;
    *e = calloc(1, sizeof(fake_event));
    if (!*e)
        return 2;
    (*e)->live = 1;
    __atomic_add_fetch(&created, 1, __ATOMIC_RELAXED);
    return 0;
}

CUresult cuEventRecord(CUevent e, CUstream s)
{
    (void)s;
    if (!e || !e->live)
        return 400;
    const char *v = getenv("FAKE_CUDA_NOT_READY");   /* read per record: tests change it */
    not_ready = v ? (int)strtol(v, NULL, 10) : 0;
    e->t_ns = now_ns();
    __atomic_store_n(&e->queries_left, not_ready, __ATOMIC_RELAXED);   /* lag, ms */
    __atomic_store_n(&e->recorded, 1, __ATOMIC_RELEASE);
    __atomic_add_fetch(&records, 1, __ATOMIC_RELAXED);
    return 0;
}

CUresult cuEventQuery(CUevent e)
{
    __atomic_add_fetch(&queries, 1, __ATOMIC_RELAXED);
    if (!e || !e->live)
        return 400;
    if (!__atomic_load_n(&e->recorded, __ATOMIC_ACQUIRE))
        return 0;    /* like CUDA: an event never recorded counts as completed */
    int lag_ms = __atomic_load_n(&e->queries_left, __ATOMIC_RELAXED);
    if (now_ns() < e->t_ns + (long long)lag_ms * 1000000LL)
        return 600;  /* CUDA_ERROR_NOT_READY */
    return 0;
}

CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
    if (!a || !b || !a->recorded || !b->recorded)
        return 400;
    long long t = now_ns();
    if (t < a->t_ns + a->queries_left * 1000000LL || t < b->t_ns + b->queries_left * 1000000LL)
        return 600;
    *ms = (float)((double)(b->t_ns - a->t_ns) / 1e6);
    return 0;
}

CUresult cuEventDestroy_v2(CUevent e)
{
    if (!e)
        return 400;
    e->live = 0;
    free(e);
    __atomic_add_fetch(&destroyed, 1, __ATOMIC_RELAXED);
    return 0;
}

void fake_cuda_stats(long *rec, long *qry, long *live)
{
    *rec = records;
    *qry = queries;
    *live = created - destroyed;
}

CUresult cuDeviceGet(int *dev, int ordinal)
{
    if (ordinal < 0 || ordinal > 7)
        return 101;   /* CUDA_ERROR_INVALID_DEVICE */
    *dev = ordinal;
    return 0;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *c, int dev)
{
    (void)dev;
    *c = (CUcontext)&ctx_tag;
    return 0;
}
