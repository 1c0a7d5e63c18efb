/*
 * loadgen.c - many ranks against one aggregator: does it keep up, and what
 * does it cost?
 *
 * Two measurements, printed as tables:
 *
 *  1. Live: an aggregator process (the same event loop, aggregator and
 *     SQLite store as `traceml run` forks) and N simulated ranks speaking
 *     the real wire protocol (HELLO with run id and secret, STEPS frames,
 *     STATS every second, BYE), each sending R step records per second for
 *     S seconds, one record per frame as a rank's shipper does at that
 *     rate (the worst case: a frame, and a read, per record). Up to
 *     10,000 ranks: this process raises its descriptor limit to the hard
 *     limit (a descriptor per rank here and one per connection in the
 *     aggregator), and four threads connect and then send. Reported: records sent and received (lost = the difference, from
 *     the aggregator's own count after every BYE), the aggregator's CPU %
 *     of one core over the send phase (all its threads, and its event
 *     loop's thread alone), its peak RSS, how long its finalize took
 *     (drain + store flush + diagnosis + report), and how many of its
 *     loop's turns found so many connections with data that it waited
 *     before the next (src/agg/server.c, PACE_READY). And what a rank
 *     meets at that load (probe_main): the last rank joins a quarter into
 *     the send phase (its handshake, OPEN to WELCOME, in ms), and rank 0
 *     asks for the summary four times (SUMMARY_REQ to the whole answer,
 *     in ms: traceml.summary() over the wire). Exit status 1 also when
 *     an answer did not come within 10 s.
 *
 *  2. Offline: the summary of a run of N ranks x K steps built in memory
 *     (tml__report_build: window, diagnosis, box and JSON), median of
 *     repeats.
 *
 *  3. Long run (--long STEPS, instead of 1 and 2): the aggregator object
 *     with its SQLite store, in this process, fed N ranks x STEPS records
 *     as fast as it takes them (batches of 1,000 per rank). At 10^4, 10^5,
 *     ... steps per rank: this process's RSS (it holds nothing but the
 *     aggregator), how long a mid-run summary() takes (the answer
 *     tml__agg_summary_json builds, median and max of --repeats), the
 *     ingestion rate and telemetry.sqlite's size; at the end, how long
 *     the final summary takes after the last rank's goodbye (store flush,
 *     diagnosis, final_summary.json/.txt, manifest).
 *
 *     build/bench/loadgen [--ranks 256] [--rate 50] [--seconds 60]
 *                         [--summary-steps 10000] [--repeats 3]
 *     build/bench/loadgen --long 10000000 --ranks 8 [--repeats 5] [--keep]
 *
 * Exit status 1 when any record was lost (a correctness failure, not a
 * timing one).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <stdatomic.h>
#include <unistd.h>

#include "agg/agg.h"
#include "model/run.h"
#include "agg/server.h"
#include "live/live.h"
#include "report/report.h"
#include "base/strbuf.h"
#include "wire/wire.h"

#define RUN_ID "loadgen0000000000000000000000000"
#define SECRET "loadgen-secret-0123456789abcdef"
#define THREADS 4
#define MAX_RANKS 10000

/* The probe (live mode): the last rank joins a quarter into the send
 * phase (its handshake timed, then handed to its sender thread through
 * late_fd), and rank 0 asks for the summary at four points of it (its
 * sender sends the request with its next frame; the probe times the
 * answer): what a late or restarted rank and traceml.summary() meet at
 * full load. */
#define PROBE_ASKS 4
static atomic_int late_fd = -1, probe_ask;
static _Atomic int64_t probe_asked_ns;
static int32_t late_rank = -1;

static long opt_ranks = 256, opt_rate = 50, opt_seconds = 60, opt_steps = 10000,
            opt_repeats = 3, opt_long = 0;
static int opt_keep;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A plausible DDP step: 1 ms input, 5/10/1 ms compute, rank-dependent noise;
 * rank 7 is the input straggler (the summary should say INPUT STRAGGLER, R7). */
