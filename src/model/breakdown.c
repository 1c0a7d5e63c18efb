/*
 * breakdown.c - the one step breakdown (breakdown.h).
 */
#include "model/breakdown.h"

#include <math.h>

static const char *const metric_names[TML_M_COUNT] = {
    "step_time", "input_wait", "h2d", "forward", "backward", "optimizer",
    "compute", "residual", "untraced", "dataloader_fetch_cpu", "communication",
    "communication_total"
};
static const char *const metric_labels[TML_M_COUNT] = {
    "Step Time", "Input Wait", "H2D", "Forward", "Backward", "Optimizer",
    "Compute", "Residual", "Untraced", "DataLoader fetch", "Communication",
    "Communication (all)"
};

const char *tml__metric_name(tml_metric m)
{
    return (unsigned)m < TML_M_COUNT ? metric_names[m] : "?";
}

const char *tml__metric_label(tml_metric m)
{
    return (unsigned)m < TML_M_COUNT ? metric_labels[m] : "?";
}

uint32_t tml__phases_missing(uint32_t observed, uint32_t instrumented)
{
    uint32_t missing = TML_PHASES_ALL & ~observed;
    uint32_t h2d = TML_PHASE_BIT(TML_PHASE_H2D);
    if ((missing & h2d) && (instrumented & h2d))
        missing &= ~h2d;            /* instrumented, never happened: zero */
    return missing;
}
