/*
 * fake_nvml.c - a stand-in for libnvidia-ml.so.1 with deterministic
 * answers, for the tests (TRACEML_LIBNVML points at the built file).
 *
 * Environment (read at nvmlInit):
 *   FAKE_NVML_DEVICES=N          device count [2]
 *   FAKE_NVML_UTIL=P             utilisation % [25]
 *   FAKE_NVML_MEM_USED_MB=M      memory used [3000]
 *   FAKE_NVML_MEM_TOTAL_MB=M     memory total [16000]
 *   FAKE_NVML_TEMP=C             temperature [42]
 *   FAKE_NVML_POWER_MW=W         power draw, milliwatts [58000]
 *   FAKE_NVML_LIMIT_MW=W         enforced power limit, milliwatts [250000]
 *   FAKE_NVML_NOT_SUPPORTED=LIST util,mem,temp,power,limit answer NOT_SUPPORTED
 *   FAKE_NVML_LOST=1             every device query answers GPU_IS_LOST
 *   FAKE_NVML_INIT_FAIL=1        nvmlInit fails
 *   FAKE_NVML_PIDS=LIST          the compute processes on every device,
 *                                comma-separated pids; "self" is the
 *                                caller's pid [none]; "procs" in
 *                                FAKE_NVML_NOT_SUPPORTED fails the call
 * Device i has UUID "GPU-fake-<i>" and reports util + i.
 *
 * Built twice: libnvidia-ml.so.1 (full), and with -DFAKE_MINIMAL
 * libnvidia-ml-min.so.1, which has only the old unversioned names and no
 * temperature/power functions (a library missing symbols). The running
 * processes: the full library has nvmlDeviceGetComputeRunningProcesses_v3
 * (nvmlProcessInfo_t: pid, usedGpuMemory, gpuInstanceId,
 * computeInstanceId), the minimal one only the unversioned name (the v1
 * struct: pid, usedGpuMemory).
 */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <unistd.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;

static struct {
    int devices, util, temp, lost, inited;
    unsigned long long used, total;
    unsigned power, limit;
    char ns[128];
    int calls;
    unsigned pids[4096];
    unsigned npids;
} F;
static char dev_tag[64];   /* handles point into this array */

static long envl(const char *k, long d)
{
    const char *v = getenv(k);
    return v && *v ? strtol(v, NULL, 10) : d;
}

static int unsupported(const char *what)
{
    char list[160];
    snprintf(list, sizeof(list), ",%s,", F.ns);
    char key[32];
    snprintf(key, sizeof(key), ",%s,", what);
    return strstr(list, key) != NULL;
}

static nvmlReturn_t do_init(void)
{
    if (envl("FAKE_NVML_INIT_FAIL", 0))
        return 1;
    F.devices = (int)envl("FAKE_NVML_DEVICES", 2);
    F.util = (int)envl("FAKE_NVML_UTIL", 25);
    F.used = (unsigned long long)envl("FAKE_NVML_MEM_USED_MB", 3000) * 1000000ull;
    F.total = (unsigned long long)envl("FAKE_NVML_MEM_TOTAL_MB", 16000) * 1000000ull;
    F.temp = (int)envl("FAKE_NVML_TEMP", 42);
    F.power = (unsigned)envl("FAKE_NVML_POWER_MW", 58000);
    F.limit = (unsigned)envl("FAKE_NVML_LIMIT_MW", 250000);
    F.lost = (int)envl("FAKE_NVML_LOST", 0);
    const char *ns = getenv("FAKE_NVML_NOT_SUPPORTED");
    snprintf(F.ns, sizeof(F.ns), "%s", ns ? ns : "");
    F.npids = 0;
    const char *p = getenv("FAKE_NVML_PIDS");
    while (p && *p && F.npids < 4096) {
        if (strncmp(p, "self", 4) == 0) {
            F.pids[F.npids++] = (unsigned)getpid();
            p += 4;
        } else {
            char *end;
            unsigned long v = strtoul(p, &end, 10);
            if (end == p)
                break;
            F.pids[F.npids++] = (unsigned)v;
            p = end;
        }
        if (*p == ',')
            p++;
    }
    F.inited = 1;
    return 0;
}

