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
 * A bounded multi-producer multi-consumer queue with a sequence number per
 * cell (D. Vyukov's design): producers and consumers claim a position with
 * one CAS and publish with a release store. Nothing waits, allocates or
 * calls the kernel; a full box drops the collective and counts it. Each
 * cell keeps its sequence number less its own index, so the zeroed static
 * box is ready as it is: cell i is free for position p when it holds
 * p - i (the round's start), full when it holds p - i + 1.
 */
#include "core/engine.h"

#include <stdatomic.h>

#define MASK (TML_COMM_BOX - 1)

typedef struct cell {
    _Atomic uint64_t seq;       /* the sequence number less the cell's index */
    tml_comm_cell c;
} cell;

static struct {
    _Alignas(64) _Atomic uint64_t head;
    _Alignas(64) _Atomic uint64_t tail;
    _Atomic uint64_t dropped;
    cell cell[TML_COMM_BOX];
} box;

int tml__comm_box_put(const tml_comm_cell *in)
{
    uint64_t pos = atomic_load_explicit(&box.head, memory_order_relaxed);
    for (;;) {
        cell *c = &box.cell[pos & MASK];
        uint64_t round = pos & ~(uint64_t)MASK;
        int64_t dif = (int64_t)(atomic_load_explicit(&c->seq, memory_order_acquire) - round);
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&box.head, &pos, pos + 1,
                                                      memory_order_relaxed, memory_order_relaxed)) {
                c->c = *in;
                atomic_store_explicit(&c->seq, round + 1, memory_order_release);
                return 0;
            }
        } else if (dif < 0) {     /* still holds the previous round: full */
            atomic_fetch_add_explicit(&box.dropped, 1, memory_order_relaxed);
            return TML_EFULL;
        } else {
            pos = atomic_load_explicit(&box.head, memory_order_relaxed);
        }
    }
}

int tml__comm_box_take(tml_comm_cell *out)
{
    uint64_t pos = atomic_load_explicit(&box.tail, memory_order_relaxed);
    for (;;) {
        cell *c = &box.cell[pos & MASK];
        uint64_t round = pos & ~(uint64_t)MASK;
        int64_t dif = (int64_t)(atomic_load_explicit(&c->seq, memory_order_acquire) - (round + 1));
        if (dif == 0) {
            if (atomic_compare_exchange_weak_explicit(&box.tail, &pos, pos + 1,
                                                      memory_order_relaxed, memory_order_relaxed)) {
                *out = c->c;
                atomic_store_explicit(&c->seq, round + TML_COMM_BOX, memory_order_release);
                return 1;
            }
        } else if (dif < 0) {     /* not written yet: empty */
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
