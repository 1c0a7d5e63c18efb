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

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traceml/traceml.h"
#include "util/json.h"

#define VIEW_MAX_BYTES (256u << 20)
/* The summary schema major versions this build reads. */
#define SUMMARY_SCHEMA_MAX 1

const char tml__usage_view[] =
    "usage: traceml view SUMMARY.json [--html [OUT]]\n"
    "\n"
    "Prints the run summary stored in SUMMARY.json (a final_summary.json\n"
    "written by `traceml run`) exactly as it was printed, without recomputing.\n"
    "\n"
    "  --html [OUT]   render an HTML report (not available yet)\n";

/* schema_version may be a number (1) or a string ("1", "1.2"). */
static int schema_major(const tml_json *v, long *major)
{
    double d;
    if (tml__json_num(v, &d)) {
        if (!isfinite(d) || d < 0 || d > 1e6 || d != floor(d))
            return 0;
        *major = (long)d;
        return 1;
    }
    const char *s = tml__json_str(v);
    if (!s)
        return 0;
    char *end;
    errno = 0;
    long m = strtol(s, &end, 10);
    if (end == s || errno || m < 0 || (*end && *end != '.'))
        return 0;
    *major = m;
    return 1;
}

int tml__cmd_view(int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(tml__usage_view, stdout);
            return 0;
        }
        if (strcmp(a, "--html") == 0 || strncmp(a, "--html=", 7) == 0)
            return tml__cli_error("view --html is not available yet");
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
    if (tml__cli_read_file(path, VIEW_MAX_BYTES, &buf, &len) < 0)
        return tml__cli_error("cannot read '%s': %s", path, strerror(errno));
    tml_json *doc = NULL;
    tml_json_error err = {0, NULL};
    int rc = tml__json_parse(buf, len, &doc, &err);
    free(buf);
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
    else if (!schema_major(sv, &major) || major < 1 || major > SUMMARY_SCHEMA_MAX)
        tml__cli_error("'%s' has an unsupported schema_version; this traceml reads "
                       "version 1 summaries", path);
    else if (!text)
        tml__cli_error("'%s' is not a TraceML summary (no \"text\" field)", path);
    else {
        tml__cli_print_summary(text);
        rc = 0;
    }
    tml__json_free(doc);
    return rc;
}
