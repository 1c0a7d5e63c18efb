/*
 * agg.c - the aggregator object: the in-memory run plus its store, and the
 * end of the run (diagnose, write the artifacts).
 *
 * Everything a rank sends goes to two places: the tml_run in memory, from
 * which the summary is built, and telemetry.sqlite, from which the same run
 * can be rebuilt when this process dies (tml__agg_open_existing). The
 * store is best-effort: when SQLite cannot be written the run goes on and
 * the summary is still produced from memory; the failure is logged in the
 * run folder's traceml.log.
 *
 * The artifacts are written with temp file + rename, so a reader (the
 * launcher, `traceml view`, a user's script) never sees half a summary,
 * and a write that fails (a full disk) leaves what was there before. The
 * summary does not depend on them: it is built in memory first, and when
 * a file cannot be written the box says so on a NOT SAVED line, with the
 * system's reason, and is still handed to the caller to print.
 */
#include "agg/agg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "model/progress.h"
#include "model/run.h"
#include "agg/rundir.h"
#include "model/timeline.h"
#include "diag/diag.h"
#include "diag/window.h"
#include "report/html.h"
#include "report/report.h"
#include "judge/tune.h"
#include "model/sample.h"
#include "store/store.h"
#include "traceml/traceml.h"
#include "base/strbuf.h"
#include "base/env.h"

struct tml_agg {
    tml_run run;
    tml_store *store;
    char *run_dir;
    int store_failed;          /* logged once */
    int html_report;           /* tml__agg_set_html_report() */
    int tune_trial;            /* tml__agg_set_tune_trial() */
    int own_process;           /* opts.own_process */
    char *thresholds;          /* opts.thresholds, NULL: the defaults */
    size_t window_steps;       /* opts.window_steps, else the default */
    char not_saved[512];       /* the box's NOT SAVED line; "" when all was written */
};

/* An aggregator of its own process notes its CPU time before a summary. */
static void note_cpu(tml_agg *a)
{
    int64_t cpu = a->own_process ? tml__clock_ns(CLOCK_PROCESS_CPUTIME_ID) : -1;
    if (cpu >= 0)
        a->run.aggregator_cpu_ns = cpu;
}

/* Why a call failed: the system's reason for a file error when errno
 * (saved by the caller right after it) has one. */
static const char *why_failed(int rc, int saved_errno)
{
    return rc == TML_EIO && saved_errno ? strerror(saved_errno) : tml_strerror(rc);
}

/* The store failed (a full disk, a file size limit): the run goes on in
 * memory, and the summary says that the telemetry behind it stops here. */
static void store_error(tml_agg *a, const char *what, int rc)
{
    int saved = errno;
    if (rc >= 0 || a->store_failed)
        return;
    a->store_failed = 1;
    const char *cause = rc == TML_EIO && a->store ? tml__store_error(a->store)
                                                   : why_failed(rc, saved);
    tml__run_log(a->run_dir, "aggregator", "telemetry.sqlite: %s failed (%s); "
                 "continuing without storage", what, cause);
    if (!a->run.partial[0]) {
        char why[256];
        uint64_t seen = tml__agg_steps_seen(a);
        snprintf(why, sizeof(why), "telemetry.sqlite could not be written after %llu step%s "
                 "(%.60s): this summary is whole, the telemetry behind it (export, a "
                 "rebuild) stops there", (unsigned long long)seen, seen == 1 ? "" : "s",
                 cause);
        tml__agg_set_partial(a, why);
    }
}

