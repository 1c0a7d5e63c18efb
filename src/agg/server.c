/*
 * server.c - the aggregator's event loop.
 *
 * Ranks connect over TCP, prove they hold the per-run secret the launcher
 * gave them (OPEN, CHALLENGE, HELLO: docs/wire.md), and then stream STEPS
 * and STATS frames until BYE.
 * The loop is one epoll(7) set, level-triggered, over the listener, the
 * control pipe and every connection, all non-blocking: a turn costs what
 * is ready, not what is connected (poll(2) walked 10,000 descriptors in
 * the kernel and here on every turn). An fd-to-slot table finds a
 * connection from its event; EPOLLOUT is asked for only while an answer
 * waits to be sent. Each connection owns a byte buffer; bytes
 * are appended as they arrive and whole frames are cut off the front, so a
 * frame split over many reads (or many frames in one read) is the same to
 * the decoder. A read that fills less than asked ends the connection's
 * turn (level-triggered: what arrives later is reported again), so a rank
 * that sent one frame costs one recv(2), not a second one that says
 * EAGAIN. A connection may read at most READ_BUDGET bytes per turn, so
 * one fast rank cannot starve the others or the control pipe. The
 * timeouts below are checked every SWEEP_MS, and only while some
 * connection is unauthenticated or has an answer waiting.
 *
 * Authenticated connections are a second epoll set (bulkfd), itself
 * watched by the first with the listener, the control pipe and the
 * connections still in their handshake. Under load (a turn that found
 * PACE_READY authenticated connections with data: thousands of ranks)
 * tml__server_run leaves the second set out of its wait for PACE_MS, so
 * that each rank's connection has several frames waiting when it is read
 * and one recv(2) takes them all (at 10,000 ranks x 10 steps/s the loop
 * took 64 % of a core without it, 21 % with it: docs/performance.md),
 * while handshakes and the control pipe are still served at once; below
 * that a turn follows at once.
 *
 * Security is deliberately simple: loopback by default, a random secret
 * per run that never crosses the wire (a HELLO carries an HMAC-SHA256 of a
 * fresh nonce of this connection's, compared in constant time, so a
 * captured HELLO cannot be replayed), REJECT and close for anything that
 * does not open with OPEN and a valid HELLO, and a cap on payload sizes.
 * A second live connection of the same rank, pid and host from another
 * process image is not merged into the first: it is a CONFLICT (agg.h). The
 * port may be reachable from other hosts (multi-node runs), so what a
 * connection costs before it authenticates is bounded: a HELLO frame of at
 * most PREAUTH_MAX_FRAME bytes within HELLO_TIMEOUT_MS; past
 * a quarter of the connection cap unauthenticated (PREAUTH_MAX_CONNS at
 * most), or the cap in all, a new one evicts the oldest that has not said
 * OPEN in SILENT_GRACE_MS, else the oldest that has not said HELLO in
 * PREAUTH_GRACE_MS (a rank says both at once), closed without a REJECT so
 * that a rank crowded out retries; idle connections cannot lock ranks out;
 * at most PREAUTH_MAX_PER_PEER from one
 * other host (127.0.0.1, where every local rank comes from, is exempt).
 * The cap is the process's descriptor limit less FD_RESERVE (the store,
 * the logs, the live views' clients), so the cap, not EMFILE, is what a
 * flood meets; running out of descriptors anyway never spins the loop (a
 * spare descriptor accepts and closes the surplus). Every
 * refusal is a line in the run folder's traceml.log (the first
 * LOG_REFUSALS, then one in LOG_EVERY), never on the user's terminal.
 */
#include "agg/server.h"
#include "model/sample.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agg/rundir.h"
#include "traceml/traceml.h"
#include "base/clock.h"
#include "base/hmac.h"
#include "base/strbuf.h"
#include "base/net.h"
#include "wire/wire.h"

#define MAX_CONNS 65536              /* the cap, whatever the descriptor limit */
#define FD_RESERVE 128              /* descriptors left to the rest of the process */
#define HELLO_TIMEOUT_MS 2000
#define PREAUTH_MAX_FRAME 4096         /* a real HELLO is < 300 bytes */
#define PREAUTH_MAX_CONNS 256
#define PREAUTH_GRACE_MS 500
#define SILENT_GRACE_MS 100            /* not even OPEN in this long */
#define PREAUTH_MAX_PER_PEER 64
#define OUT_STALL_MS 10000             /* an answer not read for this long: closed */
#define LOG_REFUSALS 50
#define LOG_EVERY 1000
#define READ_BUDGET (256 * 1024)
#define CONTROL_LINE_MAX 256
#define MAX_EVENTS 1024                /* per epoll_wait; the rest next turn */
#define SWEEP_MS 50                    /* handshake and answer timeouts checked */
#define PACE_READY 256                 /* connections with data in a turn: under load */
#define PACE_MS 30                     /* then they wait this long */

/* OPEN, then HELLO, before the connection is authenticated */
enum conn_state { C_OPEN = 0, C_HELLO, C_AUTHED, C_BYE };

