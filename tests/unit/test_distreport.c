/*
 * test_distreport.c - distributed runs in the report and the aggregator:
 * the header and R/N labels of a multi-node run, the straggler's per-step
 * evidence, ranks that never reported and ranks lost mid-run (box and
 * JSON), and how the socket server decides that a rank was lost.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agg/agg.h"
#include "model/run.h"
#include "agg/server.h"
#include "report/reload.h"
#include "report/report.h"
#include "base/json.h"
#include "wire/wire.h"
#include "harness.h"

static void step(tml_step_record *r, uint64_t id, double input_ms, double bwd_ms)
{
    memset(r, 0, sizeof(*r));
    r->step = id;
    r->phase_ns[TML_PHASE_INPUT] = (int64_t)(input_ms * 1e6);
    r->phase_ns[TML_PHASE_FORWARD] = 20000000;
    r->phase_ns[TML_PHASE_BACKWARD] = (int64_t)(bwd_ms * 1e6);
    r->phase_ns[TML_PHASE_OPTIMIZER] = 2000000;
    r->traced_ns = r->phase_ns[TML_PHASE_FORWARD] + r->phase_ns[TML_PHASE_BACKWARD] +
                   r->phase_ns[TML_PHASE_OPTIMIZER];
    r->gpu_traced_ns = -1;
    for (int p = 0; p < TML_PHASE_COUNT; p++)
        r->gpu_phase_ns[p] = -1;
    r->gap_ns = -1;
    r->rss_bytes = r->cuda_allocated_peak_bytes = r->cuda_reserved_peak_bytes = -1;
    r->observed = TML_STEP_PHASES;
}

/* 4 expected ranks on 2 nodes: R0/N0 and R1/N0 healthy, R2/N1 the input
 * straggler in `slow_steps` of 40 steps, R3/N1 never reported. R1 is lost
 * (no goodbye) when `lost`. */
static void build_run(tml_run *run, size_t slow_steps, int lost)
{
    tml__run_init(run, "dist", "id");
    run->world_size = 4;
    run->nnodes = 2;
    for (int32_t r = 0; r < 3; r++) {
        tml_rank_info info;
        memset(&info, 0, sizeof(info));
        info.rank = r;
        info.node_rank = r / 2;
        info.world_size = 4;
        info.nnodes = 2;
        info.instrumented = TML_PHASES_ALL;
        tml_rank *rk = tml__run_rank(run, &info);
        for (uint64_t s = 0; s < 40; s++) {
            tml_step_record rec;
            int slow = r == 2 && s >= 40 - slow_steps;
            /* the straggler waits for input; its peers wait for it in Backward */
            step(&rec, s, slow ? 60.0 : 1.0, slow ? 10.0 : (r == 2 ? 12.0 : 70.0));
            if (r != 2 && !(s >= 40 - slow_steps))
                rec.phase_ns[TML_PHASE_BACKWARD] = 11000000 + (int64_t)r * 100000;
            tml__run_add_steps(rk, &rec, 1);
        }
        rk->ended = !(lost && r == 1);
        rk->lost = lost && r == 1;
    }
}

static long long num(const tml_json *v)
{
    double d;
    return tml__json_num(v, &d) ? (long long)d : -1;
}

static size_t len_of(const tml_json *v)
{
    return v && v->type == TML_JSON_ARRAY ? v->n : (size_t)-1;
}

static const char *str_of(const tml_json *v)
{
    const char *s = tml__json_str(v);
    return s ? s : "";
}

static char *report(const tml_run *run, char **json_out)
{
    tml_strbuf text = TML_STRBUF_INIT, json = TML_STRBUF_INIT;
    tml_report_opts o;
    memset(&o, 0, sizeof(o));
    o.duration_s = 12.5;
    o.generated_at = "2026-01-01T00:00:00Z";
    o.json_path = "logs/dist/final_summary.json";
    CHECK_EQ_INT(tml__report_build(run, &o, &text, &json), 0);
    *json_out = json.buf;
    return text.buf;
}