static int agg_alloc(const tml_agg_opts *o, tml_agg **out)
{
    *out = NULL;
    if (!o || !o->run_dir)
        return TML_EINVAL;
    tml_agg *a = calloc(1, sizeof(*a));
    if (!a)
        return TML_ENOMEM;
    a->run_dir = strdup(o->run_dir);
    if (!a->run_dir) {
        free(a);
        return TML_ENOMEM;
    }
    tml__run_init(&a->run, o->run_name, o->run_id);
    a->run.world_size = o->world_size;
    a->run.nnodes = o->nnodes;
    a->run.mem_budget = o->memory_mb > 0 ? (size_t)o->memory_mb << 20 : 0;
    a->own_process = o->own_process;
    a->window_steps = o->window_steps >= 2 && o->window_steps <= TML_WINDOW_DEFAULT_STEPS
                      ? (size_t)o->window_steps : TML_WINDOW_DEFAULT_STEPS;
    a->thresholds = o->thresholds && *o->thresholds ? strdup(o->thresholds) : NULL;
    if (o->thresholds && *o->thresholds && !a->thresholds) {
        free(a->run_dir);
        free(a);
        return TML_ENOMEM;
    }
    a->run.start_mono_ns = o->start_mono_ns > 0 ? o->start_mono_ns : tml__mono_ns();
    *out = a;
    return 0;
}

static int store_path(const tml_agg *a, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%s/telemetry.sqlite", a->run_dir);
    return n > 0 && (size_t)n < cap ? 0 : TML_EINVAL;
}

int tml__agg_new(const tml_agg_opts *o, tml_agg **out)
{
    tml_agg *a;
    char path[4096];
    int rc = agg_alloc(o, &a);
    if (rc < 0)
        return rc;
    a->run.start_unix_ms = tml__unix_ms();
    rc = store_path(a, path, sizeof(path));
    if (rc == 0)
        rc = tml__store_open(path, 1, &a->store);
    if (rc < 0) {
        store_error(a, "create", rc);
    } else {
        store_error(a, "write run", tml__store_put_run(a->store, &a->run));
        /* an aggregator of its own process writes telemetry.sqlite on a
         * thread of the store's (started with the first batch), off its
         * event loop */
        if (a->own_process)
            tml__store_background(a->store);
    }
    *out = a;
    return 0;
}

int tml__agg_open_existing(const tml_agg_opts *o, tml_agg **out)
{
    tml_agg *a;
    char path[4096];
    int rc = agg_alloc(o, &a);
    if (rc < 0)
        return rc;
    rc = store_path(a, path, sizeof(path));
    if (rc == 0)
        rc = tml__store_open(path, 0, &a->store);
    int saved = errno;
    if (rc == 0)
        rc = tml__store_load(a->store, &a->run);
    if (rc < 0) {
        /* Whatever could be loaded stays: a partial run still deserves a
         * summary, and an empty one says NO DATA. */
        tml__run_log(a->run_dir, "aggregator", "could not load %s: %s", path,
                     rc == TML_EIO && a->store ? tml__store_error(a->store)
                                               : why_failed(rc, saved));
    }
    /* names given by the caller win over what the file says */
    if (o->run_name)
        snprintf(a->run.name, sizeof(a->run.name), "%s", o->run_name);
    if (o->run_id)
        snprintf(a->run.id, sizeof(a->run.id), "%s", o->run_id);
    if (o->world_size)
        a->run.world_size = o->world_size;
    if (o->nnodes)
        a->run.nnodes = o->nnodes;
    if (a->run.start_unix_ms <= 0)
        a->run.start_unix_ms = tml__unix_ms();
    *out = a;
    return 0;
}

void tml__agg_free(tml_agg *a)
{
    if (!a)
        return;
    tml__store_close(a->store);
    tml__run_release(&a->run);
    free(a->run_dir);
    free(a->thresholds);
    free(a);
}

/* A rank's claimed world size (and node count) that is out of range, or
 * that contradicts what the launcher knows, is replaced and logged (0 is
 * "unknown" and replaced silently). */
