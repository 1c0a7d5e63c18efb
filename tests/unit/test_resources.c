/*
 * test_resources.c - the step memory, system and process rules (SPEC 4.2,
 * 4.3) on hand-made inputs: each threshold from both sides, the creep
 * growth rate and projected full step, and n/a inputs that never fire.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diag/diag.h"
#include "harness.h"

#define MIB (1024.0 * 1024.0)
#define GIB (1024.0 * MIB)

static double vals[4][400];
static uint64_t ids[4][400];

/* Rank k's series: start + slope * i for n steps (plus a small zig-zag). */
static tml_mem_rank series(int k, size_t n, double start, double slope, double cap)
{
    for (size_t i = 0; i < n; i++) {
        vals[k][i] = start + slope * (double)i + ((i % 2) ? 0.5 * MIB : -0.5 * MIB);
        ids[k][i] = 100 + i;
    }
    tml_mem_rank r = { k, 0, vals[k], ids[k], n, cap };
    return r;
}

static void test_memory_cpu_creep_and_rising(void)
{
    tml_section_diag d;
    tml_thresholds th;
    tml__thresholds_default(&th);
    struct { size_t n; double slope_mib; size_t creep_mb; const char *kind; } t[] = {
        { 40, 0, 1024, "NO_GPU" },             /* too few steps to analyse RSS */
        { 60, 0, 1024, "BALANCED" },           /* flat */
        { 60, 0.3, 1024, "BALANCED" },         /* 18 MiB over the run: noise */
        { 60, 16, 1024, "MEMORY_RISING" },     /* 944 MiB < 1 GiB */
        { 60, 20, 1024, "MEMORY_CREEP" },      /* 1180 MiB >= 1 GiB */
        { 60, 16, 900, "MEMORY_CREEP" },       /* user-set creep amount */
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        tml_mem_rank r = series(0, t[i].n, 1 * GIB, t[i].slope_mib * MIB, 4 * GIB);
        tml_mem_input in = { 0, &r, 1 };
        th.creep_mb = t[i].creep_mb;
        tml__diag_memory(&in, &th, &d);
        if (strcmp(d.primary.kind, t[i].kind) != 0)
            fprintf(stderr, "case %zu: got %s\n", i, d.primary.kind);
        CHECK_STR(d.primary.kind, t[i].kind);
        CHECK_STR(d.primary.section, "step_memory");
    }
    /* the creep's evidence: growth per step, window growth, projected full step */
    tml_mem_rank r = series(0, 60, 1 * GIB, 20 * MIB, 4 * GIB);
    tml_mem_input in = { 0, &r, 1 };
    th.creep_mb = 1024;
    tml__diag_memory(&in, &th, &d);
    CHECK_STR(d.primary.label, "MEMORY CREEP");
    CHECK_EQ_INT(d.primary.severity, TML_SEV_WARNING);
    CHECK(d.primary.res.valid);
    CHECK_NEAR(d.primary.res.growth_bytes_per_step, 20 * MIB, 0.01 * MIB);
    CHECK_NEAR(d.primary.res.growth_bytes, 59 * 20 * MIB, 1 * MIB);
    /* last step 159 at ~2204 MiB; (4096 - 2204) / 20 = 94.6 -> 95 more steps */
    CHECK_NEAR(d.primary.res.projected_full_step, 159 + 95, 1);
    CHECK(strstr(d.primary.why, "host RAM") != NULL);
    CHECK(strstr(d.primary.why, "/step") != NULL);
    /* unknown capacity: no projection, still a creep */
    r.capacity_bytes = NAN;
    tml__diag_memory(&in, &th, &d);
    CHECK_STR(d.primary.kind, "MEMORY_CREEP");
    CHECK(isnan(d.primary.res.projected_full_step));
    /* a falling series is not rising */
    r = series(0, 60, 3 * GIB, -20 * MIB, 4 * GIB);
    tml__diag_memory(&in, &th, &d);
    CHECK_STR(d.primary.kind, "BALANCED");
}