static int dev_index(nvmlDevice_t d)
{
    return (int)((char *)d - dev_tag);
}

static nvmlReturn_t dev_check(nvmlDevice_t d)
{
    F.calls++;
    if (!F.inited)
        return 1;
    if (F.lost)
        return 15;
    if (dev_index(d) < 0 || dev_index(d) >= F.devices)
        return 2;
    return 0;
}

#define DEV_CHECK(d) do { nvmlReturn_t rc_ = dev_check(d); if (rc_) return rc_; } while (0)

typedef struct { unsigned int pid; unsigned long long used; } proc_v1;
typedef struct { unsigned int pid; unsigned long long used; unsigned int gi, ci; } proc_v2;

/* NVML's contract: *count in is the room, out how many there are;
 * INSUFFICIENT_SIZE (7) when they do not fit. */
static nvmlReturn_t running(nvmlDevice_t d, unsigned int *count, void *infos, int v1)
{
    DEV_CHECK(d);
    if (unsupported("procs"))
        return 3;
    if (*count < F.npids) {
        *count = F.npids;
        return 7;
    }
    for (unsigned i = 0; i < F.npids; i++) {
        if (v1)
            ((proc_v1 *)infos)[i] = (proc_v1){ F.pids[i], 1000000ull };
        else
            ((proc_v2 *)infos)[i] = (proc_v2){ F.pids[i], 1000000ull, 0xFFFFFFFFu, 0xFFFFFFFFu };
    }
    *count = F.npids;
    return 0;
}

nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlShutdown(void);
nvmlReturn_t nvmlDeviceGetCount(unsigned int *n);
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *d);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *c, void *infos);
int fake_nvml_calls(void);

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *c, void *infos)
{
    return running(d, c, infos, 1);
}

nvmlReturn_t nvmlInit(void) { return do_init(); }
nvmlReturn_t nvmlShutdown(void) { F.inited = 0; return 0; }
int fake_nvml_calls(void) { return F.calls; }

nvmlReturn_t nvmlDeviceGetCount(unsigned int *n)
{
    if (!F.inited)
        return 1;
    *n = (unsigned)F.devices;
    return 0;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *d)
{
    if (!F.inited)
        return 1;
    if (F.lost)
        return 15;
    if ((int)i >= F.devices)
        return 2;
    *d = (nvmlDevice_t)(void *)(dev_tag + i);
    return 0;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
    DEV_CHECK(d);
    if (unsupported("util"))
        return 3;
    u->gpu = (unsigned)(F.util + dev_index(d));
    u->memory = 10;
    return 0;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
    DEV_CHECK(d);
    if (unsupported("mem"))
        return 3;
    m->total = F.total;
    m->used = F.used;
    m->free = F.total - F.used;
    return 0;
}

#ifndef FAKE_MINIMAL
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d);
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *d);
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *i);
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *t);
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw);
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *mw);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *c, void *infos);

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *c, void *infos)
{
    return running(d, c, infos, 0);
}

nvmlReturn_t nvmlInit_v2(void) { return do_init(); }
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n) { return nvmlDeviceGetCount(n); }
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
    return nvmlDeviceGetHandleByIndex(i, d);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *d)
{
    int i;
    if (!F.inited)
        return 1;
    if (sscanf(uuid, "GPU-fake-%d", &i) != 1 || i < 0 || i >= F.devices)
        return 6;   /* NOT_FOUND */
    *d = (nvmlDevice_t)(void *)(dev_tag + i);
    return 0;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *i)
{
    DEV_CHECK(d);
    *i = (unsigned)dev_index(d);
    return 0;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *t)
{
    DEV_CHECK(d);
    if (sensor != 0 || unsupported("temp"))
        return 3;
    *t = (unsigned)F.temp;
    return 0;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw)
{
    DEV_CHECK(d);
    if (unsupported("power"))
        return 3;
    *mw = F.power;
    return 0;
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t d, unsigned int *mw)
{
    DEV_CHECK(d);
    if (unsupported("limit"))
        return 3;
    *mw = F.limit;
    return 0;
}
#endif
