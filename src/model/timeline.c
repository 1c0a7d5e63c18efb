/*
 * timeline.c - bounded host/GPU metric history (see timeline.h for why).
 */
#include "model/timeline.h"
#include "base/jsonw.h"
#include "base/array.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traceml/traceml.h"

enum { TL_CPU, TL_RAM_USED, TL_RAM_TOTAL, TL_GPU_UTIL, TL_GPU_USED, TL_GPU_TOTAL, TL_N };

typedef struct tl_node {
    int32_t node;
    double sum[TL_N][TML_TIMELINE_POINTS];
    uint32_t cnt[TL_N][TML_TIMELINE_POINTS];
} tl_node;

struct tml_timeline {
    int64_t t0_ms;
    int64_t bucket_ms;
    size_t nb;                 /* buckets in use */
    tl_node *nodes;
    size_t nnodes, cap;
};

static int track_of(uint32_t metric)
{
    switch (metric) {
    case TML_S_HOST_CPU_PERCENT: return TL_CPU;
    case TML_S_HOST_RAM_USED_BYTES: return TL_RAM_USED;
    case TML_S_HOST_RAM_TOTAL_BYTES: return TL_RAM_TOTAL;
    case TML_S_GPU_UTIL_PERCENT: return TL_GPU_UTIL;
    case TML_S_GPU_MEM_USED_BYTES: return TL_GPU_USED;
    case TML_S_GPU_MEM_TOTAL_BYTES: return TL_GPU_TOTAL;
    default: return -1;
    }
}

static tl_node *node_of(tml_timeline *tl, int32_t node)
{
    for (size_t i = 0; i < tl->nnodes; i++)
        if (tl->nodes[i].node == node)
            return &tl->nodes[i];
    if (TML_GROW(tl->nodes, tl->nnodes + 1, tl->cap) < 0)
        return NULL;
    tl_node *n = &tl->nodes[tl->nnodes++];
    memset(n, 0, sizeof(*n));
    n->node = node;
    return n;
}

/* Halves the resolution: bucket i takes buckets 2i and 2i+1. */
static void compact(tml_timeline *tl)
{
    for (size_t k = 0; k < tl->nnodes; k++)
        for (int t = 0; t < TL_N; t++) {
            tl_node *n = &tl->nodes[k];
            for (size_t i = 0; i < TML_TIMELINE_POINTS / 2; i++) {
                n->sum[t][i] = n->sum[t][2 * i] + n->sum[t][2 * i + 1];
                n->cnt[t][i] = n->cnt[t][2 * i] + n->cnt[t][2 * i + 1];
            }
            memset(&n->sum[t][TML_TIMELINE_POINTS / 2], 0,
                   TML_TIMELINE_POINTS / 2 * sizeof(double));
            memset(&n->cnt[t][TML_TIMELINE_POINTS / 2], 0,
                   TML_TIMELINE_POINTS / 2 * sizeof(uint32_t));
        }
    tl->bucket_ms *= 2;
    tl->nb = (tl->nb + 1) / 2;
}

int tml__timeline_add(tml_timeline **tlp, const tml_sample *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int t = track_of(v[i].metric);
        if (t < 0 || !isfinite(v[i].value))
            continue;
        if (!*tlp) {
            *tlp = calloc(1, sizeof(**tlp));
            if (!*tlp)
                return TML_ENOMEM;
            (*tlp)->t0_ms = v[i].ts_unix_ms - v[i].ts_unix_ms % 1000;
            (*tlp)->bucket_ms = 1000;
        }
        tml_timeline *tl = *tlp;
        int64_t dt = v[i].ts_unix_ms - tl->t0_ms;
        if (dt < 0)
            dt = 0;
        while (dt / tl->bucket_ms >= TML_TIMELINE_POINTS)
            compact(tl);
        size_t b = (size_t)(dt / tl->bucket_ms);
        tl_node *nd = node_of(tl, v[i].node);
        if (!nd)
            return TML_ENOMEM;
        nd->sum[t][b] += v[i].value;
        nd->cnt[t][b]++;
        if (b + 1 > tl->nb)
            tl->nb = b + 1;
    }
    return 0;
}

void tml__timeline_free(tml_timeline *tl)
{
    if (!tl)
        return;
    free(tl->nodes);
    free(tl);
}

static double mean(const tl_node *n, int t, size_t b)
{
    return n->cnt[t][b] ? n->sum[t][b] / n->cnt[t][b] : NAN;
}

static void array(tml_strbuf *out, const char *key, const tml_timeline *tl, const tl_node *n,
                  int t, int over)
{
    int any = 0;
    for (size_t b = 0; b < tl->nb && !any; b++)
        any = !isnan(mean(n, t, b)) && (over < 0 || !isnan(mean(n, over, b)));
    tml__sb_addf(out, ", \"%s\": ", key);
    if (!any) {
        tml__sb_adds(out, "null");
        return;
    }
    tml__sb_addc(out, '[');
    for (size_t b = 0; b < tl->nb; b++) {
        double v = mean(n, t, b);
        if (over >= 0) {
            double tot = mean(n, over, b);
            v = tot > 0 ? 100.0 * v / tot : NAN;
        }
        if (b)
            tml__sb_addc(out, ',');
        tml__json_add_num(out, v, 1, 0);
    }
    tml__sb_addc(out, ']');
}

void tml__timeline_json(const tml_timeline *tl, tml_strbuf *out)
{
    if (!tl || tl->nb == 0 || tl->nnodes == 0) {
        tml__sb_adds(out, "null");
        return;
    }
    tml__sb_addf(out, "{\"bucket_s\": %.3f, \"t_s\": [", (double)tl->bucket_ms / 1000.0);
    for (size_t b = 0; b < tl->nb; b++)
        tml__sb_addf(out, "%s%.1f", b ? "," : "", ((double)b + 0.5) * (double)tl->bucket_ms / 1000.0);
    tml__sb_adds(out, "], \"nodes\": [");
    for (size_t k = 0; k < tl->nnodes; k++) {
        const tl_node *n = &tl->nodes[k];
        tml__sb_addf(out, "%s{\"node\": %d", k ? ", " : "", (int)n->node);
        array(out, "cpu_percent", tl, n, TL_CPU, -1);
        array(out, "ram_used_percent", tl, n, TL_RAM_USED, TL_RAM_TOTAL);
        array(out, "gpu_util_percent", tl, n, TL_GPU_UTIL, -1);
        array(out, "gpu_memory_used_percent", tl, n, TL_GPU_USED, TL_GPU_TOTAL);
        tml__sb_addc(out, '}');
    }
    tml__sb_adds(out, "]}");
}
