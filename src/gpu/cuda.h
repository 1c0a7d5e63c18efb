/*
 * cuda.h - the GPU clock: CUDA events through the driver API, loaded at run
 * time, from a preallocated pool per training thread.
 *
 * The training thread records an event on its stream at each phase
 * boundary (tml__gpu_pool_record: one cuEventRecord, no allocation, no
 * wait). The shipper thread later asks whether the events have completed
 * (cuEventQuery, never a synchronize) and turns pairs of completed events
 * into durations (cuEventElapsedTime). Events are handed out and given
 * back in order, so the pool is a ring: `head` advances on the training
 * thread, `tail` on the shipper thread. A full pool records nothing and
 * the step simply has no GPU figures.
 *
 * libcuda.so.1 is opened with dlopen (or the file the caller names: the
 * engine passes $TRACEML_LIBCUDA, how the tests load a fake). Nothing
 * needs CUDA to build or to run without a GPU: tml__cuda_get() then fails and nothing is recorded.
 *
 * Ownership: the loaded driver is process-wide (tml__cuda_get) and never
 * unloaded. A pool is made by tml__gpu_pool_new on the thread whose
 * context it uses; tml__gpu_pool_free destroys its events.
 */
#ifndef TML_CUDA_H
#define TML_CUDA_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct tml_cuda tml_cuda;

/* The process's driver: loaded from path (NULL or "": libcuda.so.1) and
 * cuInit'ed on first call, whose path counts; NULL when the library, a
 * required symbol or cuInit is missing (remembered). */
tml_cuda *tml__cuda_get(const char *path);

typedef struct tml_gpu_pool {
    tml_cuda *cu;
    void *ctx;                    /* CUcontext current at creation */
    void **ev;                    /* CUevent[cap] */
    uint32_t cap;                 /* power of two */
    _Atomic uint64_t head;        /* next sequence number to record */
    _Atomic uint64_t tail;        /* first not yet given back */
    _Atomic uint64_t failed;      /* records that could not be made */
} tml_gpu_pool;

/* On the training thread, with its CUDA context current. 0, TML_EIO (no
 * driver or no current context), TML_ENOMEM. cap is rounded up to a power
 * of two. */
int tml__gpu_pool_new(tml_cuda *cu, uint32_t cap, tml_gpu_pool **out);
void tml__gpu_pool_free(tml_gpu_pool *p);

/* Hot path (training thread): records the next event on `stream`; returns
 * its sequence number, or -1 when the pool is full or the record failed. */
int64_t tml__gpu_pool_record(tml_gpu_pool *p, void *stream);

/* Shipper side. Makes the pool's context current on the calling thread
 * (once per pass). */
int tml__gpu_pool_bind(tml_gpu_pool *p);
/* 1 completed, 0 not yet, <0 error (the event can never be used). */
int tml__gpu_pool_done(tml_gpu_pool *p, int64_t seq);
/* GPU time from event a to event b (both completed), in ns; <0 on error. */
int tml__gpu_pool_elapsed(tml_gpu_pool *p, int64_t a, int64_t b, int64_t *ns);
/* Gives back every event with a sequence number below `seq`. */
void tml__gpu_pool_release(tml_gpu_pool *p, uint64_t seq);

#endif
