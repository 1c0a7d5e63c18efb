/* Wire frames: round trips, and decoders fed bad or truncated bytes. */
#include "wire/wire.h"
#include <stdlib.h>
#include "harness.h"

static void test_hello_roundtrip(void)
{
    tml_hello h = {.run_id = "abc", .secret = "s3cret"};
    h.info.rank = 3;
    h.info.world_size = 4;
    h.info.node_rank = 1;
    h.info.nnodes = 2;
    h.info.pid = 1234;
    h.info.instrumented = TML_PHASES_ALL;
    h.info.loader_known = 1;
    h.info.loader_workers = 4;
    h.info.loader_pin_memory = 1;
    h.info.cpu_count = 16;
    snprintf(h.info.host, sizeof(h.info.host), "node-a");
    snprintf(h.info.auto_models, sizeof(h.info.auto_models), "Generator, Teacher");
    h.info.instance = 0x0123456789abcdefULL;
    uint8_t nonce[TML_WIRE_NONCE], other[TML_WIRE_NONCE];
    for (int i = 0; i < TML_WIRE_NONCE; i++) {
        nonce[i] = (uint8_t)i;
        other[i] = (uint8_t)(i + (i == 31));
    }
    tml_strbuf sb = TML_STRBUF_INIT;
    tml__wire_hello(&sb, &h, nonce);
    tml_frame_header fh;
    CHECK(tml__wire_header((uint8_t *)sb.buf, sb.len, &fh) == 0);
    CHECK_EQ_INT(fh.type, TML_FRAME_HELLO);
    CHECK_EQ_INT(fh.len, sb.len - TML_WIRE_HEADER);
    tml_hello back;
    CHECK(tml__wire_parse_hello((uint8_t *)sb.buf + TML_WIRE_HEADER, fh.len, &back) == 0);
    CHECK_STR(back.run_id, "abc");
    CHECK_STR(back.secret, "");                   /* never on the wire */
    CHECK(memmem(sb.buf, sb.len, "s3cret", 6) == NULL);
    CHECK_EQ_INT(back.info.instance, 0x0123456789abcdefULL);
    /* the MAC: this nonce and this secret only, every identity byte covered */
    const uint8_t *pl = (const uint8_t *)sb.buf + TML_WIRE_HEADER;
    CHECK_EQ_INT(tml__wire_hello_verify(pl, fh.len, nonce, "s3cret"), 1);
    CHECK_EQ_INT(tml__wire_hello_verify(pl, fh.len, other, "s3cret"), 0);
    CHECK_EQ_INT(tml__wire_hello_verify(pl, fh.len, nonce, "s3creT"), 0);
    CHECK_EQ_INT(tml__wire_hello_verify(pl, fh.len, nonce, ""), 0);
    for (size_t i = 0; i < fh.len; i++) {
        uint8_t *q = malloc(fh.len);
        memcpy(q, pl, fh.len);
        q[i] ^= 0x40;
        CHECK_EQ_INT(tml__wire_hello_verify(q, fh.len, nonce, "s3cret"), 0);
        free(q);
    }
    CHECK_STR(back.info.host, "node-a");
    CHECK_EQ_INT(back.info.rank, 3);
    CHECK_EQ_INT(back.info.nnodes, 2);
    CHECK_EQ_INT(back.info.instrumented, TML_PHASES_ALL);
    CHECK_EQ_INT(back.info.loader_known, 1);
    CHECK_EQ_INT(back.info.loader_workers, 4);
    CHECK_EQ_INT(back.info.loader_pin_memory, 1);
    CHECK_EQ_INT(back.info.cpu_count, 16);
    CHECK_STR(back.info.auto_models, "Generator, Teacher");
    /* every truncation is rejected, never read past */
    for (size_t cut = 0; cut < fh.len; cut++) {
        uint8_t *p = malloc(cut ? cut : 1);
        memcpy(p, sb.buf + TML_WIRE_HEADER, cut);
        CHECK(tml__wire_parse_hello(p, cut, &back) == TML_EPROTO);
        free(p);
    }
    tml__sb_release(&sb);
}

