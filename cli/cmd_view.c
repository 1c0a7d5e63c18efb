/*
 * cmd_view.c - `traceml view SUMMARY.json`: prints the stored box again.
 *
 * The summary's `text` field is exactly what was printed at the end of the
 * run, so view does not recompute anything by default: a summary written
 * by an older TraceML looks the same as the day it was written. What view
 * does check is that the file is one of ours (valid JSON, a known
 * schema_version, a text field) and says precisely what is wrong when it
 * is not.
 *
 * --re-render (TraceML 0.5.0's flag) prints the box again from the
 * summary's data in today's layout instead (report/reload.h: the stored
 * verdicts and figures into the report model, the box printer over it). A
 * summary TraceML 0.5.0 wrote is always shown that way: its stored text is
 * another tool's layout, its data maps onto this one's model, and the box
 * says what it lacked. Nothing is ever written back to the file.
 */
#include "cli.h"
#include "base/fs.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/html.h"
#include "report/reload.h"
#include "traceml/traceml.h"
#include "base/json.h"

/* The summary schema major versions this build reads. */
#define SUMMARY_SCHEMA_MAX 1

const char tml__usage_view[] =
    "usage: traceml view SUMMARY.json|RUN_DIR [--re-render] [--html [OUT]]\n"
    "\n"
    "Prints the run summary stored in SUMMARY.json (a final_summary.json\n"
    "written by `traceml run`; a run folder stands for its final_summary.json)\n"
    "exactly as it was printed, without recomputing.\n"
    "A summary written by TraceML 0.5.0 is shown in this TraceML's layout,\n"
    "with a line naming what it lacked.\n"
    "\n"
    "  --re-render    print the box again from the summary's data, in this\n"
    "                 TraceML's layout and terminal width, instead of the\n"
    "                 stored text (the file is not modified)\n"
    "  --html [OUT]   write the HTML report instead (one self-contained page\n"
    "                 that opens offline) to OUT [SUMMARY.json with .html]\n";

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* `view X.json --html [OUT]`: the page, written next to X by default. */
static int write_html(const char *path, const char *out, const char *json, size_t len)
{
    char def[4200];
    if (!out) {
        size_t n = strlen(path);
        if (ends_with(path, ".json"))
            n -= 5;
        snprintf(def, sizeof(def), "%.*s.html", (int)(n < 4000 ? n : 4000), path);
        out = def;
    }
    tml_strbuf sb = TML_STRBUF_INIT;
    if (tml__html_render(json, len, &sb) < 0) {
        tml__sb_release(&sb);
        return tml__cli_error("out of memory");
    }
    int bad = tml__write_file(out, sb.buf, sb.len, 0666) < 0;
    tml__sb_release(&sb);
    if (bad)
        return tml__cli_error("cannot write '%s': %s", out, strerror(errno));
    printf("Wrote %s\n", out);
    return 0;
}

/* The summary's data in today's layout: the box printed, or (html) the
 * page of its JSON in this TraceML's schema. */
static int rerender(const char *path, const tml_json *doc, int html, const char *html_out)
{
    tml_report_loaded *l;
    char why[256];
    int rc = tml__report_load(doc, path, tml__cli_term_width(), &l, why, sizeof(why));
    if (rc == TML_ENOMEM)
        return tml__cli_error("'%s': out of memory", path);
    if (rc < 0)
        return tml__cli_error("'%s': %s", path, why);
    tml_strbuf box = TML_STRBUF_INIT, js = TML_STRBUF_INIT;
    tml__report_box(&l->m, &box);
    if (html)
        tml__report_json(&l->m, box.buf, &js);
    tml__report_loaded_free(l);
    if (box.failed || js.failed)
        rc = tml__cli_error("out of memory");
    else if (html)
        rc = write_html(path, html_out, js.buf, js.len);
    else
        tml__cli_print_summary(box.buf);
    tml__sb_release(&box);
    tml__sb_release(&js);
    return rc;
}

typedef struct view_opts {
    const char *path, *html_out;
    int html, re_render;
} view_opts;

/* 0, 1 when the usage was printed (exit 0), or the error's status. */
static int parse(int argc, char **argv, view_opts *o)
{
    memset(o, 0, sizeof(*o));
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (tml__cli_help(a, tml__usage_view))
            return 1;
        if (strcmp(a, "--re-render") == 0) {
            o->re_render = 1;
            continue;
        }
        if (strncmp(a, "--html=", 7) == 0) {
            o->html = 1;
            o->html_out = a + 7;
            if (!*o->html_out)
                return tml__cli_error("--html= needs a file name");
            continue;
        }
        if (strcmp(a, "--html") == 0) {
            o->html = 1;
            /* OUT is optional: the next word is it when the summary is
             * already named or it ends in .html */
            if (i + 1 < argc && argv[i + 1][0] != '-' &&
                (o->path || ends_with(argv[i + 1], ".html")))
                o->html_out = argv[++i];
            continue;
        }
        if (tml__cli_operand("view", "SUMMARY.json", a, &o->path))
            return TML_EXIT_USAGE;
    }
    if (!o->path)
        return tml__cli_error("view needs a SUMMARY.json (usage: traceml view SUMMARY.json)");
    return 0;
}

int tml__cmd_view(int argc, char **argv)
{
    view_opts o;
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : rc;
    char *buf = NULL, in_folder[4200];
    size_t len = 0;
    tml_json *doc = NULL;
    o.path = tml__cli_summary_path(o.path, in_folder, sizeof(in_folder));
    if (tml__cli_read_json(o.path, "summary", &doc, &buf, &len))
        return TML_EXIT_USAGE;
    rc = TML_EXIT_USAGE;
    long major;
    const tml_json *sv = tml__json_get(doc, "schema_version");
    const char *text = tml__json_str(tml__json_get(doc, "text"));
    if (doc->type != TML_JSON_OBJECT)
        tml__cli_error("'%s' is not a TraceML summary (not a JSON object)", o.path);
    else if (!sv)
        tml__cli_error("'%s' is not a TraceML summary (no schema_version)", o.path);
    else if (tml__summary_is_v05(doc) || (o.re_render && !o.html))
        rc = rerender(o.path, doc, o.html, o.html_out);
    else if (!tml__json_version_major(sv, &major) || major < 1 || major > SUMMARY_SCHEMA_MAX)
        tml__cli_error("'%s' has an unsupported schema_version; this traceml reads "
                       "version 1 summaries", o.path);
    else if (o.html)
        rc = write_html(o.path, o.html_out, buf, len);
    else if (!text)
        tml__cli_error("'%s' is not a TraceML summary (no \"text\" field)", o.path);
    else {
        tml__cli_print_summary(text);
        rc = 0;
    }
    free(buf);
    tml__json_free(doc);
    return rc;
}
