/*
 * json.c - recursive-descent JSON parser building a small DOM.
 *
 * TraceML reads JSON only from files it wrote (summaries, manifests), but
 * a user can hand `traceml view` anything: a truncated file, a binary, a
 * hostile nesting bomb. So the parser takes (buf, len) without assuming a
 * terminating NUL, bounds its recursion, validates UTF-8 escapes, and on
 * any error frees what it built and reports the byte offset. The DOM is
 * plain structs (arrays of values, not linked lists) because summaries are
 * small and read once; lookups are linear scans, which for objects of a
 * few dozen keys beat any hash table.
 */
#include "base/json.h"
#include "base/array.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "traceml/traceml.h"
#include "base/strbuf.h"

typedef struct parser {
    const char *p;
    size_t len, off;
    int depth;
    int nomem;
    tml_json_error err;
} parser;

static int fail(parser *ps, const char *msg)
{
    if (!ps->err.msg) {
        ps->err.msg = msg;
        ps->err.offset = ps->off;
    }
    return -1;
}

static int at_end(const parser *ps)
{
    return ps->off >= ps->len;
}

static void skip_ws(parser *ps)
{
    while (ps->off < ps->len) {
        char c = ps->p[ps->off];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        ps->off++;
    }
}

static void release(tml_json *v)
{
    switch (v->type) {
    case TML_JSON_STRING:
        free(v->str);
        break;
    case TML_JSON_ARRAY:
    case TML_JSON_OBJECT:
        for (size_t i = 0; i < v->n; i++) {
            release(&v->items[i]);
            if (v->keys)
                free(v->keys[i]);
        }
        free(v->items);
        free(v->keys);
        break;
    default:
        break;
    }
    memset(v, 0, sizeof(*v));
}

static int parse_value(parser *ps, tml_json *out);

static int literal(parser *ps, const char *word)
{
    size_t n = strlen(word);
    for (size_t i = 0; i < n; i++) {
        if (ps->off + i >= ps->len)
            return ps->off += i, fail(ps, "unexpected end of input");
        if (ps->p[ps->off + i] != word[i])
            return ps->off += i, fail(ps, "invalid literal");
    }
    ps->off += n;
    return 0;
}

static int hex4(parser *ps, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        if (at_end(ps))
            return fail(ps, "unexpected end of input");
        char c = ps->p[ps->off];
        int d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return fail(ps, "invalid \\u escape");
        v = v * 16 + (uint32_t)d;
        ps->off++;
    }
    *out = v;
    return 0;
}

static void put_utf8(tml_strbuf *sb, uint32_t cp)
{
    char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xc0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xe0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        b[0] = (char)(0xf0 | (cp >> 18));
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    tml__sb_add(sb, b, n);
}

