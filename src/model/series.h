/*
 * series.h - what the aggregator keeps of the resource samples: per place
 * (a node's host, a node's GPU, a rank's process) and metric, the count,
 * sum, minimum, maximum and last value. That is all the rules of SPEC
 * 4.2-4.3 ask of samples (averages and peaks), it is a few hundred bytes
 * per place however long the run, and every sample is in telemetry.sqlite
 * for anyone who wants the time series.
 */
#ifndef TML_SERIES_H
#define TML_SERIES_H

#include <stddef.h>
#include <stdint.h>

#include "model/sample.h"

typedef struct tml_series {
    int32_t node;
    int32_t rank;          /* process.* metrics; -1 otherwise */
    int32_t gpu;           /* gpu.* metrics; -1 otherwise */
    uint32_t metric;
    size_t n;
    double sum, min, max, last;
} tml_series;

/* Which GPU a rank samples (learnt from its gpu.* samples). */
typedef struct tml_rank_gpu {
    int32_t rank, node, gpu;
} tml_rank_gpu;

typedef struct tml_series_set {
    tml_series *v;
    size_t n, cap;
    tml_rank_gpu *rg;
    size_t nrg, caprg;
    /* Hash indexes of v (by place and metric) and rg (by rank): slot i
     * holds an index + 1, 0 empty; open addressing, at most half full.
     * A thousand ranks sample six process metrics each a second, so a
     * linear search would cost the aggregator 6,000 compares a sample. */
    uint32_t *vi, *rgi;
    size_t vi_cap, rgi_cap;
    uint64_t samples;      /* accepted so far */
} tml_series_set;

void tml__series_init(tml_series_set *s);
void tml__series_release(tml_series_set *s);
/* Adds one sample; unknown metrics and non-finite values are ignored
 * (returns 0). TML_ENOMEM on allocation failure. */
int tml__series_add(tml_series_set *s, const tml_sample *x);
/* The series of a place, NULL when nothing was sampled there. Pass -1 for
 * the rank of host/gpu metrics and the gpu of host/process metrics. */
const tml_series *tml__series_find(const tml_series_set *s, int32_t node, int32_t rank,
                                   int32_t gpu, uint32_t metric);
/* Mean of a series; NAN for NULL or empty. */
double tml__series_mean(const tml_series *x);
/* The GPU rank `rank` samples, -1 unknown. */
int32_t tml__series_rank_gpu(const tml_series_set *s, int32_t rank);

#endif