typedef struct conn {
    int fd;
    int state;
    int32_t rank;             /* its rank in the run (its own, or the one given on a clash) */
    int32_t claimed;          /* the rank it says it is */
    int32_t pid;              /* who it is: pid, host, process image (its HELLO) */
    char host[64];
    uint64_t instance;
    uint8_t nonce[TML_WIRE_NONCE];   /* its CHALLENGE */
    int64_t opened_ms;
    char peer[64];
    uint8_t *buf;
    size_t len, cap;
    /* Bytes still to send (a SUMMARY answer larger than the socket buffer),
     * written as the socket drains (POLLOUT); never waited for. */
    tml_strbuf out;
    size_t out_off;
    int64_t out_ms;           /* when `out` last moved (or was queued on empty) */
    int out_watched;          /* EPOLLOUT asked for */
} conn;

struct tml_server {
    tml_agg *agg;
    int listen_fd, control_fd, port;
    char *run_id, *secret, *run_dir;
    volatile sig_atomic_t *stop;
    void (*timer)(void *ctx);
    void *timer_ctx;
    int timer_ms;
    conn *conns;
    size_t nconns;
    size_t rejected;
    size_t max_conns;         /* the cap: conn_cap() */
    size_t preauth_max;       /* unauthenticated connections before evicting */
    int spare_fd;             /* /dev/null, given up to accept at EMFILE */
    int epfd;                 /* listener, control, handshakes, bulkfd */
    int bulkfd;               /* authenticated connections */
    struct epoll_event *events;   /* MAX_EVENTS */
    int32_t *slot_of_fd;      /* conns[] index of each fd, -1 none */
    size_t nslots;
    size_t npreauth;          /* connections not yet authenticated */
    size_t nwatched;          /* connections with out_watched */
    int64_t swept_ms;         /* the last timeout sweep */
    size_t ready;             /* ranks' connections with an event in the last turn */
    size_t paced;             /* turns tml__server_run paced after (pace) */
    tml_step_record *scratch;
    char ctl[CONTROL_LINE_MAX];
    size_t ctl_len;
    int control_always;       /* control_fd not in the epoll set */
};

