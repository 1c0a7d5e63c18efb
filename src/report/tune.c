/*
 * tune.c - `traceml tune`'s report (tune.h): the terminal table,
 * tune.json and tune.html of the result judge/tune.c decided.
 */
#include "report/tune.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/jsonw.h"
#include "traceml/traceml.h"

static const char *result_word(const tml_tune_arm *a)
{
    if (a->n && a->over >= 0 && a->cmp.verdict == TML_TUNE_GAIN &&
        a->vs_over.verdict != TML_TUNE_GAIN)
        return "no gain over the one under it";
    if (a->skipped)
        return "not tried";
    if (a->n == 0)
        return "failed";
    switch (a->cmp.verdict) {
    case TML_TUNE_GAIN:
        return "gain";
    case TML_TUNE_LOSS:
        return "loss";
    default:
        return a->n < 2 ? "too few runs" : "inconclusive";
    }
}

/* "inconclusive: 3 more rounds or a quieter machine would decide it" */
static void undecided_text(const tml_tune_cmp *c, char *out, size_t cap)
{
    if (c->more > TML_TUNE_MORE_MAX)
        snprintf(out, cap, "inconclusive: more than %d more rounds or a quieter machine would "
                 "decide it", TML_TUNE_MORE_MAX);
    else if (c->more > 0)
        snprintf(out, cap, "inconclusive: %d more round%s or a quieter machine would decide it",
                 c->more, c->more == 1 ? "" : "s");
    else
        snprintf(out, cap, "inconclusive: no change seen");
}

/* "-52.2% (-55.0% .. -49.1%)", or "" without an interval */
static void change_text(const tml_tune_cmp *c, char *out, size_t cap)
{
    if (isnan(c->change))
        snprintf(out, cap, "%s", "");
    else
        snprintf(out, cap, "%+.1f%% (%+.1f%% .. %+.1f%%)", c->change * 100, c->lo * 100,
                 c->hi * 100);
}

/* What the measurements point at that tune does not try: settings that
 * change what the training computes. */
static void notes(const tml_tune_result *r, tml_strbuf *out, int json)
{
    const tml_tune_base *b = &r->base;
    char line[400] = "";
    size_t tried = 0, skipped = 0;
    for (size_t i = 1; i < r->narms; i++) {
        tried += r->arms[i].n > 0;
        skipped += r->arms[i].skipped;
    }
    if (!tried && skipped && r->trial_s > 0)
        snprintf(line, sizeof(line), "Nothing fit in the budget: a trial takes %.0f s here "
                 "(most of it the script's start-up; the machine's load lengthens it), and a "
                 "setting needs at least 3 more trials (two rounds): a --budget of about %.0f s "
                 "would try one, or a quieter machine.", r->trial_s,
                 r->elapsed_s + 3 * r->trial_s + 1);
    else if (strcmp(b->verdict, "COMMUNICATION_BOUND") == 0 && b->comm_bytes_per_step < 1e6)
        snprintf(line, sizeof(line), "The all-reduce moves only %.0f KB a step: it is bound by "
                 "latency, not bandwidth. A larger batch per step (or gradient accumulation) "
                 "would share that latency among more samples; tune does not try it, since it "
                 "changes what the training computes.", b->comm_bytes_per_step / 1e3);
    else if (r->pick < 0 && strstr(b->verdict, "INPUT")) {
        size_t listed = 0, measured = 0, losses = 0;
        int undecided = -1;   /* the undecided loader setting measured fastest */
        for (size_t i = 1; i < r->narms; i++)
            if (strstr(r->arms[i].direction, "DataLoader")) {
                const tml_tune_cmp *c = &r->arms[i].cmp;
                listed++;
                measured += r->arms[i].n > 0;
                losses += r->arms[i].n > 0 && c->verdict == TML_TUNE_LOSS;
                if (r->arms[i].n > 1 && c->verdict == TML_TUNE_UNSURE && c->change < 0 &&
                    (undecided < 0 || c->change < r->arms[undecided].cmp.change))
                    undecided = (int)i;
            }
        if (b->workers < 0)
            snprintf(line, sizeof(line), "No DataLoader's settings were seen in the script, so "
                     "no loader setting was tried: a loader built without torch's DataLoader "
                     "has its own workers and prefetch to set.");
        else if (listed && !measured)
            snprintf(line, sizeof(line), "No loader setting fit in the budget: run again with "
                     "a larger --budget.");
        else if (undecided >= 0) {
            const tml_tune_arm *u = &r->arms[undecided];
            char why[120];
            undecided_text(&u->cmp, why, sizeof(why));
            snprintf(line, sizeof(line), "%s measured %+.1f%% (%+.1f%% .. %+.1f%%): %s "
                     "(--budget, or a machine without other load).", u->settings,
                     u->cmp.change * 100, u->cmp.lo * 100, u->cmp.hi * 100, why);
        } else if (measured && losses == measured)
            snprintf(line, sizeof(line), "No loader setting paid: make each batch cheaper "
                     "(index whole batches, lighter transforms, faster storage).");
        else if (measured)
            snprintf(line, sizeof(line), "No loader setting was measured faster over its "
                     "whole 95%% interval.");
    }
    if (!line[0])
        return;
    if (json)
        tml__sb_add_json_str(out, line);
    else
        tml__sb_addf(out, "Note: %s\n", line);
}

