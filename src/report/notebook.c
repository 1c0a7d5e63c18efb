/*
 * notebook.c - the summary as HTML for a notebook cell (%%traceml,
 * traceml.finish(); docs/notebooks.md).
 *
 * Two parts:
 *
 *   the card   the run, its verdict with Why and Next, and the step's
 *              phases as one stacked bar and a table. Plain HTML with
 *              inline styles and no script, so it reads wherever the
 *              notebook is shown: a front end that runs no output script
 *              (an untrusted notebook, GitHub's viewer) still shows it.
 *              A running cell's live view is this card, redrawn from the
 *              summary so far.
 *   the report the HTML report of html.c (charts per step and per rank,
 *              the evidence, the raw JSON) in an iframe's srcdoc,
 *              sandboxed to scripts only: its styles and scripts cannot
 *              touch the notebook's page, and it needs no network.
 *
 * The phases' labels and colours are web/phases.js's (compiled in), read
 * here rather than written twice, so the card's Forward is the report's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"
#include "base/json.h"
#include "base/strbuf.h"
#include "report/html.h"
#include "report/web_assets.h"
#include "traceml/traceml.h"

#define PHASES_MAX 12

typedef struct phase {
    char key[32], label[32], color[16];
} phase;

/* The quoted value after `name: "` from p on (at most until end): copied
 * into out; the position after its closing quote, or NULL. */
static const char *quoted_after(const char *p, const char *end, const char *name, char *out,
                                size_t cap)
{
    size_t n = strlen(name);
    for (; p + n + 3 < end; p++) {
        if (memcmp(p, name, n) != 0 || p[n] != ':')
            continue;
        const char *q = memchr(p + n, '"', (size_t)(end - p - n));
        const char *close = q ? memchr(q + 1, '"', (size_t)(end - q - 1)) : NULL;
        if (!close)
            return NULL;
        snprintf(out, cap, "%.*s", (int)(close - q - 1), q + 1);
        return close + 1;
    }
    return NULL;
}

/* web/phases.js's entries, { key: "...", label: "...", color: "#..." }
 * in step order. How many were read. */
static size_t read_phases(phase *ph, size_t max)
{
    const char *p = (const char *)tml__web_phases_js;
    const char *end = p + tml__web_phases_js_len;
    size_t n = 0;
    while (n < max && (p = quoted_after(p, end, "key", ph[n].key, sizeof(ph[n].key)))) {
        p = quoted_after(p, end, "label", ph[n].label, sizeof(ph[n].label));
        p = p ? quoted_after(p, end, "color", ph[n].color, sizeof(ph[n].color)) : NULL;
        if (!p)
            break;
        n++;
    }
    return n;
}

static double num_at(const tml_json *v, const char *path, double otherwise)
{
    double d;
    return tml__json_num(tml__json_path(v, path), &d) ? d : otherwise;
}

static const char *severity_color(const char *sev)
{
    if (sev && strcmp(sev, "CRITICAL") == 0)
        return "#c62828";
    if (sev && strcmp(sev, "WARNING") == 0)
        return "#b26a00";
    return "#2e7d32";
}

static void card_title(const tml_json *doc, tml_strbuf *out)
{
    const char *status = tml__json_str(tml__json_get(doc, "status"));
    /* partial: the figures cover part of the run (the box's PARTIAL and
     * "Ended: INTERRUPTED" lines) */
    const char *partial = tml__json_str(tml__json_path(doc, "meta.partial"));
    double steps = num_at(doc, "meta.common_steps", -1), secs = num_at(doc, "duration_s", -1);
    tml__sb_adds(out, "<div style=\"font-weight:600\">TraceML &middot; ");
    tml__sb_add_html(out, tml__json_str(tml__json_path(doc, "meta.run_name")));
    tml__sb_adds(out, "<span style=\"color:#57606a;font-weight:400\"> &middot; ");
    tml__sb_add_html(out, status && strcmp(status, "running") == 0 ? "running (so far)"
                          : status ? status : "?");
    if ((partial && *partial) || (status && strcmp(status, "interrupted") == 0))
        tml__sb_adds(out, " &middot; PARTIAL");
    if (steps >= 0)
        tml__sb_addf(out, " &middot; %.0f steps", steps);
    if (secs >= 0)
        tml__sb_addf(out, " &middot; %.1fs", secs);
    tml__sb_adds(out, "</span></div>\n");
}

static void card_verdict(const tml_json *doc, tml_strbuf *out)
{
    const tml_json *d = tml__json_get(doc, "primary_diagnosis");
    if (!tml__json_str(tml__json_get(d, "label")))
        d = tml__json_path(doc, "step_time.diagnosis");
    const char *label = tml__json_str(tml__json_get(d, "label"));
    const char *sev = tml__json_str(tml__json_get(d, "severity"));
    if (!label) {
        tml__sb_adds(out, "<div style=\"margin:6px 0;color:#57606a\">No verdict yet: "
                          "no step has completed.</div>\n");
        return;
    }
    const char *color = severity_color(sev);
    tml__sb_addf(out, "<div style=\"margin:6px 0\"><span class=\"traceml-verdict\" "
                      "style=\"background:%s;color:#fff;border-radius:3px;padding:1px 7px;"
                      "font-weight:600\">", color);
    tml__sb_add_html(out, label);
    tml__sb_addf(out, "</span> <span style=\"color:%s\">", color);
    tml__sb_add_html(out, sev);
    tml__sb_adds(out, "</span></div>\n");
    static const char *const parts[][2] = {{"why", "Why"}, {"next", "Next"}};
    for (size_t i = 0; i < 2; i++) {
        const char *s = tml__json_str(tml__json_get(d, parts[i][0]));
        if (!s || !*s)
            continue;
        tml__sb_addf(out, "<div><b>%s:</b> ", parts[i][1]);
        tml__sb_add_html(out, s);
        tml__sb_adds(out, "</div>\n");
    }
}

