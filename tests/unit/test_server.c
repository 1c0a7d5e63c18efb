/* test_server.c - the aggregator's socket server, in process: the loop runs
 * in a thread on a loopback port; the test speaks the wire as a client.
 * A bad secret, a wrong run id, frames before HELLO and garbage are
 * rejected and logged; a good session lands in the run; frames split
 * into single bytes decode the same; the control pipe and drain work. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agg/agg.h"
#include "agg/server.h"
#include "core/client.h"
#include "traceml/traceml.h"
#include "base/strbuf.h"
#include "wire/wire.h"

#include "handshake.h"
#include "harness.h"

#define RUN_ID "run0123456789"
#define SECRET "s3cr3t-0123456789abcdef"

static char dir[256];

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

typedef struct fixture {
    char run_dir[512];
    tml_agg *agg;
    tml_server *srv;
    pthread_t thread;
    /* shared with the loop thread (the ThreadSanitizer build checks) */
    atomic_int stop;
    atomic_int events;        /* written after `last` */
    atomic_size_t nconns;     /* the server's connections after each turn */
    int ctl[2];
    tml_server_cmd last;
} fixture;

static void *loop(void *arg)
{
    fixture *f = arg;
    while (!atomic_load(&f->stop)) {
        tml_server_cmd cmd;
        memset(&cmd, 0, sizeof(cmd));
        if (tml__server_poll(f->srv, 10, &cmd) == 1) {
            f->last = cmd;
            atomic_fetch_add(&f->events, 1);
        }
        atomic_store(&f->nconns, tml__server_connections(f->srv));
    }
    return NULL;
}

static int start(fixture *f, const char *name)
{
    memset(f, 0, sizeof(*f));
    if (!dir[0]) {
        snprintf(dir, sizeof(dir), "/tmp/tml_test_server_XXXXXX");
        if (!mkdtemp(dir))
            abort();
        atexit(teardown);
    }
    snprintf(f->run_dir, sizeof(f->run_dir), "%s/%s", dir, name);
    mkdir(f->run_dir, 0755);
    tml_agg_opts ao = {.run_name = name, .run_id = RUN_ID, .run_dir = f->run_dir};
    if (tml__agg_new(&ao, &f->agg) < 0)
        return -1;
    if (pipe(f->ctl) < 0)
        return -1;
    tml_server_opts so;
    memset(&so, 0, sizeof(so));
    so.run_id = RUN_ID;
    so.secret = SECRET;
    so.run_dir = f->run_dir;
    so.control_fd = f->ctl[0];
    if (tml__server_new(&so, f->agg, &f->srv) < 0)
        return -1;
    return pthread_create(&f->thread, NULL, loop, f) == 0 ? 0 : -1;
}

static void stop_loop(fixture *f)
{
    atomic_store(&f->stop, 1);
    pthread_join(f->thread, NULL);
}

static void finish(fixture *f)
{
    tml__server_free(f->srv);
    tml__agg_free(f->agg);
    close(f->ctl[1]);
}

/* Connects to 127.0.0.1:port, from a given loopback address when `from`
 * is set (127.0.0.2 counts as another host for the per-address cap), with
 * a receive buffer of rcvbuf bytes when not 0. */
static int dial_port(int port, const char *from, int rcvbuf)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    if (from) {
        inet_pton(AF_INET, from, &sin.sin_addr);
        if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
            close(fd);
            return -1;
        }
    }
    sin.sin_port = htons((uint16_t)port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int dial(const fixture *f)
{
    return dial_port(tml__server_port(f->srv), NULL, 0);
}

static void send_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        p += w;
        len -= (size_t)w;
    }
}

/* Reads one frame's type (0 on EOF/timeout). */
static int read_frame_type(int fd)
{
    uint8_t buf[4096];
    size_t n = 0;
    while (n < TML_WIRE_HEADER) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 3000) <= 0)
            return 0;
        ssize_t r = recv(fd, buf + n, sizeof(buf) - n, 0);
        if (r <= 0)
            return 0;
        n += (size_t)r;
    }
    tml_frame_header h;
    return tml__wire_header(buf, n, &h) == 0 ? h.type : 0;
}

/* 1 when the server closed the connection (EOF within 3 s). */
static int closed_by_peer(int fd)
{
    char c[256];
    for (;;) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 3000) <= 0)
            return 0;
        ssize_t r = recv(fd, c, sizeof(c), 0);
        if (r <= 0)
            return 1;
    }
}

static void hello_of(tml_hello *h, const char *run_id, const char *secret, int rank)
{
    memset(h, 0, sizeof(*h));
    snprintf(h->run_id, sizeof(h->run_id), "%s", run_id);
    snprintf(h->secret, sizeof(h->secret), "%s", secret);
    h->info.rank = rank;
    h->info.world_size = 1;
    h->info.nnodes = 1;
    h->info.pid = 99;
    h->info.instrumented = TML_PHASES_ALL;
    snprintf(h->info.host, sizeof(h->info.host), "testhost");
}

/* OPEN on fd, the CHALLENGE read, then a HELLO answering it into sb (to
 * be sent, with what follows it). */
static void hello(int fd, tml_strbuf *sb, const char *run_id, const char *secret, int rank)
{
    tml_hello h;
    uint8_t nonce[TML_WIRE_NONCE];
    hello_of(&h, run_id, secret, rank);
    CHECK_EQ_INT(th_challenge(fd, nonce), 0);
    tml__wire_hello(sb, &h, nonce);
}