static void text_arm(const tml_tune_arm *a, int width, tml_strbuf *out)
{
    char ch[64], ms[32] = "";
    change_text(&a->cmp, ch, sizeof(ch));
    if (a->n)
        snprintf(ms, sizeof(ms), "%.2f ms", a->cmp.ms);
    tml__sb_addf(out, "    %-*s %11s   %-28s %4zu  %s", width, a->settings, ms, ch, a->n,
                 result_word(a));
    if ((a->skipped || a->failures) && a->why[0]) {
        tml__sb_addf(out, " (%s)", a->why);
    } else if (a->n > 1 && a->cmp.verdict == TML_TUNE_UNSURE && !isnan(a->cmp.change)) {
        char why[120];
        undecided_text(&a->cmp, why, sizeof(why));
        tml__sb_addf(out, " (%s)", why + strlen("inconclusive: "));
    }
    tml__sb_addc(out, '\n');
}

void tml__tune_text(const tml_tune_result *r, tml_strbuf *out)
{
    const tml_tune_arm *b = &r->arms[0];
    tml__sb_addf(out, "TraceML Tune: %s\n", r->command ? r->command : "");
    tml__sb_addf(out, "Baseline: %s, %.2f ms a step (%zu processes)\n",
                 r->base.label[0] ? r->base.label : "no verdict", b->cmp.base_ms, b->n);
    tml__sb_addf(out, "Trials: %d processes of %d warm-up + %d measured steps", r->trials,
                 r->warmup, r->steps);
    if (r->steps_asked && (r->steps_asked != r->steps || r->warmup_asked != r->warmup))
        tml__sb_addf(out, " (shrunk from %d + %d to fit the budget)", r->warmup_asked,
                     r->steps_asked);
    tml__sb_addf(out, ", %.0f s of a %.0f s budget", r->elapsed_s, r->budget_s);
    if (r->rounds_added)
        tml__sb_addf(out, "; %d round%s added to undecided settings", r->rounds_added,
                     r->rounds_added == 1 ? "" : "s");
    tml__sb_adds(out, "\n");
    if (r->base.fetch_cpu_share >= 0)
        tml__sb_addf(out, "The fetch used the CPU %.0f%% of its time%s\n",
                     r->base.fetch_cpu_share * 100,
                     r->base.fetch_cpu_share < TML_TUNE_WAIT_SHARE && r->base.workers <= 0
                         ? " (it waits: worker counts beyond the cores tried)" : "");
    tml__sb_adds(out, "\n");
    int width = 24;
    for (size_t i = 1; i < r->narms; i++)
        if ((int)strlen(r->arms[i].settings) > width)
            width = (int)strlen(r->arms[i].settings);
    tml__sb_addf(out, "    %-*s %11s   %-28s %4s  %s\n", width, "setting", "step time",
                 "change vs baseline (95% CI)", "runs", "result");
    const char *dir = "";
    for (size_t i = 1; i < r->narms; i++) {
        const tml_tune_arm *a = &r->arms[i];
        if (strcmp(a->direction, dir) != 0) {
            dir = a->direction;
            tml__sb_addf(out, "  %s\n", dir);
        }
        text_arm(a, width, out);
    }
    tml__sb_addc(out, '\n');
    if (r->pick < 0) {
        tml__sb_adds(out, "Recommended: nothing. No setting tried was faster over its whole "
                     "95% interval; keep the script's settings.\n");
    } else {
        const tml_tune_arm *p = &r->arms[r->pick];
        tml__sb_addf(out, "Recommended: %s: %.1f%% less time a step (%.1f%% .. %.1f%%), %.2fx "
                     "the steps (and samples) per second\n", p->settings, -p->cmp.change * 100,
                     -p->cmp.hi * 100, -p->cmp.lo * 100, 1.0 / (1.0 + p->cmp.change));
        tml__sb_adds(out, "Put in the script:\n");
        tml_strbuf code = {0};
        tml__tune_code(p->settings, &code);
        for (const char *c = code.buf; c && *c;) {
            size_t len = strcspn(c, "\n");
            tml__sb_addf(out, "    %.*s\n", (int)len, c);
            c += len + (c[len] == '\n');
        }
        tml__sb_release(&code);
        tml__sb_addf(out, "or run it with them applied (the script unchanged):\n    traceml run "
                     "--apply %s/tune.json %s\n", r->dir ? r->dir : ".", r->command ? r->command : "");
    }
    notes(r, out, 0);
}

