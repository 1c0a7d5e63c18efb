/*
 * cmd_inspect.c - `traceml inspect FILE`: what a file of a run holds.
 *
 * TraceML 0.5.0's inspect decoded its binary .msgpack logs. This TraceML
 * keeps a run in a few documented files, so inspect reads those: a run
 * folder (every file below in turn), telemetry.sqlite (read-only: the
 * run row, each rank's steps and span, the rows of every table),
 * final_summary.json (this TraceML's or 0.5.0's: identity, ranks, steps,
 * window, verdict) and manifest.json (this TraceML's or 0.5.0's). It
 * prints a short digest, never the whole content: `sqlite3`, `traceml
 * view` and a JSON viewer show that.
 *
 * A file is recognised by its content, not its name: SQLite's header, a
 * JSON object with a primary_diagnosis (a summary) or a run id and a
 * command (a manifest). Anything else is one error line and exit 2.
 */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/clock.h"
#include "base/json.h"
#include "report/reload.h"
#include "store/store.h"
#include "traceml/traceml.h"

const char tml__usage_inspect[] =
    "usage: traceml inspect FILE\n"
    "\n"
    "Describes a file of a TraceML run: a run folder (logs/<run>/), its\n"
    "telemetry.sqlite, final_summary.json or manifest.json (summaries and\n"
    "manifests of TraceML 0.5.0 too): what it is, its schema version, the\n"
    "run's identity, ranks, steps, time span, and the row counts or the\n"
    "verdict. The file is only read.\n";

