/*
 * commbox.c - the mailbox of collectives that completed off the step's
 * thread.
 *
 * A DDP gradient bucket's future is completed by the process group's own
 * worker thread, which has no step: tml_comm_overlapped() there leaves the
 * collective here, and the next thread to end a step moves what waits into
 * its own ring before the step's end (markers.c). DDP waits for every bucket
 * before backward returns, so a step's buckets are in by then.
 *
 * A bounded multi-producer multi-consumer queue (a sequence number per
 * cell, D. Vyukov's design): producers and consumers claim a position with
 * one CAS and publish with a release store. Nothing waits, allocates or
 * calls the kernel; a full box drops the collective and counts it.
 */
#include "core/engine.h"

#include <stdatomic.h>

typedef struct cell {
    _Atomic uint64_t seq;
    tml_comm_cell c;
} cell;

static struct {
    _Alignas(64) _Atomic uint64_t head;
    _Alignas(64) _Atomic uint64_t tail;
    _Atomic uint64_t dropped;
    _Atomic int ready;          /* 0 never used, 1 being set up, 2 ready */
    cell cell[TML_COMM_BOX];
} box;

static int ready(void)
{
    int expect = 0;
    if (atomic_load_explicit(&box.ready, memory_order_acquire) == 2)
        return 1;
    if (atomic_compare_exchange_strong(&box.ready, &expect, 1)) {
        for (uint32_t i = 0; i < TML_COMM_BOX; i++)
            atomic_store_explicit(&box.cell[i].seq, i, memory_order_relaxed);
        atomic_store_explicit(&box.ready, 2, memory_order_release);
        return 1;
    }
    return 0;       /* another thread is setting it up: this one is dropped */
}

int tml__comm_box_put(const tml_comm_cell *in)
{
    if (!ready()) {
        atomic_fetch_add_explicit(&box.dropped, 1, memory_order_relaxed);
        return TML_EFULL;
    }
    uint64_t pos = atomic_load_explicit(&box.head, memory_order_relaxed);
    for (;;) {
        cell *c = &box.cell[pos & (TML_COMM_BOX - 1)];
        uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        int64_t dif = (int64_t)(seq - pos);
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&box.head, &pos, pos + 1,
                                                      memory_order_relaxed, memory_order_relaxed)) {
                c->c = *in;
                atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
                return 0;
            }
        } else if (dif < 0) {
            atomic_fetch_add_explicit(&box.dropped, 1, memory_order_relaxed);
            return TML_EFULL;
        } else {
            pos = atomic_load_explicit(&box.head, memory_order_relaxed);
        }
    }
}

int tml__comm_box_take(tml_comm_cell *out)
{
    if (atomic_load_explicit(&box.ready, memory_order_acquire) != 2)
        return 0;
    uint64_t pos = atomic_load_explicit(&box.tail, memory_order_relaxed);
    for (;;) {
        cell *c = &box.cell[pos & (TML_COMM_BOX - 1)];
        uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
        int64_t dif = (int64_t)(seq - (pos + 1));
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&box.tail, &pos, pos + 1,
                                                      memory_order_relaxed, memory_order_relaxed)) {
                *out = c->c;
                atomic_store_explicit(&c->seq, pos + TML_COMM_BOX, memory_order_release);
                return 1;
            }
        } else if (dif < 0) {
            return 0;
        } else {
            pos = atomic_load_explicit(&box.tail, memory_order_relaxed);
        }
    }
}

int tml__comm_box_empty(void)
{
    return atomic_load_explicit(&box.head, memory_order_relaxed) ==
           atomic_load_explicit(&box.tail, memory_order_relaxed);
}

uint64_t tml__comm_dropped(void)
{
    return atomic_load_explicit(&box.dropped, memory_order_relaxed);
}
