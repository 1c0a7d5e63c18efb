/*
 * nvml.c - the NVML loader (see nvml.h).
 *
 * Modelled on how nvtop does it: dlopen the library, look up each function
 * by name, newest versioned name first (nvmlInit_v2 before nvmlInit), and
 * declare the handful of structs ourselves, copied from nvml.h's ABI
 * (which NVIDIA keeps stable: new versions get new names). A function that
 * is missing only makes its metric invalid; only init, count and the
 * handle lookup are required.
 *
 * A GPU that answers NVML_ERROR_GPU_IS_LOST is marked lost and not asked
 * again: on a lost GPU some calls can block for seconds, and the sampler
 * runs every second.
 */
#include "gpu/nvml.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "traceml/traceml.h"

/* ---- the NVML ABI we use (nvml.h) ---- */
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
#define NVML_SUCCESS 0
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_TEMPERATURE_GPU 0
#define MAX_DEVICES 64

typedef nvmlReturn_t (*init_fn)(void);
typedef nvmlReturn_t (*count_fn)(unsigned int *);
typedef nvmlReturn_t (*by_index_fn)(unsigned int, nvmlDevice_t *);
typedef nvmlReturn_t (*by_uuid_fn)(const char *, nvmlDevice_t *);
typedef nvmlReturn_t (*index_fn)(nvmlDevice_t, unsigned int *);
typedef nvmlReturn_t (*util_fn)(nvmlDevice_t, nvmlUtilization_t *);
typedef nvmlReturn_t (*mem_fn)(nvmlDevice_t, nvmlMemory_t *);
typedef nvmlReturn_t (*temp_fn)(nvmlDevice_t, int, unsigned int *);
typedef nvmlReturn_t (*uint_fn)(nvmlDevice_t, unsigned int *);
/* nvmlDeviceGetComputeRunningProcesses{,_v2,_v3}: the array's element is
 * nvmlProcessInfo_v1_t {pid, usedGpuMemory} for the unversioned name and
 * nvmlProcessInfo_v2_t / nvmlProcessInfo_t {pid, usedGpuMemory,
 * gpuInstanceId, computeInstanceId} for _v2 and _v3; declared as void *
 * and read with the element size of the name found. */
typedef nvmlReturn_t (*procs_fn)(nvmlDevice_t, unsigned int *, void *);
typedef struct { unsigned int pid; unsigned long long used; } proc_v1;
typedef struct { unsigned int pid; unsigned long long used; unsigned int gi, ci; } proc_v2;

struct tml_nvml {
    void *lib;
    init_fn shutdown;
    count_fn count;
    by_index_fn by_index;
    by_uuid_fn by_uuid;
    index_fn get_index;
    util_fn util;
    mem_fn mem;
    temp_fn temp;
    uint_fn power, power_limit;
    procs_fn procs;
    size_t proc_size;              /* sizeof(proc_v1) or sizeof(proc_v2) */
    unsigned char lost[MAX_DEVICES];
};

/* The first of the names that the library has. */
static void *sym(void *lib, const char *a, const char *b)
{
    void *p = dlsym(lib, a);
    if (!p && b)
        p = dlsym(lib, b);
    return p;
}