__attribute__((format(printf, 2, 3)))
static void field(const char *name, const char *fmt, ...)
{
    va_list ap;
    printf("  %-11s", name);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

static void iso(int64_t unix_ms, char *out, size_t cap)
{
    if (unix_ms > 0)
        tml__iso_time(unix_ms, out, cap);
    else
        snprintf(out, cap, "n/a");
}

static void time_span(int64_t start, int64_t end)
{
    char a[64], b[64];
    iso(start, a, sizeof(a));
    iso(end, b, sizeof(b));
    if (start > 0 && end >= start)
        field("time", "%s .. %s (%.1f s)", a, b, (double)(end - start) / 1000.0);
    else
        field("time", "%s .. %s", a, b);
}

/* ---- telemetry.sqlite ------------------------------------------------ */

static void rank_line(const tml_store_rank_digest *r)
{
    char span[48] = "", steps[96] = "no steps";
    if (r->steps && r->first_step >= 0)
        snprintf(steps, sizeof(steps), "%llu step%s (%lld-%lld)", (unsigned long long)r->steps,
                 r->steps == 1 ? "" : "s", (long long)r->first_step, (long long)r->last_step);
    if (r->steps && r->incarnations > 1)   /* the process restarted: step ids per process */
        snprintf(steps + strlen(steps), sizeof(steps) - strlen(steps), " in %u incarnations",
                 (unsigned)r->incarnations);
    if (!isnan(r->span_s))
        snprintf(span, sizeof(span), " over %.1f s", r->span_s);
    printf("    R%d/N%d  local %d  pid %d  host %s  %s%s%s%s\n", (int)r->rank, (int)r->node,
           (int)r->local_rank, (int)r->pid, r->host[0] ? r->host : "?", steps, span,
           r->records_dropped + r->events_dropped ? "  dropped" : "",
           r->ended ? "  said goodbye" : "  no goodbye");
}

static int inspect_sqlite(const char *path)
{
    tml_store_digest d;
    char why[256];
    int rc = tml__store_digest(path, &d, why, sizeof(why));
    if (rc < 0) {
        tml__store_digest_release(&d);
        return tml__cli_error("'%s': %s", path, rc == TML_ENOMEM ? "out of memory" : why);
    }
    printf("%s: TraceML telemetry (SQLite), schema %lld, written by traceml %s\n", path,
           (long long)d.schema_version, d.traceml_version[0] ? d.traceml_version : "?");
    field("run", "%s (id %s)%s", d.run_name, d.run_id[0] ? d.run_id : "n/a",
          strcmp(d.profile, "watch") == 0 ? ", a watch run" : "");
    field("status", "%s, exit code %s", d.status[0] ? d.status : "not recorded (running, or "
          "the aggregator was stopped)", d.exit_code[0] ? d.exit_code : "n/a");
    time_span(d.start_unix_ms, d.end_unix_ms);
    if (d.world_size > 0)
        field("ranks", "%zu reported of world size %lld, %lld node%s expected", d.nranks,
              (long long)d.world_size, (long long)d.nnodes, d.nnodes == 1 ? "" : "s");
    else    /* 0: as many as reported */
        field("ranks", "%zu reported", d.nranks);
    for (size_t i = 0; i < d.nranks && i < 64; i++)
        rank_line(&d.ranks[i]);
    if (d.nranks > 64)
        printf("    ... %zu more\n", d.nranks - 64);
    char a[64], b[64];
    iso(d.samples_first_ms, a, sizeof(a));
    iso(d.samples_last_ms, b, sizeof(b));
    field("rows", "run %llu · meta %llu · ranks %llu · steps %llu · samples %llu",
          (unsigned long long)d.rows_run, (unsigned long long)d.rows_meta,
          (unsigned long long)d.rows_ranks, (unsigned long long)d.rows_steps,
          (unsigned long long)d.rows_samples);
    if (d.rows_samples)
        field("samples", "%llu metrics, %s .. %s", (unsigned long long)d.sample_metrics, a, b);
    tml__store_digest_release(&d);
    return 0;
}

/* ---- final_summary.json ---------------------------------------------- */

static void steps_field(const tml_report_model *m, int v05)
{
    const tml_window *w = &m->win;
    char warm[48], range[64] = "";
    if (m->watch) {
        field("steps", "none traced (a watch run)");
        return;
    }
    if (v05)
        snprintf(warm, sizeof(warm), "warm-up not excluded");
    else
        snprintf(warm, sizeof(warm), "%zu warm-up left out", w->warmup_steps);
    if (w->window_steps)
        snprintf(range, sizeof(range), ", steps %llu-%llu", (unsigned long long)w->first_step,
                 (unsigned long long)w->last_step);
    field("steps", "%zu common, %zu in the window (%s), %s clock%s", w->common_steps,
          w->window_steps, warm, w->clock == TML_CLOCK_GPU ? "GPU" : "CPU", range);
}

static int inspect_summary(const char *path, const tml_json *doc)
{
    tml_report_loaded *l;
    char why[256];
    int rc = tml__report_load(doc, NULL, 0, &l, why, sizeof(why));
    if (rc < 0)
        return tml__cli_error("'%s': %s", path, rc == TML_ENOMEM ? "out of memory" : why);
    const tml_report_model *m = &l->m;
    int v05 = l->kind == TML_SUMMARY_V05;
    printf("%s: %s run summary, schema %s\n", path, v05 ? "TraceML 0.5.0" : "TraceML",
           l->schema);
    field("run", "%s (id %s)%s", l->run.name[0] ? l->run.name : "(unnamed)",
          l->run.id[0] ? l->run.id : "n/a", m->watch ? ", a watch run" : "");
    if (m->exit_code >= 0)
        field("status", "%s, exit code %d", m->status, m->exit_code);
    else
        field("status", "%s, exit code not recorded", m->status);
    field("generated", "%s", m->generated_at[0] ? m->generated_at : "n/a");
    if (isnan(m->duration_s))
        field("duration", "n/a");
    else
        field("duration", "%.1f s", m->duration_s);
    field("ranks", "%d/%d reported · %d/%d node%s · %d GPU%s observed", (int)m->ranks_reported,
          (int)m->world_size, (int)m->nodes_reported, (int)m->nodes_expected,
          m->nodes_expected == 1 ? "" : "s", (int)m->gpus_observed,
          m->gpus_observed == 1 ? "" : "s");
    steps_field(m, v05);
    field("verdict", "%s (%s): %s", m->verdict.label, tml__severity_name(m->verdict.severity),
          m->verdict.why);
    field("sections", "step memory %s · system %s · process %s", m->mem.label, m->sys.label,
          m->proc.label);
    if (l->run.partial[0])
        field("partial", "%s", l->run.partial);
    if (v05)
        field("lacks", "warm-up exclusion, Untraced time, communication, step-to-step noise, "
              "per-step RSS, TraceML's overhead, the exit code");
    tml__report_loaded_free(l);
    return 0;
}

/* ---- manifest.json --------------------------------------------------- */

static const char *str_at(const tml_json *doc, const char *path)
{
    return tml__json_str(tml__json_path(doc, path));
}

static void list_field(const char *name, const tml_json *v)
{
    char l[1024] = "";
    size_t n = 0;
    for (size_t i = 0; v && i < v->n && n + 8 < sizeof(l); i++) {
        const char *s = v->type == TML_JSON_ARRAY ? tml__json_str(&v->items[i])
                        : v->type == TML_JSON_OBJECT ? v->keys[i] : NULL;
        int w = snprintf(l + n, sizeof(l) - n, "%s%s", n ? " " : "", s ? s : "?");
        if (w > 0)
            n += (size_t)w < sizeof(l) - n ? (size_t)w : sizeof(l) - n - 1;
    }
    field(name, "%s", n ? l : "n/a");
}

static int64_t ms_at(const tml_json *doc, const char *key)
{
    double v = tml__rl_num(doc, key, 1, 4e15);
    return isnan(v) ? 0 : (int64_t)v;
}

static int inspect_manifest(const char *path, const tml_json *doc)
{
    /* ours has 0.5.0's session_id too, beside its run_id */
    int v05 = tml__json_get(doc, "session_id") && !tml__json_get(doc, "run_id");
    const char *sv = NULL;
    char svb[24];
    double svn = tml__rl_num(doc, "schema_version", 0, 1e6);
    if (!isnan(svn))
        snprintf(svb, sizeof(svb), "%g", svn);
    sv = isnan(svn) ? "?" : svb;
    printf("%s: %s run manifest, schema %s\n", path, v05 ? "TraceML 0.5.0" : "TraceML", sv);
    const char *name = v05 ? str_at(doc, "run.run_name") : str_at(doc, "run_name");
    const char *id = v05 ? str_at(doc, "session_id") : str_at(doc, "run_id");
    const char *profile = v05 ? str_at(doc, "launch.profile") : str_at(doc, "profile");
    field("run", "%s (id %s), profile %s", name ? name : "?", id ? id : "n/a",
          profile ? profile : "run");
    double code = tml__rl_num(doc, "exit_code", -1e6, 1e6);
    const char *status = str_at(doc, "status");
    if (isnan(code))
        field("status", "%s, exit code n/a", status ? status : "?");
    else
        field("status", "%s, exit code %.0f", status ? status : "?", code);
    if (v05) {
        const char *a = str_at(doc, "lifecycle.training_started_at");
        const char *b = str_at(doc, "lifecycle.training_ended_at");
        field("time", "%s .. %s", a ? a : "n/a", b ? b : "n/a");
        field("host", "%s", str_at(doc, "host.hostname") ? str_at(doc, "host.hostname") : "?");
        field("script", "%s", str_at(doc, "launch.script_path") ? str_at(doc, "launch.script_path")
                                                               : "?");
    } else {
        time_span(ms_at(doc, "start_unix_ms"), ms_at(doc, "end_unix_ms"));
        field("host", "%s", str_at(doc, "host") ? str_at(doc, "host") : "?");
        field("ranks", "world size %.0f, %.0f node(s)",
              tml__rl_num(doc, "world_size", 0, TML_MAX_WORLD_SIZE),
              tml__rl_num(doc, "nnodes", 0, TML_MAX_WORLD_SIZE));
        list_field("command", tml__json_get(doc, "command"));
    }
    list_field("artifacts", tml__json_get(doc, "artifacts"));
    return 0;
}

/* ---- dispatch -------------------------------------------------------- */

static int inspect_json(const char *path)
{
    tml_json *doc;
    if (tml__cli_read_json(path, "file", &doc, NULL, NULL))
        return TML_EXIT_USAGE;
    int rc;
    if (doc->type == TML_JSON_OBJECT && tml__json_get(doc, "primary_diagnosis"))
        rc = inspect_summary(path, doc);
    else if (doc->type == TML_JSON_OBJECT && (tml__json_get(doc, "run_id") ||
                                               tml__json_get(doc, "session_id")))
        rc = inspect_manifest(path, doc);
    else
        rc = tml__cli_error("'%s' is JSON but no TraceML file (expected final_summary.json "
                            "or manifest.json)", path);
    tml__json_free(doc);
    return rc;
}

/* TraceML 0.5.0's binary log, by its content: records, each a 4-byte
 * big-endian length and that many bytes of one MessagePack map or array,
 * one after the other to the end of the file. buf holds the file's first
 * n bytes (all of it when n == size); a walk that leaves what was read
 * stops there. A name ending in .msgpack proves nothing. */
static int is_v05_log(const unsigned char *buf, size_t n, uint64_t size)
{
    uint64_t off = 0;
    size_t records = 0;
    while (off + 4 <= n) {
        uint64_t len = (uint64_t)buf[off] << 24 | (uint64_t)buf[off + 1] << 16 |
                       (uint64_t)buf[off + 2] << 8 | buf[off + 3];
        if (len == 0 || off + 4 + len > size)
            return 0;
        unsigned char t = off + 4 < n ? buf[off + 4] : 0x80;   /* not read: past n */
        if (!((t >= 0x80 && t <= 0x9f) || (t >= 0xdc && t <= 0xdf)))
            return 0;   /* fixmap, fixarray, array16/32, map16/32 */
        off += 4 + len;
        records++;
    }
    /* to the end of the file, or past what was read of a larger one */
    return records > 0 && (off == size || (n < size && off + 4 > n));
}

static int inspect_file(const char *path)
{
    unsigned char *head = malloc(1u << 20);   /* enough records to tell a 0.5.0 log */
    FILE *f = head ? fopen(path, "rb") : NULL;
    if (!f) {
        int e = head ? errno : ENOMEM;
        free(head);
        return tml__cli_error("cannot read '%s': %s", path, strerror(e));
    }
    size_t n = fread(head, 1, 1u << 20, f);
    struct stat st;
    uint64_t size = fstat(fileno(f), &st) == 0 ? (uint64_t)st.st_size : n;
    fclose(f);
    int v05 = is_v05_log(head, n, size);
    int sqlite = n >= 16 && memcmp(head, "SQLite format 3", 16) == 0;
    size_t k = 0;
    while (k < n && (head[k] == ' ' || head[k] == '\n' || head[k] == '\t' || head[k] == '\r'))
        k++;
    int json = k < n && (head[k] == '{' || head[k] == '[');
    free(head);
    if (sqlite)
        return inspect_sqlite(path);
    if (v05)
        return tml__cli_error("'%s' is a TraceML 0.5.0 binary log; this TraceML keeps a run "
                              "in telemetry.sqlite and final_summary.json (traceml inspect "
                              "logs/<run>)", path);
    if (json)
        return inspect_json(path);
    if (n == 0)
        return tml__cli_error("'%s' is empty, not a TraceML file", path);
    return tml__cli_error("'%s' is not a TraceML file (expected a run folder, telemetry.sqlite, "
                          "final_summary.json or manifest.json)", path);
}

/* A run folder: its manifest, summary and telemetry, in that order. */
static int inspect_dir(const char *path)
{
    static const char *const files[] = { "manifest.json", "final_summary.json",
                                         "telemetry.sqlite" };
    int found = 0, rc = 0;
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char p[4200];
        struct stat st;
        snprintf(p, sizeof(p), "%s%s%s", path, path[strlen(path) - 1] == '/' ? "" : "/",
                 files[i]);
        if (stat(p, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (found++)
            putchar('\n');
        rc |= inspect_file(p);
    }
    if (!found)
        return tml__cli_error("'%s' is a folder without manifest.json, final_summary.json or "
                              "telemetry.sqlite: not a TraceML run folder", path);
    return rc ? TML_EXIT_USAGE : 0;
}

int tml__cmd_inspect(int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (tml__cli_help(a, tml__usage_inspect))
            return 0;
        if (tml__cli_operand("inspect", "FILE", a, &path))
            return TML_EXIT_USAGE;
    }
    if (!path)
        return tml__cli_error("inspect needs a FILE (usage: traceml inspect FILE)");
    struct stat st;
    if (stat(path, &st) != 0)
        return tml__cli_error("cannot read '%s': %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return inspect_dir(path);
    if (!S_ISREG(st.st_mode))
        return tml__cli_error("'%s' is not a regular file or folder", path);
    return inspect_file(path);
}