static void test_header_labels_and_evidence(void)
{
    tml_run run;
    char *json;
    build_run(&run, 32, 0);
    char *box = report(&run, &json);
    CHECK(strstr(box, "dist · 3/4 ranks · 2/2 nodes · 40 common steps · 12.5s") != NULL);
    CHECK(strstr(box, "Verdict: INPUT STRAGGLER (CRITICAL)") != NULL);
    CHECK(strstr(box, "Why: R2/N1 waited") != NULL);
    CHECK(strstr(box, "Scope: N = node · R = global rank · G = GPU index") != NULL);
    CHECK(strstr(box, "Never reported: R3 (the training exited 0: not a crash)") != NULL);
    /* per-step evidence: R2 was the culprit in the 32 slow steps only */
    CHECK(strstr(box, "Evidence: R2/N1 was the straggler in 32 of 40 window steps") != NULL);
    CHECK(strstr(box, "STEP TIMING (Median R") != NULL);
    CHECK(strstr(box, "Straggler: R2/N1 · peers wait") != NULL);   /* not the slowest */
    CHECK(strstr(box, "Lost (no goodbye)") == NULL);
    tml_json *doc = NULL;
    CHECK_EQ_INT(tml__json_parse(json, strlen(json), &doc, NULL), 0);
    const tml_json *meta = tml__json_get(doc, "meta");
    CHECK_EQ_INT(len_of(tml__json_get(meta, "lost_ranks")), 0);
    CHECK_EQ_INT(len_of(tml__json_get(meta, "missing_ranks")), 1);
    const tml_json *st = tml__json_get(tml__json_get(doc, "step_time"), "straggler");
    CHECK_EQ_INT(num(tml__json_get(st, "culprit_steps")), 32);
    const tml_json *per = tml__json_get(tml__json_get(doc, "step_time"), "per_rank");
    CHECK_EQ_INT(len_of(per), 3);
    CHECK_STR(str_of(tml__json_get(tml__json_at(per, 2), "label")), "R2/N1");
    tml__json_free(doc);
    free(box);
    free(json);
    tml__run_release(&run);
}

static void test_lost_rank_named(void)
{
    tml_run run;
    char *json;
    build_run(&run, 40, 1);
    char *box = report(&run, &json);
    CHECK(strstr(box, "Lost (no goodbye): R1/N0 after step 39") != NULL);
    tml_json *doc = NULL;
    CHECK_EQ_INT(tml__json_parse(json, strlen(json), &doc, NULL), 0);
    const tml_json *lost = tml__json_get(tml__json_get(doc, "meta"), "lost_ranks");
    CHECK_EQ_INT(len_of(lost), 1);
    CHECK_EQ_INT(num(tml__json_get(tml__json_at(lost, 0), "rank")), 1);
    CHECK_EQ_INT(num(tml__json_get(tml__json_at(lost, 0), "last_step")), 39);
    tml__json_free(doc);
    free(box);
    free(json);
    tml__run_release(&run);
}

/* The box's rows as one line: borders, line ends and runs of blanks out
 * (a long row wraps). */
static const char *unwrap(const char *box, char *out, size_t cap)
{
    size_t n = 0;
    for (const char *p = box; p && *p && n + 1 < cap; p++) {
        if (*p == '|' || *p == '\n' || (*p == ' ' && n && out[n - 1] == ' '))
            continue;
        out[n++] = *p;
    }
    out[n] = '\0';
    return out;
}

/* A rank that died of SIGABRT at exit, after its goodbye (PyTorch's gloo
 * exit abort): the box says the training ended and then which rank died;
 * meta.exit_signals holds it, and a re-rendered box says the same. */
static void test_exit_signal_named(void)
{
    for (int whole = 0; whole < 2; whole++) {
        tml_run run;
        build_run(&run, 40, 0);
        if (whole)
            run.world_size = 3;   /* R3 not expected: every rank said goodbye */
        run.ranks[1].exit_signal = SIGABRT;
        tml_strbuf text = TML_STRBUF_INIT, json = TML_STRBUF_INIT;
        tml_report_opts o;
        memset(&o, 0, sizeof(o));
        o.status = "failed";
        o.exit_code = 1;
        o.duration_s = 12.5;
        o.generated_at = "2026-01-01T00:00:00Z";
        o.json_path = "logs/dist/final_summary.json";
        CHECK_EQ_INT(tml__report_build(&run, &o, &text, &json), 0);
        const char *want = whole ? "Ended: FAILED with exit code 1 after the training: every rank "
                                   "finished its steps and said goodbye, then R1/N0 aborted at exit "
                                   "(SIGABRT)"
                                 : "Ended: FAILED with exit code 1; R1/N0 aborted at exit "
                                   "(SIGABRT), after its last step";
        char flat[8192];
        CHECK(strstr(unwrap(text.buf, flat, sizeof(flat)), want) != NULL);
        tml_json *doc = NULL;
        CHECK_EQ_INT(tml__json_parse(json.buf, json.len, &doc, NULL), 0);
        const tml_json *ex = tml__json_get(tml__json_get(doc, "meta"), "exit_signals");
        CHECK_EQ_INT(len_of(ex), 1);
        CHECK_EQ_INT(num(tml__json_get(tml__json_at(ex, 0), "rank")), 1);
        CHECK_EQ_INT(num(tml__json_get(tml__json_at(ex, 0), "signal")), SIGABRT);
        tml_report_loaded *l = NULL;
        char why[256];
        CHECK_EQ_INT(tml__report_load(doc, NULL, 120, &l, why, sizeof(why)), 0);
        if (l) {
            tml_strbuf again = TML_STRBUF_INIT;
            tml__report_box(&l->m, &again);
            CHECK(strstr(unwrap(again.buf, flat, sizeof(flat)), want) != NULL);
            tml__sb_release(&again);
            tml__report_loaded_free(l);
        }
        tml__json_free(doc);
        tml__sb_release(&text);
        tml__sb_release(&json);
        tml__run_release(&run);
    }
}