static void json_arm(tml_jsonw *w, const char *key, const tml_tune_result *r,
                     const tml_tune_arm *a)
{
    tml__jw_open(w, key, '{');
    tml__jw_str(w, "settings", a->settings);
    tml__jw_str(w, "direction", a->direction);
    tml__jw_int(w, "runs", (long long)a->n);
    tml__jw_int(w, "failures", a->failures);
    tml__jw_num(w, "step_time_ms", a->n ? a->cmp.ms : NAN, 3);
    tml__jw_num(w, "steps_per_s", a->n ? 1000.0 / a->cmp.ms : NAN, 3);
    tml__jw_num(w, "change_percent", a->cmp.change * 100, 2);
    tml__jw_open(w, "ci_percent", '[');
    tml__jw_num(w, NULL, a->cmp.lo * 100, 2);
    tml__jw_num(w, NULL, a->cmp.hi * 100, 2);
    tml__jw_close(w, ']');
    tml__jw_open(w, "step_time_ms_per_run", '[');
    for (size_t i = 0; i < a->n; i++)
        tml__jw_num(w, NULL, a->step_ms[i], 3);
    tml__jw_close(w, ']');
    tml__jw_str(w, "result", result_word(a));
    tml__jw_str(w, "why", a->why[0] ? a->why : NULL);
    if (a->cmp.more > 0)   /* undecided: the rounds more that would decide it */
        tml__jw_int(w, "more_rounds", a->cmp.more);
    else
        tml__jw_null(w, "more_rounds");
    if (a->over >= 0) {   /* on top of another setting: the change against it */
        tml__jw_open(w, "over", '{');
        tml__jw_str(w, "settings", r->arms[a->over].settings);
        tml__jw_num(w, "change_percent", a->vs_over.change * 100, 2);
        tml__jw_open(w, "ci_percent", '[');
        tml__jw_num(w, NULL, a->vs_over.lo * 100, 2);
        tml__jw_num(w, NULL, a->vs_over.hi * 100, 2);
        tml__jw_close(w, ']');
        tml__jw_close(w, '}');
    } else {
        tml__jw_null(w, "over");
    }
    tml__jw_close(w, '}');
}

