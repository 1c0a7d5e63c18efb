/*
 * client.c - connecting to the aggregator.
 *
 * Everything here has a deadline: connect waits at most timeout_ms, sends
 * and each of the handshake's two replies (CHALLENGE, then WELCOME) at most
 * a second (SO_SNDTIMEO / SO_RCVTIMEO), so
 * a stalled aggregator costs the shipper thread a bounded wait and never
 * the training loop anything.
 *
 * The wire sink (at the end) is the engine's delivery over this client:
 * the hello is the handshake, every other operation a frame; a connection
 * that broke is made again, at most once a second, with the same hello;
 * an aggregator that refused us is not asked again.
 */
#include "core/client.h"
#include "core/engine.h"
#include "base/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

static int split_addr(const char *addr, char *host, size_t hcap, char *port, size_t pcap)
{
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr || !colon[1])
        return TML_EINVAL;
    size_t hl = (size_t)(colon - addr);
    if (addr[0] == '[' && hl >= 2 && addr[hl - 1] == ']') {   /* [::1]:port */
        addr++;
        hl -= 2;
    }
    if (hl >= hcap || strlen(colon + 1) >= pcap)
        return TML_EINVAL;
    memcpy(host, addr, hl);
    host[hl] = '\0';
    snprintf(port, pcap, "%s", colon + 1);
    return 0;
}

static int connect_timeout(const struct addrinfo *ai, int timeout_ms)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0)
        return -1;
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
        if (errno != EINPROGRESS)
            goto fail;
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        if (poll(&p, 1, timeout_ms) != 1)
            goto fail;
        int err = 0;
        socklen_t el = sizeof(err);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err)
            goto fail;
    }
    fcntl(fd, F_SETFL, fl);
    struct timeval tv = {.tv_sec = 1, .tv_usec = 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
fail:
    close(fd);
    return -1;
}

/* All len bytes sent (sending) or received, through EINTR; TML_ECONN
 * when the peer closed or an error (a timeout included) came first. */
static int io_all(int fd, char *p, size_t len, int sending)
{
    while (len) {
        ssize_t n = sending ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return TML_ECONN;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int tml__client_send(int fd, const void *buf, size_t len)
{
    return io_all(fd, (char *)buf, len, 1);
}

static int recv_all(int fd, uint8_t *buf, size_t len)
{
    return io_all(fd, (char *)buf, len, 0);
}

/* One frame of the handshake (its payload at most cap bytes). A REJECT
 * of another wire version still reads as a refusal: an aggregator of
 * another TraceML version says no that way (*other_version set). */
static int recv_frame(int fd, tml_frame_header *h, uint8_t *payload, size_t cap,
                      int *other_version)
{
    uint8_t hdr[TML_WIRE_HEADER];
    if (recv_all(fd, hdr, sizeof(hdr)) < 0)
        return TML_ECONN;
    int rc = tml__wire_header(hdr, sizeof(hdr), h);
    if (rc != 0 && h->version && h->type == TML_FRAME_REJECT) {
        *other_version = 1;
        return TML_EAUTH;
    }
    if (rc != 0 || h->len > cap)
        return TML_EPROTO;
    if (recv_all(fd, payload, h->len) < 0)
        return TML_ECONN;
    return h->type == TML_FRAME_REJECT ? TML_EAUTH : 0;
}

/* OPEN, CHALLENGE, HELLO (the MAC of the nonce), WELCOME: docs/wire.md. */
static int handshake(int fd, const tml_hello *hello, int *other_version)
{
    uint8_t payload[4096], nonce[TML_WIRE_NONCE];
    tml_frame_header h;
    tml_strbuf sb = TML_STRBUF_INIT;
    tml__wire_open(&sb);
    int rc = sb.failed ? TML_ENOMEM : tml__client_send(fd, sb.buf, sb.len);
    if (rc == 0)
        rc = recv_frame(fd, &h, payload, sizeof(payload), other_version);
    if (rc == 0 && (h.type != TML_FRAME_CHALLENGE ||
                    tml__wire_parse_challenge(payload, h.len, nonce) < 0))
        rc = TML_EPROTO;
    if (rc == 0) {
        tml__sb_reset(&sb);
        tml__wire_hello(&sb, hello, nonce);
        rc = sb.failed ? TML_ENOMEM : tml__client_send(fd, sb.buf, sb.len);
    }
    if (rc == 0)
        rc = recv_frame(fd, &h, payload, sizeof(payload), other_version);
    if (rc == 0 && h.type != TML_FRAME_WELCOME)
        rc = TML_EPROTO;
    tml__sb_release(&sb);
    return rc;
}

int tml__client_connect(const char *addr, const tml_hello *hello, int timeout_ms,
                        int *other_version)
{
    char host[256], port[16];
    int other = 0;
    if (other_version)
        *other_version = 0;
    if (split_addr(addr, host, sizeof(host), port, sizeof(port)) < 0)
        return TML_EINVAL;
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &res) != 0)
        return TML_ECONN;
    int fd = -1;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next)
        fd = connect_timeout(ai, timeout_ms);
    freeaddrinfo(res);
    if (fd < 0)
        return TML_ECONN;
    int rc = handshake(fd, hello, &other);   /* each wait bounded by SO_RCVTIMEO */
    if (other_version)
        *other_version = other;
    if (rc == 0)
        return fd;
    close(fd);
    return rc;
}