int tml__nvml_open(const char *path, tml_nvml **out)
{
    tml_nvml *n;

    *out = NULL;
    void *lib = dlopen(path && *path ? path : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return TML_EIO;
    n = calloc(1, sizeof(*n));
    if (!n) {
        dlclose(lib);
        return TML_ENOMEM;
    }
    n->lib = lib;
    init_fn init = (init_fn)sym(lib, "nvmlInit_v2", "nvmlInit");
    n->shutdown = (init_fn)sym(lib, "nvmlShutdown", NULL);
    n->count = (count_fn)sym(lib, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
    n->by_index = (by_index_fn)sym(lib, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
    n->by_uuid = (by_uuid_fn)sym(lib, "nvmlDeviceGetHandleByUUID", NULL);
    n->get_index = (index_fn)sym(lib, "nvmlDeviceGetIndex", NULL);
    n->util = (util_fn)sym(lib, "nvmlDeviceGetUtilizationRates", NULL);
    n->mem = (mem_fn)sym(lib, "nvmlDeviceGetMemoryInfo", NULL);
    n->temp = (temp_fn)sym(lib, "nvmlDeviceGetTemperature", NULL);
    n->power = (uint_fn)sym(lib, "nvmlDeviceGetPowerUsage", NULL);
    n->power_limit = (uint_fn)sym(lib, "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetPowerManagementLimit");
    n->procs = (procs_fn)sym(lib, "nvmlDeviceGetComputeRunningProcesses_v3", NULL);
    n->proc_size = sizeof(proc_v2);
    if (!n->procs)
        n->procs = (procs_fn)sym(lib, "nvmlDeviceGetComputeRunningProcesses_v2", NULL);
    if (!n->procs) {
        n->procs = (procs_fn)sym(lib, "nvmlDeviceGetComputeRunningProcesses", NULL);
        n->proc_size = sizeof(proc_v1);
    }
    if (!init || !n->count || !n->by_index || init() != NVML_SUCCESS) {
        dlclose(lib);
        free(n);
        return TML_EIO;
    }
    *out = n;
    return 0;
}

void tml__nvml_close(tml_nvml *n)
{
    if (!n)
        return;
    if (n->shutdown)
        n->shutdown();
    dlclose(n->lib);
    free(n);
}

unsigned tml__nvml_count(tml_nvml *n)
{
    unsigned c = 0;
    if (!n || n->count(&c) != NVML_SUCCESS)
        return 0;
    return c > MAX_DEVICES ? MAX_DEVICES : c;
}

/* One CUDA_VISIBLE_DEVICES entry to an NVML index; -1 when invalid. */
static int entry_index(tml_nvml *n, const char *s, size_t len, unsigned count)
{
    char buf[128];

    while (len && (*s == ' ' || *s == '\t')) {
        s++;
        len--;
    }
    while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    if (len == 0 || len >= sizeof(buf))
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (buf[0] >= '0' && buf[0] <= '9') {
        char *end;
        long v = strtol(buf, &end, 10);
        return *end == '\0' && v >= 0 && (unsigned long)v < count ? (int)v : -1;
    }
    /* "GPU-<uuid>" (MIG-... instances are not devices NVML can read as a whole) */
    if (strncmp(buf, "GPU-", 4) != 0 || !n || !n->by_uuid || !n->get_index)
        return -1;
    nvmlDevice_t d;
    unsigned idx;
    if (n->by_uuid(buf, &d) != NVML_SUCCESS || n->get_index(d, &idx) != NVML_SUCCESS ||
        idx >= count)
        return -1;
    return (int)idx;
}

size_t tml__nvml_visible(tml_nvml *n, const char *visible, int *idx, size_t cap)
{
    unsigned count = tml__nvml_count(n);
    size_t k = 0;

    if (!visible) {
        for (unsigned i = 0; i < count && k < cap; i++)
            idx[k++] = (int)i;
        return k;
    }
    const char *p = visible;
    while (*p && k < cap) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        int v = entry_index(n, p, len, count);
        if (v < 0)
            break;          /* CUDA stops at the first invalid entry */
        int dup = 0;
        for (size_t j = 0; j < k; j++)
            dup |= idx[j] == v;
        if (!dup)
            idx[k++] = v;
        if (!comma)
            break;
        p = comma + 1;
    }
    return k;
}

static int check(tml_nvml *n, int index, nvmlReturn_t rc, tml_gpu_reading *out)
{
    if (rc == NVML_ERROR_GPU_IS_LOST) {
        n->lost[index] = 1;
        out->lost = 1;
    }
    return rc == NVML_SUCCESS;
}

int tml__nvml_read(tml_nvml *n, int index, tml_gpu_reading *out)
{
    nvmlDevice_t d;

    memset(out, 0, sizeof(*out));
    if (!n || index < 0 || index >= MAX_DEVICES)
        return TML_EINVAL;
    if (n->lost[index]) {
        out->lost = 1;
        return 0;
    }
    if (!check(n, index, n->by_index((unsigned)index, &d), out))
        return 0;
    nvmlUtilization_t u;
    if (n->util && check(n, index, n->util(d, &u), out) && u.gpu <= 100) {
        out->util_percent = u.gpu;
        out->valid |= TML_GPU_UTIL;
    }
    nvmlMemory_t m;
    if (!out->lost && n->mem && check(n, index, n->mem(d, &m), out) && m.total > 0 &&
        m.used <= m.total) {
        out->mem_used_bytes = (double)m.used;
        out->mem_total_bytes = (double)m.total;
        out->valid |= TML_GPU_MEM;
    }
    unsigned v;
    if (!out->lost && n->temp && check(n, index, n->temp(d, NVML_TEMPERATURE_GPU, &v), out)) {
        out->temp_c = v;
        out->valid |= TML_GPU_TEMP;
    }
    if (!out->lost && n->power && check(n, index, n->power(d, &v), out)) {
        out->power_w = v / 1000.0;              /* milliwatts */
        out->valid |= TML_GPU_POWER;
    }
    if (!out->lost && n->power_limit && check(n, index, n->power_limit(d, &v), out) && v > 0) {
        out->power_limit_w = v / 1000.0;
        out->valid |= TML_GPU_POWER_LIMIT;
    }
    if (out->lost)
        out->valid = 0;
    return 0;
}

int tml__nvml_pids(tml_nvml *n, int index, uint32_t *pids, size_t cap, size_t *count)
{
    nvmlDevice_t d;
    tml_gpu_reading lost;

    *count = 0;
    if (!n || index < 0 || index >= MAX_DEVICES)
        return TML_EINVAL;
    if (!n->procs || n->lost[index])
        return TML_EIO;
    memset(&lost, 0, sizeof(lost));
    if (!check(n, index, n->by_index((unsigned)index, &d), &lost))
        return TML_EIO;
    /* The list can grow between the call that sizes it and the next: a
     * few tries, each with room for what NVML last asked, up to
     * TML_NVML_PROCS_MAX. */
    unsigned want = 32;
    for (int attempt = 0; attempt < 4; attempt++) {
        unsigned got = want;
        void *buf = calloc(want, n->proc_size);
        if (!buf)
            return TML_ENOMEM;
        nvmlReturn_t rc = n->procs(d, &got, buf);
        if (rc == NVML_SUCCESS) {
            size_t k = got < want ? got : want;
            for (size_t i = 0; i < k; i++) {
                uint32_t pid = n->proc_size == sizeof(proc_v1) ? ((proc_v1 *)buf)[i].pid
                                                               : ((proc_v2 *)buf)[i].pid;
                if (i < cap)
                    pids[i] = pid;
            }
            *count = k;
            free(buf);
            return 0;
        }
        free(buf);
        if (rc != NVML_ERROR_INSUFFICIENT_SIZE) {
            check(n, index, rc, &lost);
            return TML_EIO;
        }
        if (got <= want)
            got = want * 2;           /* NVML did not say how many: double */
        if (got > TML_NVML_PROCS_MAX)
            return TML_EIO;
        want = got + 8;               /* and room for a few more */
    }
    return TML_EIO;
}
