/* test_hmac.c - SHA-256 against FIPS 180-4's examples (and the million
 * 'a's), HMAC-SHA256 against RFC 4231's test cases 1-4, 6 and 7, split
 * messages, the constant-time compare and random bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hmac.h"

#include "harness.h"

static void hex(const uint8_t *d, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void sha(const void *msg, size_t n, char *out)
{
    tml_sha256 c;
    uint8_t d[TML_SHA256_SIZE];
    tml__sha256_init(&c);
    tml__sha256_add(&c, msg, n);
    tml__sha256_done(&c, d);
    hex(d, sizeof(d), out);
}

static void test_sha256_fips180(void)
{
    char h[65];
    sha("abc", 3, h);
    CHECK_STR(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    sha("", 0, h);
    CHECK_STR(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *m2 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha(m2, strlen(m2), h);
    CHECK_STR(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    const char *m3 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                     "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu";
    sha(m3, strlen(m3), h);
    CHECK_STR(h, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    /* one million 'a's, fed in uneven pieces */
    tml_sha256 c;
    uint8_t d[TML_SHA256_SIZE];
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    tml__sha256_init(&c);
    for (size_t off = 0, k = 1; off < 1000000; off += k, k = k * 3 % 997 + 1)
        tml__sha256_add(&c, a + off, off + k > 1000000 ? 1000000 - off : k);
    tml__sha256_done(&c, d);
    hex(d, sizeof(d), h);
    CHECK_STR(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(a);
}

static void hmac_hex(const void *key, size_t kl, const void *msg, size_t ml, size_t split,
                     char *out)
{
    uint8_t d[TML_SHA256_SIZE];
    tml__hmac_sha256(key, kl, msg, split, (const uint8_t *)msg + split, ml - split, d);
    hex(d, sizeof(d), out);
}

static void test_hmac_rfc4231(void)
{
    char h[65];
    uint8_t key[131];
    memset(key, 0x0b, 20);
    hmac_hex(key, 20, "Hi There", 8, 0, h);                          /* case 1 */
    CHECK_STR(h, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    hmac_hex("Jefe", 4, "what do ya want for nothing?", 28, 9, h);   /* case 2, split */
    CHECK_STR(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    uint8_t msg[50];
    memset(key, 0xaa, 20);
    memset(msg, 0xdd, 50);
    hmac_hex(key, 20, msg, 50, 50, h);                               /* case 3 */
    CHECK_STR(h, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
    for (int i = 0; i < 25; i++)
        key[i] = (uint8_t)(i + 1);
    memset(msg, 0xcd, 50);
    hmac_hex(key, 25, msg, 50, 17, h);                               /* case 4 */
    CHECK_STR(h, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
    memset(key, 0xaa, 131);                                          /* case 6: long key */
    const char *m6 = "Test Using Larger Than Block-Size Key - Hash Key First";
    hmac_hex(key, 131, m6, strlen(m6), 0, h);
    CHECK_STR(h, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    const char *m7 = "This is a test using a larger than block-size key and a larger than "
                     "block-size data. The key needs to be hashed before being used by the "
                     "HMAC algorithm.";
    hmac_hex(key, 131, m7, strlen(m7), 32, h);                       /* case 7 */
    CHECK_STR(h, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

static void test_equal_and_random(void)
{
    uint8_t a[32], b[32];
    CHECK_EQ_INT(tml__random_bytes(a, sizeof(a)), 0);
    CHECK_EQ_INT(tml__random_bytes(b, sizeof(b)), 0);
    CHECK(!tml__bytes_equal(a, b, sizeof(a)));     /* 2^-256 to fail by chance */
    memcpy(b, a, sizeof(a));
    CHECK(tml__bytes_equal(a, b, sizeof(a)));
    b[31] ^= 1;
    CHECK(!tml__bytes_equal(a, b, sizeof(a)));
    CHECK(tml__bytes_equal(a, b, 0));
}

#define TESTS X(test_sha256_fips180) X(test_hmac_rfc4231) X(test_equal_and_random)
#include "harness.h"
