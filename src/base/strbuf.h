/*
 * strbuf.h - a growable NUL-terminated byte buffer (after git's strbuf).
 *
 * A zeroed struct (TML_STRBUF_INIT) is an empty buffer. buf is always
 * NUL-terminated once anything was added; tml__sb_release() frees it.
 * Allocation failure sets `failed` and later appends do nothing, so callers
 * check once at the end instead of after every append.
 */
#ifndef TML_STRBUF_H
#define TML_STRBUF_H

#include <stddef.h>
#include <stdarg.h>

typedef struct tml_strbuf {
    char *buf;
    size_t len;
    size_t cap;
    int failed;
} tml_strbuf;

#define TML_STRBUF_INIT {0, 0, 0, 0}

void tml__sb_release(tml_strbuf *sb);
void tml__sb_reset(tml_strbuf *sb);                 /* len = 0, keeps memory */
int tml__sb_grow(tml_strbuf *sb, size_t extra);
void tml__sb_add(tml_strbuf *sb, const void *data, size_t len);
void tml__sb_adds(tml_strbuf *sb, const char *s);
void tml__sb_addc(tml_strbuf *sb, char c);
void tml__sb_addf(tml_strbuf *sb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void tml__sb_vaddf(tml_strbuf *sb, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* Appends s as a JSON string literal, quotes included. */
void tml__sb_add_json_str(tml_strbuf *sb, const char *s);
/* Appends s with the five characters HTML gives a meaning escaped
 * (& < > " '): safe as an element's text and inside a quoted attribute. */
void tml__sb_add_html(tml_strbuf *sb, const char *s);
/* Returns the buffer (caller frees) and leaves sb empty. */
char *tml__sb_detach(tml_strbuf *sb, size_t *len);

#endif