/* At the opening quote. Decodes into a fresh malloc'd string. */
static int parse_string(parser *ps, char **out, size_t *out_len)
{
    tml_strbuf sb = TML_STRBUF_INIT;
    ps->off++; /* the quote */
    tml__sb_grow(&sb, 16);
    for (;;) {
        if (at_end(ps))
            goto eof;
        unsigned char c = (unsigned char)ps->p[ps->off];
        if (c == '"') {
            ps->off++;
            break;
        }
        if (c < 0x20) {
            fail(ps, "control character in string");
            goto fail;
        }
        if (c != '\\') {
            size_t start = ps->off;
            while (ps->off < ps->len) {
                unsigned char d = (unsigned char)ps->p[ps->off];
                if (d == '"' || d == '\\' || d < 0x20)
                    break;
                ps->off++;
            }
            tml__sb_add(&sb, ps->p + start, ps->off - start);
            continue;
        }
        ps->off++;
        if (at_end(ps))
            goto eof;
        char e = ps->p[ps->off++];
        switch (e) {
        case '"': tml__sb_addc(&sb, '"'); break;
        case '\\': tml__sb_addc(&sb, '\\'); break;
        case '/': tml__sb_addc(&sb, '/'); break;
        case 'b': tml__sb_addc(&sb, '\b'); break;
        case 'f': tml__sb_addc(&sb, '\f'); break;
        case 'n': tml__sb_addc(&sb, '\n'); break;
        case 'r': tml__sb_addc(&sb, '\r'); break;
        case 't': tml__sb_addc(&sb, '\t'); break;
        case 'u': {
            uint32_t cp, lo;
            if (hex4(ps, &cp) < 0)
                goto fail;
            if (cp >= 0xdc00 && cp <= 0xdfff) {
                fail(ps, "lone low surrogate");
                goto fail;
            }
            if (cp >= 0xd800 && cp <= 0xdbff) {
                if (ps->len - ps->off < 2) {
                    if (ps->len == ps->off || ps->p[ps->off] == '\\')
                        goto eof;
                    fail(ps, "lone high surrogate");
                    goto fail;
                }
                if (ps->p[ps->off] != '\\' || ps->p[ps->off + 1] != 'u') {
                    fail(ps, "lone high surrogate");
                    goto fail;
                }
                ps->off += 2;
                if (hex4(ps, &lo) < 0)
                    goto fail;
                if (lo < 0xdc00 || lo > 0xdfff) {
                    fail(ps, "invalid surrogate pair");
                    goto fail;
                }
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            put_utf8(&sb, cp);
            break;
        }
        default:
            ps->off--;
            fail(ps, "invalid escape in string");
            goto fail;
        }
    }
    if (sb.failed) {
        ps->nomem = 1;
        fail(ps, "out of memory");
        goto fail;
    }
    *out_len = sb.len;
    *out = tml__sb_detach(&sb, NULL);
    if (!*out) {
        ps->nomem = 1;
        return fail(ps, "out of memory");
    }
    return 0;
eof:
    fail(ps, "unexpected end of input");
fail:
    tml__sb_release(&sb);
    return -1;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* One or more digits (a fraction's, an exponent's). */
static int digits(parser *ps)
{
    if (at_end(ps))
        return fail(ps, "unexpected end of input");
    if (!is_digit(ps->p[ps->off]))
        return fail(ps, "invalid number");
    while (ps->off < ps->len && is_digit(ps->p[ps->off]))
        ps->off++;
    return 0;
}

static int parse_number(parser *ps, tml_json *out)
{
    size_t start = ps->off;
    const char *p = ps->p;
    size_t n = ps->len;
    if (ps->off < n && p[ps->off] == '-')
        ps->off++;
    if (ps->off >= n)
        return fail(ps, "unexpected end of input");
    if (p[ps->off] == '0') {
        ps->off++;
    } else if (is_digit(p[ps->off])) {
        while (ps->off < n && is_digit(p[ps->off]))
            ps->off++;
    } else {
        return fail(ps, "invalid number");
    }
    if (ps->off < n && p[ps->off] == '.') {
        ps->off++;
        if (digits(ps) < 0)
            return -1;
    }
    if (ps->off < n && (p[ps->off] == 'e' || p[ps->off] == 'E')) {
        ps->off++;
        if (ps->off < n && (p[ps->off] == '+' || p[ps->off] == '-'))
            ps->off++;
        if (digits(ps) < 0)
            return -1;
    }
    char tmp[64];
    size_t k = ps->off - start;
    if (k >= sizeof(tmp)) {
        ps->off = start;
        return fail(ps, "number too long");
    }
    memcpy(tmp, p + start, k);
    tmp[k] = '\0';
    out->type = TML_JSON_NUMBER;
    out->number = strtod(tmp, NULL);
    return 0;
}

/* Appends one slot to a container being built; returns it zeroed. */
static tml_json *push(parser *ps, tml_json *c, size_t *cap, int with_key)
{
    size_t kcap = *cap;     /* keys grow in step with items */
    if (TML_GROW(c->items, c->n + 1, *cap) < 0 ||
        (with_key && TML_GROW(c->keys, c->n + 1, kcap) < 0))
        goto nomem;
    memset(&c->items[c->n], 0, sizeof(c->items[0]));
    if (with_key)
        c->keys[c->n] = NULL;
    return &c->items[c->n];
nomem:
    ps->nomem = 1;
    fail(ps, "out of memory");
    return NULL;
}

/* Skips white space; fails at the end of the input. */
static int more(parser *ps)
{
    skip_ws(ps);
    return at_end(ps) ? fail(ps, "unexpected end of input") : 0;
}

/* Past a container's opening bracket: 1 when it closes at once (the
 * bracket consumed), 0 when an item follows, -1. */
static int open_container(parser *ps, char close)
{
    ps->off++;
    if (more(ps) < 0)
        return -1;
    if (ps->p[ps->off] == close) {
        ps->off++;
        return 1;
    }
    return 0;
}

/* After an item: ',' (0: another follows), the closing bracket (1), or
 * the error `expected` (-1). */
static int after_item(parser *ps, char close, const char *expected)
{
    if (more(ps) < 0)
        return -1;
    char c = ps->p[ps->off++];
    if (c == close)
        return 1;
    if (c != ',') {
        ps->off--;
        return fail(ps, expected);
    }
    return 0;
}

/* Skips white space to the byte c (not consumed), else fails with msg. */
static int expect(parser *ps, char c, const char *msg)
{
    if (more(ps) < 0)
        return -1;
    return ps->p[ps->off] == c ? 0 : fail(ps, msg);
}

/* An object's key and its ':' (the opening '"' is next). */
static int parse_key(parser *ps, char **key)
{
    size_t klen;
    if (parse_string(ps, key, &klen) < 0 || expect(ps, ':', "expected ':'") < 0)
        return -1;
    ps->off++;
    return 0;
}

/* An array, or (object) an object: the items, each after its key. */
static int parse_container(parser *ps, tml_json *out, int object)
{
    char close = object ? '}' : ']';
    size_t cap = 0;
    out->type = object ? TML_JSON_OBJECT : TML_JSON_ARRAY;
    int rc = open_container(ps, close);
    while (rc == 0) {
        if (object && expect(ps, '"', "expected a string key") < 0)
            return -1;
        tml_json *slot = push(ps, out, &cap, object);
        if (!slot)
            return -1;
        out->n++;
        if ((object && parse_key(ps, &out->keys[out->n - 1]) < 0) || parse_value(ps, slot) < 0)
            return -1;
        rc = after_item(ps, close, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
    return rc < 0 ? -1 : 0;
}

static int parse_value(parser *ps, tml_json *out)
{
    if (more(ps) < 0)
        return -1;
    char c = ps->p[ps->off];
    switch (c) {
    case '{':
    case '[': {
        if (ps->depth >= TML_JSON_MAX_DEPTH)
            return fail(ps, "nesting too deep");
        ps->depth++;
        int rc = parse_container(ps, out, c == '{');
        ps->depth--;
        return rc;
    }
    case '"':
        out->type = TML_JSON_STRING;
        return parse_string(ps, &out->str, &out->str_len);
    case 't':
        out->type = TML_JSON_BOOL;
        out->boolean = 1;
        return literal(ps, "true");
    case 'f':
        out->type = TML_JSON_BOOL;
        return literal(ps, "false");
    case 'n':
        out->type = TML_JSON_NULL;
        return literal(ps, "null");
    default:
        if (c == '-' || is_digit(c))
            return parse_number(ps, out);
        return fail(ps, "unexpected character");
    }
}

int tml__json_parse(const char *buf, size_t len, tml_json **out, tml_json_error *err)
{
    parser ps;
    memset(&ps, 0, sizeof(ps));
    ps.p = buf;
    ps.len = buf ? len : 0;
    *out = NULL;
    tml_json *root = calloc(1, sizeof(*root));
    if (!root)
        return TML_ENOMEM;
    int rc = parse_value(&ps, root);
    if (rc == 0) {
        skip_ws(&ps);
        if (!at_end(&ps))
            rc = fail(&ps, "trailing characters after the value");
    }
    if (rc < 0) {
        release(root);
        free(root);
        if (err)
            *err = ps.err;
        return ps.nomem ? TML_ENOMEM : TML_EPROTO;
    }
    *out = root;
    return 0;
}

void tml__json_free(tml_json *v)
{
    if (!v)
        return;
    release(v);
    free(v);
}

const tml_json *tml__json_get(const tml_json *obj, const char *key)
{
    if (!obj || obj->type != TML_JSON_OBJECT || !key)
        return NULL;
    for (size_t i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0)
            return &obj->items[i];
    return NULL;
}

const tml_json *tml__json_path(const tml_json *v, const char *path)
{
    while (v && path && *path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        const tml_json *next = NULL;
        if (v->type != TML_JSON_OBJECT)
            return NULL;
        for (size_t i = 0; i < v->n; i++) {
            if (strlen(v->keys[i]) == n && memcmp(v->keys[i], path, n) == 0) {
                next = &v->items[i];
                break;
            }
        }
        v = next;
        path = dot ? dot + 1 : path + n;
    }
    return v;
}

const tml_json *tml__json_at(const tml_json *arr, size_t i)
{
    if (!arr || arr->type != TML_JSON_ARRAY || i >= arr->n)
        return NULL;
    return &arr->items[i];
}

const char *tml__json_str(const tml_json *v)
{
    return v && v->type == TML_JSON_STRING ? v->str : NULL;
}

int tml__json_num(const tml_json *v, double *out)
{
    if (!v || v->type != TML_JSON_NUMBER)
        return 0;
    if (out)
        *out = v->number;
    return 1;
}

int tml__json_version_major(const tml_json *v, long *major)
{
    double d;
    if (tml__json_num(v, &d)) {
        if (!isfinite(d) || d < 0 || d > 1e6 || d != floor(d))
            return 0;
        *major = (long)d;
        return 1;
    }
    const char *s = tml__json_str(v);
    if (!s)
        return 0;
    char *end;
    errno = 0;
    long m = strtol(s, &end, 10);
    if (end == s || errno || m < 0 || (*end && *end != '.'))
        return 0;
    *major = m;
    return 1;
}