static int log_has(const fixture *f, const char *needle)
{
    char path[700], buf[8192];
    snprintf(path, sizeof(path), "%s/traceml.log", f->run_dir);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

static void steps(tml_strbuf *sb, uint64_t first, size_t n)
{
    tml_step_record r[8];
    for (size_t i = 0; i < n; i++) {
        memset(&r[i], 0, sizeof(r[i]));
        r[i].step = first + i;
        r[i].traced_ns = 1000 + (int64_t)i;
        r[i].gpu_traced_ns = TML_MISSING;
        for (int p = 0; p < TML_PHASE_COUNT; p++)
            r[i].gpu_phase_ns[p] = TML_MISSING;
        r[i].gap_ns = TML_MISSING;
        r[i].rss_bytes = TML_MISSING;
        r[i].cuda_allocated_peak_bytes = TML_MISSING;
        r[i].cuda_reserved_peak_bytes = TML_MISSING;
        r[i].observed = TML_PHASES_ALL;
    }
    tml__wire_steps(sb, r, n);
}

static void test_bad_secret_rejected_and_logged(void)
{
    fixture f;
    CHECK_EQ_INT(start(&f, "badsecret"), 0);
    int fd = dial(&f);
    CHECK(fd >= 0);
    tml_strbuf sb = TML_STRBUF_INIT;
    hello(fd, &sb, RUN_ID, "s3cr3t-0123456789abcdeX", 0);   /* last byte differs */
    send_all(fd, sb.buf, sb.len);
    CHECK_EQ_INT(read_frame_type(fd), TML_FRAME_REJECT);
    CHECK(closed_by_peer(fd));
    close(fd);
    /* a secret that is a prefix of the right one */
    fd = dial(&f);
    tml__sb_reset(&sb);
    hello(fd, &sb, RUN_ID, "s3cr3t", 0);
    send_all(fd, sb.buf, sb.len);
    CHECK_EQ_INT(read_frame_type(fd), TML_FRAME_REJECT);
    close(fd);
    /* the right secret for another run */
    fd = dial(&f);
    tml__sb_reset(&sb);
    hello(fd, &sb, "otherrun", SECRET, 0);
    send_all(fd, sb.buf, sb.len);
    CHECK_EQ_INT(read_frame_type(fd), TML_FRAME_REJECT);
    close(fd);
    tml__sb_release(&sb);
    stop_loop(&f);
    CHECK_EQ_INT(tml__server_rejected(f.srv), 3);
    CHECK_EQ_INT(tml__agg_run(f.agg)->nranks, 0);
    CHECK(log_has(&f, "bad secret"));
    CHECK(log_has(&f, "wrong run id"));
    CHECK(log_has(&f, "rejected connection from 127.0.0.1:"));
    finish(&f);
}

static void test_frames_before_hello_and_garbage(void)
{
    fixture f;
    CHECK_EQ_INT(start(&f, "garbage"), 0);
    tml_strbuf sb = TML_STRBUF_INIT;
    /* STEPS first */
    int fd = dial(&f);
    steps(&sb, 0, 2);
    send_all(fd, sb.buf, sb.len);
    CHECK_EQ_INT(read_frame_type(fd), TML_FRAME_REJECT);
    CHECK(closed_by_peer(fd));
    close(fd);
    /* an HTTP request */
    fd = dial(&f);
    const char *http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    send_all(fd, http, strlen(http));
    CHECK_EQ_INT(read_frame_type(fd), TML_FRAME_REJECT);
    close(fd);
    /* an oversized frame after a good hello: closed, no REJECT needed */
    fd = dial(&f);
    tml__sb_reset(&sb);
    hello(fd, &sb, RUN_ID, SECRET, 0);
    send_all(fd, sb.buf, sb.len);
    CHECK_EQ_INT(read_frame_type(fd), TML_FRAME_WELCOME);
    uint8_t big[12] = {'T', 'M', 'L', '1', TML_WIRE_VERSION, 0, TML_FRAME_STEPS, 0, 0xff, 0xff, 0xff, 0x7f};
    send_all(fd, big, sizeof(big));
    CHECK(closed_by_peer(fd));
    close(fd);
    /* a malformed STEPS payload (count does not match length) */
    fd = dial(&f);
    tml__sb_reset(&sb);
    hello(fd, &sb, RUN_ID, SECRET, 1);
    send_all(fd, sb.buf, sb.len);
    CHECK_EQ_INT(read_frame_type(fd), TML_FRAME_WELCOME);
    uint8_t bad[16] = {'T', 'M', 'L', '1', TML_WIRE_VERSION, 0, TML_FRAME_STEPS, 0, 4, 0, 0, 0, 9, 0, 0, 0};
    send_all(fd, bad, sizeof(bad));
    CHECK(closed_by_peer(fd));
    close(fd);
    tml__sb_release(&sb);
    stop_loop(&f);
    CHECK_EQ_INT(tml__server_rejected(f.srv), 2);
    CHECK(log_has(&f, "expected OPEN first"));
    CHECK(log_has(&f, "not a TraceML frame"));
    CHECK(log_has(&f, "malformed frame"));
    /* the server still works */
    finish(&f);
}

/* 1 when the server has closed fd (without waiting). */
static int closed_now(int fd)
{
    char c;
    return recv(fd, &c, 1, MSG_DONTWAIT) == 0;
}

/* Before authentication a connection costs little and holds nothing: a
 * big frame header is refused at once (no 1 MiB buffered first), idle
 * connections are crowded out by newer ones instead of locking ranks out,
 * and another host may hold only a few. */
static void test_preauth_bounded(void)
{
    fixture f;
    CHECK_EQ_INT(start(&f, "preauth"), 0);
    uint8_t big[12] = {'T', 'M', 'L', '1', TML_WIRE_VERSION, 0, TML_FRAME_HELLO, 0, 0, 0, 0x10, 0};
    int fd = dial(&f);
    send_all(fd, big, sizeof(big));               /* a 1 MiB "HELLO" */
    CHECK_EQ_INT(read_frame_type(fd), TML_FRAME_REJECT);
    CHECK(closed_by_peer(fd));
    close(fd);
    /* another host: 64 silent connections at most */
    enum { OTHER = 80, IDLE = 300 };
    int other[OTHER], idle[IDLE], refused = 0;
    for (int i = 0; i < OTHER; i++)
        other[i] = dial_port(tml__server_port(f.srv), "127.0.0.2", 0);
    usleep(300000);
    for (int i = 0; i < OTHER; i++)
        refused += other[i] >= 0 && closed_now(other[i]);
    CHECK_EQ_INT(refused, OTHER - 64);
    /* 300 more silent ones: once they are old, newer ones crowd them out */
    for (int i = 0; i < IDLE; i++)
        idle[i] = dial(&f);
    usleep(700000);
    fd = dial(&f);                                 /* a rank, at last */
    tml_strbuf sb = TML_STRBUF_INIT;
    hello(fd, &sb, RUN_ID, SECRET, 0);
    send_all(fd, sb.buf, sb.len);
    CHECK_EQ_INT(read_frame_type(fd), TML_FRAME_WELCOME);
    close(fd);
    tml__sb_release(&sb);
    for (int i = 0; i < OTHER; i++)
        if (other[i] >= 0)
            close(other[i]);
    for (int i = 0; i < IDLE; i++)
        if (idle[i] >= 0)
            close(idle[i]);
    stop_loop(&f);
    CHECK(log_has(&f, "frame too large before HELLO"));
    CHECK(log_has(&f, "too many unauthenticated connections from this address"));
    CHECK(log_has(&f, "handshake crowded out by newer connections (a rank retries)"));
    finish(&f);
}

/* A rank descheduled between connect and OPEN, while silent connections
 * crowd the server: its connection is closed without a REJECT (a REJECT
 * makes the engine's client give up for the run), and its next try, as
 * the client makes a second later, is welcomed. */
static void test_crowded_out_rank_is_not_rejected(void)
{
    enum { SILENT = 300 };
    fixture f;
    CHECK_EQ_INT(start(&f, "crowd"), 0);
    int rank = dial(&f), silent[SILENT];
    usleep(200000);                        /* older than the silent grace */
    for (int i = 0; i < SILENT; i++)
        silent[i] = dial(&f);
    usleep(300000);
    /* the rank wakes up: its OPEN meets a closed connection, no REJECT */
    tml_strbuf sb = TML_STRBUF_INIT;
    tml__wire_open(&sb);
    send_all(rank, sb.buf, sb.len);
    tml__sb_release(&sb);
    char c[64];
    struct pollfd pf = {rank, POLLIN, 0};
    CHECK(poll(&pf, 1, 3000) == 1);
    CHECK(recv(rank, c, sizeof(c), 0) <= 0);       /* EOF or reset: no frame */
    close(rank);
    usleep(200000);                        /* the silent ones are old now */
    char addr[64];
    tml_hello h;
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", tml__server_port(f.srv));
    hello_of(&h, RUN_ID, SECRET, 0);
    int fd = tml__client_connect(addr, &h, 1000, NULL);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
    for (int i = 0; i < SILENT; i++)
        if (silent[i] >= 0)
            close(silent[i]);
    stop_loop(&f);
    CHECK(log_has(&f, "handshake crowded out by newer connections (a rank retries)"));
    finish(&f);
}

/* Out of file descriptors, connections wait in the backlog and poll(2)
 * keeps reporting the listener: the loop must shed them, not spin. A
 * child process with 40 descriptors serves for a second while 80
 * connections arrive; its CPU time shows whether it spun. */
static void test_out_of_descriptors_does_not_spin(void)
{
    int port_pipe[2];
    CHECK_EQ_INT(pipe(port_pipe), 0);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {40, 40};
        setrlimit(RLIMIT_NOFILE, &rl);
        fixture f;
        if (start(&f, "emfile") < 0)
            _exit(3);
        int port = tml__server_port(f.srv);
        if (write(port_pipe[1], &port, sizeof(port)) != sizeof(port))
            _exit(3);
        sleep(2);
        stop_loop(&f);
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
                     (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
        _exit(cpu < 0.5 ? 0 : 1);
    }
    int port = 0;
    CHECK(read(port_pipe[0], &port, sizeof(port)) == sizeof(port));
    int fds[80];
    for (int i = 0; i < 80; i++)
        fds[i] = dial_port(port, NULL, 0);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (int i = 0; i < 80; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    close(port_pipe[0]);
    close(port_pipe[1]);
}

/* A connection churner: keeps opening connections that say nothing
 * (non-blocking connects, about 5,000 a second), each closed again when
 * RING newer ones are open, until told to stop. */
enum { RING = 1200 };
typedef struct churner {
    int port;
    atomic_int stop;
    int ring[RING];
} churner;

static void *churn(void *arg)
{
    churner *ch = arg;
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_port = htons((uint16_t)ch->port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (size_t i = 0; !atomic_load(&ch->stop); i = (i + 1) % RING) {
        if (ch->ring[i] >= 0)
            close(ch->ring[i]);
        ch->ring[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (ch->ring[i] >= 0)
            (void)connect(ch->ring[i], (struct sockaddr *)&sin, sizeof(sin));
        usleep(200);
    }
    for (int i = 0; i < RING; i++)
        if (ch->ring[i] >= 0)
            close(ch->ring[i]);
    return NULL;
}

/* One rank joining as the engine's client does (client.c): a lost or
 * refused connection is tried again, a REJECT is final. 1 when the server
 * said WELCOME within 30 tries. */
static int rank_welcomed(int port, int rank)
{
    char addr[64];
    tml_hello h;
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    hello_of(&h, RUN_ID, SECRET, rank);
    for (int tries = 0; tries < 30; tries++) {
        int fd = tml__client_connect(addr, &h, 1000, NULL);
        if (fd >= 0) {
            close(fd);
            return 1;
        }
        if (fd == TML_EAUTH || fd == TML_EPROTO)
            return 0;
        usleep(100000);
    }
    return 0;
}

/* Under the common 1024-descriptor limit a churner keeping 1,200 silent
 * connections coming meets the server's own cap, a reserve below the
 * limit, not EMFILE, and its connections make room for the 30 ranks that
 * arrive meanwhile: every rank is served, at worst after a retry (a
 * handshake crowded out is closed, never REJECTed). The server runs in a
 * child process held to 1024 descriptors. */
static void test_churner_never_locks_ranks_out(void)
{
    enum { RANKS = 30 };
    struct rlimit rl;
    CHECK_EQ_INT(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < RING + RANKS + 64) {
        printf("  (skipped: the dialling side needs %d descriptors)\n", RING + RANKS + 64);
        return;
    }
    struct rlimit mine = {RING + RANKS + 64, rl.rlim_max};
    CHECK_EQ_INT(setrlimit(RLIMIT_NOFILE, &mine), 0);
    int to_parent[2], to_child[2];
    CHECK_EQ_INT(pipe(to_parent), 0);
    CHECK_EQ_INT(pipe(to_child), 0);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit lim = {1024, 1024};
        fixture f;
        if (setrlimit(RLIMIT_NOFILE, &lim) < 0 || start(&f, "churn") < 0)
            _exit(3);
        int said[2] = {tml__server_port(f.srv), (int)tml__server_max_connections(f.srv)};
        char done;
        if (write(to_parent[1], said, sizeof(said)) != sizeof(said) ||
            read(to_child[0], &done, 1) != 1)
            _exit(3);
        stop_loop(&f);
        int emfile = log_has(&f, "out of file descriptors");
        finish(&f);
        _exit(emfile ? 1 : 0);
    }
    int said[2] = {0, 0};
    CHECK(read(to_parent[0], said, sizeof(said)) == sizeof(said));
    CHECK_EQ_INT(said[1], 1024 - 128);
    static churner ch;
    ch.port = said[0];
    atomic_store(&ch.stop, 0);
    for (int i = 0; i < RING; i++)
        ch.ring[i] = -1;
    pthread_t t;
    CHECK_EQ_INT(pthread_create(&t, NULL, churn, &ch), 0);
    usleep(500000);                         /* the server full of them */
    int welcomed = 0;
    for (int r = 0; r < RANKS; r++) {
        welcomed += rank_welcomed(said[0], r);
        usleep(20000);
    }
    atomic_store(&ch.stop, 1);
    pthread_join(t, NULL);
    CHECK_EQ_INT(welcomed, RANKS);
    CHECK(write(to_child[1], "x", 1) == 1);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);   /* never ran out */
    for (int k = 0; k < 2; k++) {
        close(to_parent[k]);
        close(to_child[k]);
    }
    setrlimit(RLIMIT_NOFILE, &rl);
}

/* Two processes claiming rank 0 (spawned children each calling init()):
 * never merged; the second gets a rank of its own, the summary names the
 * conflict. A reconnection of the same process is no conflict. */
static void test_duplicate_rank_not_merged(void)
{
    fixture f;
    CHECK_EQ_INT(start(&f, "dup"), 0);
    int fd[3];
    for (int k = 0; k < 3; k++) {
        tml_strbuf sb = TML_STRBUF_INIT;
        tml_hello h;
        memset(&h, 0, sizeof(h));
        snprintf(h.run_id, sizeof(h.run_id), "%s", RUN_ID);
        snprintf(h.secret, sizeof(h.secret), "%s", SECRET);
        h.info.world_size = 1;
        h.info.nnodes = 1;
        h.info.pid = k == 2 ? 100 : 100 + k;   /* the third: process 100 again */
        h.info.instance = (uint64_t)h.info.pid * 7;
        h.info.instrumented = TML_PHASES_ALL;
        snprintf(h.info.host, sizeof(h.info.host), "testhost");
        fd[k] = dial(&f);
        uint8_t nonce[TML_WIRE_NONCE];
        CHECK_EQ_INT(th_challenge(fd[k], nonce), 0);
        tml__wire_hello(&sb, &h, nonce);
        steps(&sb, 0, 3 + (size_t)k);
        send_all(fd[k], sb.buf, sb.len);
        CHECK_EQ_INT(read_frame_type(fd[k]), TML_FRAME_WELCOME);
        tml__sb_release(&sb);
        usleep(100000);
    }
    for (int k = 0; k < 3; k++)
        close(fd[k]);
    usleep(100000);
    stop_loop(&f);
    const tml_run *run = tml__agg_run(f.agg);
    CHECK_EQ_INT(run->nranks, 2);
    CHECK_EQ_INT(run->nconflicts, 1);
    if (run->nranks == 2) {
        CHECK_EQ_INT(run->ranks[0].info.pid, 100);
        CHECK_EQ_INT(run->ranks[1].info.rank, 1);
        CHECK_EQ_INT(run->ranks[1].info.pid, 101);
        CHECK_EQ_INT(run->ranks[1].nsteps, 4);
    }
    CHECK_EQ_INT(run->conflicts[0].claimed, 0);
    CHECK_EQ_INT(run->conflicts[0].reported_as, 1);
    tml_strbuf json = TML_STRBUF_INIT;
    CHECK_EQ_INT(tml__agg_summary_json(f.agg, &json), 0);
    CHECK(json.buf && strstr(json.buf, "\"claimed_rank\": 0") && strstr(json.buf, "\"reported_as\": 1"));
    CHECK(json.buf && strstr(json.buf, "CONFLICT: rank 0 was claimed by pid 100 on testhost and pid 101"));
    tml__sb_release(&json);
    CHECK(log_has(&f, "rank 0 claimed by two processes"));
    finish(&f);
}

/* The payload of the next frame on fd (its type in *type); bytes read. */
static size_t read_frame(int fd, int *type, uint8_t *payload, size_t cap)
{
    uint8_t hdr[TML_WIRE_HEADER];
    size_t n = 0;
    *type = 0;
    while (n < sizeof(hdr)) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 3000) <= 0)
            return 0;
        ssize_t r = recv(fd, hdr + n, sizeof(hdr) - n, 0);
        if (r <= 0)
            return 0;
        n += (size_t)r;
    }
    uint16_t version = (uint16_t)(hdr[4] | hdr[5] << 8);
    uint32_t len = (uint32_t)hdr[8] | (uint32_t)hdr[9] << 8 | (uint32_t)hdr[10] << 16;
    *type = (int)(hdr[6] | hdr[7] << 8) | (version != TML_WIRE_VERSION ? version << 16 : 0);
    for (n = 0; n < len && n < cap;) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 3000) <= 0)
            break;
        ssize_t r = recv(fd, payload + n, cap - n < len - n ? cap - n : len - n, 0);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    return n;
}