/* The median rank's step: a bar of the phases' shares, then a table. */
static void card_phases(const tml_json *doc, tml_strbuf *out)
{
    const tml_json *med = tml__json_path(doc, "step_time.median");
    double step_ms = num_at(med, "step_time_ms", -1);
    if (step_ms < 0)
        return;
    phase ph[PHASES_MAX];
    size_t n = read_phases(ph, PHASES_MAX);
    char path[64], ms[32], pct[16];
    tml__sb_adds(out, "<div style=\"display:flex;height:14px;margin:8px 0 4px;"
                      "border-radius:3px;overflow:hidden;background:#eaeef2\">");
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "shares_percent.%.31s", ph[i].key);
        double share = num_at(med, path, 0);
        if (share > 0)
            tml__sb_addf(out, "<div title=\"%s\" style=\"width:%.2f%%;background:%s\"></div>",
                         ph[i].label, share, ph[i].color);
    }
    tml__sb_adds(out, "</div>\n<table class=\"traceml-phases\" style=\"border-collapse:collapse;"
                      "font-variant-numeric:tabular-nums\">\n");
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "%.31s_ms", ph[i].key);
        double v = num_at(med, path, -1);
        if (v < 0)
            continue;
        snprintf(path, sizeof(path), "shares_percent.%.31s", ph[i].key);
        tml__fmt_ms(v, ms, sizeof(ms));
        tml__fmt_pct(num_at(med, path, 0), pct, sizeof(pct));
        tml__sb_addf(out, "<tr><td><span style=\"display:inline-block;width:10px;height:10px;"
                          "background:%s;margin-right:6px\"></span>%s</td>"
                          "<td style=\"text-align:right;padding-left:16px\">%s</td>"
                          "<td style=\"text-align:right;padding-left:12px\">%s</td></tr>\n",
                     ph[i].color, ph[i].label, ms, pct);
    }
    tml__fmt_ms(step_ms, ms, sizeof(ms));
    const char *clock = tml__json_str(tml__json_path(doc, "step_time.window.clock"));
    tml__sb_addf(out, "<tr style=\"border-top:1px solid #d0d7de\"><td><b>Step Time</b> "
                      "<span style=\"color:#57606a\">(median rank, %s clock)</span></td>"
                      "<td style=\"text-align:right;padding-left:16px\"><b>%s</b></td>"
                      "<td style=\"text-align:right;padding-left:12px\">100%%</td></tr>\n"
                      "</table>\n", clock && strcmp(clock, "gpu") == 0 ? "GPU" : "CPU", ms);
}

static void card(const tml_json *doc, tml_strbuf *out)
{
    tml__sb_adds(out, "<div class=\"traceml-card\" style=\"font:13px/1.45 system-ui,"
                      "-apple-system,'Segoe UI',sans-serif;border:1px solid #d0d7de;"
                      "border-radius:6px;padding:10px 14px;margin:4px 0;max-width:820px;"
                      "color:#1f2328;background:#fff\">\n");
    card_title(doc, out);
    card_verdict(doc, out);
    card_phases(doc, out);
    tml__sb_adds(out, "</div>\n");
}

int tml_summary_html(const char *json, size_t len, int what, char **out)
{
    if (!json || !out || what < TML_HTML_PAGE || what > TML_HTML_NOTEBOOK)
        return TML_EINVAL;
    *out = NULL;
    tml_json *doc = NULL;
    int rc = tml__json_parse(json, len, &doc, NULL);
    if (rc < 0)
        return rc == TML_ENOMEM ? rc : TML_EPROTO;
    if (doc->type != TML_JSON_OBJECT) {
        tml__json_free(doc);
        return TML_EPROTO;
    }
    tml_strbuf sb = TML_STRBUF_INIT, page = TML_STRBUF_INIT;
    if (what != TML_HTML_PAGE)
        card(doc, &sb);
    tml__json_free(doc);
    if (what != TML_HTML_CARD)
        rc = tml__html_render(json, len, what == TML_HTML_PAGE ? &sb : &page);
    if (what == TML_HTML_NOTEBOOK && rc == 0) {
        tml__sb_adds(&sb, "<iframe class=\"traceml-report\" title=\"TraceML report\" "
                          "sandbox=\"allow-scripts\" style=\"width:100%;max-width:1100px;"
                          "height:720px;border:1px solid #d0d7de;border-radius:6px\" srcdoc=\"");
        tml__sb_add_html(&sb, page.buf);
        tml__sb_adds(&sb, "\"></iframe>\n");
    }
    if (rc == 0 && (sb.failed || page.failed))
        rc = TML_ENOMEM;
    tml__sb_release(&page);
    if (rc == 0)
        *out = tml__sb_detach(&sb, NULL);
    tml__sb_release(&sb);
    return rc;
}
