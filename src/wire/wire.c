/*
 * wire.c - encoding and decoding of wire frames.
 *
 * Fields are written one by one in little-endian order rather than copying
 * structs, so the format does not depend on the compiler's padding and a
 * reader on another machine decodes the same bytes. Strings are a u16
 * length then bytes, and are truncated to the receiver's buffer.
 */
#include "wire/wire.h"

#include <string.h>

#include "base/hmac.h"
#include "model/sample.h"

static void put_u16(tml_strbuf *sb, uint16_t v)
{
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    tml__sb_add(sb, b, 2);
}

static void put_u32(tml_strbuf *sb, uint32_t v)
{
    uint8_t b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    tml__sb_add(sb, b, 4);
}

static void put_u64(tml_strbuf *sb, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    tml__sb_add(sb, b, 8);
}

static void put_str(tml_strbuf *sb, const char *s)
{
    size_t n = strnlen(s, 0xffff);
    put_u16(sb, (uint16_t)n);
    tml__sb_add(sb, s, n);
}

static uint16_t get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

static uint64_t get_u64(const uint8_t *p)
{
    return (uint64_t)get_u32(p) | ((uint64_t)get_u32(p + 4) << 32);
}

/* A cursor over a payload; any overrun sets bad and yields zeros. */
typedef struct cursor {
    const uint8_t *p;
    size_t len, off;
    int bad;
} cursor;

static const uint8_t *take(cursor *c, size_t n)
{
    if (c->bad || c->len - c->off < n) {
        c->bad = 1;
        return NULL;
    }
    const uint8_t *p = c->p + c->off;
    c->off += n;
    return p;
}

static uint32_t take_u32(cursor *c)
{
    const uint8_t *p = take(c, 4);
    return p ? get_u32(p) : 0;
}

static uint64_t take_u64(cursor *c)
{
    const uint8_t *p = take(c, 8);
    return p ? get_u64(p) : 0;
}

static void take_str(cursor *c, char *dst, size_t cap)
{
    const uint8_t *lp = take(c, 2);
    size_t n = lp ? get_u16(lp) : 0;
    const uint8_t *s = take(c, n);
    size_t k = s ? (n < cap - 1 ? n : cap - 1) : 0;
    if (k)
        memcpy(dst, s, k);
    dst[k] = '\0';
}

static size_t begin_frame_as(tml_strbuf *sb, uint16_t version, uint16_t type)
{
    size_t at = sb->len;
    put_u32(sb, TML_WIRE_MAGIC);
    put_u16(sb, version);
    put_u16(sb, type);
    put_u32(sb, 0);
    return at;
}

static size_t begin_frame(tml_strbuf *sb, uint16_t type)
{
    return begin_frame_as(sb, TML_WIRE_VERSION, type);
}

static void end_frame(tml_strbuf *sb, size_t at)
{
    if (sb->failed)
        return;
    uint32_t len = (uint32_t)(sb->len - at - TML_WIRE_HEADER);
    uint8_t *p = (uint8_t *)sb->buf + at + 8;
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(len >> (8 * i));
}

int tml__wire_header(const uint8_t *buf, size_t len, tml_frame_header *out)
{
    if (len < TML_WIRE_HEADER)
        return 1;
    memset(out, 0, sizeof(*out));
    if (get_u32(buf) != TML_WIRE_MAGIC)
        return TML_EPROTO;
    out->version = get_u16(buf + 4);
    out->type = get_u16(buf + 6);
    out->len = get_u32(buf + 8);
    if (out->version != TML_WIRE_VERSION || out->len > TML_WIRE_MAX_PAYLOAD)
        return TML_EPROTO;
    return 0;
}

/* The identity fields, HELLO's and IDENTITY's. */
static void put_identity(tml_strbuf *out, const tml_hello *h)
{
    const tml_rank_info *i = &h->info;
    put_str(out, h->run_id);
    put_u32(out, (uint32_t)i->rank);
    put_u32(out, (uint32_t)i->local_rank);
    put_u32(out, (uint32_t)i->world_size);
    put_u32(out, (uint32_t)i->node_rank);
    put_u32(out, (uint32_t)i->nnodes);
    put_u32(out, (uint32_t)i->pid);
    put_u32(out, i->instrumented);
    put_str(out, i->host);
    put_u32(out, i->loader_known);
    put_u32(out, (uint32_t)i->loader_workers);
    put_u32(out, (uint32_t)i->loader_pin_memory);
    put_u32(out, (uint32_t)i->cpu_count);
    put_str(out, i->auto_models);
    put_u64(out, i->instance);
}

static void hello_mac(const uint8_t *ident, size_t len, const uint8_t nonce[TML_WIRE_NONCE],
                      const char *secret, uint8_t mac[TML_WIRE_MAC])
{
    tml__hmac_sha256(secret, strlen(secret), nonce, TML_WIRE_NONCE, ident, len, mac);
}

