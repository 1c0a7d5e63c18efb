/*
 * cmd_compare.c - `traceml compare A.json B.json [--output BASE]
 * [--fail-on-regression]`: reads two run summaries, prints the "TraceML
 * Compare" box and writes BASE.txt (the box) and BASE.json.
 *
 * All judgement lives in src/report/compare.c; this file reads files,
 * says precisely what is wrong with a bad one (one line, exit 2) and
 * turns the verdict into an exit status: 0, or 1 for a REGRESSION under
 * --fail-on-regression so that a CI job can gate on it. A summary TraceML
 * 0.5.0 wrote is mapped onto this TraceML's (report/reload.h) first.
 */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agg/rundir.h"
#include "judge/compare.h"
#include "report/compare.h"
#include "traceml/traceml.h"
#include "base/fs.h"
#include "base/json.h"
#include "base/strbuf.h"

const char tml__usage_compare[] =
    "usage: traceml compare A.json B.json [--output BASE] [--fail-on-regression]\n"
    "                       [--max-step-time-regression-pct P]\n"
    "       traceml compare --baseline A1 A2 ... --candidate B1 B2 ... [options]\n"
    "\n"
    "Compares two run summaries (final_summary.json of two `traceml run`s,\n"
    "or of TraceML 0.5.0; a run folder works too) and prints whether B is an\n"
    "IMPROVEMENT, a REGRESSION, MIXED, EQUIVALENT or INCONCLUSIVE compared\n"
    "with A, with the step time, memory, process and system figures of both.\n"
    "With several runs a side (up to 32; 3 or more interleaved runs each for\n"
    "a CI gate) the run is the unit of the test.\n"
    "\n"
    "  --baseline A1 A2 ...   the runs of side A (every argument up to the next\n"
    "                         option)\n"
    "  --candidate B1 B2 ...  the runs of side B\n"
    "  --output BASE          write BASE.txt (the box) and BASE.json\n"
    "                         [traceml_compare]\n"
    "  --fail-on-regression   exit 1 when the verdict is REGRESSION (a CI gate)\n"
    "  --max-step-time-regression-pct P\n"
    "                         step time moves at P% (0-1000) instead of 3%, and\n"
    "                         the exit status is TraceML 0.5.0's CI gate: 4 when\n"
    "                         B's step time is slower past it, 3 INCONCLUSIVE\n"
    "\n"
    "Step time moves at 3% when the change is significant, peak reserved\n"
    "memory at 10%; sides that ran on differently loaded machines, or with\n"
    "different traceml.yaml guard: declarations, are INCONCLUSIVE\n"
    "(docs/compare.md). Exit status: 0; 1 (REGRESSION with\n"
    "--fail-on-regression); 2 (bad usage or a file that is not a readable\n"
    "TraceML summary); with --max-step-time-regression-pct 3 (INCONCLUSIVE)\n"
    "or 4 (slower past P).\n";

static void copy_str(char *dst, size_t cap, const char *src)
{
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Reads and checks one summary; prints the error and returns 2 on failure. */
static int load(const char *arg, tml_cmp_run *r)
{
    char buf[4096];
    tml_json *doc = NULL;
    char why[256];

    /* A run folder stands for its final_summary.json. */
    const char *path = tml__cli_summary_path(arg, buf, sizeof(buf));
    if (tml__cli_read_json(path, "summary", &doc, NULL, NULL))
        return TML_EXIT_USAGE;
    int rc = tml__cmp_run_load(doc, r, why, sizeof(why));
    tml__json_free(doc);
    if (rc < 0)
        return tml__cli_error("'%s': %s", path, why);
    copy_str(r->path, sizeof(r->path), path);
    if (!r->label[0])
        copy_str(r->label, sizeof(r->label), path);
    return 0;
}

/* Through a temporary file and rename(2), as every output of the CLI: a
 * symlink planted at the path is replaced, never followed (base/fs.h). */
static int write_file(const char *base, const char *ext, const char *data, size_t len)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s%s", base, ext);
    if (tml__write_file(path, data, len, 0666) < 0)
        return tml__cli_error("cannot write '%s': %s", path, strerror(errno));
    return 0;
}

typedef struct compare_opts {
    const char *files[2], *base;
    const char *side[2][TML_CMP_MAX_RUNS];   /* --baseline, --candidate */
    size_t nside[2];
    int nfiles, fail_on_regression, ci_gate;
    double max_regression;     /* --max-step-time-regression-pct / 100; NAN: the default */
} compare_opts;

