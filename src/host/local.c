/*
 * local.c - tml_init: the engine, connected to where its telemetry goes.
 *
 * This is where the layers meet, on purpose above all of them: the engine
 * (src/core) defines the sink it delivers to and knows nothing of
 * aggregators; here tml_init picks one. Under a launcher (TRACEML_ADDR set
 * by `traceml run` or printed by `traceml serve`) it is the wire client;
 * started without one (`python train.py`, a C program run directly) it is
 * an aggregator hosted in this very process, fed by the shipper thread,
 * which writes the run folder and, at tml_shutdown, the summary.
 *
 * It is also the engine's edge: the one place of the library that reads
 * the environment (the table of base/env.h), once per tml_init, and hands
 * the values down in tml_engine_env and the host's options; tml_config
 * answers the Python package from the same table.
 */
#include "core/engine.h"
#include "host/host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/env.h"
#include "report/report.h"

/* ---- the in-process sink ------------------------------------------------- */

typedef struct local_sink {
    tml_sink base;
    tml_host *host;
    tml_manifest manifest;
    char run_name[128], run_id[33], run_dir[PATH_MAX];
} local_sink;

static int live_port = -1;      /* the running run's dashboard (tml_live_port) */

static tml_agg *agg_of(tml_sink *s)
{
    return tml__host_agg(((local_sink *)s)->host);
}

static int ls_hello(tml_sink *s, const tml_hello *h)
{
    return tml__agg_hello(agg_of(s), &h->info, 0, NULL);
}

/* The shipper delivers steps and samples at least once a sampling
 * interval: the dashboard's snapshot is taken then, when one is due. */
static int ls_steps(tml_sink *s, int32_t rank, const tml_step_record *r, size_t n)
{
    int rc = tml__agg_steps(agg_of(s), rank, r, n);
    tml__host_tick(((local_sink *)s)->host);
    return rc;
}

static int ls_samples(tml_sink *s, const tml_sample *v, size_t n)
{
    int rc = tml__agg_samples(agg_of(s), v, n);
    tml__host_tick(((local_sink *)s)->host);
    return rc;
}

static int ls_stats(tml_sink *s, int32_t rank, const tml_rank_stats *st, int bye)
{
    return tml__agg_stats(agg_of(s), rank, st, bye);
}

static int ls_summary(tml_sink *s, char **json)
{
    tml_strbuf sb = TML_STRBUF_INIT;
    int rc = tml__agg_summary_json(agg_of(s), &sb);
    if (rc == 0 && sb.failed)
        rc = TML_ENOMEM;
    *json = rc == 0 ? tml__sb_detach(&sb, NULL) : NULL;
    tml__sb_release(&sb);
    return rc;
}

static int ls_close(tml_sink *s, const char *status, int exit_code, char **text)
{
    local_sink *l = (local_sink *)s;
    if (atomic_load(&tml__req.launcher) == 2)   /* a summary without ranks says why */
        tml__agg_set_launch(agg_of(s), TML_LAUNCH_FORKED);
    int width = tml__report_term_width(STDOUT_FILENO, tml__env_count("COLUMNS", 0));
    int rc = tml__host_finalize(l->host, status, exit_code, width, text);
    tml__host_free(l->host);
    live_port = -1;
    free(l);
    return rc;
}

static int ls_deep_dive(tml_sink *s, int32_t rank, const tml_dd_window *d)
{
    return tml__agg_deep_dive(agg_of(s), rank, d);
}

static const tml_sink_ops local_ops = {ls_hello,   ls_steps, ls_samples,  ls_stats,
                                       ls_summary, ls_close, ls_deep_dive};

/* The run folder: the name asked for, or, for a generated one, the first
 * free "<name>", "<name>_2", ... */