void tml__wire_open(tml_strbuf *out)
{
    size_t at = begin_frame(out, TML_FRAME_OPEN);
    put_u32(out, 0);
    end_frame(out, at);
}

void tml__wire_challenge(tml_strbuf *out, const uint8_t nonce[TML_WIRE_NONCE])
{
    size_t at = begin_frame(out, TML_FRAME_CHALLENGE);
    tml__sb_add(out, nonce, TML_WIRE_NONCE);
    end_frame(out, at);
}

int tml__wire_parse_challenge(const uint8_t *p, size_t len, uint8_t nonce[TML_WIRE_NONCE])
{
    if (len != TML_WIRE_NONCE)
        return TML_EPROTO;
    memcpy(nonce, p, TML_WIRE_NONCE);
    return 0;
}

void tml__wire_hello(tml_strbuf *out, const tml_hello *h, const uint8_t nonce[TML_WIRE_NONCE])
{
    uint8_t mac[TML_WIRE_MAC];
    size_t at = begin_frame(out, TML_FRAME_HELLO);
    put_identity(out, h);
    if (out->failed)
        return;
    size_t from = at + TML_WIRE_HEADER;
    hello_mac((const uint8_t *)out->buf + from, out->len - from, nonce, h->secret, mac);
    tml__sb_add(out, mac, sizeof(mac));
    end_frame(out, at);
}

int tml__wire_hello_verify(const uint8_t *p, size_t len, const uint8_t nonce[TML_WIRE_NONCE],
                           const char *secret)
{
    uint8_t mac[TML_WIRE_MAC];
    if (len < TML_WIRE_MAC || !secret || !*secret)
        return 0;
    hello_mac(p, len - TML_WIRE_MAC, nonce, secret, mac);
    return tml__bytes_equal(mac, p + len - TML_WIRE_MAC, TML_WIRE_MAC);
}

void tml__wire_identity(tml_strbuf *out, const tml_hello *h)
{
    size_t at = begin_frame(out, TML_FRAME_IDENTITY);
    put_identity(out, h);
    end_frame(out, at);
}

int tml__wire_parse_identity(const uint8_t *p, size_t len, tml_hello *out)
{
    cursor c = {p, len, 0, 0};
    memset(out, 0, sizeof(*out));
    take_str(&c, out->run_id, sizeof(out->run_id));
    tml_rank_info *i = &out->info;
    i->rank = (int32_t)take_u32(&c);
    i->local_rank = (int32_t)take_u32(&c);
    i->world_size = (int32_t)take_u32(&c);
    i->node_rank = (int32_t)take_u32(&c);
    i->nnodes = (int32_t)take_u32(&c);
    i->pid = (int32_t)take_u32(&c);
    i->instrumented = take_u32(&c);
    take_str(&c, i->host, sizeof(i->host));
    i->loader_known = take_u32(&c) ? 1 : 0;
    i->loader_workers = (int32_t)take_u32(&c);
    i->loader_pin_memory = (int32_t)take_u32(&c);
    i->cpu_count = (int32_t)take_u32(&c);
    take_str(&c, i->auto_models, sizeof(i->auto_models));
    i->instance = take_u64(&c);
    if (c.bad || i->rank < 0 || i->world_size < 0 || i->node_rank < 0 || i->cpu_count < 0 ||
        (i->loader_known && i->loader_workers < 0))
        return TML_EPROTO;
    return 0;
}

int tml__wire_parse_hello(const uint8_t *p, size_t len, tml_hello *out)
{
    if (len < TML_WIRE_MAC) {
        memset(out, 0, sizeof(*out));
        return TML_EPROTO;
    }
    return tml__wire_parse_identity(p, len - TML_WIRE_MAC, out);
}

void tml__wire_welcome(tml_strbuf *out)
{
    size_t at = begin_frame(out, TML_FRAME_WELCOME);
    put_u32(out, 0);
    end_frame(out, at);
}

void tml__wire_reject(tml_strbuf *out, const char *reason)
{
    tml__wire_reject_as(out, TML_WIRE_VERSION, reason);
}

void tml__wire_reject_as(tml_strbuf *out, uint16_t version, const char *reason)
{
    size_t at = begin_frame_as(out, version, TML_FRAME_REJECT);
    put_str(out, reason);
    end_frame(out, at);
}