static void sane_identity(tml_agg *a, tml_rank_info *i)
{
    int32_t known = a->run.world_size, ws = i->world_size;
    if (ws < 0 || ws > TML_MAX_WORLD_SIZE || (known > 0 && ws > 0 && ws != known))
        tml__run_log(a->run_dir, "aggregator", "rank %d claimed world size %d; using %d (%s)",
                     (int)i->rank, (int)ws, known > 0 ? (int)known : 1,
                     known > 0 ? "the launcher's" : "out of range 1..65536");
    if (ws < 1 || ws > TML_MAX_WORLD_SIZE || (known > 0 && ws != known))
        i->world_size = known > 0 ? known : 1;
    if (i->nnodes < 0 || i->nnodes > TML_MAX_WORLD_SIZE)
        tml__run_log(a->run_dir, "aggregator", "rank %d claimed %d nodes; ignored",
                     (int)i->rank, (int)i->nnodes);
    if (i->nnodes < 1 || i->nnodes > TML_MAX_WORLD_SIZE)
        i->nnodes = a->run.nnodes > 0 ? a->run.nnodes : 1;
}

/* Another process holds info->rank (another pid or host; or, kind
 * SECOND_CONNECTION, another process image of the same pid and host with
 * a connection still open): give this one a number of its own. */
static void split_claim(tml_agg *a, const tml_rank *holder, tml_rank_info *info, int kind)
{
    int32_t next = a->run.world_size > 0 ? a->run.world_size : 0;
    for (size_t i = 0; i < a->run.nranks; i++)
        if (a->run.ranks[i].info.rank >= next)
            next = a->run.ranks[i].info.rank + 1;
    tml__run_log(a->run_dir, "aggregator",
                 "rank %d claimed by two %s: pid %d on %s, then pid %d on %s; "
                 "the second is reported as rank %d", (int)info->rank,
                 kind == TML_CONFLICT_CLAIMED ? "processes" : "live connections",
                 (int)holder->info.pid, holder->info.host, (int)info->pid, info->host, (int)next);
    tml_rank_conflict *c = tml__run_add_conflict(&a->run, kind);
    if (c) {
        c->claimed = info->rank;
        c->reported_as = next;
        c->pid = info->pid;
        c->first_pid = holder->info.pid;
        snprintf(c->host, sizeof(c->host), "%s", info->host);
        snprintf(c->first_host, sizeof(c->first_host), "%s", holder->info.host);
    }
    info->rank = next;
}

static int same_process(const tml_rank_info *x, const tml_rank_info *y)
{
    return x->pid == y->pid && strcmp(x->host, y->host) == 0 && x->instance == y->instance;
}

/* The rank this very process (pid, host, process image) already has,
 * whatever it claims now: a reconnection keeps its number. */
static const tml_rank *rank_of_process(const tml_agg *a, const tml_rank_info *info)
{
    if (!info->instance || info->pid <= 0)
        return NULL;
    for (size_t i = 0; i < a->run.nranks; i++)
        if (same_process(&a->run.ranks[i].info, info))
            return &a->run.ranks[i];
    return NULL;
}

int tml__agg_hello(tml_agg *a, const tml_rank_info *claimed, int live_twin,
                   int32_t *reported_as)
{
    tml_rank_info sane = *claimed, *info = &sane;
    int restarted = 0;
    sane_identity(a, info);
    const tml_rank *mine = rank_of_process(a, info);
    const tml_rank *holder = tml__run_find(&a->run, info->rank);
    if (mine) {
        info->rank = mine->info.rank;
    } else if (holder && info->pid > 0 && holder->info.pid > 0) {
        if (holder->info.pid != info->pid || strcmp(holder->info.host, info->host) != 0)
            split_claim(a, holder, info, TML_CONFLICT_CLAIMED);
        else if (holder->info.instance != info->instance && live_twin)
            split_claim(a, holder, info, TML_CONFLICT_SECOND_CONNECTION);
        else if (holder->info.instance != info->instance)
            restarted = 1;
    }
    if (reported_as)
        *reported_as = info->rank;
    tml_rank *r = tml__run_rank(&a->run, info);
    if (!r)
        return TML_ENOMEM;
    r->ended = 0;
    r->lost = 0;
    if (restarted) {
        tml__run_restart(&a->run, r);
        tml__run_log(a->run_dir, "aggregator", "rank %d restarted (a new process image, pid %d "
                     "on %s): incarnation %u, its steps kept from step %llu on", (int)r->info.rank,
                     (int)info->pid, info->host, (unsigned)r->incarnation,
                     (unsigned long long)r->step_base);
    }
    if (a->store)
        store_error(a, "write rank", tml__store_put_rank(a->store, info));
    return 0;
}

