/*
 * wire.h - the telemetry wire between a rank and the aggregator.
 *
 * A stream of frames over TCP (loopback unless multi-node). Every frame is
 * a 12-byte header then its payload, all little-endian:
 *
 *     u32 magic "TML1"   u16 version   u16 type   u32 payload length
 *
 * The handshake proves the client knows the run's secret without sending
 * it: the client opens with OPEN, the aggregator answers CHALLENGE (a fresh
 * random nonce), the client sends HELLO (who it is, and HMAC-SHA256 keyed
 * with the secret over the nonce and those identity bytes), and the
 * aggregator answers WELCOME or REJECT and closes on anything else. A
 * captured HELLO is worth nothing on another connection: its nonce differs.
 * Then the client sends STEPS batches, STATS from time to time and BYE last.
 * docs/wire.md is the reference; decoders take (buf, len) and never trust
 * lengths they were given.
 */
#ifndef TML_WIRE_H
#define TML_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include "model/deepdive.h"
#include "model/record.h"
#include "base/strbuf.h"

#define TML_WIRE_MAGIC   0x314c4d54u   /* "TML1" read as little-endian u32 */
#define TML_WIRE_VERSION 5
#define TML_WIRE_HEADER  12
#define TML_WIRE_MAX_PAYLOAD (1u << 20)
#define TML_WIRE_SECRET_MAX 64
#define TML_WIRE_RUNID_MAX 40
#define TML_WIRE_NONCE 32        /* CHALLENGE: random bytes, one connection's */
#define TML_WIRE_MAC 32          /* HELLO: HMAC-SHA256, its last bytes */

enum tml_frame_type {
    TML_FRAME_HELLO = 1,
    TML_FRAME_WELCOME = 2,
    TML_FRAME_REJECT = 3,
    TML_FRAME_STEPS = 4,
    TML_FRAME_STATS = 5,
    TML_FRAME_BYE = 6,
    /* reserved for later capabilities, so they never collide */
    TML_FRAME_SAMPLES = 7,       /* resource samples (host, process, GPU) */
    TML_FRAME_SUMMARY_REQ = 8,   /* a rank asks for the summary so far */
    TML_FRAME_SUMMARY = 9,       /* the aggregator's answer: JSON text */
    TML_FRAME_IDENTITY = 10,     /* a rank's identity changed after hello */
    TML_FRAME_OPEN = 11,         /* a client's first frame: a challenge, please */
    TML_FRAME_CHALLENGE = 12,    /* the aggregator's nonce for this connection */
    TML_FRAME_DEEP_DIVE = 13,    /* a rank's deep-dive window (model/deepdive.h) */
};

typedef struct tml_frame_header {
    uint16_t version;
    uint16_t type;
    uint32_t len;
} tml_frame_header;

typedef struct tml_hello {
    char run_id[TML_WIRE_RUNID_MAX];
    char secret[TML_WIRE_SECRET_MAX];   /* the key of the HELLO's MAC; never sent */
    tml_rank_info info;
} tml_hello;

/* Bytes of one encoded step record. */
#define TML_WIRE_STEP_SIZE 224

/* 0: header decoded; 1: need more bytes; TML_EPROTO: not a frame of ours
 * (bad magic, unsupported version, payload over TML_WIRE_MAX_PAYLOAD). A
 * frame with our magic in another version sets out->version to it (else
 * out->version is 0 on TML_EPROTO): a peer of another TraceML version. */
int tml__wire_header(const uint8_t *buf, size_t len, tml_frame_header *out);

/* OPEN (u32 0): the client's first frame. CHALLENGE: TML_WIRE_NONCE
 * random bytes; parse_challenge copies them out (0 or TML_EPROTO). */
void tml__wire_open(tml_strbuf *out);
void tml__wire_challenge(tml_strbuf *out, const uint8_t nonce[TML_WIRE_NONCE]);
int tml__wire_parse_challenge(const uint8_t *p, size_t len, uint8_t nonce[TML_WIRE_NONCE]);

/* HELLO: h's identity fields, then HMAC-SHA256(key = h->secret, message =
 * nonce || the identity fields' bytes) as the payload's last TML_WIRE_MAC
 * bytes. The secret itself is never on the wire. */