static void test_steps_roundtrip(void)
{
    tml_step_record recs[3];
    memset(recs, 0, sizeof(recs));
    for (int i = 0; i < 3; i++) {
        recs[i].step = (uint64_t)i + 10;
        recs[i].start_ns = 1000 * i;
        recs[i].traced_ns = 77;
        recs[i].phase_ns[TML_PHASE_FORWARD] = 5;
        recs[i].gpu_traced_ns = TML_MISSING;
        recs[i].gpu_phase_ns[TML_PHASE_H2D] = TML_MISSING;
        recs[i].gap_ns = -1;
        recs[i].rss_bytes = (int64_t)1 << 40;
        recs[i].observed = 5;
        recs[i].flags = TML_STEP_ABORTED;
    }
    tml_strbuf sb = TML_STRBUF_INIT;
    tml__wire_steps(&sb, recs, 3);
    tml_frame_header fh;
    CHECK(tml__wire_header((uint8_t *)sb.buf, sb.len, &fh) == 0);
    CHECK_EQ_INT(fh.len, 4 + 3 * TML_WIRE_STEP_SIZE);
    size_t n = 0;
    const uint8_t *p = (uint8_t *)sb.buf + TML_WIRE_HEADER;
    CHECK(tml__wire_parse_steps(p, fh.len, &n) == 0);
    CHECK_EQ_INT(n, 3);
    for (size_t i = 0; i < n; i++) {
        tml_step_record r;
        tml__wire_parse_step(p, i, &r);
        CHECK(memcmp(&r, &recs[i], sizeof(r)) == 0);
    }
    CHECK(tml__wire_parse_steps(p, fh.len - 1, &n) == TML_EPROTO);
    CHECK(tml__wire_parse_steps(p, 3, &n) == TML_EPROTO);
    tml__sb_release(&sb);
}

static void test_stats_roundtrip(void)
{
    tml_rank_stats s = {1, 2, 3, -1, 5}, back;
    tml_strbuf sb = TML_STRBUF_INIT;
    tml__wire_stats(&sb, TML_FRAME_BYE, &s);
    tml_frame_header fh;
    CHECK(tml__wire_header((uint8_t *)sb.buf, sb.len, &fh) == 0);
    CHECK_EQ_INT(fh.type, TML_FRAME_BYE);
    CHECK(tml__wire_parse_stats((uint8_t *)sb.buf + TML_WIRE_HEADER, fh.len, &back) == 0);
    CHECK(memcmp(&s, &back, sizeof(s)) == 0);
    CHECK(tml__wire_parse_stats((uint8_t *)sb.buf + TML_WIRE_HEADER, fh.len - 1, &back) == TML_EPROTO);
    tml__sb_release(&sb);
}

static void test_bad_headers(void)
{
    tml_frame_header fh;
    uint8_t http[] = "GET / HTTP/1.1\r\n";
    CHECK(tml__wire_header(http, sizeof(http) - 1, &fh) == TML_EPROTO);
    uint8_t shortb[5] = {0x54, 0x4d, 0x4c, 0x31, 1};
    CHECK(tml__wire_header(shortb, sizeof(shortb), &fh) == 1);
    uint8_t v2[12] = {0x54, 0x4d, 0x4c, 0x31, 6, 0, 1, 0, 0, 0, 0, 0};   /* a later version */
    CHECK(tml__wire_header(v2, 12, &fh) == TML_EPROTO);
    uint8_t v1[12] = {0x54, 0x4d, 0x4c, 0x31, 4, 0, 1, 0, 0, 0, 0, 0};   /* an earlier one */
    CHECK(tml__wire_header(v1, 12, &fh) == TML_EPROTO);
    uint8_t big[12] = {0x54, 0x4d, 0x4c, 0x31, 4, 0, 4, 0, 0, 0, 0x20, 0};
    CHECK(tml__wire_header(big, 12, &fh) == TML_EPROTO);
    /* random bytes never crash the decoders */
    srand(1);
    for (int k = 0; k < 2000; k++) {
        uint8_t buf[64];
        size_t len = (size_t)(rand() % 64);
        for (size_t i = 0; i < len; i++)
            buf[i] = (uint8_t)rand();
        tml_hello h;
        tml_rank_stats s;
        size_t n;
        (void)tml__wire_header(buf, len, &fh);
        (void)tml__wire_parse_hello(buf, len, &h);
        (void)tml__wire_parse_stats(buf, len, &s);
        if (tml__wire_parse_steps(buf, len, &n) == 0)
            CHECK(n == 0);
    }
}