int tml__agg_steps(tml_agg *a, int32_t rank, const tml_step_record *recs, size_t n)
{
    tml_rank *r = tml__run_find(&a->run, rank);
    if (!r)
        return TML_ESTATE;
    if (a->run.watch)   /* traceml watch: system and process metrics only */
        return 0;
    size_t dropped = 0;
    for (size_t i = 0; i < n;) {
        size_t k = 0;   /* the next run of possible records, from i */
        while (i + k < n && tml__record_possible(&recs[i + k]))
            k++;
        int rc = k ? tml__run_add_steps(r, recs + i, k) : 0;
        if (rc < 0)
            return rc;
        if (k && a->store)
            store_error(a, "queue steps",
                        tml__store_put_steps(a->store, rank, r->incarnation, recs + i, k));
        i += k;
        for (; i < n && !tml__record_possible(&recs[i]); i++)
            dropped++;
    }
    if (dropped)
        tml__run_log(a->run_dir, "aggregator", "rank %d sent %zu step record%s with impossible "
                     "figures (a duration beyond 11 days or negative, a byte count beyond "
                     "1e18); dropped", (int)rank, dropped, dropped == 1 ? "" : "s");
    if (a->store)
        store_error(a, "write steps", tml__store_tick(a->store, tml__mono_ms()));
    return 0;
}

int tml__agg_samples(tml_agg *a, const tml_sample *v, size_t n)
{
    int rc = 0;
    size_t dropped = 0;
    for (size_t i = 0; i < n && rc == 0;) {
        size_t k = 0;   /* the next run of possible samples, from i */
        while (i + k < n && tml__sample_possible(&v[i + k]))
            k++;
        for (size_t j = i; j < i + k && rc == 0; j++)
            rc = tml__series_add(&a->run.samples, &v[j]);
        tml__timeline_add(&a->run.timeline, v + i, k);   /* the report's chart; best-effort */
        if (k && a->store)
            store_error(a, "queue samples", tml__store_put_samples(a->store, v + i, k));
        i += k;
        for (; i < n && !tml__sample_possible(&v[i]); i++)
            dropped++;
    }
    if (dropped)
        tml__run_log(a->run_dir, "aggregator", "dropped %zu resource sample%s with impossible "
                     "values (src/model/sample.c: each metric's range)", dropped,
                     dropped == 1 ? "" : "s");
    if (a->store)
        store_error(a, "write samples", tml__store_tick(a->store, tml__mono_ms()));
    return rc;
}

int tml__agg_stats(tml_agg *a, int32_t rank, const tml_rank_stats *s, int bye)
{
    tml_rank *r = tml__run_find(&a->run, rank);
    if (!r)
        return TML_ESTATE;
    r->stats = *s;
    if (bye)
        r->ended = 1;
    if (a->store) {
        /* steps first, so a reader never sees counters ahead of records */
        if (bye)
            store_error(a, "write steps", tml__store_flush(a->store));
        store_error(a, "write stats", tml__store_put_stats(a->store, rank, s, bye));
    }
    return 0;
}

/* The rank's deep dive, kept for the report (the latest wins), sized to
 * its rows, for at most TML_DD_KEEP_RANKS ranks (model/deepdive.h). Not in
 * telemetry.sqlite: a summary rebuilt from the store has none. */
int tml__agg_deep_dive(tml_agg *a, int32_t rank, const tml_dd_window *d)
{
    tml_rank *r = tml__run_find(&a->run, rank);
    if (!r)
        return TML_ESTATE;
    size_t kept = 0;
    for (size_t i = 0; i < a->run.nranks && !r->deep_dive; i++)
        kept += a->run.ranks[i].deep_dive != NULL;
    if (kept >= TML_DD_KEEP_RANKS) {
        tml__run_log(a->run_dir, "aggregator", "deep dive of rank %d not kept: %d ranks' "
                     "windows are", (int)rank, TML_DD_KEEP_RANKS);
        return TML_EFULL;
    }
    tml_dd_window *c = tml__dd_copy(d);
    if (!c)
        return TML_ENOMEM;
    tml__dd_free(r->deep_dive);
    r->deep_dive = c;
    return 0;
}