/* 0, 1 when the usage was printed (exit 0), or the error's status. */
static int parse(int argc, char **argv, compare_opts *o)
{
    const char *v;
    memset(o, 0, sizeof(*o));
    o->base = "traceml_compare";
    o->max_regression = NAN;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (tml__cli_help(a, tml__usage_compare))
            return 1;
        if (tml__cli_opt(argc, argv, &i, "--output", &o->base) ||
            tml__cli_opt(argc, argv, &i, "-o", &o->base))
            continue;
        if (tml__cli_opt(argc, argv, &i, "--fail-on-regression", NULL)) {
            o->fail_on_regression = 1;
            continue;
        }
        if (tml__cli_opt(argc, argv, &i, "--max-step-time-regression-pct", &v)) {
            /* TraceML 0.5.0's CI check: the step-time gate, and the exit
             * status says whether B is slower past it */
            o->max_regression = tml__cli_double("--max-step-time-regression-pct", v, 0,
                                                1000) / 100.0;
            o->ci_gate = 1;
            continue;
        }
        if (strcmp(a, "--baseline") == 0 || strcmp(a, "--candidate") == 0) {
            int s = a[2] == 'c';
            if (o->nside[s])
                return tml__cli_error("%s given twice", a);
            while (i + 1 < argc && !(argv[i + 1][0] == '-' && argv[i + 1][1] != '\0')) {
                if (o->nside[s] == TML_CMP_MAX_RUNS)
                    return tml__cli_error("%s takes at most %d runs", a, TML_CMP_MAX_RUNS);
                o->side[s][o->nside[s]++] = argv[++i];
            }
            if (!o->nside[s])
                return tml__cli_error("%s needs at least one run folder or summary", a);
            continue;
        }
        if (a[0] == '-' && a[1] != '\0')
            return tml__cli_unknown("compare", a);
        if (o->nfiles == 2)
            return tml__cli_error("compare takes two summaries, got a third: '%s'", a);
        o->files[o->nfiles++] = a;
    }
    if (o->nside[0] || o->nside[1]) {
        if (o->nfiles)
            return tml__cli_error("compare takes either A B or --baseline ... --candidate "
                                  "..., not both (got '%s')", o->files[0]);
        if (!o->nside[0] || !o->nside[1])
            return tml__cli_error("compare needs both --baseline and --candidate runs");
    } else if (o->nfiles < 2) {
        return tml__cli_error("compare needs two summaries (usage: traceml compare A.json "
                              "B.json [--output BASE] [--fail-on-regression])");
    } else {
        o->side[0][0] = o->files[0];
        o->side[1][0] = o->files[1];
        o->nside[0] = o->nside[1] = 1;
    }
    if (!*o->base)
        return tml__cli_error("--output needs a non-empty BASE");
    return 0;
}

int tml__cmd_compare(int argc, char **argv)
{
    compare_opts o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : rc;
    const char *base = o.base;
    tml_cmp_run *runs = calloc(o.nside[0] + o.nside[1], sizeof(*runs));
    if (!runs)
        tml__cli_die(1, "out of memory");
    tml_cmp_run *a = runs, *b = runs + o.nside[0];
    for (size_t s = 0; s < 2; s++)
        for (size_t i = 0; i < o.nside[s]; i++)
            if (load(o.side[s][i], (s ? b : a) + i)) {
                free(runs);
                return TML_EXIT_USAGE;
            }
    tml_cmp_gates gates;
    tml__cmp_gates_default(&gates);
    if (!isnan(o.max_regression))
        gates.step_time = o.max_regression;
    tml_cmp_result r;
    tml__cmp_decide_n(a, o.nside[0], b, o.nside[1], &gates, &r);
    tml_cmp_run sa, sb;
    tml__cmp_side(a, o.nside[0], &sa);
    tml__cmp_side(b, o.nside[1], &sb);

    tml_strbuf text = TML_STRBUF_INIT, json = TML_STRBUF_INIT;
    char generated[64];
    tml__iso_time(tml__unix_ms(), generated, sizeof(generated));
    tml__cmp_text(&sa, &sb, &r, &text);
    tml__cmp_json(&sa, &sb, &r, text.buf, generated, &json);
    if (text.failed || json.failed)
        tml__cli_die(1, "out of memory");
    fputs(text.buf, stdout);
    fflush(stdout);
    rc = write_file(base, ".txt", text.buf, text.len);
    if (rc == 0)
        rc = write_file(base, ".json", json.buf, json.len);
    if (rc == 0)
        fprintf(stderr, "traceml: wrote %s.txt and %s.json\n", base, base);
    tml__sb_release(&text);
    tml__sb_release(&json);
    free(runs);
    if (rc)
        return 1;
    /* TraceML 0.5.0's CI gate (--max-step-time-regression-pct): 4 when B's
     * step time is slower past it (a REGRESSION, or MIXED with less
     * memory), 3 when the runs cannot decide (INCONCLUSIVE) */
    if (o.ci_gate) {
        if (r.verdict == TML_CMP_INCONCLUSIVE)
            return 3;
        if (r.verdict == TML_CMP_REGRESSION ||
            (r.verdict == TML_CMP_MIXED && r.time_moved > 0))
            return 4;
        return 0;
    }
    return o.fail_on_regression && r.verdict == TML_CMP_REGRESSION;
}