/* recv_all against a deadline (the socket's own timeout is 1 s). */
static int recv_until(int fd, uint8_t *buf, size_t len, int64_t deadline_ms)
{
    while (len) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int64_t now = tml__mono_ms();
        if (now >= deadline_ms)
            return TML_ECONN;
        int r = poll(&p, 1, (int)(deadline_ms - now));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return TML_ECONN;
        ssize_t n = recv(fd, buf, len, 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            return TML_ECONN;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

int tml__client_summary(int fd, int timeout_ms, char **json)
{
    int64_t deadline = tml__mono_ms() + timeout_ms;
    tml_strbuf sb = TML_STRBUF_INIT;
    *json = NULL;
    tml__wire_summary_req(&sb);
    int rc = sb.failed ? TML_ENOMEM : tml__client_send(fd, sb.buf, sb.len);
    tml__sb_release(&sb);
    if (rc < 0)
        return rc;
    for (;;) {
        uint8_t hdr[TML_WIRE_HEADER];
        tml_frame_header h;
        if (recv_until(fd, hdr, sizeof(hdr), deadline) < 0)
            return TML_ECONN;
        if (tml__wire_header(hdr, sizeof(hdr), &h) != 0)
            return TML_ECONN;
        uint8_t *p = malloc(h.len ? h.len : 1);
        if (!p)
            return TML_ECONN;
        if (recv_until(fd, p, h.len, deadline) < 0) {
            free(p);
            return TML_ECONN;
        }
        if (h.type != TML_FRAME_SUMMARY) {
            free(p);       /* nothing else is expected; skip it */
            continue;
        }
        int32_t status;
        const char *j;
        size_t jl;
        rc = tml__wire_parse_summary(p, h.len, &status, &j, &jl);
        if (rc == 0 && status < 0)
            rc = status;
        if (rc == 0) {
            *json = malloc(jl + 1);
            if (*json) {
                memcpy(*json, j, jl);
                (*json)[jl] = '\0';
            } else {
                rc = TML_ENOMEM;
            }
        }
        free(p);
        return rc;
    }
}

/* ---- the wire sink (sink.h) ---------------------------------------------- */

#define RECONNECT_NS 1000000000L

typedef struct wire_sink {
    tml_sink base;
    char addr[300];
    tml_hello hello;
    int have_hello;
    int fd;                 /* -1 when disconnected */
    int refused;            /* the handshake failed: not asked again */
    int tried_last;         /* the shipper's last pass tried once, whenever */
    int64_t next_connect_ns;
    tml_strbuf out;
} wire_sink;

static int ws_connect(wire_sink *w)
{
    if (w->fd >= 0)
        return 0;
    int64_t now = tml__mono_ns();
    /* the last pass tries once more at once: a rank crowded out until its
     * end (a flood of stalled connections) would lose the whole run */
    int last = atomic_load(&tml__ship.stop) && !w->tried_last;
    if (w->refused || !w->have_hello || (now < w->next_connect_ns && !last))
        return TML_ECONN;
    w->tried_last |= last;
    w->next_connect_ns = now + RECONNECT_NS;
    int other_version;
    int fd = tml__client_connect(w->addr, &w->hello, 1000, &other_version);
    if (fd >= 0) {
        w->fd = fd;
        return 0;
    }
    if (fd == TML_EAUTH || fd == TML_EPROTO) {
        w->refused = 1;
        tml__engine_log("aggregator refused this process", other_version
                        ? "it speaks another wire version (install the same TraceML "
                          "version for the launcher and the training)" : tml_strerror(fd));
    }
    return TML_ECONN;
}

/* Sends what is buffered; a failed send drops the connection (and the
 * bytes: the shipper counts them). */
static int ws_flush(wire_sink *w)
{
    int rc = 0;
    if (w->out.len && tml__client_send(w->fd, w->out.buf, w->out.len) < 0) {
        close(w->fd);
        w->fd = -1;
        tml__engine_log("lost the aggregator, dropping telemetry", "send failed");
        rc = TML_ECONN;
    }
    tml__sb_reset(&w->out);
    return rc;
}

static int ws_hello(tml_sink *s, const tml_hello *h)
{
    wire_sink *w = (wire_sink *)s;
    w->hello = *h;
    w->have_hello = 1;
    if (w->fd < 0)
        return ws_connect(w);    /* the handshake carries the hello */
    tml__wire_identity(&w->out, &w->hello);
    return ws_flush(w);
}

static int ws_steps(tml_sink *s, int32_t rank, const tml_step_record *r, size_t n)
{
    wire_sink *w = (wire_sink *)s;
    (void)rank;                  /* the connection says whose they are */
    if (ws_connect(w) < 0)
        return TML_ECONN;
    tml__wire_steps(&w->out, r, n);
    return ws_flush(w);
}

static int ws_samples(tml_sink *s, const tml_sample *v, size_t n)
{
    wire_sink *w = (wire_sink *)s;
    if (ws_connect(w) < 0)
        return TML_ECONN;
    tml__wire_samples(&w->out, v, n);
    return ws_flush(w);
}

static int ws_stats(tml_sink *s, int32_t rank, const tml_rank_stats *st, int bye)
{
    wire_sink *w = (wire_sink *)s;
    (void)rank;
    if (ws_connect(w) < 0)
        return TML_ECONN;
    tml__wire_stats(&w->out, bye ? TML_FRAME_BYE : TML_FRAME_STATS, st);
    return ws_flush(w);
}

static int ws_summary(tml_sink *s, char **json)
{
    wire_sink *w = (wire_sink *)s;
    if (ws_connect(w) < 0)
        return TML_ECONN;
    int rc = tml__client_summary(w->fd, 3000, json);
    if (rc == TML_ECONN) {       /* the stream may be mid-frame: start over */
        close(w->fd);
        w->fd = -1;
        tml__engine_log("summary request failed", "reconnecting");
    }
    return rc;
}

static int ws_close(tml_sink *s, const char *status, int exit_code, char **text)
{
    wire_sink *w = (wire_sink *)s;
    (void)status;
    (void)exit_code;
    *text = NULL;                /* the launcher prints the summary */
    if (w->fd >= 0)
        close(w->fd);
    tml__sb_release(&w->out);
    free(w);
    return 0;
}

static int ws_deep_dive(tml_sink *s, int32_t rank, const tml_dd_window *d)
{
    wire_sink *w = (wire_sink *)s;
    (void)rank;                  /* the connection's */
    if (ws_connect(w) < 0)
        return TML_ECONN;
    tml__wire_deep_dive(&w->out, d);
    return ws_flush(w);
}

static const tml_sink_ops wire_ops = {ws_hello, ws_steps, ws_samples,  ws_stats,
                                      ws_summary, ws_close, ws_deep_dive};

int tml__wire_sink_open(const char *addr, tml_sink **out)
{
    wire_sink *w = calloc(1, sizeof(*w));
    if (!w)
        return TML_ENOMEM;
    w->base.ops = &wire_ops;
    w->fd = -1;
    snprintf(w->addr, sizeof(w->addr), "%s", addr);
    *out = &w->base;
    return 0;
}