void tml__agg_lost(tml_agg *a, int32_t rank)
{
    tml_rank *r = tml__run_find(&a->run, rank);
    if (r && !r->ended)
        r->lost = 1;
}

size_t tml__agg_open_ranks(const tml_agg *a)
{
    size_t n = 0;
    for (size_t i = 0; i < a->run.nranks; i++)
        n += !a->run.ranks[i].ended;
    return n;
}

int tml__agg_tick(tml_agg *a)
{
    if (!a || !a->store)
        return 0;
    int rc = tml__store_tick(a->store, tml__mono_ms());
    store_error(a, "write steps", rc);
    return rc;
}

const tml_run *tml__agg_run(const tml_agg *a)
{
    return &a->run;
}

/* The diagnosis thresholds: the defaults with opts.thresholds applied;
 * TML_EINVAL (the defaults) when they are malformed. */
static int thresholds(const tml_agg *a, tml_thresholds *th)
{
    tml__thresholds_default(th);
    return a->thresholds ? tml__thresholds_parse(th, a->thresholds) : 0;
}

/* The run's end in telemetry.sqlite: the last batch, the run row, how it
 * ended. */
static void store_finish(tml_agg *a, const char *status, int exit_code)
{
    char code[16];
    if (!a->store)
        return;
    store_error(a, "write steps", tml__store_flush(a->store));
    store_error(a, "write run", tml__store_put_run(a->store, &a->run));
    snprintf(code, sizeof(code), "%d", exit_code);
    store_error(a, "write meta", tml__store_put_meta(a->store, "status", status));
    store_error(a, "write meta", tml__store_put_meta(a->store, "exit_code", code));
}

/* The summary files that could not be written, and why. */
typedef struct unsaved {
    const char *name[3];
    char why[3][96];
    size_t n;
} unsaved;

/* Notes one more and rewrites the NOT SAVED line, names with the same
 * reason together: "final_summary.json, final_summary.txt: No space left
 * on device (logs/run/)". */
static void unsaved_add(tml_agg *a, unsaved *u, const char *name, const char *why)
{
    tml_strbuf sb = TML_STRBUF_INIT;
    tml__run_log(a->run_dir, "aggregator", "could not write %s: %s", name, why);
    if (u->n == sizeof(u->name) / sizeof(u->name[0]))
        return;
    u->name[u->n] = name;
    snprintf(u->why[u->n], sizeof(u->why[0]), "%s", why);
    u->n++;
    for (size_t i = 0; i < u->n; i++) {
        size_t j = 0, k = 0;
        while (j < i && strcmp(u->why[j], u->why[i]) != 0)
            j++;
        if (j < i)
            continue;   /* listed with the first of its reason */
        tml__sb_adds(&sb, sb.len ? "; " : "");
        for (j = i; j < u->n; j++)
            if (strcmp(u->why[j], u->why[i]) == 0)
                tml__sb_addf(&sb, "%s%s", k++ ? ", " : "", u->name[j]);
        tml__sb_addf(&sb, ": %s", u->why[i]);
    }
    tml__sb_addf(&sb, " (%s/)", a->run_dir);
    snprintf(a->not_saved, sizeof(a->not_saved), "%s",
             sb.failed || !sb.buf ? "the summary files could not be written" : sb.buf);
    tml__sb_release(&sb);
}

/* One summary file (temp file + rename: a failure leaves what was there). */
static int save(tml_agg *a, unsaved *u, const char *name, const char *data, size_t len)
{
    int rc = tml__write_file_atomic(a->run_dir, name, data ? data : "", len, 0644);
    if (rc < 0)
        unsaved_add(a, u, name, why_failed(rc, errno));
    return rc;
}

