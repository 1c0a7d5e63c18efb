/*
 * assemble.h - turns a thread's events into step records.
 *
 * Runs in the shipper thread, never in the training loop. Pure: events in,
 * records out, so it is unit-tested on hand-written event sequences.
 */
#ifndef TML_ASSEMBLE_H
#define TML_ASSEMBLE_H

#include <stdint.h>
#include "core/record.h"
#include "core/ring.h"

typedef struct tml_assembler {
    int in_step;
    tml_step_record cur;
    int64_t inside_input_ns;     /* fetches inside the current bracket */
    int has_pending;             /* a fetch ended since the last bracket */
    int64_t pending_t0, pending_ns;
    int64_t last_end_ns;         /* -1 before the first step */
    uint64_t events_in_steps;    /* for the overhead estimate */
    uint64_t records_lost;       /* steps whose begin or end was dropped */
} tml_assembler;

void tml__asm_init(tml_assembler *a);
/* Feeds one event; returns 1 and fills *out when it completed a step. */
int tml__asm_feed(tml_assembler *a, const tml_event *e, tml_step_record *out);

#endif