/* A HELLO captured from a rank's connection and sent again on another is
 * refused: the MAC covers that connection's nonce, never this one's. A
 * HELLO without OPEN first, and a peer of an older wire version, are
 * refused too (the old one in its own framing, with the reason); the real
 * client still gets in. */
static void test_replayed_hello_refused(void)
{
    fixture f;
    CHECK_EQ_INT(start(&f, "replay"), 0);
    tml_strbuf captured = TML_STRBUF_INIT, sb = TML_STRBUF_INIT;
    int fd = dial(&f);
    hello(fd, &captured, RUN_ID, SECRET, 0);      /* the rank's genuine HELLO */
    send_all(fd, captured.buf, captured.len);
    CHECK_EQ_INT(read_frame_type(fd), TML_FRAME_WELCOME);
    /* the same bytes after another challenge: the rank is still connected */
    int thief = dial(&f);
    uint8_t nonce[TML_WIRE_NONCE];
    CHECK_EQ_INT(th_challenge(thief, nonce), 0);
    steps(&captured, 0, 8);
    send_all(thief, captured.buf, captured.len);
    CHECK_EQ_INT(read_frame_type(thief), TML_FRAME_REJECT);
    CHECK(closed_by_peer(thief));
    close(thief);
    /* the same bytes with no OPEN first */
    thief = dial(&f);
    send_all(thief, captured.buf, captured.len);
    CHECK_EQ_INT(read_frame_type(thief), TML_FRAME_REJECT);
    close(thief);
    /* a wire-version-3 peer: a REJECT it can read, in version 3, saying why */
    uint8_t v3[12] = {'T', 'M', 'L', '1', 3, 0, TML_FRAME_HELLO, 0, 0, 0, 0, 0};
    thief = dial(&f);
    send_all(thief, v3, sizeof(v3));
    uint8_t why[512] = {0};
    int type;
    size_t n = read_frame(thief, &type, why, sizeof(why) - 1);
    CHECK_EQ_INT(type, TML_FRAME_REJECT | 3 << 16);
    CHECK(n > 2 && strstr((char *)why + 2, "wire version 3, this aggregator speaks 5"));
    close(thief);
    /* the real client gets in */
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", tml__server_port(f.srv));
    tml_hello h;
    hello_of(&h, RUN_ID, SECRET, 1);
    h.info.pid = 98;
    int other = -1, cfd = tml__client_connect(addr, &h, 1000, &other);
    CHECK(cfd >= 0);
    CHECK_EQ_INT(other, 0);
    snprintf(h.secret, sizeof(h.secret), "not-the-secret");
    CHECK_EQ_INT(tml__client_connect(addr, &h, 1000, NULL), TML_EAUTH);
    close(fd);
    if (cfd >= 0)
        close(cfd);
    usleep(100000);
    stop_loop(&f);
    const tml_run *run = tml__agg_run(f.agg);
    CHECK_EQ_INT(run->nranks, 2);                 /* rank 0 and the client's rank 1 */
    CHECK_EQ_INT(run->ranks[0].nsteps, 0);        /* none of the thief's 8 steps */
    CHECK_EQ_INT(run->nconflicts, 0);
    CHECK(log_has(&f, "bad secret"));
    CHECK(log_has(&f, "HELLO without a challenge"));
    CHECK(log_has(&f, "wire version 3"));
    tml__sb_release(&captured);
    tml__sb_release(&sb);
    finish(&f);
}

