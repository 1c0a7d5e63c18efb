/*
 * fuzz_report.c - libFuzzer target: what the reports build from what the
 * aggregator received. fuzz_wire feeds frames into one long-lived
 * aggregator and never asks for a report; an overflow was once found on
 * exactly that path (a report over received records). Here every input
 * gets a FRESH aggregator, server and run folder, so that each report is
 * built over that input's frames alone, and then everything a report
 * reads is built from it:
 *
 *   - the summary so far (`traceml.summary()` mid-run, SUMMARY frames);
 *   - the live snapshot, its JSON (/api/live), its summary (/api/summary),
 *     the Prometheus text (/metrics) and the terminal line;
 *   - the Chrome trace (`traceml export --chrome-trace`);
 *   - finalize: final_summary.json, the box, final_summary.html;
 *   - that final_summary.json read back (`view --re-render`: the box and
 *     the JSON again) and compared with itself (`traceml compare`).
 *
 * The input: one flags byte, then the frames of up to MAX_CONNS
 * connections separated by SEP ("TMLNEXT!"). Connection i is rank i: it
 * makes a valid handshake first (handshake(), the one place that knows
 * how), then its frames are written into a real server connection (a
 * socketpair adopted by the server, as in fuzz_wire), and it is closed.
 * Flags: bit 0 a `traceml watch` run, bits 1-2 how the run ended, bits
 * 3-4 the world size the ranks claim (their count, 1, 2 or 8).
 *
 * Checked beyond no crash, no leak, no undefined behaviour (abort when
 * not): the live JSON, the Chrome trace and final_summary.json parse (the
 * summaries so far share the last one's writer); the final summary loads
 * again, and compare reads it (what we write, we must be able to read).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agg/agg.h"
#include "agg/server.h"
#include "base/fs.h"
#include "base/json.h"
#include "live/live.h"
#include "report/chrome_trace.h"
#include "report/compare.h"
#include "report/reload.h"
#include "wire/wire.h"

#include "inproc_handshake.h"

#define RUN_ID "fuzz0000000000000000000000000000"
#define SECRET "fuzz-secret-0123456789abcdef0123"
#define SEP "TMLNEXT!"
#define MAX_CONNS 8
#define NOW_MS 1735689600000LL    /* 2025-01-01: the live views' clock */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char base[64];
static unsigned long inputs;
static int keep;      /* FUZZ_REPORT_KEEP=1: run folders kept (to look at a seed's reports) */

static void must(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_report: %s\n", what);
        abort();
    }
}

static void cleanup(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", base);
}

/* The run folders live in memory where there is /dev/shm: a run's SQLite
 * store and files cost a few syscalls, not disk writes. They go at exit;
 * a crash (abort, a sanitizer report) leaves the one being written, in
 * /dev/shm/traceml-fuzz-report-XXXXXX, to remove by hand. */
static void setup(void)
{
    struct stat st;
    const char *tmp = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
    snprintf(base, sizeof(base), "%s/traceml-fuzz-report-XXXXXX", tmp);
    if (!mkdtemp(base))
        abort();
    keep = getenv("FUZZ_REPORT_KEEP") != NULL;
    if (keep)
        fprintf(stderr, "fuzz_report: run folders kept in %s\n", base);
    else
        atexit(cleanup);
}

/* A run folder holds files only: removed without a shell. */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
    rmdir(dir);
}

static void pump(tml_server *srv, int fd, int turns)
{
    char sink[4096];
    for (int i = 0; i < turns; i++) {
        tml_server_cmd cmd;
        tml__server_poll(srv, 0, &cmd);
        while (read(fd, sink, sizeof(sink)) > 0)
            ;   /* WELCOME, SUMMARY answers: read, so the server never waits */
    }
}

/*
 * The handshake of rank `rank` on fd, the client's end of a connection
 * the server adopted: a valid HELLO of the run. The only function here
 * that knows the handshake; 0, or -1 when it could not be made.
 */
static int handshake(tml_server *srv, int fd, int32_t rank, int32_t world)
{
    tml_hello h;
    memset(&h, 0, sizeof(h));
    snprintf(h.run_id, sizeof(h.run_id), "%s", RUN_ID);
    snprintf(h.secret, sizeof(h.secret), "%s", SECRET);
    h.info.rank = rank;
    h.info.local_rank = rank % 2;
    h.info.world_size = world;
    h.info.node_rank = rank / 2;
    h.info.nnodes = (world + 1) / 2;
    h.info.pid = 1000 + rank;
    h.info.instance = 1;
    h.info.instrumented = TML_STEP_PHASES;
    snprintf(h.info.host, sizeof(h.info.host), "node%d", (int)(rank / 2));
    int rc = inproc_handshake(srv, fd, &h);
    pump(srv, fd, 2);
    return rc;
}

/* One rank's connection: the handshake, its frames, then closed. */
static void connection(tml_server *srv, const uint8_t *p, size_t n, int32_t rank, int32_t world)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0)
        return;
    if (tml__server_adopt(srv, sv[0], "fuzz") < 0) {
        close(sv[0]);
        close(sv[1]);
        return;
    }
    if (handshake(srv, sv[1], rank, world) == 0)
        for (size_t off = 0; off < n;) {
            ssize_t w = send(sv[1], p + off, n - off, MSG_NOSIGNAL);
            if (w <= 0)
                break;
            off += (size_t)w;
            pump(srv, sv[1], 1);
        }
    shutdown(sv[1], SHUT_WR);
    for (int i = 0; i < 64 && tml__server_connections(srv) > 0; i++)
        pump(srv, sv[1], 1);
    close(sv[1]);
}

