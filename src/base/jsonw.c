/*
 * jsonw.c - the JSON writer (jsonw.h).
 */
#include "base/jsonw.h"
#include "base/json.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void tml__json_add_num(tml_strbuf *sb, double v, int decimals, int trim)
{
    char b[64];
    if (!isfinite(v)) {
        tml__sb_adds(sb, "null");
        return;
    }
    snprintf(b, sizeof(b), "%.*f", decimals, v == 0 ? 0.0 : v);
    if (trim && strchr(b, '.')) {
        size_t n = strlen(b);
        while (n > 0 && b[n - 1] == '0')
            b[--n] = '\0';
        if (n > 0 && b[n - 1] == '.')
            b[--n] = '\0';
    }
    /* a negative value that rounds to zero: "-0.000" is 0 */
    if (b[0] == '-' && strspn(b + 1, "0.") == strlen(b + 1))
        memmove(b, b + 1, strlen(b));
    tml__sb_adds(sb, b);
}

void tml__json_add_str_or_null(tml_strbuf *sb, const char *s)
{
    if (s && *s)
        tml__sb_add_json_str(sb, s);
    else
        tml__sb_adds(sb, "null");
}

void tml__jw_init(tml_jsonw *w, tml_strbuf *sb, int pretty)
{
    memset(w, 0, sizeof(*w));
    w->sb = sb;
    w->pretty = pretty;
}

static void indent(tml_jsonw *w)
{
    if (!w->pretty)
        return;
    tml__sb_addc(w->sb, '\n');
    for (int i = 0; i < w->depth; i++)
        tml__sb_adds(w->sb, "  ");
}

void tml__jw_key(tml_jsonw *w, const char *key)
{
    if (w->depth > 0) {
        if (w->count[w->depth]++)
            tml__sb_addc(w->sb, ',');
        indent(w);
    }
    if (key) {
        tml__sb_add_json_str(w->sb, key);
        tml__sb_adds(w->sb, w->pretty ? ": " : ":");
    }
}

void tml__jw_open(tml_jsonw *w, const char *key, char bracket)
{
    tml__jw_key(w, key);
    tml__sb_addc(w->sb, bracket);
    if (w->depth + 1 < TML_JW_DEPTH)
        w->depth++;
    w->count[w->depth] = 0;
}

void tml__jw_close(tml_jsonw *w, char bracket)
{
    int had = w->count[w->depth];
    if (w->depth > 0)
        w->depth--;
    if (had)
        indent(w);
    tml__sb_addc(w->sb, bracket);
}

void tml__jw_null(tml_jsonw *w, const char *key)
{
    tml__jw_key(w, key);
    tml__sb_adds(w->sb, "null");
}

void tml__jw_str(tml_jsonw *w, const char *key, const char *s)
{
    tml__jw_key(w, key);
    if (s)
        tml__sb_add_json_str(w->sb, s);
    else
        tml__sb_adds(w->sb, "null");
}

void tml__jw_bool(tml_jsonw *w, const char *key, int b)
{
    tml__jw_key(w, key);
    tml__sb_adds(w->sb, b ? "true" : "false");
}

void tml__jw_int(tml_jsonw *w, const char *key, long long v)
{
    tml__jw_key(w, key);
    tml__sb_addf(w->sb, "%lld", v);
}

void tml__jw_num(tml_jsonw *w, const char *key, double v, int decimals)
{
    tml__jw_key(w, key);
    tml__json_add_num(w->sb, v, decimals, 0);
}

/* Compact JSON of v with each object's keys sorted, so that two
 * declarations that say the same thing compare equal. */
static void canon(tml_strbuf *sb, const tml_json *v, int depth)
{
    if (!v || depth > 16) {
        tml__sb_adds(sb, "null");
        return;
    }
    switch (v->type) {
    case TML_JSON_NULL: tml__sb_adds(sb, "null"); break;
    case TML_JSON_BOOL: tml__sb_adds(sb, v->boolean ? "true" : "false"); break;
    case TML_JSON_NUMBER: tml__sb_addf(sb, "%.17g", v->number); break;
    case TML_JSON_STRING: tml__json_add_str_or_null(sb, v->str); break;
    case TML_JSON_ARRAY:
        tml__sb_addc(sb, '[');
        for (size_t i = 0; i < v->n; i++) {
            if (i)
                tml__sb_addc(sb, ',');
            canon(sb, &v->items[i], depth + 1);
        }
        tml__sb_addc(sb, ']');
        break;
    case TML_JSON_OBJECT: {
        tml__sb_addc(sb, '{');
        const char *last = NULL;
        for (size_t k = 0; k < v->n; k++) {   /* selection by key: n is small */
            size_t pick = v->n;
            for (size_t i = 0; i < v->n; i++)
                if ((!last || strcmp(v->keys[i], last) > 0) &&
                    (pick == v->n || strcmp(v->keys[i], v->keys[pick]) < 0))
                    pick = i;
            if (pick == v->n)
                break;
            if (last)
                tml__sb_addc(sb, ',');
            tml__json_add_str_or_null(sb, v->keys[pick]);
            tml__sb_addc(sb, ':');
            canon(sb, &v->items[pick], depth + 1);
            last = v->keys[pick];
        }
        tml__sb_addc(sb, '}');
        break;
    }
    }
}

void tml__json_add_canon(tml_strbuf *sb, const tml_json *v)
{
    canon(sb, v, 0);
}
