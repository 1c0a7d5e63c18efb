/*
 * sink.h - where the engine delivers what it measured: the interface the
 * engine defines and the layers around it implement.
 *
 * The shipper thread (shipper.c) is the only caller; a sink never sees the
 * training thread. Two implementations: the wire client (core/client.c),
 * which sends frames to the aggregator that `traceml run` or `traceml
 * serve` hosts, and the in-process aggregator (host/local.c), for a
 * process started without a launcher. The engine never includes either's
 * side: it holds a tml_sink and calls its operations.
 *
 * Every operation returns 0 when the data was taken and a negative TML_E*
 * code when it was not: the shipper then drops it and counts it (fail
 * open, never retried into the training loop).
 *
 * Ownership: open functions return a sink owned by the engine from
 * tml__engine_start() until its close(), which frees it.
 */
#ifndef TML_SINK_H
#define TML_SINK_H

#include <stddef.h>
#include <stdint.h>

#include "model/deepdive.h"
#include "model/record.h"
#include "model/sample.h"
#include "wire/wire.h"

typedef struct tml_sink tml_sink;

typedef struct tml_sink_ops {
    /* Who this process is: once its identity is settled (before its first
     * steps), and again whenever it changes (the loader settings). */
    int (*hello)(tml_sink *s, const tml_hello *h);
    int (*steps)(tml_sink *s, int32_t rank, const tml_step_record *r, size_t n);
    int (*samples)(tml_sink *s, const tml_sample *v, size_t n);
    /* The rank's counters; bye: the last ones, this rank is done. */
    int (*stats)(tml_sink *s, int32_t rank, const tml_rank_stats *st, int bye);
    /* The run's summary so far, as final_summary.json text (malloc'd). */
    int (*summary)(tml_sink *s, char **json);
    /* The end of the run. A sink that writes the run's summary gives its box
     * in *text (malloc'd; NULL otherwise). Frees the sink. */
    int (*close)(tml_sink *s, const char *status, int exit_code, char **text);
    /* The deep dive's window of this rank (model/deepdive.h), once it
     * ran or was skipped. */
    int (*deep_dive)(tml_sink *s, int32_t rank, const tml_dd_window *d);
} tml_sink_ops;

struct tml_sink {
    const tml_sink_ops *ops;
};

#endif
