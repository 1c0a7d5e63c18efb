/* test_json.c - the JSON DOM parser: valid documents, every kind of invalid
 * or truncated input, the nesting limit, and random bytes (must not crash;
 * run under SANITIZE=1 to catch overreads). */
#include <stdlib.h>
#include <string.h>

#include "traceml/traceml.h"
#include "base/json.h"

#include "harness.h"

static tml_json *parse_ok(const char *s)
{
    tml_json *v = NULL;
    tml_json_error e = {0, NULL};
    int rc = tml__json_parse(s, strlen(s), &v, &e);
    if (rc != 0)
        fprintf(stderr, "unexpected parse error '%s' at %zu in %s\n", e.msg, e.offset, s);
    CHECK_EQ_INT(rc, 0);
    return v;
}

static int parse_rc(const char *s, size_t len, tml_json_error *e)
{
    tml_json *v = NULL;
    int rc = tml__json_parse(s, len, &v, e);
    if (rc == 0)
        tml__json_free(v);
    else if (v != NULL)
        rc = 12345; /* out must stay NULL on failure */
    return rc;
}

static void test_valid_document(void)
{
    const char *doc =
        " {\"schema_version\": 1, \"text\": \"line1\\nline2 \\u00e9 \\ud83d\\ude00\","
        " \"meta\": {\"run_name\": \"bert\", \"steps\": 256, \"clock\": null},"
        " \"list\": [1, -2.5e3, true, false, null, [], {}], \"zero\": 0, \"neg\": -0.25 } ";
    tml_json *v = parse_ok(doc);
    if (!v)
        return;
    double d = 0;
    CHECK_EQ_INT(v->type, TML_JSON_OBJECT);
    CHECK(tml__json_num(tml__json_get(v, "schema_version"), &d));
    CHECK_NEAR(d, 1.0, 0);
    CHECK_STR(tml__json_str(tml__json_get(v, "text")), "line1\nline2 \xc3\xa9 \xf0\x9f\x98\x80");
    CHECK_STR(tml__json_str(tml__json_path(v, "meta.run_name")), "bert");
    CHECK(tml__json_num(tml__json_path(v, "meta.steps"), &d) && d == 256);
    CHECK_EQ_INT(tml__json_path(v, "meta.clock")->type, TML_JSON_NULL);
    CHECK(tml__json_path(v, "meta.nope") == NULL);
    CHECK(tml__json_path(v, "text.x") == NULL);
    const tml_json *list = tml__json_get(v, "list");
    CHECK(list && list->n == 7);
    CHECK(tml__json_num(tml__json_at(list, 1), &d) && d == -2500.0);
    CHECK_EQ_INT(tml__json_at(list, 2)->boolean, 1);
    CHECK_EQ_INT(tml__json_at(list, 3)->boolean, 0);
    CHECK_EQ_INT(tml__json_at(list, 5)->type, TML_JSON_ARRAY);
    CHECK_EQ_INT(tml__json_at(list, 6)->type, TML_JSON_OBJECT);
    CHECK(tml__json_at(list, 7) == NULL);
    CHECK(tml__json_num(tml__json_get(v, "zero"), &d) && d == 0.0);
    CHECK(tml__json_num(tml__json_get(v, "neg"), &d) && d == -0.25);
    /* accessors are NULL-safe and type-checked */
    CHECK(tml__json_str(tml__json_get(v, "schema_version")) == NULL);
    CHECK(!tml__json_num(tml__json_get(v, "text"), &d));
    CHECK(tml__json_get(NULL, "x") == NULL);
    CHECK(tml__json_at(NULL, 0) == NULL);
    tml__json_free(v);
}

static void test_scalars_and_nul(void)
{
    tml_json *v = parse_ok("\"a\\u0000b\"");
    if (v) {
        CHECK_EQ_INT(v->str_len, 3);
        CHECK(memcmp(v->str, "a\0b", 3) == 0);
        tml__json_free(v);
    }
    v = parse_ok("  42  ");
    if (v) {
        CHECK_NEAR(v->number, 42, 0);
        tml__json_free(v);
    }
    /* not NUL-terminated: only len bytes are read */
    char buf[4] = {'1', '2', '3', '4'};
    tml_json *w = NULL;
    CHECK_EQ_INT(tml__json_parse(buf, 2, &w, NULL), 0);
    if (w) {
        CHECK_NEAR(w->number, 12, 0);
        tml__json_free(w);
    }
}

/* Empty strings, as key and as value, come back as "" of length 0 (a
 * stored summary with "text": "" once read uninitialised memory). */
static void test_empty_strings(void)
{
    tml_json *v = parse_ok("{\"schema_version\":1,\"text\":\"\",\"\":\"x\"}");
    if (!v)
        return;
    const tml_json *t = tml__json_get(v, "text");
    CHECK(t && t->type == TML_JSON_STRING && t->str_len == 0 && t->str[0] == '\0');
    CHECK_STR(tml__json_str(t), "");
    CHECK_STR(tml__json_str(tml__json_get(v, "")), "x");
    tml__json_free(v);
    v = parse_ok("\"\"");
    if (v) {
        CHECK_EQ_INT(v->str_len, 0);
        CHECK_STR(v->str, "");
        tml__json_free(v);
    }
}