/* OPEN, CHALLENGE, IDENTITY (no MAC, no secret), and a peer of another
 * version: told apart from garbage by the header's version. */
static void test_handshake_frames(void)
{
    tml_strbuf sb = TML_STRBUF_INIT;
    tml_frame_header fh;
    uint8_t nonce[TML_WIRE_NONCE], back[TML_WIRE_NONCE];
    for (int i = 0; i < TML_WIRE_NONCE; i++)
        nonce[i] = (uint8_t)(200 - i);
    tml__wire_open(&sb);
    CHECK(tml__wire_header((uint8_t *)sb.buf, sb.len, &fh) == 0);
    CHECK_EQ_INT(fh.type, TML_FRAME_OPEN);
    tml__sb_reset(&sb);
    tml__wire_challenge(&sb, nonce);
    CHECK(tml__wire_header((uint8_t *)sb.buf, sb.len, &fh) == 0);
    CHECK_EQ_INT(fh.type, TML_FRAME_CHALLENGE);
    CHECK_EQ_INT(tml__wire_parse_challenge((uint8_t *)sb.buf + TML_WIRE_HEADER, fh.len, back), 0);
    CHECK(memcmp(back, nonce, sizeof(nonce)) == 0);
    CHECK_EQ_INT(tml__wire_parse_challenge((uint8_t *)sb.buf + TML_WIRE_HEADER, 31, back),
                 TML_EPROTO);
    tml_hello h = {.run_id = "abc", .secret = "s3cret"}, got;
    h.info.rank = 5;
    h.info.world_size = 8;
    h.info.instance = 42;
    tml__sb_reset(&sb);
    tml__wire_identity(&sb, &h);
    CHECK(tml__wire_header((uint8_t *)sb.buf, sb.len, &fh) == 0);
    CHECK_EQ_INT(fh.type, TML_FRAME_IDENTITY);
    CHECK(memmem(sb.buf, sb.len, "s3cret", 6) == NULL);
    CHECK_EQ_INT(tml__wire_parse_identity((uint8_t *)sb.buf + TML_WIRE_HEADER, fh.len, &got), 0);
    CHECK_EQ_INT(got.info.rank, 5);
    CHECK_EQ_INT(got.info.instance, 42);
    /* a version-3 REJECT: ours, another version, readable as a refusal */
    tml__sb_reset(&sb);
    tml__wire_reject_as(&sb, 3, "old");
    CHECK_EQ_INT(tml__wire_header((uint8_t *)sb.buf, sb.len, &fh), TML_EPROTO);
    CHECK_EQ_INT(fh.version, 3);
    CHECK_EQ_INT(fh.type, TML_FRAME_REJECT);
    uint8_t junk[12] = {'X', 'M', 'L', '1', 4, 0, 1, 0, 0, 0, 0, 0};
    CHECK_EQ_INT(tml__wire_header(junk, sizeof(junk), &fh), TML_EPROTO);
    CHECK_EQ_INT(fh.version, 0);
    tml__sb_release(&sb);
}

/* DEEP_DIVE: a window's rows there and back; a truncated frame, a count
 * past TML_DD_MAX_ROWS and a last step before the first are malformed. */
