/*
 * sample.c - metric ids and names (sample.h). The names are the stable,
 * user-visible spelling (telemetry.sqlite); the ids are the wire's.
 */
#include "model/sample.h"

#include <math.h>
#include <string.h>

#include "model/record.h"

static const char *const names[TML_S_COUNT] = {
    [TML_S_HOST_CPU_PERCENT] = "host.cpu_percent",
    [TML_S_HOST_RAM_USED_BYTES] = "host.ram_used_bytes",
    [TML_S_HOST_RAM_TOTAL_BYTES] = "host.ram_total_bytes",
    [TML_S_PROC_CPU_PERCENT] = "process.cpu_percent",
    [TML_S_PROC_CPU_CAPACITY] = "process.cpu_capacity_percent",
    [TML_S_PROC_RSS_BYTES] = "process.rss_bytes",
    [TML_S_GPU_UTIL_PERCENT] = "gpu.util_percent",
    [TML_S_GPU_MEM_USED_BYTES] = "gpu.memory_used_bytes",
    [TML_S_GPU_MEM_TOTAL_BYTES] = "gpu.memory_total_bytes",
    [TML_S_GPU_TEMP_C] = "gpu.temperature_c",
    [TML_S_GPU_POWER_W] = "gpu.power_w",
    [TML_S_GPU_POWER_LIMIT_W] = "gpu.power_limit_w",
    [TML_S_PROC_CUDA_ALLOCATED] = "process.cuda_allocated_bytes",
    [TML_S_PROC_CUDA_RESERVED] = "process.cuda_reserved_bytes",
    [TML_S_PROC_CUDA_DEVICE_TOTAL] = "process.cuda_device_total_bytes",
    [TML_S_PROC_RUNQ_WAIT_PERCENT] = "process.runqueue_wait_percent",
    [TML_S_PROC_TREE_CPU_PERCENT] = "process.tree_cpu_percent",
    [TML_S_GPU_OTHER_PROCS] = "gpu.other_processes",
};

const char *tml__sample_metric_name(uint32_t m)
{
    return m < TML_S_COUNT ? names[m] : NULL;
}

uint32_t tml__sample_metric_id(const char *name)
{
    if (!name)
        return 0;
    for (uint32_t m = 1; m < TML_S_COUNT; m++)
        if (names[m] && strcmp(names[m], name) == 0)
            return m;
    return 0;
}

int tml__sample_metric_scope(uint32_t m)
{
    const char *n = tml__sample_metric_name(m);
    if (!n)
        return 0;
    if (strncmp(n, "host.", 5) == 0)
        return 1;
    if (strncmp(n, "gpu.", 4) == 0)
        return 2;
    return 3;
}

/* What each metric can measure: percentages to 1e7 (process CPU: 100
 * per core), GPU utilisation to 100 (the summary's readers hold it
 * there), bytes to TML_RECORD_MAX_BYTES, degrees and watts as hardware
 * reports them. */
static const struct { double lo, hi; } range[TML_S_COUNT] = {
    [TML_S_HOST_CPU_PERCENT] = {0, 1e7},
    [TML_S_HOST_RAM_USED_BYTES] = {0, 1e18},
    [TML_S_HOST_RAM_TOTAL_BYTES] = {0, 1e18},
    [TML_S_PROC_CPU_PERCENT] = {0, 1e7},
    [TML_S_PROC_CPU_CAPACITY] = {0, 1e7},
    [TML_S_PROC_RSS_BYTES] = {0, 1e18},
    [TML_S_GPU_UTIL_PERCENT] = {0, 100},
    [TML_S_GPU_MEM_USED_BYTES] = {0, 1e18},
    [TML_S_GPU_MEM_TOTAL_BYTES] = {0, 1e18},
    [TML_S_GPU_TEMP_C] = {-273, 1000},
    [TML_S_GPU_POWER_W] = {0, 1e7},
    [TML_S_GPU_POWER_LIMIT_W] = {0, 1e7},
    [TML_S_PROC_CUDA_ALLOCATED] = {0, 1e18},
    [TML_S_PROC_CUDA_RESERVED] = {0, 1e18},
    [TML_S_PROC_CUDA_DEVICE_TOTAL] = {0, 1e18},
    [TML_S_PROC_RUNQ_WAIT_PERCENT] = {0, 1e7},
    [TML_S_PROC_TREE_CPU_PERCENT] = {0, 1e7},
    [TML_S_GPU_OTHER_PROCS] = {0, 4096},
};

int tml__sample_possible(const tml_sample *s)
{
    if (!tml__sample_metric_name(s->metric) || !isfinite(s->value))
        return 0;
    return s->value >= range[s->metric].lo && s->value <= range[s->metric].hi &&
           s->ts_unix_ms >= 0 && s->ts_unix_ms <= 1000000000000000LL /* ms: year 33658 */ &&
           s->node >= 0 && s->node <= TML_MAX_WORLD_SIZE && s->gpu >= -1 && s->gpu < 4096;
}