static void fake_step(tml_step_record *r, int32_t rank, uint64_t step)
{
    memset(r, 0, sizeof(*r));
    uint64_t h = (step * 2654435761u) ^ ((uint64_t)rank * 40503u);
    int64_t jitter = (int64_t)(h % 200000);
    r->step = step;
    r->start_ns = (int64_t)step * 20000000;
    r->phase_ns[TML_PHASE_INPUT] = 1000000 + (rank == 7 ? 4000000 : 0);
    r->phase_ns[TML_PHASE_H2D] = 0;
    r->phase_ns[TML_PHASE_FORWARD] = 5000000 + jitter;
    r->phase_ns[TML_PHASE_BACKWARD] = 10000000 - (rank == 7 ? 4000000 : 0);
    r->phase_ns[TML_PHASE_OPTIMIZER] = 1000000;
    /* lock-step: R7 waits 4 ms more for input and 4 ms less in the
     * all-reduce, so every rank's step takes the same 17.5 ms */
    r->traced_ns = 16500000 - (rank == 7 ? 4000000 : 0) + jitter;
    r->gpu_traced_ns = -1;
    for (int p = 0; p < TML_PHASE_COUNT; p++)
        r->gpu_phase_ns[p] = -1;
    r->gap_ns = step ? 10000 : -1;
    r->rss_bytes = 1000000000 + rank * 1000;
    r->cuda_allocated_peak_bytes = -1;
    r->cuda_reserved_peak_bytes = -1;
    r->observed = TML_STEP_PHASES;
}

/* ---- the aggregator child ---------------------------------------------- */

static volatile sig_atomic_t child_stop;

static void on_term(int sig)
{
    (void)sig;
    child_stop = 1;
}

/* Runs the server until the control pipe says finalize; reports
 * "received <n> finalize_ms <ms> paced <turns>\n" on status_fd. */
static int aggregator_child(const char *dir, int ctl_fd, int status_fd, int port_fd)
{
    tml_agg *agg = NULL;
    tml_server *srv = NULL;
    tml_agg_opts ao = {.run_name = "loadgen", .run_id = RUN_ID, .run_dir = dir,
                       .world_size = (int32_t)opt_ranks, .nnodes = 1, .own_process = 1};
    signal(SIGTERM, on_term);
    signal(SIGPIPE, SIG_IGN);
    if (tml__agg_new(&ao, &agg) < 0)
        return 1;
    tml_server_opts so;
    memset(&so, 0, sizeof(so));
    so.run_id = RUN_ID;
    so.secret = SECRET;
    so.run_dir = dir;
    so.control_fd = ctl_fd;
    so.stop = &child_stop;
    if (tml__server_new(&so, agg, &srv) < 0)
        return 1;
    char line[128];
    int n = snprintf(line, sizeof(line), "%d\n", tml__server_port(srv));
    if (write(port_fd, line, (size_t)n) != n)
        return 1;
    tml_server_cmd cmd;
    tml__server_run(srv, &cmd);
    int64_t t0 = now_ns();
    tml__server_drain(srv, 5000);
    tml__agg_finalize(agg, "completed", 0, 156, NULL);
    double fin_ms = (double)(now_ns() - t0) / 1e6;
    const tml_run *run = tml__agg_run(agg);
    unsigned long long got = 0;
    for (size_t i = 0; i < run->nranks; i++)
        got += tml__rank_received(&run->ranks[i]);
    n = snprintf(line, sizeof(line), "received %llu finalize_ms %.1f paced %zu\n", got, fin_ms,
                 tml__server_paced(srv));
    if (write(status_fd, line, (size_t)n) != n)
        return 1;
    tml__server_free(srv);
    tml__agg_free(agg);
    return 0;
}

/* ---- simulated ranks --------------------------------------------------- */

typedef struct sender {
    int port;
    int32_t first, count;   /* ranks first..first+count-1 */
    int *fds;               /* count of them, -1 where not connected */
    long connected;
    unsigned long long sent, failed;
} sender;

static int send_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pf = {fd, POLLOUT, 0};
            poll(&pf, 1, 100);
            continue;
        }
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