static void test_deep_dive_roundtrip(void)
{
    tml_dd_window *d = tml__dd_new(), *back = tml__dd_new();
    CHECK(d && back);
    if (!d || !back)
        return;
    d->first_step = 20;
    d->last_step = 22;
    d->wall_ns = 45000000;
    d->cuda = 1;
    CHECK_EQ_INT(tml__dd_add(d, "heavy_block.0", "aten::addmm", 7000000, 3), 0);
    CHECK_EQ_INT(tml__dd_add(d, "", "Optimizer.step#SGD.step", 250000, 3), 0);
    tml_strbuf sb = TML_STRBUF_INIT;
    tml__wire_deep_dive(&sb, d);
    tml_frame_header fh;
    CHECK(tml__wire_header((uint8_t *)sb.buf, sb.len, &fh) == 0);
    CHECK_EQ_INT(fh.type, TML_FRAME_DEEP_DIVE);
    const uint8_t *p = (uint8_t *)sb.buf + TML_WIRE_HEADER;
    CHECK_EQ_INT(tml__wire_parse_deep_dive(p, fh.len, back), 0);
    CHECK_EQ_INT(back->first_step, 20);
    CHECK_EQ_INT(back->last_step, 22);
    CHECK_EQ_INT(back->wall_ns, 45000000);
    CHECK_EQ_INT(back->cuda, 1);
    CHECK_STR(back->skipped, "");
    CHECK_EQ_INT(back->nrows, 2);
    CHECK_STR(back->rows[0].module, "heavy_block.0");
    CHECK_STR(back->rows[0].op, "aten::addmm");
    CHECK_EQ_INT(back->rows[0].self_ns, 7000000);
    CHECK_EQ_INT(back->rows[1].calls, 3);
    for (size_t cut = 0; cut < fh.len; cut += 7)
        CHECK_EQ_INT(tml__wire_parse_deep_dive(p, cut, back), TML_EPROTO);
    /* a skipped window: its reason, no rows */
    tml_dd_window *s = tml__dd_new();
    snprintf(s->skipped, sizeof(s->skipped), "the model is compiled");
    tml__sb_reset(&sb);
    tml__wire_deep_dive(&sb, s);
    CHECK(tml__wire_header((uint8_t *)sb.buf, sb.len, &fh) == 0);
    CHECK_EQ_INT(tml__wire_parse_deep_dive((uint8_t *)sb.buf + TML_WIRE_HEADER, fh.len, back), 0);
    CHECK_STR(back->skipped, "the model is compiled");
    CHECK_EQ_INT(back->nrows, 0);
    /* hostile: last before first; a count past the bound */
    s->skipped[0] = '\0';
    s->first_step = 5;
    s->last_step = 4;
    tml__sb_reset(&sb);
    tml__wire_deep_dive(&sb, s);
    CHECK_EQ_INT(tml__wire_parse_deep_dive((uint8_t *)sb.buf + TML_WIRE_HEADER,
                                           sb.len - TML_WIRE_HEADER, back), TML_EPROTO);
    s->last_step = 5;
    tml__sb_reset(&sb);
    tml__wire_deep_dive(&sb, s);
    uint8_t *q = (uint8_t *)sb.buf + sb.len - 4;     /* the count, last in a rowless frame */
    q[0] = 0xff;
    q[1] = 0xff;
    CHECK_EQ_INT(tml__wire_parse_deep_dive((uint8_t *)sb.buf + TML_WIRE_HEADER,
                                           sb.len - TML_WIRE_HEADER, back), TML_EPROTO);
    for (int i = 0; i < TML_DD_MAX_ROWS; i++)
        tml__dd_add(s, "m", "op", 1, 1);
    CHECK_EQ_INT(tml__dd_add(s, "m", "op", 1, 1), TML_EFULL);
    tml__sb_release(&sb);
    tml__dd_free(s);
    tml__dd_free(d);
    tml__dd_free(back);
}

#define TESTS X(test_hello_roundtrip) X(test_handshake_frames) X(test_steps_roundtrip) X(test_stats_roundtrip) X(test_bad_headers) X(test_deep_dive_roundtrip)
#include "harness.h"
