/*
 * cmd_compare.c - `traceml compare A.json B.json [--output BASE]
 * [--fail-on-regression]`: reads two run summaries, prints the "TraceML
 * Compare" box and writes BASE.txt (the box) and BASE.json.
 *
 * All judgement lives in src/report/compare.c; this file reads files,
 * says precisely what is wrong with a bad one (one line, exit 2) and
 * turns the verdict into an exit status: 0, or 1 for a REGRESSION under
 * --fail-on-regression so that a CI job can gate on it.
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agg/rundir.h"
#include "report/compare.h"
#include "traceml/traceml.h"
#include "base/json.h"
#include "base/strbuf.h"

#define COMPARE_MAX_BYTES (256u << 20)

const char tml__usage_compare[] =
    "usage: traceml compare A.json B.json [--output BASE] [--fail-on-regression]\n"
    "\n"
    "Compares two run summaries (final_summary.json of two `traceml run`s;\n"
    "a run folder works too) and prints whether B is an IMPROVEMENT, a\n"
    "REGRESSION, MIXED, EQUIVALENT or INCONCLUSIVE compared with A, with the\n"
    "step time, memory, process and system figures of both.\n"
    "\n"
    "  --output BASE          write BASE.txt (the box) and BASE.json\n"
    "                         [traceml_compare]\n"
    "  --fail-on-regression   exit 1 when the verdict is REGRESSION (a CI gate)\n"
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
    char *buf = NULL;
    size_t len;
    tml_json *doc = NULL;
    tml_json_error err = {0, NULL};
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
    if (tml__read_file(path, COMPARE_MAX_BYTES, &buf, &len) < 0)
        return tml__cli_error("cannot read '%s': %s", path, strerror(errno));
    int rc = tml__json_parse(buf, len, &doc, &err);
    free(buf);
    if (rc == TML_ENOMEM)
        return tml__cli_error("'%s': out of memory", path);
    if (rc < 0) {
        if (len == 0)
            return tml__cli_error("'%s' is empty, not a TraceML summary", path);
        if (err.offset >= len && err.msg && strcmp(err.msg, "unexpected end of input") == 0)
            return tml__cli_error("'%s' is truncated (the JSON ends early at byte %zu)", path,
                                  len);
        return tml__cli_error("'%s' is not valid JSON: %s at byte %zu", path,
                              err.msg ? err.msg : "invalid", err.offset);
    }
    rc = tml__cmp_run_from_json(doc, r, why, sizeof(why));
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

int tml__cmd_compare(int argc, char **argv)
{
    const char *files[2] = {NULL, NULL}, *base = "traceml_compare";
    int nfiles = 0, fail_on_regression = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(tml__usage_compare, stdout);
            return 0;
        }
        if (tml__cli_opt(argc, argv, &i, "--output", &base) ||
            tml__cli_opt(argc, argv, &i, "-o", &base))
            continue;
        if (tml__cli_opt(argc, argv, &i, "--fail-on-regression", NULL)) {
            fail_on_regression = 1;
            continue;
        }
        if (a[0] == '-' && a[1] != '\0')
            return tml__cli_error("unknown option '%s' for 'traceml compare' "
                                  "(see 'traceml help compare')", a);
        if (nfiles == 2)
            return tml__cli_error("compare takes two summaries, got a third: '%s'", a);
        files[nfiles++] = a;
    }
    if (nfiles < 2)
        return tml__cli_error("compare needs two summaries (usage: traceml compare A.json "
                              "B.json [--output BASE] [--fail-on-regression])");
    if (!*base)
        return tml__cli_error("--output needs a non-empty BASE");

    tml_cmp_run a, b;
    if (load(files[0], &a) || load(files[1], &b))
        return TML_EXIT_USAGE;
    tml_cmp_result r;
    tml__cmp_decide(&a, &b, NULL, &r);

    tml_strbuf text = TML_STRBUF_INIT, json = TML_STRBUF_INIT;
    char generated[64];
    tml__iso_time(tml__unix_ms(), generated, sizeof(generated));
    tml__cmp_text(&a, &b, &r, &text);
    tml__cmp_json(&a, &b, &r, text.buf, generated, &json);
    if (text.failed || json.failed)
        tml__cli_die(1, "out of memory");
    fputs(text.buf, stdout);
    fflush(stdout);
    int rc = write_file(base, ".txt", text.buf, text.len);
    if (rc == 0)
        rc = write_file(base, ".json", json.buf, json.len);
    if (rc == 0)
        fprintf(stderr, "traceml: wrote %s.txt and %s.json\n", base, base);
    tml__sb_release(&text);
    tml__sb_release(&json);
    if (rc)
        return 1;
    return fail_on_regression && r.verdict == TML_CMP_REGRESSION ? 1 : 0;
}
