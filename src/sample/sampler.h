/*
 * sampler.h - the resource sampler: one native thread per traced process
 * that reads /proc and NVML every interval and queues samples for the
 * shipper thread to deliver (SAMPLES frames, or the in-process aggregator).
 *
 * It never touches the training loop: the only shared state is a small
 * queue under a mutex between the sampler and the shipper, and three
 * atomics the engine updates when the training reports CUDA memory.
 *
 * What it samples: its own process (CPU %, CPU capacity %, RSS, the CUDA
 * memory last reported), the host (CPU %, RAM) when `host` is set (local
 * rank 0, so a node is sampled once), and the GPU this rank uses, through
 * NVML when the library is there: CUDA_VISIBLE_DEVICES entry number
 * local_rank (or the first entry when there are fewer), by index or UUID.
 *
 * Ownership: start allocates; stop joins the thread and frees it.
 */
#ifndef TML_SAMPLER_H
#define TML_SAMPLER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "model/sample.h"

typedef struct tml_sampler tml_sampler;

typedef struct tml_sampler_opts {
    double interval_s;          /* <= 0: 1.0 (the edges read $TRACEML_INTERVAL) */
    int32_t rank, node, local_rank;
    int host;                   /* also sample host CPU/RAM */
    int gpu;                    /* also sample this rank's GPU through NVML */
    /* CUDA allocated, reserved and device total bytes as last reported
     * (-1 unknown); may be NULL. */
    _Atomic int64_t *cuda_bytes;
    /* with gpu: the NVML library (NULL: libnvidia-ml.so.1) and the
     * CUDA_VISIBLE_DEVICES the rank's GPU is counted in (NULL: all);
     * they must outlive the sampler */
    const char *libnvml, *visible_devices;
} tml_sampler_opts;

int tml__sampler_start(const tml_sampler_opts *o, tml_sampler **out);
/* Stops the thread (after one last sample); queued samples can still be
 * taken. NULL is fine. */
void tml__sampler_halt(tml_sampler *s);
/* Halts if needed and frees. NULL is fine. */
void tml__sampler_stop(tml_sampler *s);
/* A sample now, taken on the sampler's thread, for a summary asked
 * mid-run (a run shorter than the interval has only its baseline): waits
 * up to wait_ns for it. NULL is fine. */
void tml__sampler_tick_now(tml_sampler *s, int64_t wait_ns);
/* Moves up to cap queued samples into out; returns how many. */
size_t tml__sampler_take(tml_sampler *s, tml_sample *out, size_t cap);
/* CPU time the sampler thread has used so far, ns (-1 unknown). */
int64_t tml__sampler_cpu_ns(const tml_sampler *s);

/* One process RSS reading from /proc/self/statm, bytes; -1 on failure.
 * (The shipper uses it for per-step RSS.) */
int64_t tml__rss_bytes(void);

/*
 * Of the pids NVML lists on the rank's GPU, how many are not the
 * training's: neither `self` (the rank) nor one of its descendants (its
 * DataLoader workers). -1 (unknown) when the list is not empty but does
 * not hold `self`: NVML's pids are the host's pid namespace, and in a
 * container they name other processes than ours, so no count is made
 * (and none is guessed). Another rank of the same run on the same GPU
 * counts as another process: a rank does not know its peers' pids.
 */
int tml__gpu_other_procs(const uint32_t *pids, size_t n, int32_t self);

#endif
