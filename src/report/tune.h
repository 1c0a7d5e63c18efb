/*
 * tune.h - `traceml tune`'s report: the result judge/tune.h decided
 * (the baseline, each setting's interval, the recommendation) as the
 * terminal table, tune.json and tune.html (docs/tune.md). Each appends to
 * out; nothing here decides.
 */
#ifndef TML_TUNE_H
#define TML_TUNE_H

#include "base/strbuf.h"
#include "judge/tune.h"

void tml__tune_text(const tml_tune_result *r, tml_strbuf *out);
void tml__tune_json(const tml_tune_result *r, tml_strbuf *out);
void tml__tune_html(const tml_tune_result *r, tml_strbuf *out);

#endif
