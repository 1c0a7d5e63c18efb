/*
 * jsonw.h - writing JSON: the one writer behind final_summary.json, the
 * compare report, the series, the live JSON and the timeline.
 *
 *     tml_jsonw w;
 *     tml__jw_init(&w, &sb, 1);            // 1: indented, 0: compact
 *     tml__jw_open(&w, NULL, '{');
 *     tml__jw_num(&w, "step_time_ms", 12.345, 3);
 *     tml__jw_close(&w, '}');
 *
 * Keys are escaped; a NULL string is null; a number that is NAN or
 * infinite is null (missing is never zero), and "-0" is written as 0.
 */
#ifndef TML_JSONW_H
#define TML_JSONW_H

#include "base/strbuf.h"

#define TML_JW_DEPTH 16

typedef struct tml_jsonw {
    tml_strbuf *sb;
    int pretty;
    int depth;
    int count[TML_JW_DEPTH];
} tml_jsonw;

void tml__jw_init(tml_jsonw *w, tml_strbuf *sb, int pretty);
/* Separator, indentation and `key` (NULL inside arrays) before a value;
 * for writing a value of one's own after it. */
void tml__jw_key(tml_jsonw *w, const char *key);
void tml__jw_open(tml_jsonw *w, const char *key, char bracket);   /* '{' or '[' */
void tml__jw_close(tml_jsonw *w, char bracket);                   /* '}' or ']' */
void tml__jw_null(tml_jsonw *w, const char *key);
void tml__jw_str(tml_jsonw *w, const char *key, const char *s);
void tml__jw_bool(tml_jsonw *w, const char *key, int b);
void tml__jw_int(tml_jsonw *w, const char *key, long long v);
void tml__jw_num(tml_jsonw *w, const char *key, double v, int decimals);

/* Bare values into a buffer: a number with `decimals` digits (trimmed of
 * trailing zeros when trim), null when not finite; a string, null when
 * NULL or empty. */
void tml__json_add_num(tml_strbuf *sb, double v, int decimals, int trim);
void tml__json_add_str_or_null(tml_strbuf *sb, const char *s);

/* v as compact JSON with each object's keys sorted (depth-limited), so
 * that two documents that say the same thing print the same. */
struct tml_json;
void tml__json_add_canon(tml_strbuf *sb, const struct tml_json *v);

#endif