static void test_memory_gpu_pressure(void)
{
    tml_section_diag d;
    struct { double fraction; const char *kind; tml_severity sev; } t[] = {
        { 0.91, "BALANCED", TML_SEV_INFO },
        { 0.92, "HIGH_PRESSURE", TML_SEV_WARNING },
        { 0.969, "HIGH_PRESSURE", TML_SEV_WARNING },
        { 0.97, "HIGH_PRESSURE", TML_SEV_CRITICAL },
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        double cap = 16 * GIB;
        tml_mem_rank r = series(0, 60, 0, 0, cap);
        for (size_t k = 0; k < 60; k++)
            vals[0][k] = cap * t[i].fraction - (k == 30 ? 0 : 1 * MIB);   /* peak at step 30 */
        tml_mem_input in = { 1, &r, 1 };
        tml__diag_memory(&in, NULL, &d);
        CHECK_STR(d.primary.kind, t[i].kind);
        CHECK_EQ_INT(d.primary.severity, t[i].sev);
    }
    /* unknown device size: pressure cannot fire */
    tml_mem_rank r = series(0, 60, 15 * GIB, 0, NAN);
    tml_mem_input in = { 1, &r, 1 };
    tml__diag_memory(&in, NULL, &d);
    CHECK_STR(d.primary.kind, "BALANCED");
    /* fewer than 50 steps on a GPU run: BALANCED, saying why */
    r = series(0, 49, 15.9 * GIB, 0, 16 * GIB);
    tml__diag_memory(&in, NULL, &d);
    CHECK_STR(d.primary.kind, "BALANCED");
    CHECK(strstr(d.primary.why, "need 50") != NULL);
}

static void test_memory_gpu_imbalance(void)
{
    tml_section_diag d;
    /* peaks 10 GiB (median) and worst W; capacity C */
    struct { double worst, cap; const char *kind; tml_severity sev; } t[] = {
        { 12.0, 40.0, "IMBALANCE", TML_SEV_WARNING },   /* skew 0.20, pressure 0.30 */
        { 11.9, 39.0, "BALANCED", TML_SEV_INFO },      /* skew 0.19 */
        { 12.0, 40.5, "BALANCED", TML_SEV_INFO },      /* pressure 0.296 */
        { 13.0, 26.0, "IMBALANCE", TML_SEV_CRITICAL },  /* skew 0.30, pressure 0.50 */
        { 13.0, 26.5, "IMBALANCE", TML_SEV_WARNING },   /* pressure 0.49 */
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        tml_mem_rank r[3] = {
            series(0, 60, 10 * GIB, 0, t[i].cap * GIB),
            series(1, 60, 10 * GIB, 0, t[i].cap * GIB),
            series(2, 60, t[i].worst * GIB, 0, t[i].cap * GIB),
        };
        for (int k = 0; k < 3; k++)       /* flat series: exact peaks at the boundaries */
            for (size_t j = 0; j < 60; j++)
                vals[k][j] = (k == 2 ? t[i].worst : 10.0) * GIB;
        tml_mem_input in = { 1, r, 3 };
        tml__diag_memory(&in, NULL, &d);
        if (strcmp(d.primary.kind, t[i].kind) != 0)
            fprintf(stderr, "imbalance case %zu: got %s\n", i, d.primary.kind);
        CHECK_STR(d.primary.kind, t[i].kind);
        CHECK_EQ_INT(d.primary.severity, t[i].sev);
        if (strcmp(t[i].kind, "IMBALANCE") == 0)
            CHECK_EQ_INT(d.primary.res.rank, 2);
    }
    /* two ranks: the larger is compared with the other one (with a median
     * that counted it, it was compared with itself and never fired) */
    tml_mem_rank r2[2] = { series(0, 60, 10 * GIB, 0, 26 * GIB),
                           series(1, 60, 13 * GIB, 0, 26 * GIB) };
    for (size_t j = 0; j < 60; j++) {
        vals[0][j] = 10.0 * GIB;
        vals[1][j] = 13.0 * GIB;
    }
    tml_mem_input in2 = { 1, r2, 2 };
    tml__diag_memory(&in2, NULL, &d);
    CHECK_STR(d.primary.kind, "IMBALANCE");
    CHECK_EQ_INT(d.primary.severity, TML_SEV_CRITICAL);
    CHECK_EQ_INT(d.primary.res.rank, 1);
    CHECK(strstr(d.primary.why, "30% above the other rank's 10.7 GB") != NULL);
}