static int connect_rank(sender *s, int32_t rank)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_port = htons((uint16_t)s->port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    tml_hello h;
    memset(&h, 0, sizeof(h));
    snprintf(h.run_id, sizeof(h.run_id), "%s", RUN_ID);
    snprintf(h.secret, sizeof(h.secret), "%s", SECRET);
    h.info.rank = rank;
    h.info.local_rank = rank % 8;
    h.info.world_size = (int32_t)opt_ranks;
    h.info.node_rank = rank / 8;
    h.info.nnodes = (int32_t)((opt_ranks + 7) / 8);
    h.info.pid = 100000 + rank;
    h.info.instrumented = TML_PHASES_ALL;
    snprintf(h.info.host, sizeof(h.info.host), "node%d", (int)(rank / 8));
    tml_strbuf sb = TML_STRBUF_INIT;
    uint8_t buf[256], nonce[TML_WIRE_NONCE];
    struct pollfd pf = {fd, POLLIN, 0};
    tml_frame_header fh;
    /* OPEN, the CHALLENGE (header + nonce, one small segment), the HELLO */
    tml__wire_open(&sb);
    int rc = send_all(fd, sb.buf, sb.len);
    if (rc < 0 || poll(&pf, 1, 5000) != 1 ||
        recv(fd, buf, TML_WIRE_HEADER + TML_WIRE_NONCE, MSG_WAITALL) !=
            TML_WIRE_HEADER + TML_WIRE_NONCE ||
        tml__wire_header(buf, TML_WIRE_HEADER, &fh) < 0 || fh.type != TML_FRAME_CHALLENGE ||
        tml__wire_parse_challenge(buf + TML_WIRE_HEADER, fh.len, nonce) < 0) {
        tml__sb_release(&sb);
        close(fd);
        return -1;
    }
    tml__sb_reset(&sb);
    tml__wire_hello(&sb, &h, nonce);
    rc = send_all(fd, sb.buf, sb.len);
    tml__sb_release(&sb);
    /* the WELCOME frame: header + empty or short payload */
    if (rc < 0 || poll(&pf, 1, 5000) != 1 || recv(fd, buf, sizeof(buf), 0) < TML_WIRE_HEADER) {
        close(fd);
        return -1;
    }
    if (tml__wire_header(buf, TML_WIRE_HEADER, &fh) < 0 || fh.type != TML_FRAME_WELCOME) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Each thread connects its own ranks (in parallel: 10,000 handshakes one
 * after the other would take longer than the send phase). */
static void *connect_main(void *arg)
{
    sender *s = arg;
    for (int32_t i = 0; i < s->count; i++) {
        s->fds[i] = s->first + i == late_rank ? -1 : connect_rank(s, s->first + i);
        s->connected += s->fds[i] >= 0;
    }
    return NULL;
}

/* Sleeps until now_ns() reads t (at once when it is past). */
static void sleep_until(int64_t t)
{
    int64_t now = now_ns();
    if (t > now) {
        struct timespec ts = {(time_t)((t - now) / 1000000000), (long)((t - now) % 1000000000)};
        nanosleep(&ts, NULL);
    }
}

static void *sender_main(void *arg)
{
    sender *s = arg;
    tml_strbuf sb = TML_STRBUF_INIT;
    tml_step_record rec;
    int64_t period = 1000000000 / opt_rate;
    int64_t t0 = now_ns();
    long total = opt_rate * opt_seconds;
    tml_rank_stats st;
    memset(&st, 0, sizeof(st));
    st.overhead_ns_per_step = 1000;
    for (long step = 0; step < total; step++) {
        sleep_until(t0 + step * period);
        for (int32_t i = 0; i < s->count; i++) {
            if (s->fds[i] < 0 && s->first + i == late_rank)
                s->fds[i] = atomic_exchange(&late_fd, -1);   /* joined (probe_main) */
            if (s->fds[i] < 0)
                continue;
            fake_step(&rec, s->first + i, (uint64_t)step);
            tml__sb_reset(&sb);
            tml__wire_steps(&sb, &rec, 1);
            if (s->first + i == 0 && atomic_exchange(&probe_ask, 0)) {
                tml__wire_summary_req(&sb);
                atomic_store(&probe_asked_ns, now_ns());
            }
            if (step % opt_rate == opt_rate - 1) {
                st.records_sent = (uint64_t)step + 1;
                tml__wire_stats(&sb, TML_FRAME_STATS, &st);
            }
            if (send_all(s->fds[i], sb.buf, sb.len) < 0) {
                s->failed++;
                close(s->fds[i]);
                s->fds[i] = -1;
                continue;
            }
            s->sent++;
        }
    }
    st.records_sent = (uint64_t)total;
    for (int32_t i = 0; i < s->count; i++) {
        if (s->fds[i] < 0)
            continue;
        tml__sb_reset(&sb);
        tml__wire_stats(&sb, TML_FRAME_BYE, &st);
        send_all(s->fds[i], sb.buf, sb.len);
    }
    tml__sb_release(&sb);
    return NULL;
}

typedef struct probe {
    int port, fd0;                 /* rank 0's connection: the answers come on it */
    int64_t t0;                    /* the send phase's start */
    double join_ms, ask_ms[PROBE_ASKS];
    int joined, nask;
} probe;

/* One SUMMARY frame from fd within 10 s: 0, else -1. */
static int read_answer(int fd)
{
    uint8_t hdr[TML_WIRE_HEADER];
    tml_frame_header h;
    struct pollfd pf = {fd, POLLIN, 0};
    if (poll(&pf, 1, 10000) != 1 || recv(fd, hdr, sizeof(hdr), MSG_WAITALL) != sizeof(hdr) ||
        tml__wire_header(hdr, sizeof(hdr), &h) < 0 || h.type != TML_FRAME_SUMMARY)
        return -1;
    uint8_t *body = malloc(h.len ? h.len : 1);
    int rc = body && (h.len == 0 || recv(fd, body, h.len, MSG_WAITALL) == (ssize_t)h.len) ? 0 : -1;
    free(body);
    return rc;
}

static void *probe_main(void *arg)
{
    probe *p = arg;
    int64_t span = opt_seconds * 1000000000LL;
    if (late_rank >= 0) {
        sleep_until(p->t0 + span / 4);
        sender tmp = {p->port, 0, 0, NULL, 0, 0, 0};
        int64_t a = now_ns();
        int fd = connect_rank(&tmp, late_rank);
        p->join_ms = (double)(now_ns() - a) / 1e6;
        p->joined = fd >= 0;
        atomic_store(&late_fd, fd);
    }
    for (int k = 0; k < PROBE_ASKS && p->fd0 >= 0; k++) {
        sleep_until(p->t0 + span * (4 + k) / 8);
        atomic_store(&probe_ask, 1);
        if (read_answer(p->fd0) < 0)
            break;
        p->ask_ms[p->nask++] = (double)(now_ns() - atomic_load(&probe_asked_ns)) / 1e6;
    }
    return NULL;
}

/* CPU seconds of a process (thread 0) or of one of its threads. */
static double cpu_ticks(pid_t pid, pid_t thread)
{
    char path[64], buf[1024];
    if (thread)
        snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)thread);
    else
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return NAN;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long long ut = 0, stt = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
                     &stt) != 2)
        return NAN;
    return (double)(ut + stt) / (double)sysconf(_SC_CLK_TCK);
}

