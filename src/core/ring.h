/*
 * ring.h - the per-thread event ring between a training thread (the only
 * producer) and the shipper thread (the only consumer).
 *
 * A marker becomes one 24-byte event. The producer writes the slot and then
 * publishes it with a release store of head; the consumer reads head with
 * acquire, copies events out and publishes tail. Neither side waits for the
 * other: a full ring drops the event and counts it. Capacity is a power of
 * two so positions are free-running counters masked on use.
 */
#ifndef TML_RING_H
#define TML_RING_H

#include <stdatomic.h>
#include <stdint.h>

#define TML_RING_CAP 8192u   /* events; ~1000 steps of headroom */

enum tml_event_kind {
    TML_EV_STEP_BEGIN = 1,   /* t0 = begin, t1 = step index on this thread */
    TML_EV_STEP_END = 2,     /* t0 = end, arg = record flags */
    TML_EV_SPAN = 3,         /* arg = phase, [t0, t1] */
    /* GPU clock (pushed only by threads with a CUDA stream): event pool
     * sequence numbers of the boundaries, -1 when none could be recorded. */
    TML_EV_GPU_SPAN = 4,     /* arg = phase, t0/t1 = begin/end events; after its SPAN */
    TML_EV_GPU_STEP = 5,     /* t0/t1 = the bracket's begin/end events; before STEP_END */
    /* CUDA caching allocator figures: arg 0 allocated, 1 reserved;
     * t0 = current bytes, t1 = the allocator's all-time peak (-1 unknown). */
    TML_EV_MEM = 6,
    /* Communication (tml_comm_bytes / tml_comm_overlapped): COMM_BYTES has
     * t0 = bytes; COMM_OVERLAPPED is one collective run beside compute,
     * [t0, t1], arg = bytes (at most 4 GiB). */
    TML_EV_COMM_BYTES = 7,
    TML_EV_COMM_OVERLAPPED = 8,
    /* A fresh data loader started its workers at t0 (tml_mark_loader_start):
     * the next fetch outside a bracket is taken to start there. */
    TML_EV_LOADER_START = 9,
    /* tml_step_samples: t0 = samples, t1 = tokens (-1 none). */
    TML_EV_SAMPLES = 10,
    /* tml_set_flops: t0 = FLOPs per sample (rounded), t1 = the device's
     * peak FLOP/s (0 unknown), arg = how. */
    TML_EV_FLOPS = 11,
};

typedef struct tml_event {
    int64_t t0, t1;
    uint32_t kind, arg;
} tml_event;

typedef struct tml_ring {
    _Alignas(64) _Atomic uint64_t head;      /* producer */
    _Alignas(64) _Atomic uint64_t tail;      /* consumer */
    _Atomic uint64_t dropped;
    _Alignas(64) tml_event ev[TML_RING_CAP];
} tml_ring;

static inline int tml__ring_push(tml_ring *r, uint32_t kind, uint32_t arg,
                                 int64_t t0, int64_t t1)
{
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
    if (h - t >= TML_RING_CAP) {
        atomic_fetch_add_explicit(&r->dropped, 1, memory_order_relaxed);
        return -1;
    }
    tml_event *e = &r->ev[h & (TML_RING_CAP - 1)];
    e->t0 = t0;
    e->t1 = t1;
    e->kind = kind;
    e->arg = arg;
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
    return 0;
}

/* Copies out up to max events; returns how many. Consumer side only. */
static inline uint32_t tml__ring_pop(tml_ring *r, tml_event *out, uint32_t max)
{
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
    uint32_t n = 0;
    while (t != h && n < max)
        out[n++] = r->ev[t++ & (TML_RING_CAP - 1)];
    atomic_store_explicit(&r->tail, t, memory_order_release);
    return n;
}

#endif