/* Connects as rank 0, pid 100 on testhost, process image `instance`, and
 * sends steps first..first+n-1; returns the fd (WELCOME checked). */
static int connect_as(fixture *f, uint64_t instance, uint64_t first, size_t n)
{
    tml_strbuf sb = TML_STRBUF_INIT;
    tml_hello h;
    uint8_t nonce[TML_WIRE_NONCE];
    hello_of(&h, RUN_ID, SECRET, 0);
    h.info.pid = 100;
    h.info.instance = instance;
    int fd = dial(f);
    CHECK_EQ_INT(th_challenge(fd, nonce), 0);
    tml__wire_hello(&sb, &h, nonce);
    steps(&sb, first, n);
    send_all(fd, sb.buf, sb.len);
    CHECK_EQ_INT(read_frame_type(fd), TML_FRAME_WELCOME);
    tml__sb_release(&sb);
    return fd;
}

/* Two live connections of one identity (rank 0, pid 100, testhost) from
 * two process images: the second is a CONFLICT with a rank of its own,
 * its steps never merged into the first's. The same image connecting
 * again (a reconnection) is no conflict and keeps its rank. */
static void test_second_live_connection_conflict(void)
{
    fixture f;
    CHECK_EQ_INT(start(&f, "twin"), 0);
    int a = connect_as(&f, 11, 0, 4);
    usleep(100000);
    int b = connect_as(&f, 22, 0, 6);
    usleep(100000);
    int a2 = connect_as(&f, 11, 4, 2);             /* process 11 reconnects */
    usleep(100000);
    close(a);
    close(b);
    close(a2);
    usleep(100000);
    stop_loop(&f);
    const tml_run *run = tml__agg_run(f.agg);
    CHECK_EQ_INT(run->nranks, 2);
    CHECK_EQ_INT(run->nconflicts, 1);
    if (run->nranks == 2) {
        CHECK_EQ_INT(run->ranks[0].nsteps, 6);    /* 4 + 2 of process 11 */
        CHECK_EQ_INT(run->ranks[1].nsteps, 6);    /* process 22's, apart */
        CHECK_EQ_INT(run->ranks[0].incarnation, 0);
    }
    CHECK_EQ_INT(run->conflicts[0].kind, TML_CONFLICT_SECOND_CONNECTION);
    CHECK_EQ_INT(run->conflicts[0].reported_as, 1);
    tml_strbuf json = TML_STRBUF_INIT;
    CHECK_EQ_INT(tml__agg_summary_json(f.agg, &json), 0);
    CHECK(json.buf && strstr(json.buf, "\"kind\": \"second_connection\""));
    CHECK(json.buf && strstr(json.buf, "CONFLICT: rank 0 (pid 100 on testhost) connected twice"));
    tml__sb_release(&json);
    CHECK(log_has(&f, "rank 0 claimed by two live connections"));
    finish(&f);
}

