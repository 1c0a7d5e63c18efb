/*
 * rule_h2d.c - H2D-BOUND: on the GPU clock, the host-to-device copies'
 * share of the step crosses h2d_warn.
 */
#include "diag/rules.h"

const char *const tml__rule_h2d_kinds[] = { "H2D_BOUND", NULL };

int tml__rule_h2d(const tml_rule_ctx *c, tml_diagnosis *d)
{
    return c->w->clock == TML_CLOCK_GPU &&
           tml__share_issue(c->st->share[TML_M_H2D], c->th->h2d_warn, c->th->h2d_crit,
                            "H2D_BOUND", "H2D-BOUND", TML_M_H2D,
                            "Use pinned memory and non_blocking copies; make fewer, larger "
                            "transfers.", c->multi, d);
}
