/*
 * hmac.c - SHA-256 and HMAC-SHA256, straight from FIPS 180-4 and RFC 2104.
 *
 * Written here rather than linked from OpenSSL so that libtraceml keeps
 * depending on libc and libm only (it is loaded into every training
 * process). Speed does not matter: the aggregator MACs one HELLO per
 * connection. tests/unit/test_hmac.c checks the FIPS 180-4 and RFC 4231
 * vectors.
 */
#include "base/hmac.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "traceml/traceml.h"

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2,
};

static uint32_t ror(uint32_t x, int n)
{
    return (x >> n) | (x << (32 - n));
}

static void block(tml_sha256 *c, const uint8_t *p)
{
    uint32_t w[64], v[8];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(v, c->h, sizeof(v));
    for (int i = 0; i < 64; i++) {
        uint32_t s1 = ror(v[4], 6) ^ ror(v[4], 11) ^ ror(v[4], 25);
        uint32_t ch = (v[4] & v[5]) ^ (~v[4] & v[6]);
        uint32_t t1 = v[7] + s1 + ch + K[i] + w[i];
        uint32_t s0 = ror(v[0], 2) ^ ror(v[0], 13) ^ ror(v[0], 22);
        uint32_t maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
        memmove(&v[1], &v[0], 7 * sizeof(v[0]));
        v[4] += t1;
        v[0] = t1 + s0 + maj;
    }
    for (int i = 0; i < 8; i++)
        c->h[i] += v[i];
}

void tml__sha256_init(tml_sha256 *c)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, iv, sizeof(iv));
    c->len = 0;
    c->nbuf = 0;
}

void tml__sha256_add(tml_sha256 *c, const void *data, size_t len)
{
    const uint8_t *p = data;
    c->len += len;
    while (len) {
        size_t k = 64 - c->nbuf < len ? 64 - c->nbuf : len;
        memcpy(c->buf + c->nbuf, p, k);
        c->nbuf += k;
        p += k;
        len -= k;
        if (c->nbuf == 64) {
            block(c, c->buf);
            c->nbuf = 0;
        }
    }
}

void tml__sha256_done(tml_sha256 *c, uint8_t out[TML_SHA256_SIZE])
{
    uint64_t bits = c->len * 8;
    uint8_t pad[72] = {0x80};
    size_t n = (c->nbuf < 56 ? 56 : 120) - c->nbuf;
    for (int i = 0; i < 8; i++)
        pad[n + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
    tml__sha256_add(c, pad, n + 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(c->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(c->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(c->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)c->h[i];
    }
}

void tml__hmac_sha256(const void *key, size_t key_len, const void *a, size_t a_len,
                      const void *b, size_t b_len, uint8_t out[TML_SHA256_SIZE])
{
    uint8_t k[64] = {0}, pad[64], inner[TML_SHA256_SIZE];
    tml_sha256 c;
    if (key_len > 64) {      /* a long key is hashed first (RFC 2104) */
        tml__sha256_init(&c);
        tml__sha256_add(&c, key, key_len);
        tml__sha256_done(&c, k);
    } else if (key_len) {
        memcpy(k, key, key_len);
    }
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x36;
    tml__sha256_init(&c);
    tml__sha256_add(&c, pad, 64);
    tml__sha256_add(&c, a, a_len);
    tml__sha256_add(&c, b, b_len);
    tml__sha256_done(&c, inner);
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x5c;
    tml__sha256_init(&c);
    tml__sha256_add(&c, pad, 64);
    tml__sha256_add(&c, inner, sizeof(inner));
    tml__sha256_done(&c, out);
}

int tml__bytes_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
    uint8_t d = 0;
    for (size_t i = 0; i < n; i++)
        d |= a[i] ^ b[i];
    return d == 0;
}

static int urandom(uint8_t *p, size_t n)
{
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return TML_EIO;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            close(fd);
            return TML_EIO;
        }
        p += r;
        n -= (size_t)r;
    }
    close(fd);
    return 0;
}

int tml__random_bytes(void *out, size_t n)
{
    uint8_t *p = out;
    while (n) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return errno == ENOSYS ? urandom(p, n) : TML_EIO;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}