/* ---- the server marks ranks that vanish without a goodbye ------------- */

static void pump(tml_server *srv, int ms)
{
    tml_server_cmd cmd;
    for (int i = 0; i < ms / 10; i++)
        tml__server_poll(srv, 10, &cmd);
}

/* Connects as rank, shakes hands (the server pumped here: it runs on
 * this thread) and sends one step. */
static int connect_hello(tml_server *srv, int port, int32_t rank)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_port = htons((uint16_t)port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
        close(fd);
        return -1;
    }
    tml_hello h;
    memset(&h, 0, sizeof(h));
    snprintf(h.run_id, sizeof(h.run_id), "run1");
    snprintf(h.secret, sizeof(h.secret), "s3cret");
    h.info.rank = rank;
    h.info.world_size = 3;
    tml_strbuf sb = TML_STRBUF_INIT;
    uint8_t nonce[TML_WIRE_NONCE], buf[TML_WIRE_HEADER + TML_WIRE_NONCE];
    tml__wire_open(&sb);
    send(fd, sb.buf, sb.len, 0);
    pump(srv, 50);
    if (recv(fd, buf, sizeof(buf), MSG_WAITALL) != (ssize_t)sizeof(buf) ||
        tml__wire_parse_challenge(buf + TML_WIRE_HEADER, TML_WIRE_NONCE, nonce) < 0) {
        tml__sb_release(&sb);
        close(fd);
        return -1;
    }
    tml__sb_reset(&sb);
    tml__wire_hello(&sb, &h, nonce);
    tml_step_record rec;
    step(&rec, 0, 1, 10);
    tml__wire_steps(&sb, &rec, 1);
    ssize_t w = send(fd, sb.buf, sb.len, 0);
    tml__sb_release(&sb);
    return w > 0 ? fd : -1;
}


static void test_server_marks_lost(void)
{
    char dir[] = "/tmp/tml-distreport-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    tml_agg *agg = NULL;
    tml_agg_opts ao = {.run_name = "r", .run_id = "run1", .run_dir = dir, .world_size = 3, .nnodes = 1};
    CHECK_EQ_INT(tml__agg_new(&ao, &agg), 0);
    tml_server *srv = NULL;
    tml_server_opts so;
    memset(&so, 0, sizeof(so));
    so.run_id = "run1";
    so.secret = "s3cret";
    so.run_dir = dir;
    so.control_fd = -1;
    CHECK_EQ_INT(tml__server_new(&so, agg, &srv), 0);
    int port = tml__server_port(srv);
    int a = connect_hello(srv, port, 0), b = connect_hello(srv, port, 1), c = connect_hello(srv, port, 2);
    CHECK(a >= 0 && b >= 0 && c >= 0);
    pump(srv, 200);
    /* rank 0 says goodbye, rank 1 vanishes, rank 2 stays silent */
    tml_strbuf sb = TML_STRBUF_INIT;
    tml_rank_stats st;
    memset(&st, 0, sizeof(st));
    tml__wire_stats(&sb, TML_FRAME_BYE, &st);
    CHECK(send(a, sb.buf, sb.len, 0) > 0);
    tml__sb_release(&sb);
    close(b);
    pump(srv, 200);
    const tml_run *run = tml__agg_run(agg);
    CHECK_EQ_INT(run->nranks, 3);
    CHECK_EQ_INT(run->ranks[0].lost, 0);
    CHECK_EQ_INT(run->ranks[0].ended, 1);
    CHECK_EQ_INT(run->ranks[1].lost, 1);
    CHECK_EQ_INT(run->ranks[2].lost, 0);
    /* the end of the run: still silent after the drain = lost */
    CHECK_EQ_INT(tml__server_drain(srv, 100), 1);
    CHECK_EQ_INT(run->ranks[2].lost, 1);
    CHECK_EQ_INT(run->ranks[0].lost, 0);
    /* a rank that comes back says hello again: no longer lost */
    int b2 = connect_hello(srv, port, 1);
    pump(srv, 200);
    CHECK_EQ_INT(tml__agg_run(agg)->ranks[1].lost, 0);
    close(a);
    close(b2);
    close(c);
    tml__server_free(srv);
    tml__agg_free(agg);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

#define TESTS X(test_header_labels_and_evidence) X(test_lost_rank_named) \
    X(test_exit_signal_named) X(test_server_marks_lost)
#include "harness.h"

