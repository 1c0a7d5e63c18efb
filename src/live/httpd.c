/*
 * httpd.c - the live HTTP server: the dashboard page, /api/live,
 * /api/summary, /metrics and the /events stream (Server-Sent Events).
 *
 * It runs in its own thread inside the aggregator process, so nothing a
 * client does can delay the aggregator's poll loop (which is what the ranks
 * talk to): the aggregator only ever publishes, which is three copies under
 * a mutex and one byte into a wake-up pipe. The server thread owns every
 * client socket, all non-blocking, in one poll(2) loop.
 *
 * Misbehaving clients cost bounded memory and are shown the door:
 *  - a request head must be complete within request_timeout_ms (slowloris),
 *    and is parsed by live/http.c, which refuses malformed (400), oversized
 *    (413/414/431) and other-method (405) requests with a short answer;
 *  - a client that stops reading keeps at most max_pending_bytes unsent:
 *    further stream updates are dropped for it (counted), and after
 *    stall_timeout_ms without progress it is closed;
 *  - at most max_clients connections; more get 503 and are closed;
 *  - bound to loopback (the default), it answers only requests whose Host
 *    names the loopback (403 otherwise), which defeats DNS rebinding.
 * Every refusal is logged to the run's traceml.log (rate-limited), never to
 * the user's terminal.
 *
 * Why SSE and not WebSocket: the data flows one way, SSE is plain HTTP
 * (a proxy or `ssh -L` carries it as is), the browser reconnects by itself,
 * and the server side is a few lines rather than a framing protocol.
 */
#include "live/live.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agg/rundir.h"
#include "live/http.h"
#include "base/clock.h"
#include "base/net.h"

/* S_LINGER: a refused client's answer is out and our side is shut; what it
 * still sends is read away for a moment before closing, because closing a
 * socket with unread input sends a reset that can destroy the answer
 * before the client reads it (the "lingering close" of every web server). */
enum cstate { S_REQ = 0, S_WRITE, S_SSE, S_LINGER };

#define LINGER_MS 1000
#define LINGER_BYTES (256 * 1024)

typedef struct client {
    int fd;
    int state;
    int close_after;          /* S_WRITE: close once written */
    int refused;              /* ...after lingering (S_LINGER) */
    size_t drained;           /* S_LINGER: bytes read away */
    char peer[64];
    char in[TML_HTTP_MAX_HEAD];
    size_t in_len;
    tml_strbuf out;
    size_t out_off;
    int64_t deadline_ms;      /* S_REQ: the head must be complete by then */
    int64_t progress_ms;      /* last time output moved (or was queued on empty) */
    int64_t sent_ms;          /* S_SSE: last time anything was queued */
} client;

struct tml_live_server {
    int listen_fd, wake[2], port;
    char *run_dir;
    int max_clients, request_timeout_ms, stall_timeout_ms;
    int loopback_only;        /* bound to loopback: Host must name it too */
    size_t max_pending;
    pthread_t thread;
    int started;
    pthread_mutex_t mu;       /* guards everything below */
    int stopping;
    tml_strbuf live, summary, metrics;
    uint64_t seq, seq_pushed;
    tml_live_server_stats stats;
    /* server thread only */
    client *clients;
    size_t nclients;
    struct pollfd *pfds;
    uint64_t logged;
};

static void count(tml_live_server *s, uint64_t *field)
{
    pthread_mutex_lock(&s->mu);
    (*field)++;
    pthread_mutex_unlock(&s->mu);
}

static void logf_refusal(tml_live_server *s, const client *c, int status, const char *why)
{
    /* a flood of bad requests must not fill the disk */
    s->logged++;
    if (s->logged <= 20 || s->logged % 1000 == 0)
        tml__run_log(s->run_dir, "live", "refused a request from %s: %d %s%s%s", c->peer,
                     status, tml__http_reason(status), why ? " - " : "", why ? why : "");
}

static void close_client(tml_live_server *s, size_t i)
{
    close(s->clients[i].fd);
    tml__sb_release(&s->clients[i].out);
    s->clients[i] = s->clients[s->nclients - 1];
    s->nclients--;
}

static size_t pending(const client *c)
{
    return c->out.len - c->out_off;
}

