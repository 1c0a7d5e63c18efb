/*
 * cmd_export.c - `traceml export --chrome-trace RUN [-o OUT]`: a run's
 * step records (telemetry.sqlite) as a Chrome / Perfetto trace.
 *
 * It reads the run folder's database, not the summary: the trace shows
 * every step of every rank, which the summary deliberately does not keep.
 * The layout of the trace is in src/report/chrome_trace.c.
 */
#include "cli.h"
#include "base/fs.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "model/run.h"
#include "report/chrome_trace.h"
#include "store/store.h"
#include "traceml/traceml.h"
#include "base/strbuf.h"

const char tml__usage_export[] =
    "usage: traceml export --chrome-trace RUN [-o OUT] [--steps A:B] [--ranks LIST]\n"
    "\n"
    "Writes every rank's steps and phases from RUN (a run folder such as\n"
    "logs/<run>, or its telemetry.sqlite) as a Chrome / Perfetto trace: one\n"
    "track per rank, each step a slice with its phases inside, the input wait\n"
    "before the bracket. Open it in https://ui.perfetto.dev or chrome://tracing.\n"
    "The database is read step by step and the trace written as it goes, so a\n"
    "run of any length takes the same memory.\n"
    "\n"
    "  --chrome-trace   the format (the only one today)\n"
    "  -o, --output OUT where to write [RUN/chrome_trace.json]\n"
    "  --steps A:B      only steps A to B-1 (either may be left out: 1000:,\n"
    "                   :500); times stay those of the whole run's trace\n"
    "  --ranks LIST     only these ranks: 0,3,8-15\n";

/* What --steps and --ranks leave in. */
#define MAX_RANGES 64
typedef struct filter {
    uint64_t step_lo, step_hi;                  /* [lo, hi) */
    size_t nranges;                             /* 0: every rank */
    long lo[MAX_RANGES], hi[MAX_RANGES];        /* rank ranges, inclusive */
} filter;

static int parse_steps(const char *v, filter *f)
{
    const char *colon = strchr(v, ':');
    char a[32] = "", b[32] = "";
    if (!colon || (size_t)(colon - v) >= sizeof(a) || strlen(colon + 1) >= sizeof(b))
        return tml__cli_error("--steps '%s': want A:B, steps A to B-1 (either may be left "
                              "out: 1000:, :500)", v);
    memcpy(a, v, (size_t)(colon - v));
    memcpy(b, colon + 1, strlen(colon + 1) + 1);
    f->step_lo = *a ? (uint64_t)tml__cli_long("--steps", a, 0, LONG_MAX) : 0;
    f->step_hi = *b ? (uint64_t)tml__cli_long("--steps", b, 0, LONG_MAX) : UINT64_MAX;
    if (f->step_lo >= f->step_hi)
        return tml__cli_error("--steps '%s': no step is at least A and below B", v);
    return 0;
}

static int parse_ranks(const char *v, filter *f)
{
    char item[64];
    for (const char *p = v; *p;) {
        size_t n = strcspn(p, ",");
        if (n == 0 || n >= sizeof(item) || f->nranges == MAX_RANGES)
            return tml__cli_error("--ranks '%s': want ranks and ranges such as 0,3,8-15 "
                                  "(%d at most)", v, MAX_RANGES);
        memcpy(item, p, n);
        item[n] = '\0';
        char *dash = strchr(item, '-');
        if (dash)
            *dash = '\0';
        long lo = tml__cli_long("--ranks", item, 0, INT32_MAX);
        long hi = dash ? tml__cli_long("--ranks", dash + 1, lo, INT32_MAX) : lo;
        f->lo[f->nranges] = lo;
        f->hi[f->nranges++] = hi;
        p += n + (p[n] == ',');
    }
    return f->nranges ? 0 : tml__cli_error("--ranks needs a rank (0,3,8-15)");
}

static int rank_wanted(const filter *f, int32_t rank)
{
    for (size_t i = 0; i < f->nranges; i++)
        if (rank >= f->lo[i] && rank <= f->hi[i])
            return 1;
    return f->nranges == 0;
}

