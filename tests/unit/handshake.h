/*
 * handshake.h - the client's side of the wire's handshake for tests that
 * speak the wire over a raw socket (docs/wire.md, "Handshake"):
 *
 *     uint8_t nonce[TML_WIRE_NONCE];
 *     if (th_challenge(fd, nonce) == 0) {        // OPEN sent, CHALLENGE read
 *         tml__wire_hello(&sb, &hello, nonce);   // MAC of nonce || identity
 *         ... send sb, read WELCOME or REJECT
 *     }
 */
#ifndef TML_TEST_HANDSHAKE_H
#define TML_TEST_HANDSHAKE_H

#include <poll.h>
#include <sys/socket.h>

#include "base/strbuf.h"
#include "wire/wire.h"

/* Sends OPEN and reads the CHALLENGE's nonce (3 s at most). 0, or -1 (a
 * REJECT, another frame, EOF or timeout). */
static inline int th_challenge(int fd, uint8_t nonce[TML_WIRE_NONCE])
{
    tml_strbuf sb = TML_STRBUF_INIT;
    tml__wire_open(&sb);
    ssize_t w = send(fd, sb.buf, sb.len, MSG_NOSIGNAL);
    tml__sb_release(&sb);
    if (w <= 0)
        return -1;
    uint8_t buf[TML_WIRE_HEADER + TML_WIRE_NONCE];
    size_t n = 0;
    while (n < sizeof(buf)) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 3000) <= 0)
            return -1;
        ssize_t r = recv(fd, buf + n, sizeof(buf) - n, 0);
        if (r <= 0)
            return -1;
        n += (size_t)r;
        tml_frame_header h;
        if (n >= TML_WIRE_HEADER && (tml__wire_header(buf, n, &h) != 0 ||
                                     h.type != TML_FRAME_CHALLENGE))
            return -1;
    }
    return tml__wire_parse_challenge(buf + TML_WIRE_HEADER, TML_WIRE_NONCE, nonce);
}

#endif
