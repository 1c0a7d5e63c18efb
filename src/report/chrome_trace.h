/*
 * chrome_trace.h - a run's step records as a Chrome / Perfetto trace
 * (`traceml export --chrome-trace`; layout in chrome_trace.c).
 *
 * Ownership: appends to the caller's buffer; the run is only read.
 */
#ifndef TML_CHROME_TRACE_H
#define TML_CHROME_TRACE_H

#include <stddef.h>

#include "model/run.h"
#include "base/strbuf.h"

/* Appends the trace JSON; *nslices (may be NULL) receives the number of
 * slices written. Returns 0 or TML_ENOMEM. */
int tml__chrome_trace(const tml_run *run, tml_strbuf *out, size_t *nslices);

/*
 * The same piece by piece, for a run larger than memory (`traceml
 * export` streams telemetry.sqlite through these): time 0 folded over
 * the steps first (from INT64_MAX; a run without steps: 0), then begin,
 * a rank's track before its steps (and its communication track, comm=1,
 * before its first step with communication), each step's slices (args is
 * scratch; returns how many), and end. What is appended may be written
 * out and the buffer reset between calls.
 */
int64_t tml__chrome_trace_t0(int64_t t0, const tml_step_record *s);
void tml__chrome_trace_begin(tml_strbuf *out, const char *run_name, const char *run_id);
void tml__chrome_trace_track(tml_strbuf *out, int32_t rank, int32_t node, int comm);
int tml__chrome_trace_has_comm(const tml_step_record *s);
size_t tml__chrome_trace_step(tml_strbuf *out, tml_strbuf *args, const tml_step_record *s,
                              int32_t rank, int64_t t0);
void tml__chrome_trace_end(tml_strbuf *out);

#endif