void tml__wire_hello(tml_strbuf *out, const tml_hello *h, const uint8_t nonce[TML_WIRE_NONCE]);
/* 1 when a HELLO payload's MAC is that of nonce and its identity bytes
 * under secret (compared in constant time), else 0. */
int tml__wire_hello_verify(const uint8_t *p, size_t len, const uint8_t nonce[TML_WIRE_NONCE],
                           const char *secret);
/* IDENTITY: the identity fields alone (a rank's description changed after
 * the handshake: its loader settings, ...); the connection is already
 * authenticated. Parse it with tml__wire_parse_identity. */
void tml__wire_identity(tml_strbuf *out, const tml_hello *h);
void tml__wire_welcome(tml_strbuf *out);
void tml__wire_reject(tml_strbuf *out, const char *reason);
/* A REJECT framed in another wire version: what a peer of that version
 * reads as a refusal (REJECT's payload is the same in every version). */
void tml__wire_reject_as(tml_strbuf *out, uint16_t version, const char *reason);
/* Appends one STEPS frame holding n records (n * TML_WIRE_STEP_SIZE must fit
 * TML_WIRE_MAX_PAYLOAD; callers batch at most TML_WIRE_MAX_STEPS). */
#define TML_WIRE_MAX_STEPS 4096
void tml__wire_steps(tml_strbuf *out, const tml_step_record *recs, size_t n);
void tml__wire_stats(tml_strbuf *out, uint16_t type, const tml_rank_stats *s);

/* SAMPLES (type 7): u32 count, then count samples of TML_WIRE_SAMPLE_SIZE
 * bytes (ts_unix_ms u64, node i32, rank i32, gpu i32, metric u32, value
 * f64 as its IEEE-754 bits). Callers batch at most TML_WIRE_MAX_SAMPLES. */
#define TML_WIRE_SAMPLE_SIZE 32
#define TML_WIRE_MAX_SAMPLES 4096
struct tml_sample;
void tml__wire_samples(tml_strbuf *out, const struct tml_sample *v, size_t n);
/* Sets *n to the sample count; decode sample i with parse_sample. */
int tml__wire_parse_samples(const uint8_t *p, size_t len, size_t *n);
void tml__wire_parse_sample(const uint8_t *p, size_t i, struct tml_sample *out);

/* SUMMARY_REQ (type 8): u32 flags (0), sent by a rank on its connection;
 * the aggregator answers SUMMARY (type 9): i32 status (0, or a negative
 * TML_E* when no summary could be built), then the summary JSON (the rest
 * of the payload, not NUL-terminated). parse_summary points *json into p. */
void tml__wire_summary_req(tml_strbuf *out);
void tml__wire_summary(tml_strbuf *out, int32_t status, const char *json, size_t len);
int tml__wire_parse_summary(const uint8_t *p, size_t len, int32_t *status,
                            const char **json, size_t *json_len);

/* DEEP_DIVE (type 13): u64 first_step, u64 last_step, u64 wall_ns, u32
 * cuda, str skipped, u32 count (at most TML_DD_MAX_ROWS), then count rows
 * of str module, str op, u64 self_ns, u64 calls (docs/wire.md). At most
 * ~50 KB. parse_deep_dive into d (tml__dd_new(): room for every row a
 * frame may hold): 0 or TML_EPROTO (a count, a time or a step range no
 * rank sends, or more rows than d has room for). */
void tml__wire_deep_dive(tml_strbuf *out, const tml_dd_window *d);
int tml__wire_parse_deep_dive(const uint8_t *p, size_t len, tml_dd_window *d);

/* Payload decoders: 0 or TML_EPROTO. parse_hello reads a HELLO (identity
 * fields and MAC; check the MAC with tml__wire_hello_verify), parse_identity
 * an IDENTITY; neither fills out->secret. */
int tml__wire_parse_hello(const uint8_t *p, size_t len, tml_hello *out);
int tml__wire_parse_identity(const uint8_t *p, size_t len, tml_hello *out);
/* Sets *n to the record count; decode record i with parse_step. */
int tml__wire_parse_steps(const uint8_t *p, size_t len, size_t *n);
void tml__wire_parse_step(const uint8_t *p, size_t i, tml_step_record *out);
int tml__wire_parse_stats(const uint8_t *p, size_t len, tml_rank_stats *out);

#endif
