/*
 * html.c - final_summary.html: the summary JSON, dygraphs and our renderer
 * (web/phases.js, web/report.js, web/report.css) in one file.
 *
 * One file that opens offline, anywhere: mailed, attached to a CI run,
 * copied off a cluster. So nothing is linked, everything is inlined: the
 * styles, the chart library's code (dygraphs, compiled into the binary at
 * build time from Debian's libjs-dygraphs; see scripts/gen-web-assets)
 * and the summary itself as a JSON data block. The page computes nothing
 * of its own: web/report.js draws what the JSON says, and the per-step
 * charts come from the summary's bounded "series" (docs/summary-json.md),
 * so `traceml view X.json --html` renders the same page from the summary
 * file alone.
 *
 * The only escaping needed: inside <script> the sequence "</" could close
 * the element early, so every "</" of the JSON becomes "<\/" (the same
 * string to a JSON parser). Our scripts and dygraphs contain no "</script"
 * (checked by the test of the report).
 */
#include "report/html.h"

#include <string.h>

#include "report/web_assets.h"
#include "traceml/traceml.h"

static void add_json_for_script(tml_strbuf *out, const char *json, size_t len)
{
    size_t from = 0;
    for (size_t i = 0; i + 1 < len; i++)
        if (json[i] == '<' && (json[i + 1] == '/' || json[i + 1] == '!')) {
            tml__sb_add(out, json + from, i - from);
            tml__sb_adds(out, json[i + 1] == '/' ? "<\\/" : "\\u003c!");
            i++;
            from = i + 1;
        }
    tml__sb_add(out, json + from, len - from);
}

int tml__html_render(const char *json, size_t len, tml_strbuf *out)
{
    tml__sb_adds(out, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    tml__sb_addf(out, "<meta name=\"generator\" content=\"TraceML %s, %s\">\n",
                 TML_VERSION_STRING, tml__web_charts_version);
    tml__sb_adds(out, "<title>TraceML report</title>\n<style>\n");
    tml__sb_add(out, tml__web_charts_css, tml__web_charts_css_len);
    tml__sb_adds(out, "\n</style>\n<style>\n");
    tml__sb_add(out, tml__web_report_css, tml__web_report_css_len);
    tml__sb_adds(out, "</style>\n</head>\n<body>\n<main id=\"app\"></main>\n"
                      "<script type=\"application/json\" id=\"traceml-summary\">\n");
    add_json_for_script(out, json, len);
    tml__sb_adds(out, "</script>\n<!-- dygraphs (https://dygraphs.com/), inlined:\n");
    tml__sb_add(out, tml__web_charts_license, tml__web_charts_license_len);
    tml__sb_adds(out, "-->\n<script>\n");
    tml__sb_add(out, tml__web_charts_js, tml__web_charts_js_len);
    tml__sb_adds(out, "\n</script>\n<script>\n");
    /* the phase colours (web/phases.js), then the renderer that uses them */
    tml__sb_add(out, tml__web_phases_js, tml__web_phases_js_len);
    tml__sb_add(out, tml__web_report_js, tml__web_report_js_len);
    tml__sb_adds(out, "</script>\n</body>\n</html>\n");
    return out->failed ? TML_ENOMEM : 0;
}