/* A rank's process that re-executes itself (same pid and host, a new
 * process image, its step ids from 0 again) is a new incarnation: both
 * processes' steps are counted, telemetry.sqlite keeps both (no row
 * replaced), the summary names it, and a run rebuilt from the file says
 * the same. */
static void test_restart_is_a_new_incarnation(void)
{
    fixture f;
    CHECK_EQ_INT(start(&f, "reexec"), 0);
    int a = connect_as(&f, 11, 0, 5);
    close(a);                                      /* the old image is gone */
    for (int i = 0; i < 300 && atomic_load(&f.nconns) != 0; i++)
        usleep(10000);
    int b = connect_as(&f, 22, 0, 3);
    tml_strbuf sb = TML_STRBUF_INIT;
    tml_rank_stats st;
    memset(&st, 0, sizeof(st));
    tml__wire_stats(&sb, TML_FRAME_BYE, &st);
    send_all(b, sb.buf, sb.len);
    tml__sb_release(&sb);
    CHECK(closed_by_peer(b) || 1);
    close(b);
    usleep(100000);
    stop_loop(&f);
    const tml_run *run = tml__agg_run(f.agg);
    CHECK_EQ_INT(run->nranks, 1);
    CHECK_EQ_INT(run->nconflicts, 1);
    if (run->nranks == 1) {
        CHECK_EQ_INT(run->ranks[0].nsteps, 8);
        CHECK_EQ_INT(run->ranks[0].incarnation, 1);
        for (size_t i = 0; i < run->ranks[0].nsteps; i++)
            CHECK_EQ_INT(run->ranks[0].steps[i].step, i);   /* numbered on: 0..7 */
    }
    CHECK_EQ_INT(run->conflicts[0].kind, TML_CONFLICT_RESTARTED);
    CHECK_EQ_INT(run->conflicts[0].incarnation, 1);
    CHECK_EQ_INT(run->conflicts[0].first_step, 5);
    char *text = NULL;
    tml__agg_finalize(f.agg, "completed", 0, 0, &text);
    CHECK(text && strstr(text, "CONFLICT: rank 0 restarted: pid 100 on testhost"));
    CHECK(text && strstr(text, "8 common steps"));
    free(text);
    CHECK(log_has(&f, "rank 0 restarted"));
    /* the run again, from telemetry.sqlite alone */
    tml_agg *again = NULL;
    tml_agg_opts ao = {.run_name = "reexec", .run_id = RUN_ID, .run_dir = f.run_dir};
    CHECK_EQ_INT(tml__agg_open_existing(&ao, &again), 0);
    const tml_run *back = tml__agg_run(again);
    CHECK_EQ_INT(back->nranks, 1);
    if (back->nranks == 1)
        CHECK_EQ_INT(back->ranks[0].nsteps, 8);
    CHECK_EQ_INT(back->nconflicts, 1);
    CHECK_EQ_INT(back->conflicts[0].kind, TML_CONFLICT_RESTARTED);
    CHECK_EQ_INT(back->conflicts[0].first_step, 5);
    tml__agg_free(again);
    finish(&f);
}