/* The page is an extra: failing to write it costs the page only. */
static void save_html(tml_agg *a, unsaved *u, const tml_strbuf *json)
{
    tml_strbuf html = TML_STRBUF_INIT;
    int rc = tml__html_render(json->buf ? json->buf : "{}", json->len, &html);
    if (rc < 0)
        unsaved_add(a, u, "final_summary.html", tml_strerror(rc));
    else
        save(a, u, "final_summary.html", html.buf, html.len);
    tml__sb_release(&html);
}

/* The box again, now with its NOT SAVED line, and without the path of a
 * final_summary.json that is not there. The old box stays if this fails. */
static void rebox(tml_agg *a, tml_report_opts *ro, int json_saved, tml_strbuf *text)
{
    tml_strbuf box = TML_STRBUF_INIT;
    ro->not_saved = a->not_saved;
    if (!json_saved)
        ro->json_path = NULL;
    if (tml__report_build(&a->run, ro, &box, NULL) == 0 && !box.failed) {
        tml__sb_release(text);
        *text = box;
    } else {
        tml__sb_release(&box);
    }
}

/* final_summary.json, .html (when asked), then .txt: the box, written
 * last, says which of the others could not be. TML_EIO when the JSON or
 * the box is not on disk; *text is the box to print either way. */
static int save_summary(tml_agg *a, tml_report_opts *ro, tml_strbuf *text,
                        const tml_strbuf *json)
{
    unsaved u;
    memset(&u, 0, sizeof(u));
    a->not_saved[0] = '\0';
    int rc = save(a, &u, "final_summary.json", json->buf, json->len);
    int json_saved = rc == 0;
    if (a->html_report)
        save_html(a, &u, json);
    if (u.n)
        rebox(a, ro, json_saved, text);
    if (save(a, &u, "final_summary.txt", text->buf, text->len) < 0) {
        rebox(a, ro, json_saved, text);
        rc = TML_EIO;
    }
    return rc;
}

/* The ranks of this host that died of a signal at exit, after their
 * goodbye (their progress pages): the box says so. */
static void note_exit_signals(tml_agg *a, const tml_progress_sum *ps)
{
    char host[64] = "";
    gethostname(host, sizeof(host) - 1);
    for (int i = 0; i < ps->nexits && i < TML_PROGRESS_EXITS; i++)
        for (size_t k = 0; k < a->run.nranks; k++) {
            tml_rank *r = &a->run.ranks[k];
            if (r->ended && r->info.pid == ps->exits[i].pid && strcmp(r->info.host, host) == 0)
                r->exit_signal = ps->exits[i].signal;
        }
}

int tml__agg_finalize(tml_agg *a, const char *status, int exit_code, int width,
                      char **text_out)
{
    tml_strbuf text = TML_STRBUF_INIT, json = TML_STRBUF_INIT;
    char json_path[4096], generated[64];
    tml_thresholds th;
    int rc;

    if (text_out)
        *text_out = NULL;
    if (!status)
        status = "completed";
    a->run.end_unix_ms = tml__unix_ms();
    note_cpu(a);
    tml_progress_sum ps;
    tml__progress_read(a->run_dir, &ps);
    a->run.steps_traced_here = ps.steps;
    note_exit_signals(a, &ps);
    if (a->tune_trial && strcmp(status, "interrupted") == 0)
        snprintf(a->run.stopped_by, sizeof(a->run.stopped_by), "tune");
    store_finish(a, status, exit_code);
    if (thresholds(a, &th) < 0)
        tml__run_log(a->run_dir, "aggregator", "%s is malformed; using the defaults",
                     tml__env_name(TML_ENV_THRESHOLDS));
    snprintf(json_path, sizeof(json_path), "%s/final_summary.json", a->run_dir);
    tml__iso_time(a->run.end_unix_ms, generated, sizeof(generated));

    tml_report_opts ro;
    memset(&ro, 0, sizeof(ro));
    ro.status = status;
    ro.exit_code = exit_code;
    ro.duration_s = tml__agg_elapsed_s(a);
    ro.json_path = json_path;
    ro.width = width;
    ro.th = &th;
    ro.window_steps = a->window_steps;
    ro.generated_at = generated;
    ro.series = 1;             /* the HTML report's charts (docs/summary-json.md) */
    tml_strbuf workload = TML_STRBUF_INIT;
    if (tml__manifest_workload(a->run_dir, &workload) == 0)
        ro.workload_json = workload.buf;
    tml_strbuf context = TML_STRBUF_INIT;
    if (tml__manifest_run_context(a->run_dir, status, &context) == 0)
        ro.run_context_json = context.buf;
    rc = tml__report_build(&a->run, &ro, &text, &json);
    if (rc == 0 && (text.failed || json.failed))
        rc = TML_ENOMEM;
    if (rc < 0) {
        tml__run_log(a->run_dir, "aggregator", "finalize failed: %s", tml_strerror(rc));
        goto out;
    }
    rc = save_summary(a, &ro, &text, &json);
    if (text_out) {
        *text_out = strdup(text.buf ? text.buf : "");
        if (!*text_out)
            rc = TML_ENOMEM;
    }
out:
    tml__sb_release(&text);
    tml__sb_release(&json);
    tml__sb_release(&workload);
    tml__sb_release(&context);
    return rc;
}

