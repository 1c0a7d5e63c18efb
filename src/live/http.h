/*
 * http.h - the few pieces of HTTP/1.1 the live server needs: a request-head
 * parser over (buf, len), the status line and headers of a response, and
 * Server-Sent Events framing.
 *
 *     tml_http_req req;
 *     int n = tml__http_parse(buf, len, &req);
 *     if (n == 0)      -> read more (the head is not complete yet)
 *     else if (n < 0)  -> answer status -n (400, 405, 413, 414, 431, 505)
 *     else             -> req holds the request; its head was n bytes
 *
 * The server only takes GET and HEAD without a body, so anything that
 * announces a body (Content-Length > 0, Transfer-Encoding) is refused with
 * 413 rather than read. Limits are fixed and small on purpose: a dashboard
 * never sends more than a few hundred bytes.
 *
 * Ownership: req is filled by copying (bounded); nothing is allocated.
 */
#ifndef TML_HTTP_H
#define TML_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "base/strbuf.h"

#define TML_HTTP_MAX_HEAD 8192      /* whole request head; more: 431 */
#define TML_HTTP_MAX_LINE 2048      /* request line; more: 414 */
#define TML_HTTP_MAX_TARGET 512     /* path + query; more: 414 */
#define TML_HTTP_MAX_HEADERS 64     /* header fields; more: 431 */

typedef struct tml_http_req {
    char method[8];                   /* "GET" or "HEAD" */
    char path[TML_HTTP_MAX_TARGET];   /* the target up to '?' */
    char query[TML_HTTP_MAX_TARGET];  /* after '?', "" when none */
    int version_minor;                /* HTTP/1.0 -> 0, HTTP/1.1 -> 1 */
    int keep_alive;                   /* the connection may serve another request */
    int has_host;
    char host[256];                   /* the Host field's value, "" without one */
    size_t nheaders;
} tml_http_req;

/*
 * Parses one request head at the start of buf. Returns the head's length
 * (> 0) when it is complete and acceptable, 0 when more bytes are needed
 * (and none of the limits is passed yet), or -status for a request to
 * refuse: -400 malformed, -405 a method other than GET/HEAD, -413 a body,
 * -414 a request line or target too long, -431 head too large or too many
 * fields, -505 an HTTP version other than 1.0/1.1. Line ends may be CRLF
 * or LF.
 */
int tml__http_parse(const char *buf, size_t len, tml_http_req *req);

/* 1 when a Host value (with or without a port) names this machine's
 * loopback: localhost, 127.0.0.0/8, ::1. What a browser sends to a
 * loopback-bound server unless a DNS rebinding attack is under way. */
int tml__http_host_is_loopback(const char *host);

/* "OK", "Not Found", ... ("Unknown" for others). */
const char *tml__http_reason(int status);

/* The dashboard is self-contained: its page, script and style files and
 * dygraphs come from this server, its data from /api and /events, and it
 * has no inline script or <style>. Nothing else is allowed: no script
 * from elsewhere or inline, no eval, no frames, no forms, no plugins, no
 * <base>. The one allowance is style attributes (style-src-attr):
 * dygraphs' legend sets its series' colours in style="..." it writes as
 * HTML; a browser without CSP level 3 falls back to style-src 'self' and
 * draws the legend uncoloured. */
#define TML_HTTP_CSP                                                                  \
    "default-src 'none'; script-src 'self'; style-src 'self'; "                       \
    "style-src-attr 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; "      \
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

/*
 * Appends a response head: status line, Content-Type (when ctype),
 * Content-Length (when body_len >= 0), Cache-Control: no-store,
 * X-Content-Type-Options: nosniff, Content-Security-Policy: TML_HTTP_CSP,
 * Connection (keep-alive or close), the extra header lines (each ending in
 * "\r\n"; may be NULL), and the blank line.
 */
void tml__http_head(tml_strbuf *out, int status, const char *ctype, long long body_len,
                    int keep_alive, const char *extra);

/* A whole small error response (text/plain body "<status> <reason>\n"),
 * Connection: close. */
void tml__http_error(tml_strbuf *out, int status);

/*
 * Appends one Server-Sent Event: "event: <event>\n" (when event),
 * "id: <id>\n" (when id > 0), one "data: " line per line of data (so
 * multi-line JSON arrives intact: the browser joins them with '\n'), and
 * the blank line. CR and CRLF in data count as line ends.
 */
void tml__sse_event(tml_strbuf *out, const char *event, uint64_t id, const char *data,
                    size_t len);

#endif