static tml_sys_node node(void)
{
    tml_sys_node n;
    memset(&n, 0, sizeof(n));
    n.samples = 10;
    n.cpu_percent = 20;
    n.ram_used_bytes = n.ram_used_peak_bytes = 10e9;
    n.ram_total_bytes = 100e9;
    n.gpu_util_percent = 90;
    n.gpu_mem_used_bytes = 1e9;
    n.gpu_mem_total_bytes = 16e9;
    n.gpu_mem_peak_percent = 10;
    n.gpu_temp_c = n.gpu_temp_peak_c = 50;
    n.gpu_power_w = 100;
    n.gpu_power_limit_w = 250;
    n.gpu_power_percent = 40;
    n.gpus = 1;
    n.worst_gpu = 0;
    return n;
}

static void test_system_rules(void)
{
    struct { size_t off; double v; const char *kind; tml_severity sev; } t[] = {
        { offsetof(tml_sys_node, gpu_mem_peak_percent), 89.9, "HIGH_GPU_MEM", TML_SEV_WARNING },
        { offsetof(tml_sys_node, gpu_mem_peak_percent), 90.0, "VERY_HIGH_GPU_MEM", TML_SEV_CRITICAL },
        { offsetof(tml_sys_node, gpu_mem_peak_percent), 79.9, "NORMAL", TML_SEV_INFO },
        { offsetof(tml_sys_node, gpu_mem_peak_percent), 80.0, "HIGH_GPU_MEM", TML_SEV_WARNING },
        { offsetof(tml_sys_node, gpu_temp_peak_c), 84.9, "NORMAL", TML_SEV_INFO },
        { offsetof(tml_sys_node, gpu_temp_peak_c), 85.0, "HIGH_GPU_TEMP", TML_SEV_CRITICAL },
        { offsetof(tml_sys_node, gpu_power_percent), 79.9, "NORMAL", TML_SEV_INFO },
        { offsetof(tml_sys_node, gpu_power_percent), 80.0, "HIGH_GPU_PWR", TML_SEV_WARNING },
        { offsetof(tml_sys_node, ram_used_peak_bytes), 79.9e9, "NORMAL", TML_SEV_INFO },
        { offsetof(tml_sys_node, ram_used_peak_bytes), 80e9, "HIGH_RAM", TML_SEV_WARNING },
        { offsetof(tml_sys_node, cpu_percent), 79.9, "NORMAL", TML_SEV_INFO },
        { offsetof(tml_sys_node, cpu_percent), 80, "HIGH_CPU", TML_SEV_WARNING },
        { offsetof(tml_sys_node, gpu_util_percent), 70, "NORMAL", TML_SEV_INFO },
        { offsetof(tml_sys_node, gpu_util_percent), 69.9, "MODERATE_GPU_UTIL", TML_SEV_INFO },
        { offsetof(tml_sys_node, gpu_util_percent), 30, "MODERATE_GPU_UTIL", TML_SEV_INFO },
        { offsetof(tml_sys_node, gpu_util_percent), 29.9, "LOW_GPU_UTIL", TML_SEV_INFO },
        { offsetof(tml_sys_node, gpu_util_percent), NAN, "NORMAL", TML_SEV_INFO },   /* no GPU */
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        tml_sys_node n = node();
        tml_section_diag d;
        double util;
        *(double *)(void *)((char *)&n + t[i].off) = t[i].v;
        tml__diag_system_rules(&n, 1, NULL, &d, &util);
        if (strcmp(d.primary.kind, t[i].kind) != 0)
            fprintf(stderr, "system case %zu: got %s\n", i, d.primary.kind);
        CHECK_STR(d.primary.kind, t[i].kind);
        CHECK_EQ_INT(d.primary.severity, t[i].sev);
        CHECK_STR(d.primary.section, "system");
    }
    /* LOW GPU UTIL's evidence, as in the brief */
    tml_sys_node n = node();
    tml_section_diag d;
    double util;
    n.gpu_util_percent = 24;
    tml__diag_system_rules(&n, 1, NULL, &d, &util);
    CHECK_STR(d.primary.label, "LOW GPU UTIL");
    CHECK_STR(d.primary.why, "GPU utilization averaged 24%.");
    CHECK_NEAR(util, 24, 1e-9);
    /* priorities: every finding is an issue, the gravest first */
    n.gpu_mem_peak_percent = 95;
    n.gpu_temp_peak_c = 90;
    n.cpu_percent = 85;
    tml__diag_system_rules(&n, 1, NULL, &d, &util);
    CHECK_EQ_INT(d.nissues, 4);
    CHECK_STR(d.issues[0].kind, "VERY_HIGH_GPU_MEM");
    CHECK_STR(d.issues[1].kind, "HIGH_GPU_TEMP");
    CHECK_STR(d.issues[2].kind, "HIGH_CPU");
    CHECK_STR(d.issues[3].kind, "LOW_GPU_UTIL");
    /* several nodes: the worst is named */
    tml_sys_node two[2] = { node(), node() };
    two[1].node = 1;
    two[1].gpu_temp_peak_c = 88;
    tml__diag_system_rules(two, 2, NULL, &d, &util);
    CHECK_STR(d.primary.kind, "HIGH_GPU_TEMP");
    CHECK_EQ_INT(d.primary.res.node, 1);
    CHECK(strstr(d.primary.why, "on N1") != NULL);
    /* a CPU-only host: only host rules, and no GPU utilisation */
    tml_sys_node c = node();
    c.gpu_util_percent = c.gpu_mem_peak_percent = c.gpu_temp_peak_c = c.gpu_power_percent = NAN;
    tml__diag_system_rules(&c, 1, NULL, &d, &util);
    CHECK_STR(d.primary.kind, "NORMAL");
    CHECK(isnan(util));
}

