/*
 * inproc_handshake.h - the client's side of the wire's handshake for the
 * fuzz targets that hold the server in the same thread (fuzz_wire,
 * fuzz_report): OPEN on fd, one turn of the server so that it answers
 * CHALLENGE, then the HELLO with the MAC of that nonce (docs/wire.md,
 * "Handshake"). fd is the client's end of a connection srv adopted. 0, or
 * -1 when it could not be made. (tests/unit/handshake.h is the same for a
 * server in another thread or process: it waits for the CHALLENGE.)
 */
#ifndef TML_FUZZ_INPROC_HANDSHAKE_H
#define TML_FUZZ_INPROC_HANDSHAKE_H

#include <sys/socket.h>
#include <unistd.h>

#include "agg/server.h"
#include "base/strbuf.h"
#include "wire/wire.h"

static inline int inproc_handshake(tml_server *srv, int fd, const tml_hello *hello)
{
    uint8_t buf[TML_WIRE_HEADER + TML_WIRE_NONCE], nonce[TML_WIRE_NONCE];
    tml_frame_header fh;
    tml_server_cmd cmd;
    tml_strbuf sb = TML_STRBUF_INIT;
    int rc = -1;
    tml__wire_open(&sb);
    if (sb.failed || send(fd, sb.buf, sb.len, MSG_NOSIGNAL) != (ssize_t)sb.len)
        goto out;
    tml__server_poll(srv, 0, &cmd);
    if (read(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf) ||
        tml__wire_header(buf, sizeof(buf), &fh) != 0 || fh.type != TML_FRAME_CHALLENGE ||
        tml__wire_parse_challenge(buf + TML_WIRE_HEADER, fh.len, nonce) < 0)
        goto out;
    tml__sb_reset(&sb);
    tml__wire_hello(&sb, hello, nonce);
    rc = sb.failed || send(fd, sb.buf, sb.len, MSG_NOSIGNAL) != (ssize_t)sb.len ? -1 : 0;
out:
    tml__sb_release(&sb);
    return rc;
}

#endif
