/*
 * timeline.h - host and GPU metrics over time, bounded: what the HTML
 * report's "system metrics over time" chart draws (summary "series.system").
 *
 * The aggregator keeps averages and peaks of every sample (sample/series.h)
 * and every sample goes to telemetry.sqlite; this keeps, per node, a fixed
 * number of time buckets (TML_TIMELINE_POINTS) of host CPU %, RAM and GPU
 * utilisation/memory. When a run outlasts the buckets, neighbouring buckets
 * are merged pairwise and the bucket width doubles, so memory stays fixed
 * (about 17 KB per node) however long the run.
 *
 * Ownership: the run owns its timeline (tml_run.timeline, allocated on the
 * first sample, freed by tml__run_release).
 */
#ifndef TML_TIMELINE_H
#define TML_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#include "model/sample.h"
#include "base/strbuf.h"

#define TML_TIMELINE_POINTS 240

typedef struct tml_timeline tml_timeline;

/* Adds samples (other metrics than host/GPU ones are ignored); allocates
 * *tl on first use. TML_ENOMEM leaves the timeline as it was. */
int tml__timeline_add(tml_timeline **tl, const tml_sample *v, size_t n);
void tml__timeline_free(tml_timeline *tl);
/* Appends the "series.system" JSON value: null without samples, else
 * {"bucket_s", "t_s": [...], "nodes": [{"node", "cpu_percent",
 * "ram_used_percent", "gpu_util_percent", "gpu_memory_used_percent"}]}
 * (arrays of bucket means, null entries for empty buckets, a null array
 * for a metric never sampled). */
void tml__timeline_json(const tml_timeline *tl, tml_strbuf *out);

#endif
