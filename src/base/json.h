/*
 * json.h - a small JSON DOM parser for files TraceML wrote itself
 * (final_summary.json, manifest.json) and reads back: `traceml view`,
 * `traceml compare`.
 *
 *     tml_json *doc;
 *     tml_json_error err;
 *     if (tml__json_parse(buf, len, &doc, &err) < 0)
 *         fprintf(stderr, "%s at byte %zu\n", err.msg, err.offset);
 *     const char *text = tml__json_str(tml__json_get(doc, "text"));
 *     tml__json_free(doc);
 *
 * The input is (buf, len) and need not be NUL-terminated. It must be one
 * complete RFC 8259 value with nothing but whitespace after it. Nesting
 * deeper than TML_JSON_MAX_DEPTH and numbers longer than 63 characters are
 * rejected, so no input can exhaust the stack.
 *
 * Ownership: tml__json_parse allocates the whole tree; tml__json_free
 * releases it. Every pointer obtained from the tree (values, strings, keys)
 * stays valid until then. The accessors accept NULL and return NULL/0 for a
 * missing value or a value of another type, so lookups can be chained.
 */
#ifndef TML_JSON_H
#define TML_JSON_H

#include <stddef.h>

#define TML_JSON_MAX_DEPTH 64

typedef enum tml_json_type {
    TML_JSON_NULL = 0,
    TML_JSON_BOOL,
    TML_JSON_NUMBER,
    TML_JSON_STRING,
    TML_JSON_ARRAY,
    TML_JSON_OBJECT
} tml_json_type;

typedef struct tml_json tml_json;
struct tml_json {
    tml_json_type type;
    int boolean;            /* BOOL */
    double number;          /* NUMBER */
    char *str;              /* STRING: decoded UTF-8, NUL-terminated */
    size_t str_len;         /* STRING: bytes (may contain NUL from \u0000) */
    tml_json *items;        /* ARRAY / OBJECT: n values */
    char **keys;            /* OBJECT: n keys, NUL-terminated */
    size_t n;
};

typedef struct tml_json_error {
    size_t offset;          /* byte offset of the problem in the input */
    const char *msg;        /* static text, e.g. "unexpected end of input" */
} tml_json_error;

/* 0 and *out set; TML_EPROTO (err filled, may be NULL) for invalid input;
 * TML_ENOMEM. */
int tml__json_parse(const char *buf, size_t len, tml_json **out, tml_json_error *err);
void tml__json_free(tml_json *v);

/* The value of key in an object (first match), or NULL. */
const tml_json *tml__json_get(const tml_json *obj, const char *key);
/* Dotted path through objects: "meta.run_name". NULL when any part is missing. */
const tml_json *tml__json_path(const tml_json *v, const char *path);
/* Item i of an array, or NULL. */
const tml_json *tml__json_at(const tml_json *arr, size_t i);
/* The string, or NULL when v is not a string. */
const char *tml__json_str(const tml_json *v);
/* 1 and *out set when v is a number, else 0. */
int tml__json_num(const tml_json *v, double *out);
/* A schema version, a number (1) or a string ("1", "1.2"): 1 and *major, or 0. */
int tml__json_version_major(const tml_json *v, long *major);

#endif