static void send_frame(conn *c, const tml_strbuf *sb)
{
    if (sb->failed || !sb->len)
        return;
    /* Small frames on a fresh socket: they fit the send buffer. A client
     * that does not read is not waited for. */
    ssize_t w = send(c->fd, sb->buf, sb->len, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w;
}

/* Sends what the socket takes now; the rest waits for POLLOUT. */
static void flush_out(conn *c)
{
    while (c->out_off < c->out.len) {
        ssize_t w = send(c->fd, c->out.buf + c->out_off, c->out.len - c->out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        c->out_off += (size_t)w;
        c->out_ms = tml__mono_ms();
    }
    tml__sb_reset(&c->out);
    c->out_off = 0;
}

static void queue_frame(conn *c, const tml_strbuf *sb)
{
    if (sb->failed || !sb->len)
        return;
    if (c->out.len == c->out_off)
        c->out_ms = tml__mono_ms();
    tml__sb_add(&c->out, sb->buf, sb->len);
    flush_out(c);
}

/* fd -> slot i in conns[] (i -1: none); the table grows with the fds. */
static int set_slot(tml_server *s, int fd, int32_t i)
{
    if ((size_t)fd >= s->nslots) {
        size_t n = s->nslots ? s->nslots : 1024;
        while (n <= (size_t)fd)
            n *= 2;
        int32_t *t = realloc(s->slot_of_fd, n * sizeof(*t));
        if (!t)
            return TML_ENOMEM;
        for (size_t k = s->nslots; k < n; k++)
            t[k] = -1;
        s->slot_of_fd = t;
        s->nslots = n;
    }
    s->slot_of_fd[fd] = i;
    return 0;
}

static conn *conn_of_fd(const tml_server *s, int fd)
{
    if (fd < 0 || (size_t)fd >= s->nslots || s->slot_of_fd[fd] < 0)
        return NULL;
    return &s->conns[s->slot_of_fd[fd]];
}

static int watch_in(int epfd, int op, int fd, uint32_t events)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.events = events;
    ev.data.fd = fd;
    return epoll_ctl(epfd, op, fd, &ev);
}

static int watch(tml_server *s, int op, int fd, uint32_t events)
{
    return watch_in(s->epfd, op, fd, events);
}

/* The set a connection is in: bulkfd once it is authenticated. */
static int set_of(const tml_server *s, const conn *c)
{
    return c->state < C_AUTHED ? s->epfd : s->bulkfd;
}

/* EPOLLOUT while an answer waits to be sent, not otherwise (level-
 * triggered, an idle writable socket would be reported every turn). */
static void watch_out(tml_server *s, conn *c)
{
    int want = c->out.len > c->out_off;
    if (want == c->out_watched ||
        watch_in(set_of(s, c), EPOLL_CTL_MOD, c->fd, EPOLLIN | (want ? EPOLLOUT : 0)) < 0)
        return;
    c->out_watched = want;
    if (want)
        s->nwatched++;
    else
        s->nwatched--;
}

static void close_conn(tml_server *s, size_t i)
{
    conn *c = &s->conns[i];
    /* out of the set before close: a forked child holding the socket
     * would otherwise keep it there */
    epoll_ctl(set_of(s, c), EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    s->slot_of_fd[c->fd] = -1;
    s->npreauth -= c->state < C_AUTHED;
    s->nwatched -= c->out_watched;
    tml__sb_release(&c->out);
    free(c->buf);
    s->conns[i] = s->conns[s->nconns - 1];
    s->nconns--;
    if (i < s->nconns)
        s->slot_of_fd[s->conns[i].fd] = (int32_t)i;
}

/* Refusals are logged, but not without bound: an attacker's flood must
 * not fill the disk or cost a write(2) per connection. */
static int log_refusal(tml_server *s)
{
    s->rejected++;
    return s->rejected <= LOG_REFUSALS || s->rejected % LOG_EVERY == 0;
}

static void reject(tml_server *s, conn *c, const char *reason)
{
    tml_strbuf sb = TML_STRBUF_INIT;
    tml__wire_reject(&sb, reason);
    send_frame(c, &sb);
    tml__sb_release(&sb);
    if (log_refusal(s))
        tml__run_log(s->run_dir, "aggregator", "rejected connection from %s: %s (%zu so far)",
                     c->peer, reason, s->rejected);
}

/* A peer of another TraceML version: refused in its own version's framing,
 * so that it reads a REJECT (and a reason), not garbage. */
static void reject_version(tml_server *s, conn *c, uint16_t version)
{
    char why[160];
    tml_strbuf sb = TML_STRBUF_INIT;
    snprintf(why, sizeof(why), "wire version %u, this aggregator speaks %u (another TraceML "
             "version: install the same TraceML for the launcher and the training)",
             (unsigned)version, (unsigned)TML_WIRE_VERSION);
    tml__wire_reject_as(&sb, version, why);
    send_frame(c, &sb);
    tml__sb_release(&sb);
    if (log_refusal(s))
        tml__run_log(s->run_dir, "aggregator", "rejected connection from %s: %s (%zu so far)",
                     c->peer, why, s->rejected);
}

/* How many connections the loop keeps: the descriptor limit less
 * FD_RESERVE (half the limit when it is tiny), at most MAX_CONNS. */
static size_t conn_cap(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
        rl.rlim_cur > MAX_CONNS + FD_RESERVE)
        return MAX_CONNS;
    size_t soft = (size_t)rl.rlim_cur;
    return soft > 2 * FD_RESERVE ? soft - FD_RESERVE : soft / 2;
}

int tml__server_new(const tml_server_opts *o, tml_agg *agg, tml_server **out)
{
    int rc = TML_ENOMEM;
    *out = NULL;
    if (!o || !agg || !o->run_id || !o->secret || !*o->secret || o->port < 0 ||
        o->port > 65535)
        return TML_EINVAL;
    tml_server *s = calloc(1, sizeof(*s));
    if (!s)
        return TML_ENOMEM;
    s->listen_fd = -1;
    s->epfd = -1;
    s->bulkfd = -1;
    s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    s->agg = agg;
    s->control_fd = o->control_fd;
    s->stop = o->stop;
    s->timer = o->timer;
    s->timer_ctx = o->timer_ctx;
    s->timer_ms = o->timer_ms > 0 ? o->timer_ms : 1000;
    s->run_id = strdup(o->run_id);
    s->secret = strdup(o->secret);
    s->run_dir = o->run_dir ? strdup(o->run_dir) : NULL;
    s->max_conns = conn_cap();
    s->preauth_max = s->max_conns / 4 < PREAUTH_MAX_CONNS ? s->max_conns / 4 : PREAUTH_MAX_CONNS;
    s->conns = calloc(s->max_conns, sizeof(*s->conns));
    s->events = calloc(MAX_EVENTS, sizeof(*s->events));
    if (!s->run_id || !s->secret || (o->run_dir && !s->run_dir) || !s->conns || !s->events)
        goto fail;

    s->listen_fd = tml__net_listen(o->bind_addr, o->port, 128, &s->port);
    if (s->listen_fd < 0) {
        rc = s->listen_fd;
        goto fail;
    }
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    s->bulkfd = epoll_create1(EPOLL_CLOEXEC);
    if (s->epfd < 0 || s->bulkfd < 0 || watch(s, EPOLL_CTL_ADD, s->listen_fd, EPOLLIN) < 0 ||
        watch(s, EPOLL_CTL_ADD, s->bulkfd, EPOLLIN) < 0) {
        rc = TML_EIO;
        goto fail;
    }
    /* a control fd epoll cannot watch (a regular file) is read every turn */
    if (s->control_fd >= 0 && watch(s, EPOLL_CTL_ADD, s->control_fd, EPOLLIN) < 0)
        s->control_always = 1;
    *out = s;
    return 0;
fail:
    {
        int saved = errno;
        tml__server_free(s);
        errno = saved;
    }
    return rc;
}

void tml__server_free(tml_server *s)
{
    if (!s)
        return;
    while (s->nconns)
        close_conn(s, s->nconns - 1);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    if (s->spare_fd >= 0)
        close(s->spare_fd);
    if (s->epfd >= 0)
        close(s->epfd);
    if (s->bulkfd >= 0)
        close(s->bulkfd);
    free(s->conns);
    free(s->events);
    free(s->slot_of_fd);
    free(s->scratch);
    free(s->run_id);
    free(s->secret);
    free(s->run_dir);
    free(s);
}

int tml__server_port(const tml_server *s)
{
    return s->port;
}

size_t tml__server_connections(const tml_server *s)
{
    return s->nconns;
}

size_t tml__server_max_connections(const tml_server *s)
{
    return s->max_conns;
}

int tml__server_adopt(tml_server *s, int fd, const char *peer)
{
    if (s->nconns >= s->max_conns)
        return TML_EFULL;
    if (fd < 0 || set_slot(s, fd, (int32_t)s->nconns) < 0)
        return TML_ENOMEM;
    if (watch(s, EPOLL_CTL_ADD, fd, EPOLLIN) < 0) {
        s->slot_of_fd[fd] = -1;
        return TML_ENOMEM;   /* ENOMEM, or ENOSPC: max_user_watches */
    }
    conn *c = &s->conns[s->nconns++];
    memset(c, 0, sizeof(*c));
    c->fd = fd;
    c->rank = -1;
    c->opened_ms = tml__mono_ms();
    snprintf(c->peer, sizeof(c->peer), "%s", peer);
    s->npreauth++;
    return 0;
}

size_t tml__server_paced(const tml_server *s)
{
    return s ? s->paced : 0;
}

size_t tml__server_rejected(const tml_server *s)
{
    return s->rejected;
}

/* Out of descriptors: the connection stays in the backlog and poll(2)
 * keeps saying so. Give up the spare, accept and close it, take the spare
 * back (the nginx/libuv remedy): the loop never spins. */
static void shed_one(tml_server *s)
{
    if (s->spare_fd < 0)
        return;
    close(s->spare_fd);
    int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0)
        close(fd);
    s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (log_refusal(s))
        tml__run_log(s->run_dir, "aggregator",
                     "refused a connection: out of file descriptors (%zu refusals so far)",
                     s->rejected);
}