int tml__agg_summary_json(tml_agg *a, tml_strbuf *json)
{
    char json_path[4096], generated[64];
    tml_thresholds th;
    tml_report_opts ro;
    int64_t now = tml__unix_ms();

    thresholds(a, &th);
    note_cpu(a);
    snprintf(json_path, sizeof(json_path), "%s/final_summary.json", a->run_dir);
    tml__iso_time(now, generated, sizeof(generated));
    memset(&ro, 0, sizeof(ro));
    ro.status = "running";
    ro.duration_s = tml__agg_elapsed_s(a);
    ro.json_path = json_path;
    ro.th = &th;
    ro.window_steps = a->window_steps;
    ro.generated_at = generated;
    ro.compact_ranks = 1;   /* an answer that fits a frame however many ranks */
    return tml__report_build(&a->run, &ro, NULL, json);
}

double tml__agg_elapsed_s(const tml_agg *a)
{
    double s = tml__mono_s_since(a->run.start_mono_ns);
    return s > 0 ? s : 0;
}

void tml__agg_set_html_report(tml_agg *a, int on)
{
    if (a)
        a->html_report = on != 0;
}

void tml__agg_set_launch(tml_agg *a, tml_launch how)
{
    if (a)
        a->run.launch = how;
}

/* a checked setting string (tml__tune_settings_check) always fits */
_Static_assert(sizeof(((tml_run *)0)->applied) >= TML_TUNE_SETTING, "run.applied too small");

void tml__agg_set_applied(tml_agg *a, const char *settings)
{
    if (a)
        snprintf(a->run.applied, sizeof(a->run.applied), "%s", settings ? settings : "");
}

void tml__agg_set_watch(tml_agg *a, int on)
{
    if (!a)
        return;
    a->run.watch = on != 0;
    if (a->store && on)
        store_error(a, "write meta", tml__store_put_meta(a->store, "profile", "watch"));
}

void tml__agg_set_tune_trial(tml_agg *a, int on)
{
    a->tune_trial = on;
}

void tml__agg_set_partial(tml_agg *a, const char *why)
{
    snprintf(a->run.partial, sizeof(a->run.partial), "%s", why);
    tml__run_log(a->run_dir, "aggregator", "PARTIAL: %s", why);
}

uint64_t tml__agg_steps_seen(const tml_agg *a)
{
    uint64_t n = 0;
    for (size_t i = 0; i < a->run.nranks; i++) {
        const tml_rank *r = &a->run.ranks[i];
        for (size_t j = 0; j < r->nsteps; j++)
            if (r->steps[j].step + 1 > n)
                n = r->steps[j].step + 1;
    }
    return n;
}

const char *tml__agg_not_saved(const tml_agg *a)
{
    return a->not_saved;
}