static long status_kb(pid_t pid, const char *key)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long v = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, strlen(key)) == 0)
            v = strtol(line + strlen(key), NULL, 10);
    fclose(f);
    return v;
}

/* A descriptor per simulated rank here, and one per connection in the
 * aggregator child (which inherits the limit): the soft limit up to the
 * hard one. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (rlim_t)opt_ranks + 64 > rl.rlim_cur)
        fprintf(stderr, "loadgen: %ld ranks need more descriptors than the limit (%llu): "
                "raise ulimit -Hn\n", opt_ranks, (unsigned long long)rl.rlim_cur);
}

static int live(void)
{
    char dir[] = "/tmp/traceml-loadgen-XXXXXX";
    int ctl[2], st[2], pp[2];
    raise_fd_limit();
    if (!mkdtemp(dir) || pipe(ctl) < 0 || pipe(st) < 0 || pipe(pp) < 0)
        return 2;
    pid_t pid = fork();
    if (pid == 0) {
        close(ctl[1]);
        close(st[0]);
        close(pp[0]);
        _exit(aggregator_child(dir, ctl[0], st[1], pp[1]));
    }
    close(ctl[0]);
    close(st[1]);
    close(pp[1]);
    char line[128] = "";
    ssize_t r = read(pp[0], line, sizeof(line) - 1);
    int port = r > 0 ? (int)strtol(line, NULL, 10) : 0;
    if (port <= 0) {
        fprintf(stderr, "loadgen: the aggregator did not start\n");
        return 2;
    }
    sender *ss = calloc(THREADS, sizeof(*ss));
    pthread_t th[THREADS];
    long per = (opt_ranks + THREADS - 1) / THREADS;
    long connected = 0;
    if (!ss)
        return 2;
    late_rank = opt_ranks > 1 ? (int32_t)opt_ranks - 1 : -1;
    for (int t = 0; t < THREADS; t++) {
        ss[t].port = port;
        ss[t].first = (int32_t)(t * per);
        ss[t].count = (int32_t)(per < opt_ranks - t * per ? per : opt_ranks - t * per);
        if (ss[t].count < 0)
            ss[t].count = 0;
        ss[t].fds = malloc(((size_t)ss[t].count + 1) * sizeof(int));
        if (!ss[t].fds)
            return 2;
        pthread_create(&th[t], NULL, connect_main, &ss[t]);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        connected += ss[t].connected;
    }
    /* the process, and its first thread: the event loop */
    double c0 = cpu_ticks(pid, 0), l0 = cpu_ticks(pid, pid);
    int64_t w0 = now_ns();
    probe pr;
    memset(&pr, 0, sizeof(pr));
    pr.port = port;
    pr.fd0 = ss[0].count ? ss[0].fds[0] : -1;
    pr.t0 = w0;
    pthread_t pth;
    pthread_create(&pth, NULL, probe_main, &pr);
    for (int t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, sender_main, &ss[t]);
    unsigned long long sent = 0, failed = 0;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        sent += ss[t].sent;
        failed += ss[t].failed;
    }
    pthread_join(pth, NULL);
    connected += pr.joined;
    int late = atomic_exchange(&late_fd, -1);   /* joined after its sender was done */
    if (late >= 0)
        close(late);
    qsort(pr.ask_ms, (size_t)pr.nask, sizeof(double), cmp_d);
    double wall = (double)(now_ns() - w0) / 1e9;
    double c1 = cpu_ticks(pid, 0), l1 = cpu_ticks(pid, pid);
    long rss = status_kb(pid, "VmRSS:"), hwm = status_kb(pid, "VmHWM:");
    if (write(ctl[1], "finalize completed 0 156\n", 25) != 25)
        return 2;
    char res[256] = "";
    size_t got = 0;
    while (got < sizeof(res) - 1) {
        r = read(st[0], res + got, sizeof(res) - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    int status;
    waitpid(pid, &status, 0);
    unsigned long long received = 0;
    double fin_ms = NAN;
    unsigned long long paced = 0;
    sscanf(res, "received %llu finalize_ms %lf paced %llu", &received, &fin_ms, &paced);
    for (int t = 0; t < THREADS; t++) {
        for (int32_t i = 0; i < ss[t].count; i++)
            if (ss[t].fds[i] >= 0)
                close(ss[t].fds[i]);
        free(ss[t].fds);
    }
    free(ss);

    printf("## live: %ld ranks x %ld steps/s for %ld s against one aggregator\n\n",
           opt_ranks, opt_rate, opt_seconds);
    printf("| ranks connected | records sent | records received | lost | send phase s | "
           "aggregator CPU %% (one core) | its event loop's thread %% | "
           "aggregator RSS MiB (end / peak) | finalize ms | turns paced | "
           "late rank's handshake ms | summary() over the wire ms, median / max (answers) |\n");
    printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    printf("| %ld | %llu | %llu | %lld | %.1f | %.1f | %.1f | %.1f / %.1f | %.0f | %llu | %.1f | "
           "%.1f / %.1f (%d of %d) |\n\n",
           connected, sent, received, (long long)sent - (long long)received, wall,
           100.0 * (c1 - c0) / wall, 100.0 * (l1 - l0) / wall, rss / 1024.0, hwm / 1024.0,
           fin_ms, paced, pr.joined ? pr.join_ms : NAN,
           pr.nask ? pr.ask_ms[pr.nask / 2] : NAN, pr.nask ? pr.ask_ms[pr.nask - 1] : NAN,
           pr.nask, PROBE_ASKS);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "loadgen: could not remove %s\n", dir);
    return (connected == opt_ranks && failed == 0 && sent == received &&
            pr.nask == PROBE_ASKS) ? 0 : 1;
}