void tml__wire_steps(tml_strbuf *out, const tml_step_record *recs, size_t n)
{
    size_t at = begin_frame(out, TML_FRAME_STEPS);
    put_u32(out, (uint32_t)n);
    for (size_t k = 0; k < n; k++) {
        const tml_step_record *r = &recs[k];
        size_t start = out->len;
        put_u64(out, r->step);
        put_u64(out, (uint64_t)r->start_ns);
        put_u64(out, (uint64_t)r->traced_ns);
        for (int p = 0; p < TML_PHASE_COUNT; p++)
            put_u64(out, (uint64_t)r->phase_ns[p]);
        put_u64(out, (uint64_t)r->gpu_traced_ns);
        for (int p = 0; p < TML_PHASE_COUNT; p++)
            put_u64(out, (uint64_t)r->gpu_phase_ns[p]);
        put_u64(out, (uint64_t)r->gap_ns);
        put_u64(out, (uint64_t)r->rss_bytes);
        put_u64(out, (uint64_t)r->cuda_allocated_peak_bytes);
        put_u64(out, (uint64_t)r->cuda_reserved_peak_bytes);
        put_u32(out, r->observed);
        put_u32(out, r->flags);
        put_u64(out, (uint64_t)r->comm_ns);
        put_u64(out, (uint64_t)r->comm_bytes);
        put_u32(out, r->comm_count);
        put_u64(out, (uint64_t)r->samples);
        put_u64(out, (uint64_t)r->tokens);
        put_u64(out, (uint64_t)r->flops);
        put_u64(out, (uint64_t)r->peak_flops);
        put_u32(out, r->flops_how);
        /* pad to the fixed record size, room for fields of later versions */
        while (!out->failed && out->len - start < TML_WIRE_STEP_SIZE)
            put_u32(out, 0);
    }
    end_frame(out, at);
}

/* A payload of fixed-size items: a u32 count, then exactly count items. */
static int parse_count(const uint8_t *p, size_t len, size_t item_size, size_t *n)
{
    if (len < 4)
        return TML_EPROTO;
    uint32_t count = get_u32(p);
    if ((size_t)count * item_size != len - 4)
        return TML_EPROTO;
    *n = count;
    return 0;
}

int tml__wire_parse_steps(const uint8_t *p, size_t len, size_t *n)
{
    return parse_count(p, len, TML_WIRE_STEP_SIZE, n);
}

void tml__wire_parse_step(const uint8_t *p, size_t i, tml_step_record *r)
{
    const uint8_t *q = p + 4 + i * TML_WIRE_STEP_SIZE;
    memset(r, 0, sizeof(*r));
#define NEXT64() (q += 8, get_u64(q - 8))
    r->step = NEXT64();
    r->start_ns = (int64_t)NEXT64();
    r->traced_ns = (int64_t)NEXT64();
    for (int k = 0; k < TML_PHASE_COUNT; k++)
        r->phase_ns[k] = (int64_t)NEXT64();
    r->gpu_traced_ns = (int64_t)NEXT64();
    for (int k = 0; k < TML_PHASE_COUNT; k++)
        r->gpu_phase_ns[k] = (int64_t)NEXT64();
    r->gap_ns = (int64_t)NEXT64();
    r->rss_bytes = (int64_t)NEXT64();
    r->cuda_allocated_peak_bytes = (int64_t)NEXT64();
    r->cuda_reserved_peak_bytes = (int64_t)NEXT64();
#undef NEXT64
    r->observed = get_u32(q);
    r->flags = get_u32(q + 4);
    r->comm_ns = (int64_t)get_u64(q + 8);
    r->comm_bytes = (int64_t)get_u64(q + 16);
    r->comm_count = get_u32(q + 24);
    r->samples = (int64_t)get_u64(q + 28);
    r->tokens = (int64_t)get_u64(q + 36);
    r->flops = (int64_t)get_u64(q + 44);
    r->peak_flops = (int64_t)get_u64(q + 52);
    r->flops_how = get_u32(q + 60);
}

void tml__wire_stats(tml_strbuf *out, uint16_t type, const tml_rank_stats *s)
{
    size_t at = begin_frame(out, type);
    put_u64(out, s->events_dropped);
    put_u64(out, s->records_dropped);
    put_u64(out, s->records_sent);
    put_u64(out, (uint64_t)s->overhead_ns_per_step);
    put_u64(out, (uint64_t)s->shipper_cpu_ns);
    end_frame(out, at);
}

int tml__wire_parse_stats(const uint8_t *p, size_t len, tml_rank_stats *s)
{
    cursor c = {p, len, 0, 0};
    s->events_dropped = take_u64(&c);
    s->records_dropped = take_u64(&c);
    s->records_sent = take_u64(&c);
    s->overhead_ns_per_step = (int64_t)take_u64(&c);
    s->shipper_cpu_ns = (int64_t)take_u64(&c);
    return c.bad ? TML_EPROTO : 0;
}

