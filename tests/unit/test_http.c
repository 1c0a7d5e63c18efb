/*
 * test_http.c - the live server's HTTP request parser (table-driven, with
 * every refusal status on both sides of its limit), SSE framing, and a
 * deterministic fuzz: random and mutated heads must never crash, read
 * past len, or give an answer other than "more", a head length within
 * len, or one of the documented refusals.
 */
#include <stdint.h>
#include <stdlib.h>

#include "harness.h"
#include "live/http.h"

typedef struct {
    const char *name;
    const char *req;
    int want;            /* > 0: accepted, the head's length = strlen(req); 0 more; < 0 status */
    const char *path, *query;
    int keep_alive;
} http_case;

static const http_case cases[] = {
    {"get 1.1", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 1, "/", "", 1},
    {"get 1.0 no host", "GET /metrics HTTP/1.0\r\n\r\n", 1, "/metrics", "", 0},
    {"1.0 keep-alive", "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 1, "/", "", 1},
    {"1.1 close", "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 1, "/", "", 0},
    {"connection list", "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, CLOSE\r\n\r\n", 1,
     "/", "", 0},
    {"head", "HEAD /api/live HTTP/1.1\r\nHost: x\r\n\r\n", 1, "/api/live", "", 1},
    {"query", "GET /events?x=1&y=2 HTTP/1.1\r\nHost: a\r\n\r\n", 1, "/events", "x=1&y=2", 1},
    {"bare lf", "GET / HTTP/1.1\nHost: x\n\n", 1, "/", "", 1},
    {"leading crlf", "\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", 1, "/", "", 1},
    {"header ows", "GET / HTTP/1.1\r\nHost:   x  \r\nAccept:\t*/*\r\n\r\n", 1, "/", "", 1},
    {"content-length 0", "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", 1, "/", "",
     1},
    /* incomplete */
    {"empty", "", 0, NULL, NULL, 0},
    {"partial line", "GET / HT", 0, NULL, NULL, 0},
    {"partial head", "GET / HTTP/1.1\r\nHost: x\r\n", 0, NULL, NULL, 0},
    /* refusals */
    {"post", "POST / HTTP/1.1\r\nHost: x\r\n\r\n", -405, NULL, NULL, 0},
    {"delete", "DELETE / HTTP/1.1\r\nHost: x\r\n\r\n", -405, NULL, NULL, 0},
    {"lowercase get", "get / HTTP/1.1\r\nHost: x\r\n\r\n", -405, NULL, NULL, 0},
    {"binary early", "\x16\x03\x01\x02", -400, NULL, NULL, 0},
    {"no target", "GET HTTP/1.1\r\n\r\n", -400, NULL, NULL, 0},
    {"absolute target", "GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\n", -400, NULL, NULL, 0},
    {"two spaces", "GET  / HTTP/1.1\r\nHost: x\r\n\r\n", -400, NULL, NULL, 0},
    {"ctl in target", "GET /a\x01 HTTP/1.1\r\nHost: x\r\n\r\n", -400, NULL, NULL, 0},
    {"bad version", "GET / HTTX/1.1\r\nHost: x\r\n\r\n", -400, NULL, NULL, 0},
    {"http 2", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", -505, NULL, NULL, 0},
    {"http 1.2", "GET / HTTP/1.2\r\nHost: x\r\n\r\n", -505, NULL, NULL, 0},
    {"1.1 without host", "GET / HTTP/1.1\r\n\r\n", -400, NULL, NULL, 0},
    {"two hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", -400, NULL, NULL, 0},
    {"folding", "GET / HTTP/1.1\r\nHost: a\r\n x\r\n\r\n", -400, NULL, NULL, 0},
    {"no colon", "GET / HTTP/1.1\r\nHost a\r\n\r\n", -400, NULL, NULL, 0},
    {"space in name", "GET / HTTP/1.1\r\nHo st: a\r\n\r\n", -400, NULL, NULL, 0},
    {"ctl in value", "GET / HTTP/1.1\r\nHost: a\x01\r\n\r\n", -400, NULL, NULL, 0},
    {"body", "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", -413, NULL, NULL,
     0},
    {"bad length", "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", -400, NULL, NULL,
     0},
    {"chunked", "GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", -413, NULL,
     NULL, 0},
};

static void test_table(void)
{
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const http_case *c = &cases[i];
        tml_http_req req;
        int n = tml__http_parse(c->req, strlen(c->req), &req);
        int want = c->want > 0 ? (int)strlen(c->req) : c->want;
        if (c->want > 0 && strstr(c->req, "hello"))
            want = (int)(strstr(c->req, "hello") - c->req);
        if (n != want)
            fprintf(stderr, "case '%s': got %d, want %d\n", c->name, n, want);
        CHECK_EQ_INT(n, want);
        if (c->want > 0 && n > 0) {
            CHECK_STR(req.path, c->path);
            CHECK_STR(req.query, c->query);
            CHECK_EQ_INT(req.keep_alive, c->keep_alive);
        }
    }
}

/* A head with n header fields of the given value length. */
static char *make_head(size_t nfields, size_t vlen, size_t *len)
{
    size_t cap = 64 + nfields * (vlen + 16);
    char *b = malloc(cap);
    size_t o = (size_t)snprintf(b, cap, "GET / HTTP/1.1\r\nHost: x\r\n");
    for (size_t i = 0; i < nfields; i++) {
        o += (size_t)snprintf(b + o, cap - o, "X-%zu: ", i);
        memset(b + o, 'v', vlen);
        o += vlen;
        b[o++] = '\r';
        b[o++] = '\n';
    }
    b[o++] = '\r';
    b[o++] = '\n';
    *len = o;
    return b;
}

static void test_limits_both_sides(void)
{
    tml_http_req req;
    size_t len;
    /* header count: 64 fields in all is fine (Host + 63), 65 is not */
    char *h = make_head(TML_HTTP_MAX_HEADERS - 1, 4, &len);
    CHECK_EQ_INT(tml__http_parse(h, len, &req), (int)len);
    free(h);
    h = make_head(TML_HTTP_MAX_HEADERS, 4, &len);
    CHECK_EQ_INT(tml__http_parse(h, len, &req), -431);
    free(h);
    /* head size: just under 8 KiB is fine; over is 431 */
    h = make_head(1, TML_HTTP_MAX_HEAD - 40 - 8, &len);
    CHECK(len < TML_HTTP_MAX_HEAD);
    CHECK_EQ_INT(tml__http_parse(h, len, &req), (int)len);
    free(h);
    h = make_head(1, TML_HTTP_MAX_HEAD, &len);
    CHECK_EQ_INT(tml__http_parse(h, len, &req), -431);
    /* ...also when only the first 8 KiB have arrived */
    CHECK_EQ_INT(tml__http_parse(h, TML_HTTP_MAX_HEAD, &req), -431);
    CHECK_EQ_INT(tml__http_parse(h, TML_HTTP_MAX_HEAD - 1, &req), 0);
    free(h);

    /* target length: 511 is fine, 512 is 414 */
    char line[TML_HTTP_MAX_LINE + 64];
    for (int extra = 0; extra < 2; extra++) {
        size_t tl = TML_HTTP_MAX_TARGET - 1 + (size_t)extra;
        char *t = malloc(tl + 1);
        t[0] = '/';
        memset(t + 1, 'a', tl - 1);
        t[tl] = '\0';
        int n = snprintf(line, sizeof(line), "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", t);
        CHECK_EQ_INT(tml__http_parse(line, (size_t)n, &req), extra ? -414 : n);
        free(t);
    }
    /* a request line that never ends: 414 once past the line limit */
    char *big = malloc(TML_HTTP_MAX_LINE + 2);
    memcpy(big, "GET /", 5);
    memset(big + 5, 'a', TML_HTTP_MAX_LINE + 2 - 5);
    CHECK_EQ_INT(tml__http_parse(big, TML_HTTP_MAX_LINE, &req), 0);
    CHECK_EQ_INT(tml__http_parse(big, TML_HTTP_MAX_LINE + 2, &req), -414);
    free(big);
}

static void test_every_prefix(void)
{
    /* a valid request cut anywhere is "more", never an error */
    const char *r = "GET /api/live?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8765\r\n"
                    "User-Agent: test\r\nAccept: */*\r\n\r\n";
    size_t n = strlen(r);
    tml_http_req req;
    for (size_t k = 0; k < n; k++) {
        int got = tml__http_parse(r, k, &req);
        if (got != 0)
            fprintf(stderr, "prefix %zu: %d\n", k, got);
        CHECK_EQ_INT(got, 0);
    }
    CHECK_EQ_INT(tml__http_parse(r, n, &req), (int)n);
}

static void test_responses(void)
{
    tml_strbuf sb = TML_STRBUF_INIT;
    tml__http_error(&sb, 431);
    CHECK(strncmp(sb.buf, "HTTP/1.1 431 Request Header Fields Too Large\r\n", 46) == 0);
    CHECK(strstr(sb.buf, "Connection: close\r\n") != NULL);
    CHECK(strstr(sb.buf, "Content-Length: 36\r\n") != NULL);
    CHECK(strstr(sb.buf, "\r\n\r\n431 Request Header Fields Too Large\n") != NULL);
    tml__sb_reset(&sb);
    tml__http_error(&sb, 405);
    CHECK(strstr(sb.buf, "Allow: GET, HEAD\r\n") != NULL);
    tml__sb_reset(&sb);
    tml__http_head(&sb, 200, "text/plain", -1, 1, NULL);
    CHECK(strstr(sb.buf, "Content-Length") == NULL);
    CHECK(strstr(sb.buf, "\r\nX-Content-Type-Options: nosniff\r\n") != NULL);
    CHECK(strstr(sb.buf, "\r\nContent-Security-Policy: default-src 'none'; script-src 'self'; "
                         "style-src 'self'; ") != NULL);
    CHECK(strstr(sb.buf, "Connection: keep-alive\r\n\r\n") != NULL);
    tml__sb_release(&sb);
}

static void test_sse(void)
{
    tml_strbuf sb = TML_STRBUF_INIT;
    tml__sse_event(&sb, "live", 7, "{\"a\":1}", 7);
    CHECK_STR(sb.buf, "event: live\nid: 7\ndata: {\"a\":1}\n\n");
    tml__sb_reset(&sb);
    const char *multi = "{\n  \"a\": 1\r\n}\n";
    tml__sse_event(&sb, "summary", 0, multi, strlen(multi));
    CHECK_STR(sb.buf, "event: summary\ndata: {\ndata:   \"a\": 1\ndata: }\n\n");
    tml__sb_reset(&sb);
    tml__sse_event(&sb, NULL, 0, "", 0);
    CHECK_STR(sb.buf, "data: \n\n");
    tml__sb_release(&sb);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

static int allowed(int n, size_t len)
{
    if (n > 0)
        return (size_t)n <= len;
    switch (-n) {
    case 0: case 400: case 405: case 413: case 414: case 431: case 505:
        return 1;
    default:
        return 0;
    }
}

/* What a loopback-bound server accepts as Host (DNS rebinding defence). */
static void test_host_loopback(void)
{
    static const char *const yes[] = {"localhost", "LocalHost:8765", "127.0.0.1", "127.0.0.1:80",
                                      "127.1.2.3:9", "[::1]", "[::1]:8765"};
    static const char *const no[] = {"", "x", "evil.example", "evil.example:8765",
                                     "localhost.evil.example", "127.0.0.1.evil.example",
                                     "128.0.0.1", "127.0.0.256", "[::2]", "[::1]x", "::1",
                                     "10.0.0.1:8765", ":8765"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        CHECK(tml__http_host_is_loopback(yes[i]));
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        if (tml__http_host_is_loopback(no[i]))
            fprintf(stderr, "accepted: %s\n", no[i]);
        CHECK(!tml__http_host_is_loopback(no[i]));
    }
    tml_http_req req;
    const char *r = "GET / HTTP/1.1\r\nHost:  evil.example:80 \r\n\r\n";
    CHECK(tml__http_parse(r, strlen(r), &req) > 0);
    CHECK_STR(req.host, "evil.example:80");
}

static void test_fuzz(void)
{
    static const char *const seeds[] = {
        "GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n",
        "HEAD /metrics?a=b HTTP/1.0\r\nContent-Length: 0\r\n\r\n",
        "GET /events HTTP/1.1\nHost: y\nTransfer-Encoding: chunked\n\n",
    };
    const char alphabet[] = "GETHADPOS /?:\r\n\t\x01\x7f\xff" "HTTP/1.01Content-Length";
    tml_http_req req;
    int bad = 0;
    for (int iter = 0; iter < 200000; iter++) {
        char buf[512];
        size_t len;
        const char *seed = seeds[rnd() % 3];
        if (rnd() % 4 == 0) {   /* random bytes */
            len = rnd() % sizeof(buf);
            for (size_t i = 0; i < len; i++)
                buf[i] = rnd() % 4 ? alphabet[rnd() % (sizeof(alphabet) - 1)] : (char)rnd();
        } else {                /* a mutated valid request */
            len = strlen(seed);
            memcpy(buf, seed, len);
            int muts = 1 + (int)(rnd() % 4);
            for (int m = 0; m < muts; m++) {
                size_t at = rnd() % len;
                switch (rnd() % 3) {
                case 0: buf[at] = (char)rnd(); break;
                case 1: buf[at] = alphabet[rnd() % (sizeof(alphabet) - 1)]; break;
                default: len = at + 1; break;   /* truncate */
                }
            }
        }
        /* a copy exactly len long, so ASan sees any read past it */
        char *exact = malloc(len ? len : 1);
        memcpy(exact, buf, len);
        int n = tml__http_parse(exact, len, &req);
        if (!allowed(n, len))
            bad++;
        if (n > 0) {
            bad += strcmp(req.method, "GET") != 0 && strcmp(req.method, "HEAD") != 0;
            bad += req.path[0] != '/';
        }
        free(exact);
    }
    CHECK_EQ_INT(bad, 0);
}

#define TESTS X(test_table) X(test_limits_both_sides) X(test_every_prefix) \
    X(test_responses) X(test_sse) X(test_host_loopback) X(test_fuzz)
#include "harness.h"
