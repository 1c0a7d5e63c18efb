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
 */
#include "core/engine.h"
#include "host/host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "report/report.h"

/* ---- the in-process sink ------------------------------------------------- */

typedef struct local_sink {
    tml_sink base;
    tml_host *host;
    tml_manifest manifest;
    char run_name[128], run_id[33], run_dir[PATH_MAX];
} local_sink;

static tml_agg *agg_of(tml_sink *s)
{
    return tml__host_agg(((local_sink *)s)->host);
}

static int ls_hello(tml_sink *s, const tml_hello *h)
{
    return tml__agg_hello(agg_of(s), &h->info, 0, NULL);
}

static int ls_steps(tml_sink *s, int32_t rank, const tml_step_record *r, size_t n)
{
    return tml__agg_steps(agg_of(s), rank, r, n);
}

static int ls_samples(tml_sink *s, const tml_sample *v, size_t n)
{
    return tml__agg_samples(agg_of(s), v, n);
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
    int width = tml__report_term_width(STDOUT_FILENO);
    int rc = tml__host_finalize(l->host, status, exit_code, width, text);
    tml__host_free(l->host);
    free(l);
    return rc;
}

static const tml_sink_ops local_ops = {ls_hello, ls_steps, ls_samples, ls_stats, ls_summary,
                                       ls_close};

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
    const char *html = getenv("TRACEML_HTML_REPORT");
    tml_host_opts ho = {.run_name = l->run_name, .run_id = l->run_id, .run_dir = l->run_dir,
                        .world_size = i->world_size, .nnodes = i->nnodes,
                        .html_report = html && *html && strcmp(html, "0") != 0,
                        .manifest = &l->manifest, .control_fd = -1, .live_port = -1};
    rc = tml__host_open(&ho, &l->host);
    if (rc < 0)
        goto fail;
    tml__engine_set_run(l->run_name, l->run_dir, l->run_id, NULL);
    *out = &l->base;
    return 0;
fail:
    free(l);
    return rc;
}

/* ---- tml_init ------------------------------------------------------------------ */

int tml_init(const tml_options *opts)
{
    int done, rc = tml__engine_prepare(opts, &done);
    if (done)
        return rc;
    tml_sink *sink = NULL;
    const char *addr = getenv("TRACEML_ADDR");
    if (addr && *addr) {
        tml__engine_set_run(NULL, getenv("TRACEML_RUN_DIR"), getenv("TRACEML_RUN_ID"),
                            getenv("TRACEML_SECRET"));
        tml__engine_track_progress();
        rc = tml__wire_sink_open(addr, &sink);
    } else {
        rc = local_sink_open(&sink);
    }
    return rc < 0 ? rc : tml__engine_start(sink);
}