static int make_run_dir(local_sink *l)
{
    const tml_setup *c = &tml__setup;
    snprintf(l->run_name, sizeof(l->run_name), "%.127s", c->run_name);
    int rc = tml__rundir_create(c->logs_dir, l->run_name, l->run_dir, sizeof(l->run_dir));
    for (int k = 2; rc == TML_EEXIST && !c->explicit_name && k < 100; k++) {
        snprintf(l->run_name, sizeof(l->run_name), "%.90s_%d", c->run_name, k);
        rc = tml__rundir_create(c->logs_dir, l->run_name, l->run_dir, sizeof(l->run_dir));
    }
    return rc;
}

/* The aggregator's variables, as the launcher's aggregator reads them. */
static void agg_env(tml_host_opts *ho)
{
    char bad[160];
    ho->thresholds = tml__env_str(TML_ENV_THRESHOLDS);
    ho->window_steps = (int)tml__env_int(TML_ENV_WINDOW_STEPS, bad, sizeof(bad));
    if (bad[0])
        tml__run_log(ho->run_dir, "aggregator", "%s", bad);
    ho->memory_mb = (int)tml__env_int(TML_ENV_MEMORY_MB, bad, sizeof(bad));
    if (bad[0])
        tml__run_log(ho->run_dir, "aggregator", "%s", bad);
}

static int local_sink_open(tml_sink **out)
{
    const tml_rank_info *i = &tml__setup.hello.info;
    local_sink *l = calloc(1, sizeof(*l));
    if (!l)
        return TML_ENOMEM;
    l->base.ops = &local_ops;
    int rc = make_run_dir(l);
    if (rc < 0)
        goto fail;
    tml__random_hex(l->run_id, 16);
    l->manifest = (tml_manifest){.run_name = l->run_name, .run_id = l->run_id,
                                 .status = "running", .start_unix_ms = tml__setup.start_unix_ms,
                                 .world_size = i->world_size, .nnodes = i->nnodes};
    /* TRACEML_HTML_REPORT=1: final_summary.html too (traceml run
     * --html-report does the same for launched runs) */
    tml_host_opts ho = {.run_name = l->run_name, .run_id = l->run_id, .run_dir = l->run_dir,
                        .world_size = i->world_size, .nnodes = i->nnodes,
                        .html_report = tml__env_bool(TML_ENV_HTML_REPORT),
                        .manifest = &l->manifest, .control_fd = -1,
                        .live_port = (int)tml__env_int(TML_ENV_DASHBOARD_PORT, NULL, 0)};
    agg_env(&ho);
    rc = tml__host_open(&ho, &l->host);
    if (rc < 0)
        goto fail;
    live_port = tml__host_live_port(l->host);
    tml__engine_set_run(l->run_name, l->run_dir, l->run_id, NULL);
    *out = &l->base;
    return 0;
fail:
    free(l);
    return rc;
}

/* ---- tml_init ------------------------------------------------------------------ */

/* The first of a, b, c set to a count an int32_t holds, else def. */
static int32_t first_count(const char *a, const char *b, const char *c, int32_t def)
{
    const char *names[] = {a, b, c};
    for (size_t k = 0; k < 3 && names[k]; k++) {
        long v = tml__env_count(names[k], -1);
        if (v >= 0 && v <= INT32_MAX)
            return (int32_t)v;
    }
    return def;
}

/* What the environment says to the engine: TraceML's variables, and who
 * this process is in torchrun's or Slurm's. bad: a value not taken. */
static void read_env(tml_engine_env *e, char *bad, size_t cap)
{
    memset(e, 0, sizeof(*e));
    e->logs_dir = tml__env_str(TML_ENV_LOGS_DIR);
    e->run_name = tml__env_str(TML_ENV_RUN_NAME);
    if (!e->run_name)   /* TraceML 0.5.0's name for it */
        e->run_name = tml__env_str(TML_ENV_SESSION_ID);
    e->disabled = tml__env_bool(TML_ENV_DISABLED);
    e->identity_set = tml__env_raw("RANK") || tml__env_raw("SLURM_PROCID");
    e->rank = first_count("RANK", "SLURM_PROCID", NULL, 0);
    e->local_rank = first_count("LOCAL_RANK", "SLURM_LOCALID", NULL, 0);
    e->world_size = first_count("WORLD_SIZE", "SLURM_NTASKS", NULL, 1);
    e->node_rank = first_count("GROUP_RANK", "NODE_RANK", "SLURM_NODEID", 0);
    e->nnodes = first_count(tml__env_name(TML_ENV_NNODES), "SLURM_NNODES", NULL, 1);
    e->interval_s = tml__env_double(TML_ENV_INTERVAL, bad, cap);
    e->libnvml = tml__env_str(TML_ENV_LIBNVML);
    e->libcuda = tml__env_str(TML_ENV_LIBCUDA);
    e->visible_devices = tml__env_raw("CUDA_VISIBLE_DEVICES");
}