static void json_head(tml_jsonw *w, const tml_tune_result *r)
{
    const tml_tune_arm *b = &r->arms[0];
    tml__jw_int(w, "schema_version", 1);
    tml__jw_str(w, "command", r->command);
    tml__jw_open(w, "baseline", '{');
    tml__jw_str(w, "verdict", r->base.verdict[0] ? r->base.verdict : NULL);
    tml__jw_str(w, "label", r->base.label[0] ? r->base.label : NULL);
    tml__jw_num(w, "step_time_ms", b->n ? b->cmp.base_ms : NAN, 3);
    tml__jw_num(w, "steps_per_s", b->n ? 1000.0 / b->cmp.base_ms : NAN, 3);
    tml__jw_int(w, "runs", (long long)b->n);
    tml__jw_open(w, "step_time_ms_per_run", '[');
    for (size_t i = 0; i < b->n; i++)
        tml__jw_num(w, NULL, b->step_ms[i], 3);
    tml__jw_close(w, ']');
    tml__jw_close(w, '}');
    tml__jw_int(w, "trials_run", r->trials);
    tml__jw_int(w, "repeats", r->repeats);
    tml__jw_int(w, "warmup_steps", r->warmup);
    tml__jw_int(w, "measured_steps", r->steps);
    /* what was asked, before trials were shrunk to fit the budget */
    tml__jw_int(w, "warmup_steps_asked", r->warmup_asked ? r->warmup_asked : r->warmup);
    tml__jw_int(w, "measured_steps_asked", r->steps_asked ? r->steps_asked : r->steps);
    tml__jw_int(w, "rounds_added", r->rounds_added);
    tml__jw_num(w, "fetch_cpu_share", r->base.fetch_cpu_share, 3);
    tml__jw_num(w, "trial_s", r->trial_s > 0 ? r->trial_s : NAN, 1);
    tml__jw_num(w, "elapsed_s", r->elapsed_s, 1);
    tml__jw_num(w, "budget_s", r->budget_s, 1);
}

void tml__tune_json(const tml_tune_result *r, tml_strbuf *out)
{
    tml_jsonw w;
    tml__jw_init(&w, out, 1);
    tml__jw_open(&w, NULL, '{');
    json_head(&w, r);
    tml__jw_open(&w, "trials", '[');
    for (size_t i = 1; i < r->narms; i++)
        if ((int)i != r->combo)
            json_arm(&w, NULL, r, &r->arms[i]);
    tml__jw_close(&w, ']');
    if (r->combo >= 0) {
        json_arm(&w, "combination", r, &r->arms[r->combo]);
    } else {
        tml__jw_null(&w, "combination");
    }
    /* what `traceml run --apply` applies */
    tml__jw_str(&w, "apply", r->pick >= 0 ? r->arms[r->pick].settings : NULL);
    tml__jw_open(&w, "code", '[');
    tml_strbuf code = {0};
    if (r->pick >= 0)
        tml__tune_code(r->arms[r->pick].settings, &code);
    for (const char *c = code.buf; c && *c;) {
        size_t len = strcspn(c, "\n");
        char line[256];
        snprintf(line, sizeof(line), "%.*s", (int)len, c);
        tml__jw_str(&w, NULL, line);
        c += len + (c[len] == '\n');
    }
    tml__sb_release(&code);
    tml__jw_close(&w, ']');
    tml__jw_key(&w, "note");
    size_t before = out->len;
    notes(r, out, 1);
    if (out->len == before)
        tml__sb_adds(out, "null");
    tml__jw_close(&w, '}');
    tml__sb_addc(out, '\n');
}

/* The intervals as an inline SVG (the page without the baseline's report,
 * which web/report.js draws the same chart on): one row a measured
 * setting, its change (a dot) and 95% interval (a whisker) on one axis of
 * percent, the baseline's 0 a dashed line. Rows carry their figures
 * (data-change, data-lo, data-hi, tune.json's). */