/* ---- offline summary --------------------------------------------------- */

static int offline(void)
{
    tml_run run;
    tml__run_init(&run, "loadgen", RUN_ID);
    run.world_size = (int32_t)opt_ranks;
    run.nnodes = (int32_t)((opt_ranks + 7) / 8);
    tml_step_record *recs = malloc((size_t)opt_steps * sizeof(*recs));
    if (!recs)
        return 2;
    for (int32_t r = 0; r < opt_ranks; r++) {
        tml_rank_info info;
        memset(&info, 0, sizeof(info));
        info.rank = r;
        info.node_rank = r / 8;
        info.local_rank = r % 8;
        info.world_size = (int32_t)opt_ranks;
        info.instrumented = TML_PHASES_ALL;
        tml_rank *rk = tml__run_rank(&run, &info);
        for (long s = 0; s < opt_steps; s++)
            fake_step(&recs[s], r, (uint64_t)s);
        if (!rk || tml__run_add_steps(rk, recs, (size_t)opt_steps) < 0)
            return 2;
        rk->ended = 1;
    }
    free(recs);
    double *ms = calloc((size_t)opt_repeats, sizeof(*ms));
    size_t text_len = 0, json_len = 0;
    const char *verdict = "?";
    for (long i = 0; i < opt_repeats; i++) {
        tml_strbuf text = TML_STRBUF_INIT, json = TML_STRBUF_INIT;
        tml_report_opts o;
        memset(&o, 0, sizeof(o));
        o.status = "completed";
        o.duration_s = 200;
        o.json_path = "final_summary.json";
        o.generated_at = "2026-01-01T00:00:00Z";
        int64_t t0 = now_ns();
        int rc = tml__report_build(&run, &o, &text, &json);
        ms[i] = (double)(now_ns() - t0) / 1e6;
        if (rc < 0)
            return 2;
        text_len = text.len;
        json_len = json.len;
        verdict = text.buf && strstr(text.buf, "INPUT STRAGGLER") ? "INPUT STRAGGLER (R7)"
                                                                  : "other";
        tml__sb_release(&text);
        tml__sb_release(&json);
    }
    qsort(ms, (size_t)opt_repeats, sizeof(*ms), cmp_d);
    printf("## offline: the final summary of %ld ranks x %ld steps (tml__report_build)\n\n",
           opt_ranks, opt_steps);
    printf("| step records | median ms | min ms | max ms | box bytes | JSON bytes | verdict |\n");
    printf("|---:|---:|---:|---:|---:|---:|---|\n");
    printf("| %ld | %.0f | %.0f | %.0f | %zu | %zu | %s |\n\n", opt_ranks * opt_steps,
           ms[opt_repeats / 2], ms[0], ms[opt_repeats - 1], text_len, json_len, verdict);
    free(ms);
    tml__run_release(&run);
    return 0;
}