/* A rank that asks for summaries without reading the answers loses its
 * own connection; the others keep theirs and their data. */
static void test_summary_requests_one_at_a_time(void)
{
    fixture f;
    CHECK_EQ_INT(start(&f, "sumreq"), 0);
    tml_strbuf sb = TML_STRBUF_INIT;
    /* a small receive window, set before connecting: answers pile up in
     * the server's buffer after a few */
    int greedy = dial_port(tml__server_port(f.srv), NULL, 4096);
    hello(greedy, &sb, RUN_ID, SECRET, 0);
    steps(&sb, 0, 8);
    send_all(greedy, sb.buf, sb.len);
    CHECK_EQ_INT(read_frame_type(greedy), TML_FRAME_WELCOME);
    tml__sb_reset(&sb);
    for (int i = 0; i < 200; i++)
        tml__wire_summary_req(&sb);
    send_all(greedy, sb.buf, sb.len);
    tml__sb_reset(&sb);
    int other = dial(&f);
    hello(other, &sb, RUN_ID, SECRET, 1);
    steps(&sb, 0, 5);
    send_all(other, sb.buf, sb.len);
    CHECK_EQ_INT(read_frame_type(other), TML_FRAME_WELCOME);
    /* the greedy one is closed: after the answers it did get, EOF */
    char buf[65536];
    ssize_t r = 1;   /* no EOF within 5 s fails */
    do {
        struct pollfd pf = {greedy, POLLIN, 0};
        if (poll(&pf, 1, 5000) <= 0)
            break;
        r = recv(greedy, buf, sizeof(buf), 0);
    } while (r > 0);
    CHECK(r == 0 || r < 0);
    close(greedy);
    close(other);
    usleep(100000);
    stop_loop(&f);
    const tml_run *run = tml__agg_run(f.agg);
    CHECK_EQ_INT(run->nranks, 2);
    if (run->nranks == 2)
        CHECK_EQ_INT(run->ranks[1].nsteps, 5);
    CHECK(log_has(&f, "a summary asked for before the last answer was read"));
    tml__sb_release(&sb);
    finish(&f);
}

static void test_good_session(void)
{
    fixture f;
    CHECK_EQ_INT(start(&f, "good"), 0);
    int fd = dial(&f);
    tml_strbuf sb = TML_STRBUF_INIT;
    hello(fd, &sb, RUN_ID, SECRET, 0);
    send_all(fd, sb.buf, sb.len);
    CHECK_EQ_INT(read_frame_type(fd), TML_FRAME_WELCOME);
    tml__sb_reset(&sb);
    steps(&sb, 0, 5);
    steps(&sb, 5, 3);
    tml_rank_stats st = {1, 2, 8, 900, 12345};
    tml__wire_stats(&sb, TML_FRAME_STATS, &st);
    st.records_sent = 9;
    /* sent one byte at a time: reassembly must not care */
    for (size_t i = 0; i < sb.len; i++)
        send_all(fd, sb.buf + i, 1);
    tml__sb_reset(&sb);
    steps(&sb, 8, 1);
    tml__wire_stats(&sb, TML_FRAME_BYE, &st);
    send_all(fd, sb.buf, sb.len);
    tml__sb_release(&sb);
    close(fd);
    /* the loop is still running: wait for the rank to be done */
    for (int i = 0; i < 300 && atomic_load(&f.nconns); i++)
        usleep(10000);
    stop_loop(&f);
    const tml_run *run = tml__agg_run(f.agg);
    CHECK_EQ_INT(run->nranks, 1);
    if (run->nranks == 1) {
        const tml_rank *r = &run->ranks[0];
        CHECK_EQ_INT(r->nsteps, 9);
        CHECK_EQ_INT(r->ended, 1);
        CHECK_EQ_INT(r->stats.records_sent, 9);
        CHECK_EQ_INT(r->stats.overhead_ns_per_step, 900);
        CHECK_STR(r->info.host, "testhost");
        for (size_t i = 0; i < r->nsteps; i++)
            CHECK_EQ_INT(r->steps[i].step, i);
        CHECK_EQ_INT(r->steps[5].traced_ns, 1000);
        CHECK_EQ_INT(r->steps[0].gap_ns, TML_MISSING);
    }
    CHECK_EQ_INT(tml__agg_open_ranks(f.agg), 0);
    CHECK_EQ_INT(tml__server_rejected(f.srv), 0);
    /* finalize writes the artifacts */
    char *text = NULL;
    CHECK_EQ_INT(tml__agg_finalize(f.agg, "completed", 0, 0, &text), 0);
    CHECK(text && strstr(text, "good") != NULL);
    free(text);
    char path[700];
    snprintf(path, sizeof(path), "%s/final_summary.json", f.run_dir);
    CHECK(access(path, F_OK) == 0);
    snprintf(path, sizeof(path), "%s/final_summary.txt", f.run_dir);
    CHECK(access(path, F_OK) == 0);
    finish(&f);

    /* and the same run comes back from telemetry.sqlite */
    tml_agg *again = NULL;
    tml_agg_opts ao = {.run_name = "good", .run_id = RUN_ID, .run_dir = f.run_dir};
    CHECK_EQ_INT(tml__agg_open_existing(&ao, &again), 0);
    if (again) {
        const tml_run *run2 = tml__agg_run(again);
        CHECK_EQ_INT(run2->nranks, 1);
        if (run2->nranks == 1) {
            CHECK_EQ_INT(run2->ranks[0].nsteps, 9);
            CHECK_EQ_INT(run2->ranks[0].ended, 1);
        }
        tml__agg_free(again);
    }
}