static void html_chart(const tml_tune_result *r, tml_strbuf *out)
{
    double lo = 0, hi = 0;
    int n = 0;
    for (size_t i = 1; i < r->narms; i++) {
        const tml_tune_cmp *c = &r->arms[i].cmp;
        if (r->arms[i].n && !isnan(c->change) && !isnan(c->lo) && !isnan(c->hi)) {
            lo = fmin(lo, c->lo * 100);
            hi = fmax(hi, c->hi * 100);
            n++;
        }
    }
    if (!n)
        return;
    double pad = (hi - lo) * 0.05 > 0 ? (hi - lo) * 0.05 : 1, y = 10, base = 10 + 26.0 * n;
    lo -= pad;
    hi += pad;
#define X(v) (260 + ((v) - lo) / (hi - lo) * 620)
    tml__sb_addf(out, "<svg id=\"tune-chart\" width=\"900\" height=\"%.0f\" role=\"img\" "
                 "aria-label=\"change vs baseline with its 95%% interval, each setting\">\n"
                 "<line id=\"tune-chart-zero\" x1=\"%.1f\" x2=\"%.1f\" y1=\"6\" y2=\"%.0f\" "
                 "stroke=\"#333\" stroke-dasharray=\"4 3\"/>\n<text x=\"%.1f\" y=\"%.0f\" "
                 "font-size=\"11\" text-anchor=\"middle\">0 (baseline)</text>\n<text x=\"260\" "
                 "y=\"%.0f\" font-size=\"11\">change in step time vs the baseline, 95%% "
                 "interval (left of 0: faster)</text>\n", base + 34, X(0), X(0), base, X(0),
                 base + 16, base + 30);
    for (size_t i = 1; i < r->narms; i++, y += 26) {
        const tml_tune_arm *a = &r->arms[i];
        const tml_tune_cmp *c = &a->cmp;
        if (!a->n || isnan(c->change) || isnan(c->lo) || isnan(c->hi)) {
            y -= 26;
            continue;
        }
        const char *word = result_word(a);
        const char *color = strcmp(word, "gain") == 0 ? "#080" : strcmp(word, "loss") == 0
                            ? "#b00" : "#777";
        tml__sb_addf(out, "<g class=\"tune-ci\" data-settings=\"");
        tml__sb_add_html(out, a->settings);
        tml__sb_addf(out, "\" data-change=\"%.1f\" data-lo=\"%.1f\" data-hi=\"%.1f\">"
                     "<text x=\"252\" y=\"%.0f\" text-anchor=\"end\" font-size=\"12\">",
                     c->change * 100, c->lo * 100, c->hi * 100, y + 17);
        tml__sb_add_html(out, a->settings);
        tml__sb_addf(out, "</text><line class=\"whisker\" x1=\"%.1f\" x2=\"%.1f\" y1=\"%.0f\" "
                     "y2=\"%.0f\" stroke=\"%s\" stroke-width=\"2\"/><circle class=\"change\" "
                     "cx=\"%.1f\" cy=\"%.0f\" r=\"4\" fill=\"%s\"/></g>\n", X(c->lo * 100),
                     X(c->hi * 100), y + 13, y + 13, color, X(c->change * 100), y + 13, color);
    }
#undef X
    tml__sb_adds(out, "</svg>\n");
}

void tml__tune_html(const tml_tune_result *r, tml_strbuf *out)
{
    tml__sb_adds(out, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>TraceML Tune"
                 "</title><style>body{font-family:sans-serif;margin:2em}table{border-collapse:"
                 "collapse}td,th{padding:.3em .8em;border-bottom:1px solid #ddd;text-align:left}"
                 ".gain{color:#080}.loss{color:#b00}pre{background:#f4f4f4;padding:1em}</style>"
                 "</head><body>\n<h1>TraceML Tune</h1>\n<p>");
    tml__sb_add_html(out, r->command);
    tml__sb_adds(out, "</p>\n<table><tr><th>setting</th><th>step time (ms)</th><th>change vs "
                 "baseline</th><th>95% interval</th><th>runs</th><th>result</th></tr>\n");
    for (size_t i = 0; i < r->narms; i++) {
        const tml_tune_arm *a = &r->arms[i];
        const char *word = i ? result_word(a) : "";
        tml__sb_adds(out, "<tr><td>");
        tml__sb_add_html(out, i ? a->settings : "baseline");
        tml__sb_addf(out, "</td><td>%.2f</td>", i ? a->cmp.ms : a->cmp.base_ms);
        if (isnan(a->cmp.change) || !i)
            tml__sb_adds(out, "<td></td><td></td>");
        else
            tml__sb_addf(out, "<td>%+.1f%%</td><td>%+.1f%% .. %+.1f%%</td>", a->cmp.change * 100,
                         a->cmp.lo * 100, a->cmp.hi * 100);
        tml__sb_addf(out, "<td>%zu</td><td class=\"%s\">%s</td></tr>\n", a->n, word, word);
    }
    tml__sb_adds(out, "</table>\n");
    html_chart(r, out);
    tml__sb_adds(out, "<pre>");
    tml_strbuf text = {0};
    tml__tune_text(r, &text);
    tml__sb_add_html(out, text.buf);
    tml__sb_release(&text);
    tml__sb_adds(out, "</pre>\n</body></html>\n");
}
