/*
 * sample.c - metric ids and names (sample.h). The names are the stable,
 * user-visible spelling (telemetry.sqlite); the ids are the wire's.
 */
#include "model/sample.h"

#include <string.h>

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
