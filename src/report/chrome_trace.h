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

#endif