/* ---- long run ---------------------------------------------------------- */

/* One mid-run summary() answer (tml__agg_summary_json, what a rank's
 * traceml.summary() gets); its size into *bytes. */
static int one_summary(tml_agg *agg, size_t *bytes)
{
    tml_strbuf js = TML_STRBUF_INIT;
    int rc = tml__agg_summary_json(agg, &js);
    *bytes = js.len;
    tml__sb_release(&js);
    return rc;
}

/* One live snapshot as the aggregator's live feed builds it once a second
 * (model, live JSON, Prometheus text); their size into *bytes. */
static int one_snapshot(tml_agg *agg, size_t *bytes)
{
    tml_live_snap snap;
    tml_live_build_opts o;
    tml_strbuf sum = TML_STRBUF_INIT, live = TML_STRBUF_INIT, prom = TML_STRBUF_INIT;
    memset(&o, 0, sizeof(o));
    o.status = "running";
    int rc = tml__live_snap_build(tml__agg_run(agg), &o, &snap, &sum);
    if (rc == 0) {
        tml__live_json(&snap, &live);
        tml__live_prometheus(&snap, &prom);
        tml__live_snap_release(&snap);
    }
    *bytes = live.len + prom.len;
    tml__sb_release(&sum);
    tml__sb_release(&live);
    tml__sb_release(&prom);
    return rc;
}

