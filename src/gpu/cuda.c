/*
 * cuda.c - CUDA driver loader and the event pool (see cuda.h).
 *
 * The driver API rather than the runtime: libcuda.so.1 ships with the
 * driver, so it is there whenever a GPU is, whatever CUDA toolkit (if any)
 * the user's PyTorch was built with, and its ABI is stable. Symbols are
 * looked up newest version first (cuEventDestroy_v2 before cuEventDestroy,
 * as cuda.h's #defines do). Events are created once, with timing enabled
 * and without BLOCKING_SYNC, so recording one is a cheap enqueue.
 */
#include "gpu/cuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "traceml/traceml.h"

/* ---- the driver ABI we use (cuda.h) ---- */
typedef int CUresult;
typedef void *CUcontext;
typedef void *CUevent;
typedef void *CUstream;
#define CUDA_SUCCESS 0
#define CUDA_ERROR_NOT_READY 600
#define CU_EVENT_DEFAULT 0

struct tml_cuda {
    void *lib;
    CUresult (*ctx_get)(CUcontext *);
    CUresult (*ctx_set)(CUcontext);
    CUresult (*ev_create)(CUevent *, unsigned int);
    CUresult (*ev_record)(CUevent, CUstream);
    CUresult (*ev_query)(CUevent);
    CUresult (*ev_elapsed)(float *, CUevent, CUevent);
    CUresult (*ev_destroy)(CUevent);
};

static tml_cuda cuda_driver;
static tml_cuda *cuda_ok;
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;
static const char *cuda_path;   /* the first tml__cuda_get's, for cuda_load */

static void *sym(void *lib, const char *a, const char *b)
{
    void *p = dlsym(lib, a);
    if (!p && b)
        p = dlsym(lib, b);
    return p;
}

static void cuda_load(void)
{
    const char *path = cuda_path;
    tml_cuda *c = &cuda_driver;
    void *lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return;
    CUresult (*init)(unsigned int) = (CUresult (*)(unsigned int))sym(lib, "cuInit", NULL);
    c->ctx_get = (CUresult (*)(CUcontext *))sym(lib, "cuCtxGetCurrent", NULL);
    c->ctx_set = (CUresult (*)(CUcontext))sym(lib, "cuCtxSetCurrent", NULL);
    c->ev_create = (CUresult (*)(CUevent *, unsigned int))sym(lib, "cuEventCreate", NULL);
    c->ev_record = (CUresult (*)(CUevent, CUstream))sym(lib, "cuEventRecord", NULL);
    c->ev_query = (CUresult (*)(CUevent))sym(lib, "cuEventQuery", NULL);
    c->ev_elapsed = (CUresult (*)(float *, CUevent, CUevent))sym(lib, "cuEventElapsedTime", NULL);
    c->ev_destroy = (CUresult (*)(CUevent))sym(lib, "cuEventDestroy_v2", "cuEventDestroy");
    if (!init || !c->ctx_get || !c->ctx_set || !c->ev_create || !c->ev_record ||
        !c->ev_query || !c->ev_elapsed || !c->ev_destroy || init(0) != CUDA_SUCCESS) {
        dlclose(lib);
        memset(c, 0, sizeof(*c));
        return;
    }
    c->lib = lib;
    cuda_ok = c;
}

tml_cuda *tml__cuda_get(const char *path)
{
    if (!cuda_path)   /* a race only between callers of the same engine: one path */
        cuda_path = path ? path : "";
    pthread_once(&cuda_once, cuda_load);
    return cuda_ok;
}

int tml__gpu_pool_new(tml_cuda *cu, uint32_t cap, tml_gpu_pool **out)
{
    CUcontext ctx = NULL;
    uint32_t n = 16;

    *out = NULL;
    if (!cu || cu->ctx_get(&ctx) != CUDA_SUCCESS || !ctx)
        return TML_EIO;
    while (n < cap && n < (1u << 20))
        n <<= 1;
    tml_gpu_pool *p = calloc(1, sizeof(*p));
    if (!p)
        return TML_ENOMEM;
    p->ev = calloc(n, sizeof(*p->ev));
    if (!p->ev) {
        free(p);
        return TML_ENOMEM;
    }
    p->cu = cu;
    p->ctx = ctx;
    p->cap = n;
    for (uint32_t i = 0; i < n; i++) {
        if (cu->ev_create(&p->ev[i], CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
            p->cap = i;
            tml__gpu_pool_free(p);
            return TML_EIO;
        }
    }
    *out = p;
    return 0;
}

void tml__gpu_pool_free(tml_gpu_pool *p)
{
    if (!p)
        return;
    if (p->cu->ctx_set(p->ctx) == CUDA_SUCCESS)
        for (uint32_t i = 0; i < p->cap; i++)
            if (p->ev[i])
                p->cu->ev_destroy(p->ev[i]);
    free(p->ev);
    free(p);
}

int64_t tml__gpu_pool_record(tml_gpu_pool *p, void *stream)
{
    uint64_t h = atomic_load_explicit(&p->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&p->tail, memory_order_acquire);
    if (h - t >= p->cap || p->cu->ev_record(p->ev[h & (p->cap - 1)], stream) != CUDA_SUCCESS) {
        atomic_fetch_add_explicit(&p->failed, 1, memory_order_relaxed);
        return -1;
    }
    atomic_store_explicit(&p->head, h + 1, memory_order_release);
    return (int64_t)h;
}

int tml__gpu_pool_bind(tml_gpu_pool *p)
{
    return p->cu->ctx_set(p->ctx) == CUDA_SUCCESS ? 0 : TML_EIO;
}

/* The event of a sequence number still owned by the caller. */
static CUevent event_of(tml_gpu_pool *p, int64_t seq)
{
    uint64_t t = atomic_load_explicit(&p->tail, memory_order_relaxed);
    uint64_t h = atomic_load_explicit(&p->head, memory_order_acquire);
    if (seq < 0 || (uint64_t)seq < t || (uint64_t)seq >= h)
        return NULL;
    return p->ev[(uint64_t)seq & (p->cap - 1)];
}

int tml__gpu_pool_done(tml_gpu_pool *p, int64_t seq)
{
    CUevent e = event_of(p, seq);
    if (!e)
        return TML_EINVAL;
    CUresult rc = p->cu->ev_query(e);
    if (rc == CUDA_SUCCESS)
        return 1;
    return rc == CUDA_ERROR_NOT_READY ? 0 : TML_EIO;
}

int tml__gpu_pool_elapsed(tml_gpu_pool *p, int64_t a, int64_t b, int64_t *ns)
{
    CUevent ea = event_of(p, a), eb = event_of(p, b);
    float msf = 0;
    if (!ea || !eb || p->cu->ev_elapsed(&msf, ea, eb) != CUDA_SUCCESS || !(msf >= 0.0f))
        return TML_EIO;
    *ns = (int64_t)((double)msf * 1e6 + 0.5);
    return 0;
}

void tml__gpu_pool_release(tml_gpu_pool *p, uint64_t seq)
{
    uint64_t t = atomic_load_explicit(&p->tail, memory_order_relaxed);
    uint64_t h = atomic_load_explicit(&p->head, memory_order_acquire);
    if (seq > h)
        seq = h;
    if (seq > t)
        atomic_store_explicit(&p->tail, seq, memory_order_release);
}