/* Unauthenticated connections: how many in all and from this address,
 * the oldest of them, and the oldest of those that have not even said OPEN
 * (a rank says it as soon as it is connected). */
static size_t preauth_count(const tml_server *s, const char *ip, size_t *from_ip, size_t *oldest,
                            size_t *oldest_silent)
{
    size_t n = 0, iplen = strlen(ip);
    *from_ip = 0;
    *oldest = *oldest_silent = SIZE_MAX;
    for (size_t i = 0; i < s->nconns; i++) {
        const conn *c = &s->conns[i];
        if (c->state >= C_AUTHED)
            continue;
        n++;
        if (strncmp(c->peer, ip, iplen) == 0 && c->peer[iplen] == ':')
            (*from_ip)++;
        if (*oldest == SIZE_MAX || c->opened_ms < s->conns[*oldest].opened_ms)
            *oldest = i;
        if (c->state == C_OPEN &&
            (*oldest_silent == SIZE_MAX || c->opened_ms < s->conns[*oldest_silent].opened_ms))
            *oldest_silent = i;
    }
    return n;
}

/* Room for one more connection: NULL, or why not. When the unauthenticated
 * ones reach their share, or all reach the cap, one of them makes room:
 * the oldest that has not said OPEN for SILENT_GRACE_MS, else the oldest
 * that has not finished its handshake in PREAUTH_GRACE_MS. So silent
 * connections, however many and however fast they come, cannot keep a
 * rank out. */
static const char *make_room(tml_server *s, const char *ip)
{
    size_t from_ip = 0, oldest = SIZE_MAX, silent = SIZE_MAX;
    int local = strcmp(ip, "127.0.0.1") == 0;
    int full = s->npreauth >= s->preauth_max || s->nconns >= s->max_conns;
    /* the walk over every connection only when its answer matters: a
     * local rank connecting while there is room costs O(1) */
    if ((!local || full) && s->npreauth)
        preauth_count(s, ip, &from_ip, &oldest, &silent);
    if (!local && from_ip >= PREAUTH_MAX_PER_PEER)
        return "too many unauthenticated connections from this address";
    if (full) {
        int64_t now = tml__mono_ms();
        size_t victim = SIZE_MAX;
        if (silent != SIZE_MAX && now - s->conns[silent].opened_ms > SILENT_GRACE_MS)
            victim = silent;
        else if (oldest != SIZE_MAX && now - s->conns[oldest].opened_ms > PREAUTH_GRACE_MS)
            victim = oldest;
        if (victim != SIZE_MAX) {
            /* closed without a REJECT: a rank told REJECT stops trying,
             * one that lost the connection retries (client.c) */
            if (log_refusal(s))
                tml__run_log(s->run_dir, "aggregator",
                             "dropped connection from %s: handshake crowded out by newer "
                             "connections (a rank retries) (%zu so far)",
                             s->conns[victim].peer, s->rejected);
            close_conn(s, victim);
        }
    }
    return s->nconns >= s->max_conns ? "too many connections" : NULL;
}

