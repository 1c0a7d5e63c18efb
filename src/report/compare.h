/*
 * compare.h - `traceml compare A B` in the report: a summary read into a
 * compared run (reload_compare.c), and the comparison the judge decided
 * (judge/compare.h) printed as the "TraceML Compare" box and as JSON
 * (compare.c, docs/compare.md).
 *
 *     tml_cmp_run a, b;
 *     char why[256];
 *     if (tml__cmp_run_load(doc_a, &a, why, sizeof(why)) < 0) ...
 *     tml_cmp_result r;
 *     tml__cmp_decide(&a, &b, NULL, &r);   // judge/compare.h
 *     tml__cmp_text(&a, &b, &r, &box);     // the brief's "TraceML Compare" box
 *     tml__cmp_json(&a, &b, &r, box.buf, NULL, &json);
 *
 * Ownership: nothing here allocates except into the caller's strbufs.
 */
#ifndef TML_COMPARE_H
#define TML_COMPARE_H

#include <stddef.h>

#include "base/json.h"
#include "base/strbuf.h"
#include "judge/compare.h"

/*
 * Fills r from a parsed final_summary.json. Returns 0, or TML_EPROTO with
 * a reason in why ("not a JSON object", "no schema_version", "unsupported
 * schema_version 2 (this traceml reads 1)", "no step_time section").
 * Optional parts that are absent stay missing.
 */
int tml__cmp_run_from_json(const tml_json *doc, tml_cmp_run *r, char *why, size_t cap);
/* The same for either kind of summary: one TraceML 0.5.0 wrote is first
 * mapped onto this TraceML's (report/reload.h), and r->source says what it
 * lacked. 0, TML_EPROTO (why) or TML_ENOMEM. */
int tml__cmp_run_load(const tml_json *doc, tml_cmp_run *r, char *why, size_t cap);

/* The "TraceML Compare" box (80 columns), appended to out. */
void tml__cmp_text(const tml_cmp_run *a, const tml_cmp_run *b, const tml_cmp_result *r,
                   tml_strbuf *out);
/* The comparison as JSON (docs/compare.md), "text" holding the box. */
void tml__cmp_json(const tml_cmp_run *a, const tml_cmp_run *b, const tml_cmp_result *r,
                   const char *text, const char *generated_at, tml_strbuf *out);

#endif
