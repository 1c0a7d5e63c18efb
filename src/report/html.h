/*
 * html.h - the HTML report (final_summary.html): one self-contained page
 * rendered from a final_summary.json, for `traceml run --html-report` and
 * `traceml view X.json --html`. Layout and reasons in html.c.
 *
 * Ownership: appends to the caller's buffer; json is only read.
 */
#ifndef TML_HTML_H
#define TML_HTML_H

#include <stddef.h>

#include "base/strbuf.h"

/* Appends the page for the summary JSON text (not checked here: callers
 * pass a summary they parsed or wrote). 0 or TML_ENOMEM. */
int tml__html_render(const char *json, size_t len, tml_strbuf *out);

#endif