static void accept_all(tml_server *s)
{
    for (;;) {
        struct sockaddr_in sin;
        socklen_t sl = sizeof(sin);
        int fd = accept4(s->listen_fd, (struct sockaddr *)&sin, &sl,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE)
                shed_one(s);
            return;   /* EAGAIN, or an error that the next turn retries */
        }
        char ip[INET_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET, &sin.sin_addr, ip, sizeof(ip));
        const char *why = make_room(s, ip);
        if (why) {
            if (log_refusal(s))
                tml__run_log(s->run_dir, "aggregator", "refused connection from %s:%d: %s",
                             ip, ntohs(sin.sin_port), why);
            close(fd);
            continue;
        }
        char peer[64];
        snprintf(peer, sizeof(peer), "%s:%d", ip, ntohs(sin.sin_port));
        if (tml__server_adopt(s, fd, peer) < 0)   /* make_room said there is a slot */
            close(fd);
    }
}

/* The first frame: OPEN. The answer is a CHALLENGE with a nonce of this
 * connection's, which the HELLO's MAC must cover. -1: refused. */
static int on_open(tml_server *s, conn *c, const tml_frame_header *h)
{
    if (h->type != TML_FRAME_OPEN) {
        reject(s, c, h->type == TML_FRAME_HELLO ? "HELLO without a challenge (send OPEN first)"
                                                : "expected OPEN first");
        return -1;
    }
    if (tml__random_bytes(c->nonce, sizeof(c->nonce)) < 0) {
        reject(s, c, "no random bytes for a challenge");
        return -1;
    }
    tml_strbuf sb = TML_STRBUF_INIT;
    tml__wire_challenge(&sb, c->nonce);
    send_frame(c, &sb);
    tml__sb_release(&sb);
    c->state = C_HELLO;
    return 0;
}

/* Another process image of the same rank, pid and host with a connection
 * still open (not yet said goodbye). */
static int live_twin(const tml_server *s, const conn *c, const tml_rank_info *i)
{
    for (size_t k = 0; k < s->nconns; k++) {
        const conn *o = &s->conns[k];
        if (o != c && o->state == C_AUTHED && o->claimed == i->rank && o->pid == i->pid &&
            strcmp(o->host, i->host) == 0 && o->instance != i->instance)
            return 1;
    }
    return 0;
}

/* The HELLO: this run's id, and the MAC of our nonce under this run's
 * secret. -1: refused. */
static int on_hello(tml_server *s, conn *c, const tml_frame_header *h, const uint8_t *p)
{
    tml_hello hello;
    if (h->type != TML_FRAME_HELLO) {
        reject(s, c, "expected HELLO after the challenge");
        return -1;
    }
    if (tml__wire_parse_hello(p, h->len, &hello) < 0) {
        reject(s, c, "malformed HELLO");
        return -1;
    }
    if (strcmp(hello.run_id, s->run_id) != 0) {
        reject(s, c, "wrong run id");
        return -1;
    }
    if (!tml__wire_hello_verify(p, h->len, c->nonce, s->secret)) {
        reject(s, c, "bad secret (the HELLO's MAC does not match this connection's challenge)");
        return -1;
    }
    const tml_rank_info *i = &hello.info;
    if (tml__agg_hello(s->agg, i, live_twin(s, c, i), &c->rank) < 0) {
        reject(s, c, "aggregator out of memory");
        return -1;
    }
    /* from the handshakes' set to the ranks' */
    epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    c->state = C_AUTHED;
    s->npreauth--;
    if (watch_in(s->bulkfd, EPOLL_CTL_ADD, c->fd,
                 EPOLLIN | (c->out_watched ? EPOLLOUT : 0)) < 0) {
        tml__run_log(s->run_dir, "aggregator", "closed connection from %s (rank %d): %s",
                     c->peer, (int)c->rank, strerror(errno));
        return -1;
    }
    c->claimed = i->rank;
    c->pid = i->pid;
    c->instance = i->instance;
    snprintf(c->host, sizeof(c->host), "%s", i->host);
    tml_strbuf sb = TML_STRBUF_INIT;
    tml__wire_welcome(&sb);
    send_frame(c, &sb);
    tml__sb_release(&sb);
    return 0;
}

/* STEPS: a payload can hold more records than the scratch: in parts. */
static int on_steps(tml_server *s, conn *c, const tml_frame_header *h, const uint8_t *p)
{
    size_t n;
    if (tml__wire_parse_steps(p, h->len, &n) < 0)
        return 1;
    if (!s->scratch) {
        s->scratch = malloc(TML_WIRE_MAX_STEPS * sizeof(*s->scratch));
        if (!s->scratch)
            return -1;
    }
    for (size_t done = 0; done < n;) {
        size_t k = n - done < TML_WIRE_MAX_STEPS ? n - done : TML_WIRE_MAX_STEPS;
        for (size_t i = 0; i < k; i++)
            tml__wire_parse_step(p, done + i, &s->scratch[i]);
        tml__agg_steps(s->agg, c->rank, s->scratch, k);
        done += k;
    }
    return 0;
}