/* Median and max of --repeats calls of what(agg), in ms. */
static void latency(tml_agg *agg, int (*what)(tml_agg *, size_t *), double *med, double *mx,
                    size_t *bytes)
{
    double *ms = calloc((size_t)opt_repeats, sizeof(*ms));
    for (long i = 0; ms && i < opt_repeats; i++) {
        int64_t t0 = now_ns();
        if (what(agg, bytes) < 0)
            fprintf(stderr, "loadgen: summary or snapshot failed\n");
        ms[i] = (double)(now_ns() - t0) / 1e6;
    }
    if (!ms)
        return;
    qsort(ms, (size_t)opt_repeats, sizeof(*ms), cmp_d);
    *med = ms[opt_repeats / 2];
    *mx = ms[opt_repeats - 1];
    free(ms);
}

static int longrun(void)
{
    enum { BATCH = 1000 };
    char dir[] = "/tmp/traceml-longrun-XXXXXX", db[64];
    tml_agg *agg = NULL;
    if (!mkdtemp(dir))
        return 2;
    snprintf(db, sizeof(db), "%s/telemetry.sqlite", dir);
    tml_agg_opts ao = {.run_name = "longrun", .run_id = RUN_ID, .run_dir = dir,
                       .world_size = (int32_t)opt_ranks, .nnodes = 1};
    if (tml__agg_new(&ao, &agg) < 0)
        return 2;
    for (int32_t r = 0; r < opt_ranks; r++) {
        tml_rank_info info;
        memset(&info, 0, sizeof(info));
        info.rank = r;
        info.local_rank = r % 8;
        info.node_rank = r / 8;
        info.world_size = (int32_t)opt_ranks;
        info.nnodes = (int32_t)((opt_ranks + 7) / 8);
        info.pid = 100000 + r;
        info.instrumented = TML_PHASES_ALL;
        if (tml__agg_hello(agg, &info, 0, NULL) < 0)
            return 2;
    }
    printf("## long run: %ld ranks x %ld steps into one aggregator (with telemetry.sqlite)\n\n",
           opt_ranks, opt_long);
    printf("| steps per rank | step records | RSS MB | peak RSS MB | summary() median / max ms | "
           "summary() KB | snapshot median / max ms | snapshot KB | records/s | "
           "telemetry.sqlite MB |\n");
    printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    fflush(stdout);
    tml_step_record recs[BATCH];
    long next = 10000 < opt_long ? 10000 : opt_long;
    int64_t t_mark = now_ns();
    long done_mark = 0;
    for (long done = 0; done < opt_long;) {
        long n = opt_long - done < BATCH ? opt_long - done : BATCH;
        if (done < next && done + n > next)
            n = next - done;
        for (int32_t r = 0; r < opt_ranks; r++) {
            for (long k = 0; k < n; k++)
                fake_step(&recs[k], r, (uint64_t)(done + k));
            if (tml__agg_steps(agg, r, recs, (size_t)n) < 0)
                return 2;
        }
        done += n;
        if (done != next)
            continue;
        tml__agg_tick(agg);
        double rate = (double)(done - done_mark) * (double)opt_ranks /
                      ((double)(now_ns() - t_mark) / 1e9);
        double med = NAN, mx = NAN, smed = NAN, smx = NAN;
        size_t bytes = 0, sbytes = 0;
        latency(agg, one_summary, &med, &mx, &bytes);
        latency(agg, one_snapshot, &smed, &smx, &sbytes);
        struct stat st;
        double db_mb = stat(db, &st) == 0 ? (double)st.st_size / 1048576.0 : NAN;
        printf("| %ld | %ld | %.1f | %.1f | %.1f / %.1f | %.0f | %.1f / %.1f | %.0f | %.0f | "
               "%.0f |\n", done, done * opt_ranks, status_kb(getpid(), "VmRSS:") / 1024.0,
               status_kb(getpid(), "VmHWM:") / 1024.0, med, mx, bytes / 1024.0, smed, smx,
               sbytes / 1024.0, rate, db_mb);
        fflush(stdout);
        next = next * 10 < opt_long ? next * 10 : opt_long;
        t_mark = now_ns();
        done_mark = done;
    }
    tml_rank_stats bye = {0, 0, (uint64_t)opt_long, 700, 0};
    for (int32_t r = 0; r < opt_ranks; r++)
        tml__agg_stats(agg, r, &bye, 1);
    int64_t t0 = now_ns();
    char *box = NULL;
    int rc = tml__agg_finalize(agg, "completed", 0, 156, &box);
    double fin_ms = (double)(now_ns() - t0) / 1e6;
    /* the fake steps make rank 7 wait 4 ms more for input (fake_step) */
    const char *verdict = box && strstr(box, "INPUT STRAGGLER") && strstr(box, "R7")
                              ? "INPUT STRAGGLER, R7 named" : "not the injected INPUT STRAGGLER";
    printf("\nFinal summary after the last rank's goodbye: %.0f ms (%s; %s); peak RSS %.1f MB.\n\n",
           fin_ms, rc == 0 ? "written" : "FAILED", verdict, status_kb(getpid(), "VmHWM:") / 1024.0);
    free(box);
    tml__agg_free(agg);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (opt_keep)
        printf("Run folder kept: %s\n", dir);
    else if (system(cmd) != 0)
        fprintf(stderr, "loadgen: could not remove %s\n", dir);
    return rc == 0 ? 0 : 1;
}

