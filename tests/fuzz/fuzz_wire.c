/*
 * fuzz_wire.c - libFuzzer target: the wire protocol (what any process
 * that reaches the aggregator's port can send). Two levels:
 *
 *   - the frame parsers on the raw input (header, HELLO, STEPS, SAMPLES,
 *     STATS, SUMMARY payloads);
 *   - the aggregator's own frame handling: the input is written into a
 *     connection of a real server and aggregator (through a socketpair
 *     adopted by the server), after a valid handshake when the first byte
 *     is odd (OPEN, the server's CHALLENGE read back, a HELLO with the MAC
 *     of its nonce), so that the frames after the handshake are reached
 *     too.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agg/agg.h"
#include "agg/server.h"
#include "wire/wire.h"

#include "inproc_handshake.h"

#define RUN_ID "fuzz0000000000000000000000000000"
#define SECRET "fuzz-secret-0123456789abcdef0123"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tml_agg *agg;
static tml_server *srv;
static tml_hello hello;

static char dir[] = "/tmp/traceml-fuzz-XXXXXX";

static void cleanup(void)
{
    char cmd[64];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

static void setup(void)
{
    if (!mkdtemp(dir))
        abort();
    atexit(cleanup);
    tml_agg_opts ao = {.run_name = "fuzz", .run_id = RUN_ID, .run_dir = dir};
    tml_server_opts so;
    memset(&so, 0, sizeof(so));
    so.run_id = RUN_ID;
    so.secret = SECRET;
    so.run_dir = dir;
    so.control_fd = -1;
    if (tml__agg_new(&ao, &agg) < 0 || tml__server_new(&so, agg, &srv) < 0)
        abort();
    tml_hello *h = &hello;
    memset(h, 0, sizeof(*h));
    snprintf(h->run_id, sizeof(h->run_id), "%s", RUN_ID);
    snprintf(h->secret, sizeof(h->secret), "%s", SECRET);
    h->info.world_size = 4;
    h->info.nnodes = 1;
    h->info.pid = 1;
    h->info.instance = 1;
}

static void parsers(const uint8_t *p, size_t n)
{
    tml_frame_header fh;
    tml_hello h;
    tml_rank_stats st;
    size_t k;
    int32_t status;
    const char *json;
    size_t jlen;
    tml__wire_header(p, n, &fh);
    tml__wire_parse_hello(p, n, &h);
    tml__wire_parse_identity(p, n, &h);
    uint8_t nonce[TML_WIRE_NONCE];
    tml__wire_parse_challenge(p, n, nonce);
    tml__wire_parse_stats(p, n, &st);
    tml__wire_parse_summary(p, n, &status, &json, &jlen);
    if (tml__wire_parse_steps(p, n, &k) == 0)
        for (size_t i = 0; i < k; i++) {
            tml_step_record r;
            tml__wire_parse_step(p, i, &r);
        }
    if (tml__wire_parse_samples(p, n, &k) == 0)
        for (size_t i = 0; i < k; i++) {
            tml_sample s;
            tml__wire_parse_sample(p, i, &s);
        }
    static tml_dd_window *dd;     /* ~50 KB: not on the fuzzer's stack */
    if (dd || (dd = tml__dd_new()))
        tml__wire_parse_deep_dive(p, n, dd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!agg)
        setup();
    parsers(data, size);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0)
        return 0;
    if (tml__server_adopt(srv, sv[0], "fuzz") < 0) {
        close(sv[0]);
        close(sv[1]);
        return 0;
    }
    if (size && (data[0] & 1) && inproc_handshake(srv, sv[1], &hello) < 0)
        size = 0;
    size_t off = size ? 1 : 0;
    while (off < size) {
        ssize_t w = write(sv[1], data + off, size - off);
        if (w <= 0)
            break;
        off += (size_t)w;
        tml_server_cmd cmd;
        tml__server_poll(srv, 0, &cmd);
    }
    shutdown(sv[1], SHUT_WR);
    for (int i = 0; i < 64 && tml__server_connections(srv) > 0; i++) {
        tml_server_cmd cmd;
        tml__server_poll(srv, 1, &cmd);
    }
    close(sv[1]);
    return 0;
}