/* A rank's DEEP_DIVE frame reaches the run, sized to its rows; a
 * malformed one closes the connection like any malformed frame. */
static void test_deep_dive_frame(void)
{
    fixture f;
    CHECK_EQ_INT(start(&f, "deep"), 0);
    int fd = dial(&f);
    tml_strbuf sb = TML_STRBUF_INIT;
    hello(fd, &sb, RUN_ID, SECRET, 0);
    send_all(fd, sb.buf, sb.len);
    CHECK_EQ_INT(read_frame_type(fd), TML_FRAME_WELCOME);
    tml__sb_reset(&sb);
    steps(&sb, 0, 3);
    tml_dd_window *d = tml__dd_new();
    d->first_step = 1;
    d->last_step = 2;
    tml__dd_add(d, "heavy_block", "aten::addmm", 5000000, 6);
    tml__wire_deep_dive(&sb, d);
    tml_rank_stats st = {0, 0, 3, 0, 0};
    tml__wire_stats(&sb, TML_FRAME_BYE, &st);
    send_all(fd, sb.buf, sb.len);
    close(fd);
    /* a second rank sends a window whose last step is before its first */
    fd = dial(&f);
    tml__sb_reset(&sb);
    hello(fd, &sb, RUN_ID, SECRET, 1);
    send_all(fd, sb.buf, sb.len);
    CHECK_EQ_INT(read_frame_type(fd), TML_FRAME_WELCOME);
    tml__sb_reset(&sb);
    d->first_step = 9;
    tml__wire_deep_dive(&sb, d);
    send_all(fd, sb.buf, sb.len);
    char c;
    CHECK(recv(fd, &c, 1, 0) <= 0);      /* closed on us */
    close(fd);
    tml__sb_release(&sb);
    tml__dd_free(d);
    for (int i = 0; i < 300 && atomic_load(&f.nconns); i++)
        usleep(10000);
    stop_loop(&f);
    const tml_run *run = tml__agg_run(f.agg);
    const tml_rank *r0 = tml__run_find((tml_run *)run, 0);
    const tml_rank *r1 = tml__run_find((tml_run *)run, 1);
    CHECK(r0 && r0->deep_dive && r0->deep_dive->nrows == 1 && r0->deep_dive->cap == 1);
    if (r0 && r0->deep_dive) {
        CHECK_STR(r0->deep_dive->rows[0].module, "heavy_block");
        CHECK_EQ_INT(r0->deep_dive->last_step, 2);
    }
    CHECK(!r1 || !r1->deep_dive);
    finish(&f);
}

static void test_control_and_drain(void)
{
    fixture f;
    CHECK_EQ_INT(start(&f, "control"), 0);
    int fd = dial(&f);
    tml_strbuf sb = TML_STRBUF_INIT;
    hello(fd, &sb, RUN_ID, SECRET, 0);
    send_all(fd, sb.buf, sb.len);
    CHECK_EQ_INT(read_frame_type(fd), TML_FRAME_WELCOME);
    const char *line = "finalize interrupted 130 88\n";
    CHECK_EQ_INT(write(f.ctl[1], line, strlen(line)), (long long)strlen(line));
    for (int i = 0; i < 300 && !atomic_load(&f.events); i++)
        usleep(10000);
    stop_loop(&f);
    CHECK_EQ_INT(atomic_load(&f.events), 1);
    CHECK_EQ_INT(f.last.event, TML_SERVER_FINALIZE);
    CHECK_STR(f.last.status, "interrupted");
    CHECK_EQ_INT(f.last.exit_code, 130);
    CHECK_EQ_INT(f.last.width, 88);
    /* an open rank holds drain until its deadline... */
    CHECK_EQ_INT(tml__server_drain(f.srv, 100), 1);
    /* ...and its goodbye releases it */
    tml__sb_reset(&sb);
    steps(&sb, 0, 2);
    tml_rank_stats st = {0, 0, 2, -1, -1};
    tml__wire_stats(&sb, TML_FRAME_BYE, &st);
    send_all(fd, sb.buf, sb.len);
    CHECK_EQ_INT(tml__server_drain(f.srv, 2000), 0);
    CHECK_EQ_INT(tml__agg_run(f.agg)->ranks[0].nsteps, 2);
    tml__sb_release(&sb);
    close(fd);
    /* the control pipe's end is an event too */
    close(f.ctl[1]);
    f.ctl[1] = dup(2);   /* finish() closes it */
    tml_server_cmd cmd;
    memset(&cmd, 0, sizeof(cmd));
    int got = 0;
    for (int i = 0; i < 100 && !got; i++)
        got = tml__server_poll(f.srv, 10, &cmd);
    CHECK_EQ_INT(got, 1);
    CHECK_EQ_INT(cmd.event, TML_SERVER_CONTROL_EOF);
    finish(&f);
}