static long arg_long(const char *name, const char *v, long lo, long hi)
{
    char *end;
    long x = strtol(v ? v : "", &end, 10);
    if (!v || *end || x < lo || x > hi) {
        fprintf(stderr, "loadgen: %s must be an integer in [%ld, %ld]\n", name, lo, hi);
        exit(2);
    }
    return x;
}

int main(int argc, char **argv)
{
    int do_live = 1, do_offline = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--ranks") == 0)
            opt_ranks = arg_long(a, v, 1, MAX_RANKS), i++;
        else if (strcmp(a, "--rate") == 0)
            opt_rate = arg_long(a, v, 1, 10000), i++;
        else if (strcmp(a, "--seconds") == 0)
            opt_seconds = arg_long(a, v, 1, 3600), i++;
        else if (strcmp(a, "--summary-steps") == 0)
            opt_steps = arg_long(a, v, 2, 1000000), i++;
        else if (strcmp(a, "--repeats") == 0)
            opt_repeats = arg_long(a, v, 1, 100), i++;
        else if (strcmp(a, "--long") == 0)
            opt_long = arg_long(a, v, 1, 1000000000), i++;
        else if (strcmp(a, "--keep") == 0)
            opt_keep = 1;
        else if (strcmp(a, "--live-only") == 0)
            do_offline = 0;
        else if (strcmp(a, "--offline-only") == 0)
            do_live = 0;
        else {
            fprintf(stderr, "loadgen: unknown option '%s'\n", a);
            return 2;
        }
    }
    if (opt_long)
        return longrun();
    int rc = 0;
    if (do_live)
        rc = live();
    if (do_offline && rc != 2) {
        int r2 = offline();
        if (r2)
            rc = r2;
    }
    return rc;
}
