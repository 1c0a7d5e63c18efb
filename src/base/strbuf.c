/*
 * strbuf.c - growable string buffer. Reports are built by appending, so a
 * single "failed" flag replaces checking every append; the caller checks it
 * once before using the text.
 */
#include "base/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tml__sb_release(tml_strbuf *sb)
{
    free(sb->buf);
    sb->buf = NULL;
    sb->len = sb->cap = 0;
    sb->failed = 0;
}

void tml__sb_reset(tml_strbuf *sb)
{
    sb->len = 0;
    if (sb->buf)
        sb->buf[0] = '\0';
}

int tml__sb_grow(tml_strbuf *sb, size_t extra)
{
    if (sb->failed)
        return -1;
    if (sb->len + extra + 1 <= sb->cap)
        return 0;
    size_t cap = sb->cap ? sb->cap : 64;
    while (cap < sb->len + extra + 1) {
        if (cap > ((size_t)-1) / 2) {
            sb->failed = 1;
            return -1;
        }
        cap *= 2;
    }
    char *p = realloc(sb->buf, cap);
    if (!p) {
        sb->failed = 1;
        return -1;
    }
    sb->buf = p;
    sb->buf[sb->len] = '\0';   /* always a string, even before the first add */
    sb->cap = cap;
    return 0;
}

void tml__sb_add(tml_strbuf *sb, const void *data, size_t len)
{
    if (tml__sb_grow(sb, len) < 0)
        return;
    memcpy(sb->buf + sb->len, data, len);
    sb->len += len;
    sb->buf[sb->len] = '\0';
}

void tml__sb_adds(tml_strbuf *sb, const char *s)
{
    tml__sb_add(sb, s, strlen(s));
}

void tml__sb_addc(tml_strbuf *sb, char c)
{
    tml__sb_add(sb, &c, 1);
}

void tml__sb_vaddf(tml_strbuf *sb, const char *fmt, va_list ap)
{
    va_list cp;
    va_copy(cp, ap);
    int n = vsnprintf(NULL, 0, fmt, cp);
    va_end(cp);
    if (n < 0 || tml__sb_grow(sb, (size_t)n) < 0) {
        sb->failed = 1;
        return;
    }
    vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
    sb->len += (size_t)n;
}

void tml__sb_addf(tml_strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tml__sb_vaddf(sb, fmt, ap);
    va_end(ap);
}

void tml__sb_add_json_str(tml_strbuf *sb, const char *s)
{
    tml__sb_addc(sb, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':  tml__sb_adds(sb, "\\\""); break;
        case '\\': tml__sb_adds(sb, "\\\\"); break;
        case '\n': tml__sb_adds(sb, "\\n"); break;
        case '\r': tml__sb_adds(sb, "\\r"); break;
        case '\t': tml__sb_adds(sb, "\\t"); break;
        default:
            if (*p < 0x20)
                tml__sb_addf(sb, "\\u%04x", *p);
            else
                tml__sb_addc(sb, (char)*p);
        }
    }
    tml__sb_addc(sb, '"');
}

void tml__sb_add_html(tml_strbuf *sb, const char *s)
{
    size_t from = 0, i = 0;
    for (; s && s[i]; i++) {
        const char *e = s[i] == '&' ? "&amp;" : s[i] == '<' ? "&lt;" : s[i] == '>' ? "&gt;"
                      : s[i] == '"' ? "&quot;" : s[i] == '\'' ? "&#39;" : NULL;
        if (!e)
            continue;
        tml__sb_add(sb, s + from, i - from);
        tml__sb_adds(sb, e);
        from = i + 1;
    }
    if (s)
        tml__sb_add(sb, s + from, i - from);
}

char *tml__sb_detach(tml_strbuf *sb, size_t *len)
{
    if (tml__sb_grow(sb, 0) < 0)
        return NULL;
    char *p = sb->buf;
    if (len)
        *len = sb->len;
    sb->buf = NULL;
    sb->len = sb->cap = 0;
    return p;
}