/* Tries to send what is queued. -1: the client is gone. */
static int flush_out(client *c, int64_t now)
{
    while (pending(c)) {
        ssize_t w = send(c->fd, c->out.buf + c->out_off, pending(c),
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        c->out_off += (size_t)w;
        c->progress_ms = now;
    }
    tml__sb_reset(&c->out);
    c->out_off = 0;
    return 0;
}

static void queue(client *c, const void *p, size_t n, int64_t now)
{
    if (!pending(c))
        c->progress_ms = now;   /* the stall clock starts with the first unsent byte */
    tml__sb_add(&c->out, p, n);
}

static void refuse(tml_live_server *s, client *c, int status, const char *why, int64_t now)
{
    tml_strbuf sb = TML_STRBUF_INIT;
    tml__http_error(&sb, status);
    queue(c, sb.buf, sb.len, now);
    tml__sb_release(&sb);
    c->state = S_WRITE;
    c->close_after = 1;
    c->refused = 1;
    count(s, &s->stats.refused);
    logf_refusal(s, c, status, why);
}

static void respond(client *c, const tml_http_req *req, int status, const char *ctype,
                    const char *body, size_t len, int64_t now)
{
    tml_strbuf sb = TML_STRBUF_INIT;
    tml__http_head(&sb, status, ctype, (long long)len, req->keep_alive, NULL);
    if (strcmp(req->method, "HEAD") != 0)
        tml__sb_add(&sb, body, len);
    queue(c, sb.buf, sb.len, now);
    tml__sb_release(&sb);
    c->state = S_WRITE;
    c->close_after = !req->keep_alive;
}

/* Copies one of the published documents under the lock. */
static int copy_doc(tml_live_server *s, const tml_strbuf *doc, tml_strbuf *out)
{
    pthread_mutex_lock(&s->mu);
    int have = doc->len > 0;
    if (have)
        tml__sb_add(out, doc->buf, doc->len);
    pthread_mutex_unlock(&s->mu);
    return have && !out->failed;
}

/* The current publication as an event pair, into ev (s->mu held). */
static void current_events(const tml_live_server *s, tml_strbuf *ev)
{
    if (s->live.len)
        tml__sse_event(ev, "live", s->seq, s->live.buf, s->live.len);
    if (s->summary.len)
        tml__sse_event(ev, "summary", 0, s->summary.buf, s->summary.len);
}

static void sse_push_current(tml_live_server *s, client *c, int64_t now)
{
    tml_strbuf ev = TML_STRBUF_INIT;
    pthread_mutex_lock(&s->mu);
    current_events(s, &ev);
    pthread_mutex_unlock(&s->mu);
    if (ev.len && !ev.failed) {
        queue(c, ev.buf, ev.len, now);
        c->sent_ms = now;
        count(s, &s->stats.events_sent);
    }
    tml__sb_release(&ev);
}

static void handle_request(tml_live_server *s, client *c, const tml_http_req *req, int64_t now)
{
    count(s, &s->stats.requests);
    /* A page elsewhere whose name a DNS rebinding now points at 127.0.0.1
     * would send its own host name: a loopback server only answers its
     * loopback names. */
    if (s->loopback_only && req->has_host && !tml__http_host_is_loopback(req->host)) {
        refuse(s, c, 403, "Host is not a loopback name", now);
        return;
    }
    const char *p = req->path;
    if (strcmp(p, "/events") == 0) {
        tml_strbuf sb = TML_STRBUF_INIT;
        tml__http_head(&sb, 200, "text/event-stream; charset=utf-8", -1, 1, NULL);
        if (strcmp(req->method, "HEAD") == 0) {
            queue(c, sb.buf, sb.len, now);
            tml__sb_release(&sb);
            c->state = S_WRITE;
            c->close_after = 1;
            return;
        }
        tml__sb_adds(&sb, "retry: 2000\n\n");
        queue(c, sb.buf, sb.len, now);
        tml__sb_release(&sb);
        c->state = S_SSE;
        count(s, &s->stats.sse_clients);
        sse_push_current(s, c, now);
        return;
    }
    const tml_strbuf *doc = NULL;
    const char *ctype = NULL;
    if (strcmp(p, "/api/live") == 0) {
        doc = &s->live;
        ctype = "application/json";
    } else if (strcmp(p, "/api/summary") == 0) {
        doc = &s->summary;
        ctype = "application/json";
    } else if (strcmp(p, "/metrics") == 0) {
        doc = &s->metrics;
        ctype = "text/plain; version=0.0.4; charset=utf-8";
    }
    if (doc) {
        tml_strbuf body = TML_STRBUF_INIT;
        if (copy_doc(s, doc, &body))
            respond(c, req, 200, ctype, body.buf, body.len, now);
        else
            respond(c, req, 503, "text/plain; charset=utf-8", "no data yet\n", 12, now);
        tml__sb_release(&body);
        return;
    }
    if (strcmp(p, "/healthz") == 0) {
        respond(c, req, 200, "text/plain; charset=utf-8", "ok\n", 3, now);
        return;
    }
    const tml_live_asset *a = tml__live_asset(strcmp(p, "/index.html") == 0 ? "/" : p);
    if (a) {
        respond(c, req, 200, a->ctype, (const char *)a->data, a->len, now);
        return;
    }
    respond(c, req, 404, "text/plain; charset=utf-8", "404 Not Found\n", 14, now);
}

/* Reads and, when a head is complete, answers it. -1: close. */
static int service_read(tml_live_server *s, client *c, int64_t now)
{
    for (;;) {
        if (c->state == S_REQ && c->in_len < sizeof(c->in)) {
            ssize_t r = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len, 0);
            if (r < 0 && errno == EINTR)
                continue;
            if (r == 0)
                return -1;
            if (r < 0) {
                if (errno != EAGAIN && errno != EWOULDBLOCK)
                    return -1;
            } else {
                c->in_len += (size_t)r;
            }
        } else if (c->state == S_LINGER) {
            char sink[16384];
            ssize_t r = recv(c->fd, sink, sizeof(sink), 0);
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
                return -1;
            if (r > 0 && (c->drained += (size_t)r) > LINGER_BYTES)
                return -1;
            return 0;
        } else if (c->state != S_REQ) {
            /* a stream client has nothing to say; read it away, notice EOF */
            char sink[512];
            ssize_t r = recv(c->fd, sink, sizeof(sink), 0);
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
                return -1;
            return 0;
        }
        if (c->state != S_REQ || !c->in_len)
            return 0;
        tml_http_req req;
        int n = tml__http_parse(c->in, c->in_len, &req);
        if (n == 0)
            return 0;
        if (n < 0) {
            refuse(s, c, -n, NULL, now);
            c->in_len = 0;
            return 0;
        }
        memmove(c->in, c->in + n, c->in_len - (size_t)n);
        c->in_len -= (size_t)n;
        handle_request(s, c, &req, now);
        return 0;
    }
}

