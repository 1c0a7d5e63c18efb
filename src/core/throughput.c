/*
 * throughput.c - the samples, tokens and FLOPs of a step: the public
 * markers (tml_step_samples, tml_set_flops) and their assembly.
 *
 * A batch fetched between steps counts for the next step; a later fetch
 * between steps forgets it (a validation loop's batches feed no step), as
 * the Input Wait keeps only the last fetch. Several batches inside a step
 * add up. FLOPs are a sample's (set once, off the hot path) times the
 * step's samples, with the device's peak looked up once here
 * (gpu/peak.c), so that the aggregator needs no table of devices.
 */
#include "core/engine.h"
#include "core/assemble.h"

#include <math.h>

#include "gpu/peak.h"

int tml_step_samples(int64_t samples, int64_t tokens)
{
    if (samples < 0 || tokens < -1)
        return TML_EINVAL;
    return tml__marker_push(TML_EV_SAMPLES, 0, samples, tokens);
}

int tml_set_flops(double flops_per_sample, uint32_t how, const char *device)
{
    /* what a record may hold (a step whose product is more has none) */
    if (!(flops_per_sample >= 0 && flops_per_sample <= (double)TML_RECORD_MAX_FLOPS))
        return TML_EINVAL;
    int64_t peak = tml__gpu_peak_flops(device, how);
    return tml__marker_push(TML_EV_FLOPS, how, (int64_t)llround(flops_per_sample), peak);
}

/* A count of samples or tokens plus n (ignored unless positive), held to
 * what a record may carry. */
static int64_t add_count(int64_t c, int64_t n)
{
    if (n <= 0)
        return c;
    return n > TML_RECORD_MAX_SAMPLES - c ? TML_RECORD_MAX_SAMPLES : c + n;
}

void tml__asm_count(tml_assembler *a, const tml_event *e)
{
    if (e->kind != TML_EV_SAMPLES && e->kind != TML_EV_FLOPS)
        return;
    if (e->kind == TML_EV_FLOPS) {
        a->flops_per_sample = e->t0 > 0 ? e->t0 : 0;
        a->peak_flops = e->t1 > 0 ? e->t1 : 0;
        a->flops_how = e->arg;
        return;
    }
    int64_t *samples = a->in_step ? &a->cur.samples : &a->pending_samples;
    int64_t *tokens = a->in_step ? &a->cur.tokens : &a->pending_tokens;
    *samples = add_count(*samples, e->t0);
    *tokens = add_count(*tokens, e->t1);
}

void tml__asm_take_counts(tml_assembler *a, tml_step_record *r)
{
    r->samples = a->pending_samples;
    r->tokens = a->pending_tokens;
    a->pending_samples = a->pending_tokens = 0;
}

/* A step's FLOPs: its samples times a sample's, when both are known and
 * the product is one a record may hold. */
void tml__asm_step_flops(const tml_assembler *a, tml_step_record *r)
{
    double f = (double)r->samples * (double)a->flops_per_sample;
    if (r->samples > 0 && a->flops_per_sample > 0 && f <= (double)TML_RECORD_MAX_FLOPS) {
        r->flops = (int64_t)f;
        r->peak_flops = a->peak_flops;
        r->flops_how = a->flops_how;
    }
}
