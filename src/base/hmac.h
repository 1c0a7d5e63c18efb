/*
 * hmac.h - SHA-256 (FIPS 180-4), HMAC-SHA256 (RFC 2104) and random bytes:
 * what the wire's handshake needs to prove a rank knows the run's secret
 * without sending it (docs/wire.md). Small and dependency-free: the library
 * links libc and libm only, never a crypto library.
 */
#ifndef TML_HMAC_H
#define TML_HMAC_H

#include <stddef.h>
#include <stdint.h>

#define TML_SHA256_SIZE 32

typedef struct tml_sha256 {
    uint32_t h[8];
    uint64_t len;            /* bytes hashed so far */
    uint8_t buf[64];
    size_t nbuf;
} tml_sha256;

void tml__sha256_init(tml_sha256 *c);
void tml__sha256_add(tml_sha256 *c, const void *data, size_t len);
void tml__sha256_done(tml_sha256 *c, uint8_t out[TML_SHA256_SIZE]);

/* HMAC-SHA256 of the concatenation of two parts (either may be empty):
 * the handshake MACs a nonce and a payload without copying them. */
void tml__hmac_sha256(const void *key, size_t key_len, const void *a, size_t a_len,
                      const void *b, size_t b_len, uint8_t out[TML_SHA256_SIZE]);

/* 1 when a and b (n bytes each) are equal; time depends on n only. */
int tml__bytes_equal(const uint8_t *a, const uint8_t *b, size_t n);

/* n random bytes from the kernel (getrandom(2), /dev/urandom where it is
 * missing). 0, or TML_EIO. */
int tml__random_bytes(void *out, size_t n);

#endif