/* SAMPLES: a rank speaks for itself only, so each sample gets its rank. */
static int on_samples(tml_server *s, conn *c, const tml_frame_header *h, const uint8_t *p)
{
    size_t n;
    tml_sample v[256];
    if (tml__wire_parse_samples(p, h->len, &n) < 0)
        return 1;
    for (size_t done = 0; done < n;) {
        size_t k = n - done < 256 ? n - done : 256;
        for (size_t i = 0; i < k; i++) {
            tml__wire_parse_sample(p, done + i, &v[i]);
            v[i].rank = c->rank;
        }
        tml__agg_samples(s->agg, v, k);
        done += k;
    }
    return 0;
}

/* SUMMARY_REQ: a rank asks for the summary so far (traceml.summary()
 * mid-run). One at a time: asking again while the last answer is still
 * unread costs the asker its connection (-1), never the others' time. */
static int on_summary_req(tml_server *s, conn *c)
{
    if (c->out.len > c->out_off) {
        tml__run_log(s->run_dir, "aggregator", "closed connection from %s (rank %d): a summary "
                     "asked for before the last answer was read", c->peer, (int)c->rank);
        tml__agg_lost(s->agg, c->rank);
        return -1;
    }
    tml_strbuf js = TML_STRBUF_INIT, fr = TML_STRBUF_INIT;
    int rc = tml__agg_summary_json(s->agg, &js);
    if (rc == 0 && js.failed)
        rc = TML_ENOMEM;
    tml__wire_summary(&fr, rc, rc == 0 ? js.buf : NULL, rc == 0 ? js.len : 0);
    queue_frame(c, &fr);
    tml__sb_release(&js);
    tml__sb_release(&fr);
    return 0;
}

/* A rank's deep dive (model/deepdive.h): 0 taken, 1 malformed. */
static int on_deep_dive(tml_server *s, conn *c, const tml_frame_header *h, const uint8_t *p)
{
    tml_dd_window *d = tml__dd_new();
    if (!d)
        return 0;       /* dropped: the connection is fine */
    int rc = tml__wire_parse_deep_dive(p, h->len, d) == 0 ? 0 : 1;
    if (rc == 0)
        tml__agg_deep_dive(s->agg, c->rank, d);
    tml__dd_free(d);
    return rc;
}

/* One whole frame. 0 handled, -1 close the connection. */
static int handle_frame(tml_server *s, conn *c, const tml_frame_header *h, const uint8_t *p)
{
    int rc = 1;   /* 1: unexpected or malformed */

    if (c->state == C_OPEN)
        return on_open(s, c, h);
    if (c->state == C_HELLO)
        return on_hello(s, c, h, p);
    if (c->state == C_AUTHED) {
        switch (h->type) {
        case TML_FRAME_IDENTITY: {
            /* A rank describing itself anew (its loader settings, ...): a
             * rank speaks for itself only, so its number and process
             * (pid, host, image) cannot change. */
            tml_hello again;
            if (tml__wire_parse_identity(p, h->len, &again) == 0 &&
                again.info.rank == c->claimed) {
                again.info.rank = c->rank;
                again.info.pid = c->pid;
                again.info.instance = c->instance;
                snprintf(again.info.host, sizeof(again.info.host), "%s", c->host);
                tml__agg_hello(s->agg, &again.info, 0, NULL);
                rc = 0;
            }
            break;
        }
        case TML_FRAME_STEPS:
            rc = on_steps(s, c, h, p);
            break;
        case TML_FRAME_SAMPLES:
            rc = on_samples(s, c, h, p);
            break;
        case TML_FRAME_SUMMARY_REQ:
            if (on_summary_req(s, c) < 0)
                return -1;
            rc = 0;
            break;
        case TML_FRAME_DEEP_DIVE:
            rc = on_deep_dive(s, c, h, p);
            break;
        case TML_FRAME_STATS:
        case TML_FRAME_BYE: {
            tml_rank_stats st;
            if (tml__wire_parse_stats(p, h->len, &st) < 0)
                break;
            int bye = h->type == TML_FRAME_BYE;
            tml__agg_stats(s->agg, c->rank, &st, bye);
            if (bye)
                c->state = C_BYE;
            rc = 0;
            break;
        }
        default:
            break;
        }
    }
    if (rc <= 0)
        return rc;
    tml__run_log(s->run_dir, "aggregator",
                 "closed connection from %s (rank %d): unexpected or malformed frame type %u",
                 c->peer, (int)c->rank, (unsigned)h->type);
    return -1;
}