static void accept_all(tml_live_server *s, int64_t now)
{
    for (;;) {
        struct sockaddr_in sin;
        socklen_t sl = sizeof(sin);
        int fd = accept4(s->listen_fd, (struct sockaddr *)&sin, &sl,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        char ip[INET_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET, &sin.sin_addr, ip, sizeof(ip));
        if (s->nclients >= (size_t)s->max_clients) {
            static const char busy[] =
                "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                "X-Content-Type-Options: nosniff\r\n"
                "Content-Security-Policy: " TML_HTTP_CSP "\r\n"
                "Connection: close\r\n\r\n";
            ssize_t w = send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)w;
            close(fd);
            count(s, &s->stats.refused);
            client tmp;
            snprintf(tmp.peer, sizeof(tmp.peer), "%s:%d", ip, ntohs(sin.sin_port));
            logf_refusal(s, &tmp, 503, "too many clients");
            continue;
        }
        client *c = &s->clients[s->nclients++];
        memset(c, 0, sizeof(*c));
        c->fd = fd;
        c->deadline_ms = now + s->request_timeout_ms;
        c->progress_ms = c->sent_ms = now;
        snprintf(c->peer, sizeof(c->peer), "%s:%d", ip, ntohs(sin.sin_port));
    }
}

/* New publication: one event pair to every stream client that keeps up. */
static void push_updates(tml_live_server *s, int64_t now)
{
    tml_strbuf ev = TML_STRBUF_INIT;
    pthread_mutex_lock(&s->mu);
    if (s->seq != s->seq_pushed) {
        s->seq_pushed = s->seq;
        current_events(s, &ev);
    }
    pthread_mutex_unlock(&s->mu);
    if (ev.len && !ev.failed) {
        for (size_t i = 0; i < s->nclients; i++) {
            client *c = &s->clients[i];
            if (c->state != S_SSE)
                continue;
            /* an event always fits an empty queue, so a big one still
             * reaches a client that keeps up */
            if (pending(c) && pending(c) + ev.len > s->max_pending) {
                count(s, &s->stats.events_dropped);
                continue;
            }
            queue(c, ev.buf, ev.len, now);
            c->sent_ms = now;
            count(s, &s->stats.events_sent);
        }
    }
    tml__sb_release(&ev);
}