static void test_invalid(void)
{
    static const char *bad[] = {
        "", "   ", "{", "[", "{\"a\"", "{\"a\":", "{\"a\":1", "{\"a\":1,", "[1,",
        "\"abc", "\"\\", "\"\\u12", "tru", "nul", "-", "1.", "1e", "1e+",
        "{a:1}", "{\"a\" 1}", "[1 2]", "[1,]", "{\"a\":1,}", "01", "+1", ".5",
        "1 2", "{} x", "\"\\x\"", "\"tab\there\"", "\"\\udc00\"", "\"\\ud800\"",
        "\"\\ud800\\u0041\"", "True", "NaN", "Infinity", "'a'", "[\"a\" : 1]",
        "1234567890123456789012345678901234567890123456789012345678901234567890",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tml_json_error e = {0, NULL};
        int rc = parse_rc(bad[i], strlen(bad[i]), &e);
        if (rc != TML_EPROTO)
            fprintf(stderr, "accepted invalid input: %s\n", bad[i]);
        CHECK_EQ_INT(rc, TML_EPROTO);
        CHECK(e.msg != NULL);
        CHECK(e.offset <= strlen(bad[i]));
    }
}

static void test_truncated_everywhere(void)
{
    /* every proper prefix of a valid document is invalid and says so */
    const char *doc = "{\"schema_version\": 1, \"text\": \"box \\u00e9\", \"a\": [1.5e2, true, null, {\"b\": false}]}";
    size_t n = strlen(doc);
    int eofs = 0;
    for (size_t k = 0; k < n; k++) {
        tml_json_error e = {0, NULL};
        char *copy = malloc(k ? k : 1); /* exact size: ASan catches overreads */
        memcpy(copy, doc, k);
        int rc = parse_rc(copy, k, &e);
        free(copy);
        CHECK_EQ_INT(rc, TML_EPROTO);
        if (e.msg && strcmp(e.msg, "unexpected end of input") == 0)
            eofs++;
    }
    CHECK_EQ_INT(eofs, (long long)n);
    tml_json_error e = {0, NULL};
    CHECK_EQ_INT(parse_rc(doc, n, &e), 0);
}

static void test_depth_limit(void)
{
    char buf[2 * (TML_JSON_MAX_DEPTH + 2) + 1];
    for (int depth = TML_JSON_MAX_DEPTH; depth <= TML_JSON_MAX_DEPTH + 1; depth++) {
        size_t k = 0;
        for (int i = 0; i < depth; i++)
            buf[k++] = '[';
        for (int i = 0; i < depth; i++)
            buf[k++] = ']';
        tml_json_error e = {0, NULL};
        int rc = parse_rc(buf, k, &e);
        if (depth <= TML_JSON_MAX_DEPTH) {
            CHECK_EQ_INT(rc, 0);
        } else {
            CHECK_EQ_INT(rc, TML_EPROTO);
            CHECK_STR(e.msg, "nesting too deep");
        }
    }
    /* a nesting bomb far beyond the limit fails fast, no stack overflow */
    size_t big = 1000000;
    char *bomb = malloc(big);
    memset(bomb, '[', big);
    tml_json_error e = {0, NULL};
    CHECK_EQ_INT(parse_rc(bomb, big, &e), TML_EPROTO);
    free(bomb);
}

static void test_random_bytes(void)
{
    /* fuzz-ish: random bytes and random mutations of a valid document */
    const char *doc = "{\"k\": [1, 2.5, \"s\\n\", {\"x\": null, \"y\": true}], \"t\": \"\\ud83d\\ude00\"}";
    size_t n = strlen(doc);
    unsigned seed = 12345;
    int ok = 0;
    for (int iter = 0; iter < 20000; iter++) {
        size_t len = (size_t)(iter % 97);
        char *b = malloc(len ? len : 1);
        if (iter % 2 == 0) {
            for (size_t i = 0; i < len; i++) {
                seed = seed * 1103515245u + 12345u;
                static const char set[] = "{}[]\":,0123456789-+.eEtrufalsn \\u\x01\xff";
                b[i] = set[(seed >> 16) % (sizeof(set) - 1)];
            }
        } else {
            len = n;
            free(b);
            b = malloc(n);
            memcpy(b, doc, n);
            for (int m = 0; m < 3; m++) {
                seed = seed * 1103515245u + 12345u;
                b[(seed >> 8) % n] = (char)(seed >> 20);
            }
        }
        tml_json_error e = {0, NULL};
        int rc = parse_rc(b, len, &e);
        CHECK(rc == 0 || rc == TML_EPROTO);
        ok += rc == 0;
        free(b);
    }
    CHECK(ok >= 0);
}

#define TESTS X(test_valid_document) X(test_scalars_and_nul) X(test_empty_strings) X(test_invalid) \
    X(test_truncated_everywhere) X(test_depth_limit) X(test_random_bytes)
#include "harness.h"