static tml_proc_rank proc(int32_t rank)
{
    tml_proc_rank p;
    memset(&p, 0, sizeof(p));
    p.rank = rank;
    p.samples = 10;
    p.cpu_capacity_percent = 14;
    p.cpu_percent = 28;
    p.rss_bytes = p.rss_peak_bytes = 3e9;
    p.host_ram_total_bytes = 30e9;
    p.cuda_allocated_bytes = 2.9e9;
    p.cuda_reserved_bytes = 3.2e9;
    p.cuda_reserved_peak_bytes = 3.2e9;
    p.device_total_bytes = 16e9;
    return p;
}

static void test_process_rules(void)
{
    struct { size_t off; double v; const char *kind; tml_severity sev; } t[] = {
        { offsetof(tml_proc_rank, cuda_reserved_peak_bytes), 12.7e9, "NORMAL", TML_SEV_INFO },
        { offsetof(tml_proc_rank, cuda_reserved_peak_bytes), 12.8e9, "HIGH_PROCESS_GPU_MEMORY", TML_SEV_WARNING },
        { offsetof(tml_proc_rank, cuda_reserved_peak_bytes), 14.4e9, "VERY_HIGH_PROCESS_GPU_MEMORY", TML_SEV_CRITICAL },
        { offsetof(tml_proc_rank, rss_peak_bytes), 23.9e9, "NORMAL", TML_SEV_INFO },
        { offsetof(tml_proc_rank, rss_peak_bytes), 24e9, "HIGH_PROCESS_RSS", TML_SEV_WARNING },
        { offsetof(tml_proc_rank, cpu_capacity_percent), 79.9, "NORMAL", TML_SEV_INFO },
        { offsetof(tml_proc_rank, cpu_capacity_percent), 80, "HIGH_PROCESS_CPU", TML_SEV_WARNING },
        { offsetof(tml_proc_rank, device_total_bytes), NAN, "NORMAL", TML_SEV_INFO },
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        tml_proc_rank p = proc(0);
        tml_section_diag d;
        *(double *)(void *)((char *)&p + t[i].off) = t[i].v;
        tml__diag_process_rules(&p, 1, NULL, &d);
        if (strcmp(d.primary.kind, t[i].kind) != 0)
            fprintf(stderr, "process case %zu: got %s\n", i, d.primary.kind);
        CHECK_STR(d.primary.kind, t[i].kind);
        CHECK_EQ_INT(d.primary.severity, t[i].sev);
    }
    /* reserved/allocated ratio: >= 2.0 with reserved >= 30% of the device */
    struct { double alloc, resv; const char *kind; } r[] = {
        { 2.5e9, 4.9e9, "NORMAL" },                                 /* 1.96x */
        { 2.4e9, 4.8e9, "HIGH_CUDA_RESERVED_ALLOCATED_RATIO" },     /* 2.0x, 30% */
        { 2.3e9, 4.7e9, "NORMAL" },                                 /* 2.04x, 29% */
    };
    for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
        tml_proc_rank p = proc(0);
        tml_section_diag d;
        p.cuda_allocated_bytes = r[i].alloc;
        p.cuda_reserved_bytes = p.cuda_reserved_peak_bytes = r[i].resv;
        tml__diag_process_rules(&p, 1, NULL, &d);
        CHECK_STR(d.primary.kind, r[i].kind);
    }
    /* rank imbalance of reserved memory */
    tml_proc_rank v[3] = { proc(0), proc(1), proc(2) };
    for (int k = 0; k < 3; k++) {
        v[k].cuda_reserved_bytes = v[k].cuda_reserved_peak_bytes = 5e9;
        v[k].cuda_allocated_bytes = 4.5e9;
    }
    v[2].cuda_reserved_bytes = 5.9e9;      /* +18% */
    tml_section_diag d;
    tml__diag_process_rules(v, 3, NULL, &d);
    CHECK_STR(d.primary.kind, "NORMAL");
    v[2].cuda_reserved_bytes = 6.0e9;      /* +20%, 37.5% of the device */
    tml__diag_process_rules(v, 3, NULL, &d);
    CHECK_STR(d.primary.kind, "RANK_GPU_MEMORY_IMBALANCE");
    CHECK_EQ_INT(d.primary.res.rank, 2);
    /* two ranks: the other rank is the reference */
    tml__diag_process_rules(&v[1], 2, NULL, &d);
    CHECK_STR(d.primary.kind, "RANK_GPU_MEMORY_IMBALANCE");
    CHECK(strstr(d.primary.why, "20% above the other rank's") != NULL);
    /* nothing sampled at all */
    tml_proc_rank e;
    memset(&e, 0, sizeof(e));
    e.cpu_capacity_percent = e.rss_bytes = e.cuda_reserved_bytes = e.cuda_allocated_bytes = NAN;
    e.rss_peak_bytes = e.cuda_reserved_peak_bytes = e.device_total_bytes = e.host_ram_total_bytes = NAN;
    tml__diag_process_rules(&e, 1, NULL, &d);
    CHECK_STR(d.primary.kind, "NORMAL");
    CHECK(strstr(d.primary.why, "No process metrics") != NULL);
}