static void must_parse(const tml_strbuf *sb, const char *what)
{
    tml_json *doc = NULL;
    if (sb->failed)
        return;
    must(tml__json_parse(sb->buf ? sb->buf : "", sb->len, &doc, NULL) == 0, what);
    tml__json_free(doc);
}

/* What is built while the run goes on: the summary so far, the live
 * views, the Chrome trace. */
static void mid_run(tml_agg *agg)
{
    tml_strbuf sb = TML_STRBUF_INIT, live = TML_STRBUF_INIT, prom = TML_STRBUF_INIT;
    tml_strbuf line = TML_STRBUF_INIT, sum = TML_STRBUF_INIT, trace = TML_STRBUF_INIT;
    /* the summaries so far come from the final summary's writer, whose
     * output read_back() parses: built here, not parsed again (time) */
    tml__agg_summary_json(agg, &sb);
    tml_live_build_opts lo = {.seq = 1, .now_unix_ms = NOW_MS, .start_mono_ns = 1000000000LL,
                              .now_mono_ns = 61000000000LL};   /* 60 s into the run */
    tml_live_snap snap;
    if (tml__live_snap_build(tml__agg_run(agg), &lo, &snap, &sum) == 0) {
        tml__live_json(&snap, &live);
        must_parse(&live, "the live JSON is not JSON");
        must(!live.buf || !memchr(live.buf, '\n', live.len), "a newline in the live JSON");
        tml__live_prometheus(&snap, &prom);
        tml__live_text_line(&snap, &line);
        tml__live_snap_release(&snap);
    }
    size_t nslices;
    if (tml__chrome_trace(tml__agg_run(agg), &trace, &nslices) == 0)
        must_parse(&trace, "the Chrome trace is not JSON");
    tml_strbuf *all[] = {&sb, &live, &prom, &line, &sum, &trace};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        tml__sb_release(all[i]);
}

/* final_summary.json as `view --re-render` and `compare` read it. */
static void read_back(const char *dir)
{
    char path[128], why[256], *buf = NULL;
    size_t len;
    tml_json *doc = NULL;
    tml_report_loaded *l = NULL;
    snprintf(path, sizeof(path), "%s/final_summary.json", dir);
    if (tml__read_file(path, 64u << 20, &buf, &len) < 0)
        return;   /* not written: finalize said why */
    must(tml__json_parse(buf, len, &doc, NULL) == 0, "final_summary.json is not JSON");
    int rc = tml__report_load(doc, path, 100, &l, why, sizeof(why));
    if (rc != 0)
        fprintf(stderr, "fuzz_report: %s\n", why);
    must(rc == 0, "final_summary.json does not load again");
    tml_strbuf box = TML_STRBUF_INIT, js = TML_STRBUF_INIT;
    tml__report_box(&l->m, &box);
    tml__report_json(&l->m, box.buf ? box.buf : "", &js);   /* parsed by fuzz_compare */
    tml__report_loaded_free(l);
    tml_cmp_run r;
    rc = tml__cmp_run_load(doc, &r, why, sizeof(why));
    if (rc != 0)
        fprintf(stderr, "fuzz_report: %s\n", why);
    must(rc == 0, "compare does not read final_summary.json");
    tml__sb_release(&box);
    tml__sb_release(&js);
    tml__json_free(doc);
    free(buf);
}

static void run_one(const char *dir, uint8_t flags, const uint8_t *p, size_t n)
{
    static const char *const status[] = {"completed", "failed", "interrupted", "completed"};
    const uint8_t *part[MAX_CONNS];
    size_t plen[MAX_CONNS], nconn = 0;
    while (nconn < MAX_CONNS - 1) {
        const uint8_t *sep = memmem(p, n, SEP, strlen(SEP));
        if (!sep)
            break;
        part[nconn] = p;
        plen[nconn++] = (size_t)(sep - p);
        n -= (size_t)(sep - p) + strlen(SEP);
        p = sep + strlen(SEP);
    }
    part[nconn] = p;
    plen[nconn++] = n;
    static const int32_t worlds[] = {0, 1, 2, 8};
    int32_t world = worlds[(flags >> 3) & 3] ? worlds[(flags >> 3) & 3] : (int32_t)nconn;

    tml_agg *agg = NULL;
    tml_server *srv = NULL;
    tml_agg_opts ao = {.run_name = "fuzz", .run_id = RUN_ID, .run_dir = dir};
    tml_server_opts so;
    memset(&so, 0, sizeof(so));
    so.run_id = RUN_ID;
    so.secret = SECRET;
    so.run_dir = dir;
    so.control_fd = -1;
    if (tml__agg_new(&ao, &agg) < 0 || tml__server_new(&so, agg, &srv) < 0) {
        tml__agg_free(agg);
        return;
    }
    tml__agg_set_watch(agg, flags & 1);
    tml__agg_set_html_report(agg, 1);
    for (size_t i = 0; i < nconn; i++)
        connection(srv, part[i], plen[i], (int32_t)i, world);
    mid_run(agg);
    char *text = NULL;
    int rc = tml__agg_finalize(agg, status[(flags >> 1) & 3], (flags >> 1) & 3 ? 1 : 0, 100,
                               &text);
    free(text);
    if (rc == 0)
        read_back(dir);
    tml__server_free(srv);
    tml__agg_free(agg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!base[0])
        setup();
    if (size == 0)
        return 0;
    char dir[96];
    snprintf(dir, sizeof(dir), "%s/%lu", base, inputs++);
    if (mkdir(dir, 0700) < 0)
        return 0;
    run_one(dir, data[0], data + 1, size - 1);
    if (!keep)
        remove_dir(dir);
    return 0;
}
