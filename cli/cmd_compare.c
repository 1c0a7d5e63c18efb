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
#include "report/compare.h"
#include "traceml/traceml.h"
#include "base/json.h"
#include "base/strbuf.h"

const char tml__usage_compare[] =
    "usage: traceml compare A.json B.json [--output BASE] [--fail-on-regression]\n"
    "                       [--max-step-time-regression-pct P]\n"
    "\n"
    "Compares two run summaries (final_summary.json of two `traceml run`s,\n"
    "or of TraceML 0.5.0; a run folder works too) and prints whether B is an\n"
    "IMPROVEMENT, a REGRESSION, MIXED, EQUIVALENT or INCONCLUSIVE compared\n"
    "with A, with the step time, memory, process and system figures of both.\n"
    "\n"
    "  --output BASE          write BASE.txt (the box) and BASE.json\n"
    "                         [traceml_compare]\n"
    "  --fail-on-regression   exit 1 when the verdict is REGRESSION (a CI gate)\n"
    "  --max-step-time-regression-pct P\n"
    "                         step time moves at P% (0-1000) instead of 3%, and\n"
    "                         the exit status is the CI gate: 1 when B's step\n"
    "                         time is slower past it (TraceML 0.5.0's check)\n"
    "\n"
    "Step time moves at 3%, peak reserved memory at 10%; a change smaller\n"
    "than the runs' own step-to-step noise is EQUIVALENT (docs/compare.md).\n"
    "Exit status: 0, 1 (REGRESSION with --fail-on-regression), 2 (bad usage or\n"
    "a file that is not a readable TraceML summary).\n";

static void copy_str(char *dst, size_t cap, const char *src)
{
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Reads and checks one summary; prints the error and returns 2 on failure. */
static int load(const char *arg, tml_cmp_run *r)
{
    char path[4096];
    tml_json *doc = NULL;
    char why[256];

    /* A run folder stands for its final_summary.json. */
    size_t al = strlen(arg);
    copy_str(path, sizeof(path), arg);
    if (al > 0 && al < sizeof(path) - 32) {
        char probe[4096];
        snprintf(probe, sizeof(probe), "%s%sfinal_summary.json", arg,
                 arg[al - 1] == '/' ? "" : "/");
        FILE *f = fopen(probe, "r");
        if (f) {
            fclose(f);
            copy_str(path, sizeof(path), probe);
        }
    }
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

static int write_file(const char *base, const char *ext, const char *data, size_t len)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s%s", base, ext);
    FILE *f = fopen(path, "w");
    if (!f)
        return tml__cli_error("cannot write '%s': %s", path, strerror(errno));
    size_t w = fwrite(data, 1, len, f);
    int bad = w != len;
    if (fclose(f) != 0)
        bad = 1;
    if (bad)
        return tml__cli_error("cannot write '%s': %s", path, strerror(errno));
    return 0;
}

typedef struct compare_opts {
    const char *files[2], *base;
    int nfiles, fail_on_regression;
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
            o->fail_on_regression = 1;
            continue;
        }
        if (a[0] == '-' && a[1] != '\0')
            return tml__cli_unknown("compare", a);
        if (o->nfiles == 2)
            return tml__cli_error("compare takes two summaries, got a third: '%s'", a);
        o->files[o->nfiles++] = a;
    }
    if (o->nfiles < 2)
        return tml__cli_error("compare needs two summaries (usage: traceml compare A.json "
                              "B.json [--output BASE] [--fail-on-regression])");
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
    tml_cmp_run a, b;
    if (load(o.files[0], &a) || load(o.files[1], &b))
        return TML_EXIT_USAGE;
    tml_cmp_gates gates;
    tml__cmp_gates_default(&gates);
    if (!isnan(o.max_regression))
        gates.step_time = o.max_regression;
    tml_cmp_result r;
    tml__cmp_decide(&a, &b, &gates, &r);

    tml_strbuf text = TML_STRBUF_INIT, json = TML_STRBUF_INIT;
    char generated[64];
    tml__iso_time(tml__unix_ms(), generated, sizeof(generated));
    tml__cmp_text(&a, &b, &r, &text);
    tml__cmp_json(&a, &b, &r, text.buf, generated, &json);
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
    if (rc)
        return 1;
    /* the gate: B slower past it (REGRESSION, or MIXED with less memory
     * under --max-step-time-regression-pct, whose check is step time) */
    if (!o.fail_on_regression)
        return 0;
    if (r.verdict == TML_CMP_REGRESSION)
        return 1;
    return !isnan(o.max_regression) && r.verdict == TML_CMP_MIXED && r.time_moved > 0;
}
