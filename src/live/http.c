/*
 * http.c - a strict, small HTTP/1.1 request-head parser and response
 * helpers for the live server.
 *
 * The live server faces a browser on loopback, a Prometheus scraper, and
 * whatever else reaches the port, so the parser is written for the last:
 * it takes (buf, len) of whatever has arrived so far, never reads past len,
 * never allocates, and decides as early as it can. A request line that is
 * already wrong is refused before its head is complete (a client sending
 * binary gets 400 at once, not after 8 KiB); a head that passes a limit is
 * refused as soon as the limit is passed. Everything that would need a body
 * is refused, because the server has nothing to receive.
 *
 * Leniency is limited to what real clients do: bare LF line ends, any case
 * in header names, optional whitespace around values. Obsolete line folding
 * and control characters are refused (they are how request smuggling
 * starts).
 */
#include "live/http.h"

#include <stdio.h>
#include <string.h>

static int is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return 1;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Length of the line at p (without its LF / CRLF) and, in *next, where the
 * following line starts. -1 when no LF is within n bytes. */
static long line_len(const char *p, size_t n, size_t *next)
{
    const char *nl = memchr(p, '\n', n);
    if (!nl)
        return -1;
    size_t l = (size_t)(nl - p);
    *next = l + 1;
    if (l && p[l - 1] == '\r')
        l--;
    return (long)l;
}

static int ieq(const char *a, size_t alen, const char *b)
{
    size_t n = strlen(b);
    if (alen != n)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char x = a[i], y = b[i];
        if (x >= 'A' && x <= 'Z')
            x = (char)(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z')
            y = (char)(y - 'A' + 'a');
        if (x != y)
            return 0;
    }
    return 1;
}

/* Does the comma-separated list (v, n) hold token t (any case)? */
static int has_token(const char *v, size_t n, const char *t)
{
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t s = i;
        while (i < n && v[i] != ',')
            i++;
        size_t e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        if (e > s && ieq(v + s, e - s, t))
            return 1;
    }
    return 0;
}

/* Checks the method token so far (the line may be incomplete). */
static int method_prefix_ok(const char *p, size_t n)
{
    for (size_t i = 0; i < n && p[i] != ' '; i++)
        if (!is_tchar((unsigned char)p[i]) || i >= 16)
            return 0;
    return 1;
}

/* The token at the start of the l bytes at p, ended by the byte `end`:
 * its length (at least 1, every byte a tchar), or -1. */
static long token_before(const char *p, size_t l, char end)
{
    const char *e = memchr(p, end, l);
    if (!e || e == p)
        return -1;
    for (const char *q = p; q < e; q++)
        if (!is_tchar((unsigned char)*q))
            return -1;
    return (long)(e - p);
}

static int parse_request_line(const char *p, size_t l, tml_http_req *req)
{
    long method_len = token_before(p, l, ' ');
    if (method_len < 0)
        return -400;
    size_t ml = (size_t)method_len;
    const char *t = p + ml + 1;
    const char *end = p + l;
    const char *sp2 = memchr(t, ' ', (size_t)(end - t));
    if (!sp2 || sp2 == t)
        return -400;
    size_t tl = (size_t)(sp2 - t);
    const char *v = sp2 + 1;
    size_t vl = (size_t)(end - v);
    if (vl != 8 || memcmp(v, "HTTP/", 5) != 0 || v[5] < '0' || v[5] > '9' || v[6] != '.' ||
        v[7] < '0' || v[7] > '9')
        return -400;
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
        return -505;
    req->version_minor = v[7] - '0';
    if (t[0] != '/')
        return -400;   /* origin-form only: no proxies, no "*" */
    for (size_t i = 0; i < tl; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c <= 0x20 || c >= 0x7f)
            return -400;
    }
    if (tl >= TML_HTTP_MAX_TARGET)
        return -414;
    const char *q = memchr(t, '?', tl);
    size_t pl = q ? (size_t)(q - t) : tl;
    memcpy(req->path, t, pl);
    req->path[pl] = '\0';
    if (q) {
        size_t ql = tl - pl - 1;
        memcpy(req->query, q + 1, ql);
        req->query[ql] = '\0';
    }
    if (ml == 3 && memcmp(p, "GET", 3) == 0)
        memcpy(req->method, "GET", 4);
    else if (ml == 4 && memcmp(p, "HEAD", 4) == 0)
        memcpy(req->method, "HEAD", 5);
    else
        return -405;
    return 0;
}