/* A written answer with Connection: close: close now (1), or linger (0). */
static int done_writing(client *c, int64_t now)
{
    if (!c->refused)
        return 1;
    shutdown(c->fd, SHUT_WR);
    c->state = S_LINGER;
    c->deadline_ms = now + LINGER_MS;
    return 0;
}

/* An answer is out: close, linger, or (keep-alive) take the next request,
 * which may already be here, pipelined. At most a few per call, so that
 * one client cannot hold the loop; the next tick goes on. 1 when gone. */
static int answered(tml_live_server *s, client *c, int64_t now)
{
    for (int k = 0; k < 8 && c->state == S_WRITE && !pending(c); k++) {
        if (c->close_after)
            return done_writing(c, now);
        c->state = S_REQ;
        c->deadline_ms = now + s->request_timeout_ms;
        if (!c->in_len)
            return 0;
        if (service_read(s, c, now) < 0 || (pending(c) && flush_out(c, now) < 0))
            return 1;
    }
    return 0;
}

/* A client poll(2) found ready: read, write, next keep-alive request.
 * 1 when it is gone. */
static int client_ready(tml_live_server *s, client *c, short re, int64_t now)
{
    int gone = 0;
    if (re & (POLLIN | POLLHUP | POLLERR))
        gone = service_read(s, c, now) < 0;
    if (!gone && pending(c))
        gone = flush_out(c, now) < 0;
    return gone || answered(s, c, now);
}

/* Every client's clock: SSE keep-alives, pending output, lingering,
 * request and stall timeouts. 1 when it is gone. */
static int client_tick(tml_live_server *s, client *c, int64_t now)
{
    if (c->state == S_SSE && !pending(c) && now - c->sent_ms >= 15000) {
        queue(c, ": keep-alive\n\n", 14, now);   /* lets proxies see life */
        c->sent_ms = now;
    }
    if (pending(c) && flush_out(c, now) < 0)
        return 1;
    if (answered(s, c, now))
        return 1;
    if (c->state == S_LINGER && now > c->deadline_ms)
        return 1;
    int timed_out = 0;
    if (c->state == S_REQ && now > c->deadline_ms) {
        if (c->in_len) {   /* a head that never completed: tell it */
            refuse(s, c, 408, "request head not complete in time", now);
            flush_out(c, now);
        }
        timed_out = 1;
    } else if (pending(c) && now - c->progress_ms > s->stall_timeout_ms) {
        tml__run_log(s->run_dir, "live", "closed %s: it read nothing for %d ms (%zu bytes unsent)",
                     c->peer, s->stall_timeout_ms, pending(c));
        timed_out = 1;
    }
    if (timed_out)
        count(s, &s->stats.timeouts);
    return timed_out;
}

static void *server_main(void *arg)
{
    tml_live_server *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        int stop = s->stopping;
        pthread_mutex_unlock(&s->mu);
        if (stop)
            break;
        size_t np = 0;
        s->pfds[np].fd = s->listen_fd;
        s->pfds[np++].events = POLLIN;
        s->pfds[np].fd = s->wake[0];
        s->pfds[np++].events = POLLIN;
        for (size_t i = 0; i < s->nclients; i++) {
            client *c = &s->clients[i];
            s->pfds[np].fd = c->fd;
            s->pfds[np].events = (short)((c->state != S_WRITE ? POLLIN : 0) |
                                         (pending(c) ? POLLOUT : 0));
            np++;
        }
        int n = poll(s->pfds, np, 250);
        int64_t now = tml__mono_ms();
        if (n < 0 && errno != EINTR)
            break;
        if (n > 0) {
            for (size_t k = s->nclients; k-- > 0;) {
                short re = s->pfds[2 + k].revents;
                if (re && client_ready(s, &s->clients[k], re, now))
                    close_client(s, k);
            }
            if (s->pfds[1].revents) {
                char buf[64];
                while (read(s->wake[0], buf, sizeof(buf)) > 0)
                    ;
            }
            if (s->pfds[0].revents)
                accept_all(s, now);
        }
        push_updates(s, now);
        for (size_t k = s->nclients; k-- > 0;)
            if (client_tick(s, &s->clients[k], now))
                close_client(s, k);
    }
    while (s->nclients) {
        client *c = &s->clients[s->nclients - 1];
        if (c->state == S_SSE)
            flush_out(c, tml__mono_ms());   /* the last event, if it fits */
        close_client(s, s->nclients - 1);
    }
    return NULL;
}