/* The walk over telemetry.sqlite's steps, numbered as the run numbers
 * them (a restarted rank's steps on after its earlier process's). */
typedef struct walk {
    const filter *f;
    const tml_store_digest *d;
    int32_t rank;                   /* the rank being read; -1 before the first */
    uint32_t incarnation;
    uint64_t base, next;
    int64_t t0;                     /* pass 1: folded; pass 2: time 0 */
    int writing, track, comm_track;
    int write_errno;                /* the output could not be written: why */
    tml_strbuf out, args;
    tml_file_out file;
    size_t steps, slices, ranks;
} walk;

static int32_t node_of(const tml_store_digest *d, int32_t rank)
{
    for (size_t i = 0; i < d->nranks; i++)
        if (d->ranks[i].rank == rank)
            return d->ranks[i].node < 0 ? 0 : d->ranks[i].node;
    return 0;
}

/* What the buffer holds, into the file. */
static int flush(walk *w)
{
    if (tml__file_write(&w->file, w->out.buf, w->out.len) < 0) {
        w->write_errno = errno;
        return TML_EIO;
    }
    tml__sb_reset(&w->out);
    return 0;
}

static int on_step(void *ctx, int32_t rank, uint32_t inc, const tml_step_record *rec)
{
    walk *w = ctx;
    if (rank != w->rank) {
        w->rank = rank;
        w->incarnation = 0;
        w->base = w->next = 0;
        w->track = w->comm_track = 0;
    }
    for (; w->incarnation < inc; w->incarnation++)
        w->base = w->next;          /* tml__run_restart */
    tml_step_record r = *rec;
    r.step = tml__run_step_id(r.step, w->base, &w->next);
    if (!w->writing) {
        w->t0 = tml__chrome_trace_t0(w->t0, &r);
        return 0;
    }
    if (!rank_wanted(w->f, rank) || r.step < w->f->step_lo || r.step >= w->f->step_hi)
        return 0;
    int32_t node = node_of(w->d, rank);
    if (!w->track) {
        tml__chrome_trace_track(&w->out, rank, node, 0);
        w->track = 1;
        w->ranks++;
    }
    if (!w->comm_track && tml__chrome_trace_has_comm(&r)) {
        tml__chrome_trace_track(&w->out, rank, node, 1);
        w->comm_track = 1;
    }
    w->slices += tml__chrome_trace_step(&w->out, &w->args, &r, rank, w->t0);
    w->steps++;
    if (w->out.failed)
        return TML_ENOMEM;
    if (w->out.len < (1u << 20))
        return 0;
    return flush(w);
}

/* Both passes over the steps: time 0, then the trace into w->file. */
static int write_trace(tml_store *store, walk *w, const char *name, const char *id)
{
    w->rank = -1;
    w->t0 = INT64_MAX;
    int rc = tml__store_each_step(store, on_step, w);
    if (rc < 0)
        return rc;
    if (w->t0 == INT64_MAX)
        w->t0 = 0;
    w->writing = 1;
    w->rank = -1;
    tml__chrome_trace_begin(&w->out, name, id);
    rc = tml__store_each_step(store, on_step, w);
    if (rc < 0)
        return rc;
    tml__chrome_trace_end(&w->out);
    if (w->out.failed)
        return TML_ENOMEM;
    rc = flush(w);
    if (rc == 0 && tml__file_commit(&w->file) < 0) {
        w->write_errno = errno;
        rc = TML_EIO;
    }
    return rc;
}

/* RUN (a run folder, or its telemetry.sqlite) to the database's path and
 * the default output's (chrome_trace.json beside the database). 0, or
 * TML_EXIT_USAGE after the error line. */