/* TraceML 0.5.0's direct launch (rundir.h): the aggregator of a `traceml
 * serve` named by TRACEML_AGGREGATOR_HOST/PORT, or, with neither, one
 * that serves 0.5.0's port on this machine for this user. Its run's id,
 * secret and folder come from its advert unless the environment has them.
 * NULL: none, the process has its own aggregator. */
static const char *direct_launch(char *addr, size_t cap, tml_serve_advert *adv)
{
    const char *host = tml__env_str(TML_ENV_AGGREGATOR_HOST);
    const char *port_s = tml__env_str(TML_ENV_AGGREGATOR_PORT);
    long port = TML_SERVE_PORT_05;
    if (port_s && *port_s) {
        char *end;
        port = strtol(port_s, &end, 10);
        if (*end || port < 1 || port > 65535)
            return NULL;
    }
    int advertised = tml__serve_advert_read((int)port, adv) == 0;
    if (!(host && *host) && !(port_s && *port_s) && !advertised)
        return NULL;
    snprintf(addr, cap, "%s:%ld", host && *host ? host : "127.0.0.1", port);
    return addr;
}

int tml_init(const tml_options *opts)
{
    tml_engine_env env;
    char bad[160];
    read_env(&env, bad, sizeof(bad));
    int done, rc = tml__engine_prepare(opts, &env, &done);
    if (done)
        return rc;
    tml_sink *sink = NULL;
    tml_serve_advert adv;
    char direct[300];
    memset(&adv, 0, sizeof(adv));
    const char *addr = tml__env_str(TML_ENV_ADDR);
    if (!addr)
        addr = direct_launch(direct, sizeof(direct), &adv);
    if (addr) {
        const char *dir = tml__env_str(TML_ENV_RUN_DIR), *id = tml__env_str(TML_ENV_RUN_ID);
        const char *secret = tml__env_str(TML_ENV_SECRET);
        tml__engine_set_run(NULL, dir ? dir : adv.run_dir[0] ? adv.run_dir : NULL,
                            id ? id : adv.run_id[0] ? adv.run_id : NULL,
                            secret ? secret : adv.secret[0] ? adv.secret : NULL);
        tml__engine_track_progress();
        rc = tml__wire_sink_open(addr, &sink);
    } else {
        rc = local_sink_open(&sink);
    }
    if (rc == 0 && bad[0])
        tml__engine_log("environment", bad);
    return rc < 0 ? rc : tml__engine_start(sink);
}

/* ---- tml_config: a variable, as the engine reads it ------------------------- */

const char *tml_config(const char *name, char *out, size_t cap)
{
    size_t n;
    const tml_env_var *e = tml__env_find(name);
    if (!e || !out || !cap)
        return NULL;
    tml_env_id id = (tml_env_id)(e - tml__env_table(&n));
    const char *s;
    switch (e->type) {
    case TML_ENV_BOOL:
        snprintf(out, cap, "%d", tml__env_bool(id));
        break;
    case TML_ENV_INT:
        snprintf(out, cap, "%ld", tml__env_int(id, NULL, 0));
        break;
    case TML_ENV_DOUBLE:
        snprintf(out, cap, "%.17g", tml__env_double(id, NULL, 0));
        break;
    default:
        s = tml__env_str(id);
        snprintf(out, cap, "%s", s ? s : "");
        break;
    }
    return tml__env_type_name(e->type);
}

int tml_live_port(void)
{
    return live_port;
}