int tml__live_server_new(const tml_live_server_opts *o, tml_live_server **out)
{
    int rc = TML_ENOMEM;
    *out = NULL;
    if (!o || o->port < 0 || o->port > 65535)
        return TML_EINVAL;
    tml_live_server *s = calloc(1, sizeof(*s));
    if (!s)
        return TML_ENOMEM;
    s->listen_fd = s->wake[0] = s->wake[1] = -1;
    pthread_mutex_init(&s->mu, NULL);
    s->max_clients = o->max_clients > 0 ? o->max_clients : 64;
    s->request_timeout_ms = o->request_timeout_ms > 0 ? o->request_timeout_ms : 10000;
    s->stall_timeout_ms = o->stall_timeout_ms > 0 ? o->stall_timeout_ms : 15000;
    s->max_pending = o->max_pending_bytes ? o->max_pending_bytes : (size_t)1 << 20;
    s->run_dir = o->run_dir ? strdup(o->run_dir) : NULL;
    s->loopback_only = !o->bind_addr || strcmp(o->bind_addr, "::1") == 0 ||
                       tml__http_host_is_loopback(o->bind_addr);
    s->clients = calloc((size_t)s->max_clients, sizeof(*s->clients));
    s->pfds = calloc((size_t)s->max_clients + 2, sizeof(*s->pfds));
    if ((o->run_dir && !s->run_dir) || !s->clients || !s->pfds)
        goto fail;
    if (pipe2(s->wake, O_NONBLOCK | O_CLOEXEC) < 0) {
        rc = TML_EIO;
        goto fail;
    }
    s->listen_fd = tml__net_listen(o->bind_addr, o->port, 64, &s->port);
    if (s->listen_fd < 0) {
        rc = s->listen_fd;
        goto fail;
    }
    if (pthread_create(&s->thread, NULL, server_main, s) != 0) {
        rc = TML_ENOMEM;
        goto fail;
    }
    s->started = 1;
    *out = s;
    return 0;
fail:
    {
        int saved = errno;
        tml__live_server_free(s);
        errno = saved;
    }
    return rc;
}

int tml__live_server_port(const tml_live_server *s)
{
    return s->port;
}

static void replace(tml_strbuf *doc, const char *text)
{
    if (!text)
        return;
    tml__sb_reset(doc);
    doc->failed = 0;
    tml__sb_adds(doc, text);
    if (doc->failed)
        tml__sb_release(doc);   /* serve 503 rather than half a document */
}

void tml__live_server_publish(tml_live_server *s, const char *live_json,
                              const char *summary_json, const char *metrics)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    replace(&s->live, live_json);
    replace(&s->summary, summary_json);
    replace(&s->metrics, metrics);
    s->seq++;
    pthread_mutex_unlock(&s->mu);
    ssize_t w = write(s->wake[1], "", 1);   /* full pipe: a wake-up is pending anyway */
    (void)w;
}

void tml__live_server_stats(tml_live_server *s, tml_live_server_stats *out)
{
    pthread_mutex_lock(&s->mu);
    *out = s->stats;
    pthread_mutex_unlock(&s->mu);
}

void tml__live_server_free(tml_live_server *s)
{
    if (!s)
        return;
    if (s->started) {
        pthread_mutex_lock(&s->mu);
        s->stopping = 1;
        pthread_mutex_unlock(&s->mu);
        ssize_t w = write(s->wake[1], "", 1);
        (void)w;
        pthread_join(s->thread, NULL);
    }
    while (s->nclients)
        close_client(s, s->nclients - 1);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    if (s->wake[0] >= 0)
        close(s->wake[0]);
    if (s->wake[1] >= 0)
        close(s->wake[1]);
    tml__sb_release(&s->live);
    tml__sb_release(&s->summary);
    tml__sb_release(&s->metrics);
    pthread_mutex_destroy(&s->mu);
    free(s->clients);
    free(s->pfds);
    free(s->run_dir);
    free(s);
}
