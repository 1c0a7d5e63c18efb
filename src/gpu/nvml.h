/*
 * nvml.h - GPU metrics through NVML, loaded at run time.
 *
 * Nothing here needs CUDA or NVIDIA headers to build: libnvidia-ml.so.1 is
 * opened with dlopen (or the file the caller names: the edges pass
 * $TRACEML_LIBNVML, which is how the tests load a fake) and the few
 * types used are declared in nvml.c.
 * Every metric carries its own valid flag: a missing library, a device
 * that answers NOT_SUPPORTED or a GPU that fell off the bus gives "not
 * valid" (reported as n/a), never a zero and never a crash.
 *
 *     tml_nvml *n;
 *     if (tml__nvml_open(NULL, &n) == 0) {
 *         int idx[8]; size_t k = tml__nvml_visible(n, visible_devices, idx, 8);
 *         tml_gpu_reading r; tml__nvml_read(n, idx[0], &r);
 *         tml__nvml_close(n);
 *     }
 *
 * Ownership: tml__nvml_open allocates, tml__nvml_close frees (and calls
 * nvmlShutdown once for the nvmlInit it did).
 */
#ifndef TML_NVML_H
#define TML_NVML_H

#include <stddef.h>
#include <stdint.h>

typedef struct tml_nvml tml_nvml;

enum {
    TML_GPU_UTIL = 1u << 0,
    TML_GPU_MEM = 1u << 1,          /* mem_used_bytes and mem_total_bytes */
    TML_GPU_TEMP = 1u << 2,
    TML_GPU_POWER = 1u << 3,
    TML_GPU_POWER_LIMIT = 1u << 4,
};

typedef struct tml_gpu_reading {
    uint32_t valid;                 /* TML_GPU_* bits of the fields below */
    int lost;                       /* the device answered GPU_IS_LOST */
    double util_percent;
    double mem_used_bytes, mem_total_bytes;
    double temp_c;
    double power_w, power_limit_w;
} tml_gpu_reading;

/* Opens path (NULL or "": libnvidia-ml.so.1). 0, or TML_EIO when the
 * library or a required symbol is missing or nvmlInit fails (then *out is
 * NULL). */
int tml__nvml_open(const char *path, tml_nvml **out);
void tml__nvml_close(tml_nvml *n);
/* NVML device count, 0 on error. */
unsigned tml__nvml_count(tml_nvml *n);
/*
 * The NVML device indices of the GPUs this process may use, in CUDA's
 * order: every device when `visible` (CUDA_VISIBLE_DEVICES) is NULL, else
 * its comma-separated entries, each an index or a UUID ("GPU-..."), up to
 * the first invalid one (as CUDA does); "" means none. Returns the count
 * written into idx (at most cap).
 */
size_t tml__nvml_visible(tml_nvml *n, const char *visible, int *idx, size_t cap);
/* One reading of device `index`. 0, or TML_EINVAL for a bad index. */
int tml__nvml_read(tml_nvml *n, int index, tml_gpu_reading *out);

/*
 * The pids of the compute processes on device `index`
 * (nvmlDeviceGetComputeRunningProcesses, newest version first; graphics
 * processes are not asked for: a training shares a GPU with compute
 * work). Up to cap go into pids; *count gets how many there were (may be
 * more than cap). 0, or TML_EIO when the library lacks the call, the
 * device does not answer or the list stays larger than
 * TML_NVML_PROCS_MAX: unknown, never an empty list. NVML's pids are
 * those of the driver's (the host's) pid namespace.
 */
#define TML_NVML_PROCS_MAX 4096
int tml__nvml_pids(tml_nvml *n, int index, uint32_t *pids, size_t cap, size_t *count);

#endif