static int locate(const char *run_arg, char *db, size_t dbcap, char *out, size_t outcap)
{
    char dir[4096];
    struct stat st;
    if (stat(run_arg, &st) < 0)
        return tml__cli_error("cannot read '%s': %s", run_arg, strerror(errno));
    size_t al = strnlen(run_arg, sizeof(dir) - 1);
    memcpy(dir, run_arg, al);
    dir[al] = '\0';
    if (S_ISDIR(st.st_mode)) {
        while (al > 1 && dir[al - 1] == '/')
            dir[--al] = '\0';
        snprintf(db, dbcap, "%s/telemetry.sqlite", dir);
    } else {
        snprintf(db, dbcap, "%s", dir);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
        else
            snprintf(dir, sizeof(dir), ".");
    }
    if (stat(db, &st) < 0)
        return tml__cli_error("'%s' has no telemetry.sqlite (is it a TraceML run folder?)",
                              run_arg);
    snprintf(out, outcap, "%s/chrome_trace.json", dir);
    return 0;
}

int tml__cmd_export(int argc, char **argv)
{
    const char *run_arg = NULL, *out_path = NULL, *v;
    int chrome = 0;
    filter f = {0, UINT64_MAX, 0, {0}, {0}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (tml__cli_help(a, tml__usage_export))
            return 0;
        if (tml__cli_opt(argc, argv, &i, "--chrome-trace", NULL)) {
            chrome = 1;
            continue;
        }
        if (tml__cli_opt(argc, argv, &i, "-o", &out_path) ||
            tml__cli_opt(argc, argv, &i, "--output", &out_path))
            continue;
        if (tml__cli_opt(argc, argv, &i, "--steps", &v)) {
            if (parse_steps(v, &f))
                return TML_EXIT_USAGE;
            continue;
        }
        if (tml__cli_opt(argc, argv, &i, "--ranks", &v)) {
            if (parse_ranks(v, &f))
                return TML_EXIT_USAGE;
            continue;
        }
        if (tml__cli_operand("export", "RUN", a, &run_arg))
            return TML_EXIT_USAGE;
    }
    if (!chrome)
        return tml__cli_error("export needs a format: --chrome-trace "
                              "(usage: traceml export --chrome-trace RUN [-o OUT])");
    if (!run_arg)
        return tml__cli_error("export needs a RUN folder (usage: traceml export "
                              "--chrome-trace RUN [-o OUT])");

    char db[4200], def_out[4200];
    if (locate(run_arg, db, sizeof(db), def_out, sizeof(def_out)))
        return TML_EXIT_USAGE;
    if (!out_path)
        out_path = def_out;

    tml_store_digest d;
    char why[256] = "";
    int rc = tml__store_digest(db, &d, why, sizeof(why));
    tml_store *store = NULL;
    if (rc == 0)
        rc = tml__store_open(db, 0, &store);
    if (rc < 0) {
        tml__store_digest_release(&d);
        return tml__cli_error("'%s' is not a readable TraceML database: %s", db,
                              *why ? why : tml_strerror(rc));
    }
    walk w;
    memset(&w, 0, sizeof(w));
    w.f = &f;
    w.d = &d;
    w.out = (tml_strbuf)TML_STRBUF_INIT;
    w.args = (tml_strbuf)TML_STRBUF_INIT;
    if (tml__file_begin(&w.file, out_path, 0666) < 0) {
        int saved = errno;
        tml__store_close(store);
        tml__store_digest_release(&d);
        return tml__cli_error("cannot write '%s': %s", out_path, strerror(saved));
    }
    rc = write_trace(store, &w, d.run_name, d.run_id);
    if (rc < 0)
        tml__file_abort(&w.file);
    tml__store_close(store);
    tml__store_digest_release(&d);
    tml__sb_release(&w.out);
    tml__sb_release(&w.args);
    if (rc == TML_ENOMEM)
        tml__cli_die(1, "out of memory");
    if (rc < 0 && w.write_errno)
        return tml__cli_error("cannot write '%s': %s", out_path, strerror(w.write_errno));
    if (rc < 0)
        return tml__cli_error("'%s' is not a readable TraceML database: %s", db,
                              tml_strerror(rc));
    fprintf(stderr, "traceml: wrote %s (%zu rank%s, %zu steps, %zu slices)\n", out_path,
            w.ranks, w.ranks == 1 ? "" : "s", w.steps, w.slices);
    return 0;
}
