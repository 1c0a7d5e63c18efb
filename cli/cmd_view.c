/*
 * cmd_view.c - `traceml view SUMMARY.json`: prints the stored box again.
 *
 * The summary's `text` field is exactly what was printed at the end of the
 * run, so view never recomputes anything: a summary written by an older
 * TraceML looks the same as the day it was written. What view does check is
 * that the file is one of ours (valid JSON, a known schema_version, a text
 * field) and says precisely what is wrong when it is not.
 */
#include "cli.h"
#include "base/fs.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/html.h"
#include "traceml/traceml.h"
#include "base/json.h"

#define VIEW_MAX_BYTES (256u << 20)
/* The summary schema major versions this build reads. */
#define SUMMARY_SCHEMA_MAX 1

const char tml__usage_view[] =
    "usage: traceml view SUMMARY.json [--html [OUT]]\n"
    "\n"
    "Prints the run summary stored in SUMMARY.json (a final_summary.json\n"
    "written by `traceml run`) exactly as it was printed, without recomputing.\n"
    "\n"
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

int tml__cmd_view(int argc, char **argv)
{
    const char *path = NULL, *html_out = NULL;
    int html = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(tml__usage_view, stdout);
            return 0;
        }
        if (strncmp(a, "--html=", 7) == 0) {
            html = 1;
            html_out = a + 7;
            if (!*html_out)
                return tml__cli_error("--html= needs a file name");
            continue;
        }
        if (strcmp(a, "--html") == 0) {
            html = 1;
            /* OUT is optional: the next word is it when the summary is
             * already named or it ends in .html */
            if (i + 1 < argc && argv[i + 1][0] != '-' && (path || ends_with(argv[i + 1], ".html")))
                html_out = argv[++i];
            continue;
        }
        if (a[0] == '-' && a[1] != '\0')
            return tml__cli_error("unknown option '%s' for 'traceml view' (see 'traceml help view')", a);
        if (path)
            return tml__cli_error("view takes one SUMMARY.json, got '%s' and '%s'", path, a);
        path = a;
    }
    if (!path)
        return tml__cli_error("view needs a SUMMARY.json (usage: traceml view SUMMARY.json)");

    char *buf;
    size_t len;
    if (tml__read_file(path, VIEW_MAX_BYTES, &buf, &len) < 0)
        return tml__cli_error("cannot read '%s': %s", path, strerror(errno));
    tml_json *doc = NULL;
    tml_json_error err = {0, NULL};
    int rc = tml__json_parse(buf, len, &doc, &err);
    if (rc < 0 || !html) {
        free(buf);
        buf = NULL;
    }
    if (rc == TML_ENOMEM)
        return tml__cli_error("'%s': out of memory", path);
    if (rc < 0) {
        if (len == 0)
            return tml__cli_error("'%s' is empty, not a TraceML summary", path);
        if (err.offset >= len && err.msg && strcmp(err.msg, "unexpected end of input") == 0)
            return tml__cli_error("'%s' is truncated (the JSON ends early at byte %zu)",
                                  path, len);
        return tml__cli_error("'%s' is not valid JSON: %s at byte %zu", path,
                              err.msg ? err.msg : "invalid", err.offset);
    }
    rc = TML_EXIT_USAGE;
    long major;
    const tml_json *sv = tml__json_get(doc, "schema_version");
    const char *text = tml__json_str(tml__json_get(doc, "text"));
    if (doc->type != TML_JSON_OBJECT)
        tml__cli_error("'%s' is not a TraceML summary (not a JSON object)", path);
    else if (!sv)
        tml__cli_error("'%s' is not a TraceML summary (no schema_version)", path);
    else if (!tml__json_version_major(sv, &major) || major < 1 || major > SUMMARY_SCHEMA_MAX)
        tml__cli_error("'%s' has an unsupported schema_version; this traceml reads "
                       "version 1 summaries", path);
    else if (html)
        rc = write_html(path, html_out, buf, len);
    else if (!text)
        tml__cli_error("'%s' is not a TraceML summary (no \"text\" field)", path);
    else {
        tml__cli_print_summary(text);
        rc = 0;
    }
    free(buf);
    tml__json_free(doc);
    return rc;
}
