/*
 * sample.h - resource samples: what the sampler measures every interval
 * and the aggregator keeps (SPEC 3.4).
 *
 * A sample is one number at one time for one place: the host (node), a
 * process (rank) or a GPU (node + gpu index). Metric ids are part of the
 * wire format (SAMPLES frames) and never change meaning; their names are
 * what telemetry.sqlite's `samples.metric` column holds.
 */
#ifndef TML_SAMPLE_H
#define TML_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

typedef enum tml_sample_metric {
    TML_S_HOST_CPU_PERCENT = 1,        /* host.cpu_percent (100 = all cores) */
    TML_S_HOST_RAM_USED_BYTES = 2,     /* host.ram_used_bytes (total - available) */
    TML_S_HOST_RAM_TOTAL_BYTES = 3,    /* host.ram_total_bytes */
    TML_S_PROC_CPU_PERCENT = 4,        /* process.cpu_percent (100 = one core) */
    TML_S_PROC_CPU_CAPACITY = 5,       /* process.cpu_capacity_percent (cpu % / logical cores) */
    TML_S_PROC_RSS_BYTES = 6,          /* process.rss_bytes */
    TML_S_GPU_UTIL_PERCENT = 7,        /* gpu.util_percent */
    TML_S_GPU_MEM_USED_BYTES = 8,      /* gpu.memory_used_bytes */
    TML_S_GPU_MEM_TOTAL_BYTES = 9,     /* gpu.memory_total_bytes */
    TML_S_GPU_TEMP_C = 10,             /* gpu.temperature_c */
    TML_S_GPU_POWER_W = 11,            /* gpu.power_w */
    TML_S_GPU_POWER_LIMIT_W = 12,      /* gpu.power_limit_w */
    TML_S_PROC_CUDA_ALLOCATED = 13,    /* process.cuda_allocated_bytes (current) */
    TML_S_PROC_CUDA_RESERVED = 14,     /* process.cuda_reserved_bytes (current) */
    TML_S_PROC_CUDA_DEVICE_TOTAL = 15, /* process.cuda_device_total_bytes */
    /* process.runqueue_wait_percent: of wall time, how long the main
     * thread was runnable but waited for a core (/proc/self/schedstat) */
    TML_S_PROC_RUNQ_WAIT_PERCENT = 16,
    /* process.tree_cpu_percent: the process with its descendants (its
     * DataLoader workers), 100 = one core */
    TML_S_PROC_TREE_CPU_PERCENT = 17,
    /* gpu.other_processes: compute processes on the rank's GPU that are
     * not the training's (neither the rank nor its descendants); sent
     * only when known (sampler.c) */
    TML_S_GPU_OTHER_PROCS = 18,
    TML_S_COUNT
} tml_sample_metric;

typedef struct tml_sample {
    int64_t ts_unix_ms;
    int32_t node;          /* node rank */
    int32_t rank;          /* global rank of the process that sampled */
    int32_t gpu;           /* NVML device index for gpu.* metrics, else -1 */
    uint32_t metric;       /* tml_sample_metric */
    double value;
} tml_sample;

/* "host.cpu_percent", ...; NULL for an unknown id. */
const char *tml__sample_metric_name(uint32_t metric);
/* The id of a name, 0 when unknown. */
uint32_t tml__sample_metric_id(const char *name);
/* 1 when s is a sample a rank can take: a known metric, a finite value
 * within the metric's range (sample.c), a time from 1970 to 1e15 ms, a
 * node 0..TML_MAX_WORLD_SIZE and a GPU index -1..4095. The aggregator drops
 * any other (a corrupt or hostile sender). */
int tml__sample_possible(const tml_sample *s);
/* 1 for host.*, 2 for gpu.*, 3 for process.* metrics, 0 unknown. */
int tml__sample_metric_scope(uint32_t metric);

#endif