static int parse_field(const char *p, size_t l, tml_http_req *req, int *conn_close,
                       int *conn_keep)
{
    if (p[0] == ' ' || p[0] == '\t')
        return -400;   /* obsolete line folding */
    long name_len = token_before(p, l, ':');
    if (name_len < 0)
        return -400;
    size_t nl = (size_t)name_len;
    const char *v = p + nl + 1;
    size_t vl = l - nl - 1;
    for (size_t i = 0; i < vl; i++) {
        unsigned char c = (unsigned char)v[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return -400;
    }
    while (vl && (*v == ' ' || *v == '\t')) {
        v++;
        vl--;
    }
    while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
        vl--;
    if (ieq(p, nl, "host")) {
        if (req->has_host || vl >= sizeof(req->host))
            return -400;   /* two Host fields, or no host name */
        req->has_host = 1;
        memcpy(req->host, v, vl);
        req->host[vl] = '\0';
    } else if (ieq(p, nl, "content-length")) {
        if (!vl)
            return -400;
        int nonzero = 0;
        for (size_t i = 0; i < vl; i++) {
            if (v[i] < '0' || v[i] > '9')
                return -400;
            nonzero |= v[i] != '0';
        }
        if (nonzero)
            return -413;
    } else if (ieq(p, nl, "transfer-encoding")) {
        return -413;
    } else if (ieq(p, nl, "connection")) {
        *conn_close |= has_token(v, vl, "close");
        *conn_keep |= has_token(v, vl, "keep-alive");
    }
    return 0;
}

int tml__http_parse(const char *buf, size_t len, tml_http_req *req)
{
    memset(req, 0, sizeof(*req));
    size_t avail = len < TML_HTTP_MAX_HEAD ? len : TML_HTTP_MAX_HEAD;
    size_t off = 0, next = 0;

    /* Browsers may send a stray CRLF between requests (RFC 9112 2.2). */
    while (off < avail && off < 4 && (buf[off] == '\r' || buf[off] == '\n'))
        off++;
    long l = line_len(buf + off, avail - off, &next);
    if (l < 0) {
        size_t have = avail - off;
        if (!method_prefix_ok(buf + off, have))
            return -400;
        if (have > TML_HTTP_MAX_LINE)
            return -414;
        return len >= TML_HTTP_MAX_HEAD ? -431 : 0;
    }
    if ((size_t)l > TML_HTTP_MAX_LINE)
        return -414;
    int rc = parse_request_line(buf + off, (size_t)l, req);
    if (rc < 0)
        return rc;
    off += next;

    int conn_close = 0, conn_keep = 0;
    for (;;) {
        l = line_len(buf + off, avail - off, &next);
        if (l < 0) {
            /* the head is not complete: refuse early what is already wrong */
            if (len >= TML_HTTP_MAX_HEAD)
                return -431;
            return 0;
        }
        if (l == 0) {
            off += next;
            break;
        }
        if (++req->nheaders > TML_HTTP_MAX_HEADERS)
            return -431;
        rc = parse_field(buf + off, (size_t)l, req, &conn_close, &conn_keep);
        if (rc < 0)
            return rc;
        off += next;
    }
    if (req->version_minor == 1 && !req->has_host)
        return -400;
    req->keep_alive = req->version_minor == 1 ? !conn_close : (conn_keep && !conn_close);
    return (int)off;
}

int tml__http_host_is_loopback(const char *host)
{
    char name[256];
    size_t n = strlen(host);
    const char *end;

    if (host[0] == '[') {                      /* [v6] or [v6]:port */
        end = strchr(host, ']');
        if (!end || (end[1] && end[1] != ':'))
            return 0;
        return (size_t)(end - host - 1) == 3 && strncmp(host + 1, "::1", 3) == 0;
    }
    end = strchr(host, ':');
    n = end ? (size_t)(end - host) : n;
    if (n == 0 || n >= sizeof(name))
        return 0;
    for (size_t i = 0; i < n; i++)
        name[i] = (char)(host[i] >= 'A' && host[i] <= 'Z' ? host[i] + 32 : host[i]);
    name[n] = '\0';
    if (strcmp(name, "localhost") == 0)
        return 1;
    unsigned a, b, c, d;
    char extra;
    return sscanf(name, "%u.%u.%u.%u%c", &a, &b, &c, &d, &extra) == 4 && a == 127 && b < 256 &&
           c < 256 && d < 256;
}

const char *tml__http_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 403: return "Forbidden";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

void tml__http_head(tml_strbuf *out, int status, const char *ctype, long long body_len,
                    int keep_alive, const char *extra)
{
    tml__sb_addf(out, "HTTP/1.1 %d %s\r\n", status, tml__http_reason(status));
    if (ctype)
        tml__sb_addf(out, "Content-Type: %s\r\n", ctype);
    if (body_len >= 0)
        tml__sb_addf(out, "Content-Length: %lld\r\n", body_len);
    tml__sb_adds(out, "Cache-Control: no-store\r\n"
                      "X-Content-Type-Options: nosniff\r\n"
                      "Content-Security-Policy: " TML_HTTP_CSP "\r\n");
    tml__sb_adds(out, keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n");
    if (extra)
        tml__sb_adds(out, extra);
    tml__sb_adds(out, "\r\n");
}

void tml__http_error(tml_strbuf *out, int status)
{
    char body[96];
    int n = snprintf(body, sizeof(body), "%d %s\n", status, tml__http_reason(status));
    const char *extra = status == 405 ? "Allow: GET, HEAD\r\n" : NULL;
    tml__http_head(out, status, "text/plain; charset=utf-8", n, 0, extra);
    tml__sb_add(out, body, (size_t)n);
}

void tml__sse_event(tml_strbuf *out, const char *event, uint64_t id, const char *data,
                    size_t len)
{
    if (event)
        tml__sb_addf(out, "event: %s\n", event);
    if (id)
        tml__sb_addf(out, "id: %llu\n", (unsigned long long)id);
    size_t i = 0;
    do {
        size_t s = i;
        while (i < len && data[i] != '\n' && data[i] != '\r')
            i++;
        tml__sb_adds(out, "data: ");
        tml__sb_add(out, data + s, i - s);
        tml__sb_addc(out, '\n');
        if (i >= len)
            break;
        if (data[i] == '\r' && i + 1 < len && data[i + 1] == '\n')
            i++;
        i++;   /* past the line end; a final one adds no empty line */
    } while (i < len);
    tml__sb_addc(out, '\n');
}