static void test_run_verdict_low_gpu_util(void)
{
    tml_step_diag st;
    tml_diagnosis v;
    memset(&st, 0, sizeof(st));
    tml__diag_init(&st.primary, "BALANCED", "BALANCED", "step_time", TML_SEV_INFO);
    tml__diag_run_verdict(&st, 24.0, NULL, &v);
    CHECK_STR(v.kind, "LOW_GPU_UTILIZATION");
    tml__diag_run_verdict(&st, 30.0, NULL, &v);
    CHECK_STR(v.kind, "NO_CLEAR_PERFORMANCE_BOTTLENECK");
    tml__diag_run_verdict(&st, NAN, NULL, &v);     /* CPU-only: never LOW GPU UTILIZATION */
    CHECK_STR(v.kind, "NO_CLEAR_PERFORMANCE_BOTTLENECK");
}

static void test_thresholds_memory_keys(void)
{
    tml_thresholds t;
    tml__thresholds_default(&t);
    CHECK_EQ_INT(t.creep_mb, 1024);
    CHECK_EQ_INT(t.mem_min_steps, 50);
    CHECK_EQ_INT(tml__thresholds_parse(&t, "creep_mb=256, mem_min_steps=20, mem_pressure_warn=0.8"), 0);
    CHECK_EQ_INT(t.creep_mb, 256);
    CHECK_EQ_INT(t.mem_min_steps, 20);
    CHECK_NEAR(t.mem_pressure_warn, 0.8, 1e-12);
    CHECK_EQ_INT(tml__thresholds_parse(&t, "mem_pressure_warn=0.99"), TML_EINVAL);   /* > crit */
    CHECK_EQ_INT(tml__thresholds_parse(&t, "creep_mb=0"), TML_EINVAL);
    CHECK_NEAR(tml__slope((const double[]){ 1, 3, 5, 7 }, 4), 2.0, 1e-12);
    CHECK(isnan(tml__slope((const double[]){ 1 }, 1)));
}

/* SPEC 4.4's Also: every section's WARNING or CRITICAL findings and a
 * memory trend heading for full, ranked by severity, then the sooner
 * projected step; never the verdict; at most max. */