void tml__wire_samples(tml_strbuf *out, const tml_sample *v, size_t n)
{
    size_t at = begin_frame(out, TML_FRAME_SAMPLES);
    put_u32(out, (uint32_t)n);
    for (size_t k = 0; k < n; k++) {
        uint64_t bits;
        memcpy(&bits, &v[k].value, sizeof(bits));
        put_u64(out, (uint64_t)v[k].ts_unix_ms);
        put_u32(out, (uint32_t)v[k].node);
        put_u32(out, (uint32_t)v[k].rank);
        put_u32(out, (uint32_t)v[k].gpu);
        put_u32(out, v[k].metric);
        put_u64(out, bits);
    }
    end_frame(out, at);
}

int tml__wire_parse_samples(const uint8_t *p, size_t len, size_t *n)
{
    return parse_count(p, len, TML_WIRE_SAMPLE_SIZE, n);
}

void tml__wire_parse_sample(const uint8_t *p, size_t i, tml_sample *out)
{
    const uint8_t *q = p + 4 + i * TML_WIRE_SAMPLE_SIZE;
    uint64_t bits = get_u64(q + 24);
    out->ts_unix_ms = (int64_t)get_u64(q);
    out->node = (int32_t)get_u32(q + 8);
    out->rank = (int32_t)get_u32(q + 12);
    out->gpu = (int32_t)get_u32(q + 16);
    out->metric = get_u32(q + 20);
    memcpy(&out->value, &bits, sizeof(bits));
}

void tml__wire_summary_req(tml_strbuf *out)
{
    size_t at = begin_frame(out, TML_FRAME_SUMMARY_REQ);
    put_u32(out, 0);
    end_frame(out, at);
}

void tml__wire_summary(tml_strbuf *out, int32_t status, const char *json, size_t len)
{
    if (len + 4 > TML_WIRE_MAX_PAYLOAD) {   /* too large for one frame */
        status = TML_EFULL;
        len = 0;
    }
    size_t at = begin_frame(out, TML_FRAME_SUMMARY);
    put_u32(out, (uint32_t)status);
    if (len)
        tml__sb_add(out, json, len);
    end_frame(out, at);
}

int tml__wire_parse_summary(const uint8_t *p, size_t len, int32_t *status,
                            const char **json, size_t *json_len)
{
    if (len < 4)
        return TML_EPROTO;
    *status = (int32_t)get_u32(p);
    *json = (const char *)p + 4;
    *json_len = len - 4;
    return 0;
}

/* DEEP_DIVE: the window's bounds and wall time, the CUDA flag, the reason
 * none ran, then the rows (two names, self time, calls). */
void tml__wire_deep_dive(tml_strbuf *out, const tml_dd_window *d)
{
    size_t at = begin_frame(out, TML_FRAME_DEEP_DIVE);
    size_t n = d->nrows < TML_DD_MAX_ROWS ? d->nrows : TML_DD_MAX_ROWS;
    put_u64(out, d->first_step);
    put_u64(out, d->last_step);
    put_u64(out, (uint64_t)d->wall_ns);
    put_u32(out, (uint32_t)d->cuda);
    put_str(out, d->skipped);
    put_u32(out, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        put_str(out, d->rows[i].module);
        put_str(out, d->rows[i].op);
        put_u64(out, (uint64_t)d->rows[i].self_ns);
        put_u64(out, (uint64_t)d->rows[i].calls);
    }
    end_frame(out, at);
}

int tml__wire_parse_deep_dive(const uint8_t *p, size_t len, tml_dd_window *d)
{
    cursor c = {p, len, 0, 0};
    size_t cap = d->cap;
    memset(d, 0, sizeof(*d));       /* the header; rows are appended */
    d->cap = cap;
    d->first_step = take_u64(&c);
    d->last_step = take_u64(&c);
    d->wall_ns = (int64_t)take_u64(&c);
    d->cuda = take_u32(&c) != 0;
    take_str(&c, d->skipped, sizeof(d->skipped));
    uint32_t n = take_u32(&c);
    if (n > TML_DD_MAX_ROWS || n > cap)
        return TML_EPROTO;
    for (uint32_t i = 0; i < n && !c.bad; i++) {
        char module[TML_DD_NAME], op[TML_DD_NAME];
        take_str(&c, module, sizeof(module));
        take_str(&c, op, sizeof(op));
        int64_t ns = (int64_t)take_u64(&c), calls = (int64_t)take_u64(&c);
        if (ns < 0 || ns > TML_RECORD_MAX_NS || calls < 0)
            return TML_EPROTO;
        tml__dd_add(d, module, op, ns, calls);
    }
    if (c.bad || d->wall_ns < 0 || d->wall_ns > TML_RECORD_MAX_NS || d->last_step < d->first_step)
        return TML_EPROTO;
    return 0;
}