/* Reads what is there and handles whole frames. -1: close it. */
static int service(tml_server *s, conn *c)
{
    size_t budget = READ_BUDGET;
    int eof = 0;
    while (budget > 0) {
        if (c->cap - c->len < 4096) {
            size_t max = c->state < C_AUTHED ? TML_WIRE_HEADER + PREAUTH_MAX_FRAME
                                             : TML_WIRE_HEADER + TML_WIRE_MAX_PAYLOAD + 65536;
            size_t cap = c->cap ? c->cap * 2 : 16384;
            if (cap > max)
                cap = max;
            if (cap <= c->cap)
                break;   /* full: frames below must make room */
            uint8_t *nb = realloc(c->buf, cap);
            if (!nb)
                return -1;
            c->buf = nb;
            c->cap = cap;
        }
        size_t want = c->cap - c->len < budget ? c->cap - c->len : budget;
        ssize_t r = recv(c->fd, c->buf + c->len, want, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                eof = 1;   /* reset by the peer: as good as closed */
            break;
        }
        if (r == 0) {
            eof = 1;
            break;
        }
        c->len += (size_t)r;
        budget -= (size_t)r;
        if ((size_t)r < want)
            break;   /* drained for now; more is reported again */
    }
    size_t off = 0;
    while (c->len - off >= TML_WIRE_HEADER) {
        tml_frame_header h;
        int rc = tml__wire_header(c->buf + off, c->len - off, &h);
        if (rc < 0) {
            if (c->state < C_AUTHED && h.version)
                reject_version(s, c, h.version);
            else if (c->state < C_AUTHED)
                reject(s, c, "not a TraceML frame");
            else
                tml__run_log(s->run_dir, "aggregator",
                             "closed connection from %s (rank %d): not a TraceML frame",
                             c->peer, (int)c->rank);
            return -1;
        }
        if (c->state < C_AUTHED && h.len > PREAUTH_MAX_FRAME) {
            reject(s, c, "frame too large before HELLO");
            return -1;
        }
        if (c->len - off - TML_WIRE_HEADER < h.len)
            break;
        if (handle_frame(s, c, &h, c->buf + off + TML_WIRE_HEADER) < 0)
            return -1;
        off += TML_WIRE_HEADER + h.len;
    }
    if (off) {
        memmove(c->buf, c->buf + off, c->len - off);
        c->len -= off;
    }
    if (eof) {
        if (c->state < C_AUTHED && c->len)
            tml__run_log(s->run_dir, "aggregator",
                         "connection from %s closed during the handshake", c->peer);
        else if (c->state == C_AUTHED) {
            tml__run_log(s->run_dir, "aggregator",
                         "rank %d (%s) disconnected without saying goodbye", (int)c->rank,
                         c->peer);
            tml__agg_lost(s->agg, c->rank);
        }
        return -1;
    }
    return 0;
}

/* Reads the control pipe; 1 when *cmd holds an event. */
static int read_control(tml_server *s, tml_server_cmd *cmd)
{
    for (;;) {
        if (s->ctl_len == sizeof(s->ctl))
            s->ctl_len = 0;   /* an overlong line is garbage: drop it */
        ssize_t r = read(s->control_fd, s->ctl + s->ctl_len, sizeof(s->ctl) - s->ctl_len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return 0;
        if (r == 0) {
            if (!s->control_always)
                epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->control_fd, NULL);
            close(s->control_fd);
            s->control_fd = -1;
            cmd->event = TML_SERVER_CONTROL_EOF;
            return 1;
        }
        s->ctl_len += (size_t)r;
        char *nl = memchr(s->ctl, '\n', s->ctl_len);
        if (!nl)
            return 0;
        *nl = '\0';
        char status[16] = "";
        int code = 0, width = 0;
        int n = sscanf(s->ctl, "finalize %15s %d %d", status, &code, &width);
        size_t used = (size_t)(nl - s->ctl) + 1;
        memmove(s->ctl, nl + 1, s->ctl_len - used);
        s->ctl_len -= used;
        if (n >= 1) {
            cmd->event = TML_SERVER_FINALIZE;
            snprintf(cmd->status, sizeof(cmd->status), "%s", status);
            cmd->exit_code = n >= 2 ? code : 0;
            cmd->width = n >= 3 ? width : 0;
            return 1;
        }
        tml__run_log(s->run_dir, "aggregator", "ignored control line '%s'", s->ctl);
        return 0;
    }
}

/* Connections that took too long: to say HELLO, or to read an answer. */
static void sweep(tml_server *s, int64_t now)
{
    for (size_t k = s->nconns; k-- > 0;) {
        conn *c = &s->conns[k];
        if (c->state < C_AUTHED && now - c->opened_ms > HELLO_TIMEOUT_MS) {
            reject(s, c, "no HELLO in time");
            close_conn(s, k);
        } else if (c->out.len > c->out_off && now - c->out_ms > OUT_STALL_MS) {
            tml__run_log(s->run_dir, "aggregator", "closed connection from %s (rank %d): it "
                         "read nothing of an answer for %d s", c->peer, (int)c->rank,
                         OUT_STALL_MS / 1000);
            if (c->state == C_AUTHED)
                tml__agg_lost(s->agg, c->rank);
            close_conn(s, k);
        }
    }
}