static void test_also_across_sections(void)
{
    tml_section_diag mem, sys, proc;
    memset(&mem, 0, sizeof(mem));
    memset(&sys, 0, sizeof(sys));
    memset(&proc, 0, sizeof(proc));
    tml__diag_init(&mem.issues[mem.nissues++], "MEMORY_RISING", "MEMORY RISING", "step_memory",
                   TML_SEV_INFO);
    mem.issues[0].res.valid = 1;
    mem.issues[0].res.projected_full_step = 2938;
    tml__diag_init(&sys.issues[sys.nissues++], "LOW_GPU_UTIL", "LOW GPU UTIL", "system",
                   TML_SEV_INFO);
    tml__diag_init(&sys.issues[sys.nissues++], "HIGH_CPU", "HIGH CPU", "system",
                   TML_SEV_WARNING);
    tml__diag_init(&proc.issues[proc.nissues++], "HIGH_PROCESS_RSS", "HIGH PROCESS RSS",
                   "process", TML_SEV_WARNING);
    tml__diag_init(&proc.issues[proc.nissues++], "NORMAL", "NORMAL", "process", TML_SEV_INFO);
    const tml_section_diag *secs[3] = { &mem, &sys, &proc };
    tml_diagnosis verdict;
    tml__diag_init(&verdict, "RESIDUAL_HEAVY", "RESIDUAL-HEAVY", "step_time", TML_SEV_CRITICAL);
    const tml_diagnosis *out[TML_ALSO_MAX];
    size_t n = tml__diag_also(&verdict, secs, 3, out, TML_ALSO_MAX);
    CHECK_EQ_INT(n, 3);
    CHECK_STR(out[0]->kind, "HIGH_CPU");                /* WARNINGs in section order */
    CHECK_STR(out[1]->kind, "HIGH_PROCESS_RSS");
    CHECK_STR(out[2]->kind, "MEMORY_RISING");           /* INFO, but heading for full */
    /* a CRITICAL goes first; the list keeps the three gravest */
    tml__diag_init(&proc.issues[proc.nissues++], "VERY_HIGH_PROCESS_GPU_MEMORY",
                   "VERY HIGH PROCESS GPU MEMORY", "process", TML_SEV_CRITICAL);
    n = tml__diag_also(&verdict, secs, 3, out, TML_ALSO_MAX);
    CHECK_EQ_INT(n, 3);
    CHECK_STR(out[0]->kind, "VERY_HIGH_PROCESS_GPU_MEMORY");
    CHECK_STR(out[2]->kind, "HIGH_PROCESS_RSS");
    /* among trends, the sooner full first; a trend without a projection
     * and INFO findings are not named; nor is the verdict itself */
    memset(&sys, 0, sizeof(sys));
    memset(&proc, 0, sizeof(proc));
    tml__diag_init(&mem.issues[mem.nissues++], "MEMORY_CREEP", "MEMORY CREEP", "step_memory",
                   TML_SEV_INFO);
    mem.issues[1].res.valid = 1;
    mem.issues[1].res.projected_full_step = 500;
    tml__diag_init(&mem.issues[mem.nissues++], "MEMORY_RISING", "MEMORY RISING", "step_memory",
                   TML_SEV_INFO);
    mem.issues[2].res.valid = 1;
    mem.issues[2].res.projected_full_step = NAN;
    n = tml__diag_also(&verdict, secs, 3, out, TML_ALSO_MAX);
    CHECK_EQ_INT(n, 2);
    CHECK_NEAR(out[0]->res.projected_full_step, 500, 0);
    CHECK_NEAR(out[1]->res.projected_full_step, 2938, 0);
    tml__diag_init(&verdict, "MEMORY_CREEP", "MEMORY CREEP", "step_memory", TML_SEV_WARNING);
    n = tml__diag_also(&verdict, secs, 3, out, TML_ALSO_MAX);
    CHECK_EQ_INT(n, 1);
    CHECK_STR(out[0]->kind, "MEMORY_RISING");
}

#define TESTS X(test_memory_cpu_creep_and_rising) X(test_memory_gpu_pressure) \
    X(test_memory_gpu_imbalance) X(test_system_rules) X(test_process_rules) \
    X(test_run_verdict_low_gpu_util) X(test_thresholds_memory_keys) X(test_also_across_sections)
#include "harness.h"