/* A control fd that epoll(7) cannot watch (a regular file) is read every
 * turn, as poll(2) read it: its line, then its end. */
static void test_control_file(void)
{
    fixture f;
    CHECK_EQ_INT(start(&f, "controlfile"), 0);
    stop_loop(&f);
    char path[600];
    snprintf(path, sizeof(path), "%s/control", f.run_dir);
    FILE *fp = fopen(path, "w");
    CHECK(fp != NULL);
    if (!fp)
        return;
    fputs("finalize failed 3 100\n", fp);
    fclose(fp);
    int cfd = open(path, O_RDONLY);
    tml_server *srv = NULL;
    tml_server_opts so;
    memset(&so, 0, sizeof(so));
    so.run_id = RUN_ID;
    so.secret = SECRET;
    so.control_fd = cfd;
    CHECK_EQ_INT(tml__server_new(&so, f.agg, &srv), 0);
    if (!srv) {
        close(cfd);
        finish(&f);
        return;
    }
    tml_server_cmd cmd;
    memset(&cmd, 0, sizeof(cmd));
    CHECK_EQ_INT(tml__server_poll(srv, 1000, &cmd), 1);   /* at once, not after 1 s */
    CHECK_EQ_INT(cmd.event, TML_SERVER_FINALIZE);
    CHECK_STR(cmd.status, "failed");
    CHECK_EQ_INT(cmd.exit_code, 3);
    memset(&cmd, 0, sizeof(cmd));
    CHECK_EQ_INT(tml__server_poll(srv, 1000, &cmd), 1);
    CHECK_EQ_INT(cmd.event, TML_SERVER_CONTROL_EOF);
    tml__server_free(srv);   /* closed the file at its end */
    finish(&f);
}

static void test_bind_errors(void)
{
    fixture f;
    CHECK_EQ_INT(start(&f, "bind"), 0);
    tml_server *s2 = NULL;
    tml_server_opts so;
    memset(&so, 0, sizeof(so));
    so.run_id = RUN_ID;
    so.secret = SECRET;
    so.control_fd = -1;
    so.port = tml__server_port(f.srv);   /* taken */
    CHECK_EQ_INT(tml__server_new(&so, f.agg, &s2), TML_ECONN);
    so.port = 0;
    so.bind_addr = "not an address";
    CHECK_EQ_INT(tml__server_new(&so, f.agg, &s2), TML_EINVAL);
    so.bind_addr = NULL;
    so.secret = "";
    CHECK_EQ_INT(tml__server_new(&so, f.agg, &s2), TML_EINVAL);
    CHECK(s2 == NULL);
    stop_loop(&f);
    finish(&f);
}

typedef struct runner {
    tml_server *srv;
    int rc;
} runner;

static void *run_until_finalize(void *arg)
{
    runner *r = arg;
    tml_server_cmd cmd;
    r->rc = tml__server_run(r->srv, &cmd);
    return NULL;
}

/* Thousands of ranks: a turn that finds PACE_READY (256) connections with
 * data waits before the next (server.c); nothing any of them sent is
 * lost or held back by it. */
static void test_paced_turns_lose_nothing(void)
{
    enum { N = 300, STEPS = 3 };
    static int fds[N];
    fixture f;
    CHECK_EQ_INT(start(&f, "paced"), 0);
    tml_strbuf sb = TML_STRBUF_INIT;
    int authed = 0;
    for (int i = 0; i < N; i++) {
        tml_hello h;
        uint8_t nonce[TML_WIRE_NONCE];
        fds[i] = dial(&f);
        hello_of(&h, RUN_ID, SECRET, i);
        h.info.world_size = N;
        tml__sb_reset(&sb);
        if (fds[i] >= 0 && th_challenge(fds[i], nonce) == 0) {
            tml__wire_hello(&sb, &h, nonce);
            send_all(fds[i], sb.buf, sb.len);
            authed += read_frame_type(fds[i]) == TML_FRAME_WELCOME;
        }
    }
    CHECK_EQ_INT(authed, N);
    stop_loop(&f);
    /* every connection has a frame waiting before the loop's next turn */
    for (int i = 0; i < N; i++) {
        tml__sb_reset(&sb);
        steps(&sb, 0, STEPS);
        send_all(fds[i], sb.buf, sb.len);
    }
    runner r = {f.srv, 0};
    pthread_t t;
    CHECK_EQ_INT(pthread_create(&t, NULL, run_until_finalize, &r), 0);
    usleep(300000);
    static const char fin[] = "finalize completed 0 80\n";
    CHECK_EQ_INT(write(f.ctl[1], fin, sizeof(fin) - 1), (int)sizeof(fin) - 1);
    pthread_join(t, NULL);
    CHECK_EQ_INT(r.rc, 0);
    CHECK(tml__server_paced(f.srv) >= 1);
    const tml_run *run = tml__agg_run(f.agg);
    CHECK_EQ_INT(run->nranks, N);
    uint64_t got = 0;
    for (size_t i = 0; i < run->nranks; i++)
        got += tml__rank_received(&run->ranks[i]);
    CHECK_EQ_INT(got, (uint64_t)N * STEPS);
    for (int i = 0; i < N; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    tml__sb_release(&sb);
    finish(&f);
}

#define TESTS X(test_bad_secret_rejected_and_logged) X(test_frames_before_hello_and_garbage) \
    X(test_preauth_bounded) X(test_crowded_out_rank_is_not_rejected) \
    X(test_out_of_descriptors_does_not_spin) \
    X(test_churner_never_locks_ranks_out) \
    X(test_duplicate_rank_not_merged) X(test_replayed_hello_refused) \
    X(test_second_live_connection_conflict) X(test_restart_is_a_new_incarnation) \
    X(test_summary_requests_one_at_a_time) X(test_good_session) X(test_deep_dive_frame) X(test_control_and_drain) \
    X(test_control_file) X(test_bind_errors) X(test_paced_turns_lose_nothing)
#include "harness.h"