/* One connection's event: send what waits, read what came. */
static void on_conn_event(tml_server *s, conn *c, uint32_t ev)
{
    if ((ev & EPOLLOUT) && c->out.len)
        flush_out(c);
    if ((ev & ~(uint32_t)EPOLLOUT) && service(s, c) < 0) {
        close_conn(s, (size_t)(c - s->conns));
        return;
    }
    watch_out(s, c);
}

int tml__server_poll(tml_server *s, int timeout_ms, tml_server_cmd *cmd)
{
    int got = 0, listener = 0, control = s->control_always && s->control_fd >= 0;
    int n = epoll_wait(s->epfd, s->events, MAX_EVENTS, control ? 0 : timeout_ms);
    if (n < 0 && errno != EINTR)
        return TML_EIO;
    /* connections first, then the control pipe, then new connections:
     * only the connection at hand closes while events are read, and an
     * fd that closed is no one's until accept reuses it */
    int bulk = 0;
    for (int k = 0; k < n; k++) {
        int fd = s->events[k].data.fd;
        if (fd == s->listen_fd) {
            listener = 1;
        } else if (fd == s->control_fd) {
            control = 1;
        } else if (fd == s->bulkfd) {
            bulk = 1;
        } else {
            conn *c = conn_of_fd(s, fd);
            if (c)
                on_conn_event(s, c, s->events[k].events);
        }
    }
    /* then the ranks' connections that have something */
    n = bulk ? epoll_wait(s->bulkfd, s->events, MAX_EVENTS, 0) : 0;
    for (int k = 0; k < n; k++) {
        conn *c = conn_of_fd(s, s->events[k].data.fd);
        if (c)
            on_conn_event(s, c, s->events[k].events);
    }
    s->ready = n > 0 ? (size_t)n : 0;
    if (control && s->control_fd >= 0)
        got = read_control(s, cmd);
    if (listener)
        accept_all(s);
    int64_t now = tml__mono_ms();
    if ((s->npreauth || s->nwatched) && now - s->swept_ms >= SWEEP_MS) {
        s->swept_ms = now;
        sweep(s, now);
    }
    tml__agg_tick(s->agg);
    return got;
}

/* PACE_MS with the ranks' connections out of the wait (they fill up
 * meanwhile); handshakes, new connections and the control pipe are
 * served as ever. 1 when *cmd holds a control event. */
static int pace(tml_server *s, tml_server_cmd *cmd)
{
    s->paced++;
    if (s->control_always) {   /* the control fd is read every turn: no wait */
        tml__sleep_ms(PACE_MS);
        return 0;
    }
    int got = 0;
    watch(s, EPOLL_CTL_MOD, s->bulkfd, 0);
    int64_t until = tml__mono_ms() + PACE_MS;
    for (int64_t now = tml__mono_ms(); got == 0 && now < until; now = tml__mono_ms())
        got = tml__server_poll(s, (int)(until - now), cmd);
    watch(s, EPOLL_CTL_MOD, s->bulkfd, EPOLLIN);
    return got;
}

/* The one event loop: the ranks' sockets, the control pipe, and the timer
 * (Redis ae.c style: periodic work is an event of the loop, not a second
 * loop). */
int tml__server_run(tml_server *s, tml_server_cmd *cmd)
{
    memset(cmd, 0, sizeof(*cmd));
    int64_t next = tml__mono_ms();
    for (;;) {
        if (s->stop && *s->stop) {
            cmd->event = TML_SERVER_STOPPED;
            return 0;
        }
        int wait = 100;
        if (s->timer) {
            int64_t now = tml__mono_ms();
            if (now >= next) {
                s->timer(s->timer_ctx);
                next = now + s->timer_ms;
            }
            if (next - now < wait)
                wait = next - now > 0 ? (int)(next - now) : 0;
        }
        int rc = tml__server_poll(s, wait, cmd);
        if (rc < 0)
            return rc;
        if (rc == 0 && s->ready >= PACE_READY)
            rc = pace(s, cmd);
        if (rc < 0)
            return rc;
        if (rc == 1)
            return 0;
    }
}

static size_t pending(const tml_server *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->nconns; i++)
        n += s->conns[i].state != C_BYE;
    return n;
}

size_t tml__server_drain(tml_server *s, int timeout_ms)
{
    int64_t deadline = tml__mono_ms() + timeout_ms;
    tml_server_cmd ignored;
    /* pick up connections queued in the backlog before looking */
    accept_all(s);
    for (;;) {
        memset(&ignored, 0, sizeof(ignored));
        tml__server_poll(s, 0, &ignored);
        size_t left = pending(s);
        int64_t now = tml__mono_ms();
        if (left && now >= deadline)   /* the end of the run: still silent */
            for (size_t i = 0; i < s->nconns; i++)
                if (s->conns[i].state == C_AUTHED)
                    tml__agg_lost(s->agg, s->conns[i].rank);
        if (left == 0 || now >= deadline)
            return left;
        int64_t wait = deadline - now;
        tml__server_poll(s, wait < 20 ? (int)wait : 20, &ignored);
    }
}
