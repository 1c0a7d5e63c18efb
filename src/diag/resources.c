/*
 * resources.c - the step memory, system and process sections' rules.
 *
 * Only step time can be the run's root cause (SPEC 4.4); these sections
 * report resource findings beside it. The engine does not sample system or
 * process metrics yet, so today the rules can only say what they know: a
 * run without CUDA figures has NO GPU step memory, and sections without
 * samples are NORMAL with an evidence line that says nothing was sampled,
 * never a zero. The thresholds of SPEC 4.2/4.3 are added here, as pure
 * functions of the same plain structs, when the samplers exist.
 */
#include "diag/diag.h"

#include <math.h>
#include <stdio.h>

void tml__diag_step_memory(const tml_window *w, const tml_thresholds *th,
                           tml_diagnosis *out)
{
    int gpu = 0;

    (void)th;
    for (size_t i = 0; i < w->nranks; i++)
        if (!isnan(w->ranks[i].cuda_reserved_bytes) || !isnan(w->ranks[i].cuda_allocated_bytes))
            gpu = 1;
    if (!gpu) {
        tml__diag_init(out, "NO_GPU", "NO GPU", "step_memory", TML_SEV_INFO);
        snprintf(out->why, sizeof(out->why), "No CUDA memory figures were recorded (CPU-only run).");
        return;
    }
    tml__diag_init(out, "BALANCED", "BALANCED", "step_memory", TML_SEV_INFO);
    snprintf(out->why, sizeof(out->why), "No memory rule fired.");
}

void tml__diag_system(const tml_sys_node *nodes, size_t n,
                      const tml_thresholds *th, tml_diagnosis *out)
{
    size_t samples = 0;

    (void)th;
    for (size_t i = 0; i < n; i++)
        samples += nodes[i].samples;
    tml__diag_init(out, "NORMAL", "NORMAL", "system", TML_SEV_INFO);
    snprintf(out->why, sizeof(out->why), "%s",
             samples ? "No system rule fired." : "No system metrics were sampled in this run.");
}

void tml__diag_process(const tml_proc_rank *ranks, size_t n,
                       const tml_thresholds *th, tml_diagnosis *out)
{
    size_t samples = 0;

    (void)th;
    for (size_t i = 0; i < n; i++)
        samples += ranks[i].samples;
    tml__diag_init(out, "NORMAL", "NORMAL", "process", TML_SEV_INFO);
    snprintf(out->why, sizeof(out->why), "%s",
             samples ? "No process rule fired." : "No process metrics were sampled in this run.");
}
