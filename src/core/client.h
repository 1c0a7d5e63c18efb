/*
 * client.h - the rank's side of the wire: connect to the aggregator, shake
 * hands, send frames. Used only by the shipper thread.
 */
#ifndef TML_CLIENT_H
#define TML_CLIENT_H

#include <stddef.h>
#include "wire/wire.h"

/* Connects to "host:port" within timeout_ms and performs the handshake
 * (OPEN, CHALLENGE, HELLO with the MAC of hello->secret, WELCOME; each
 * reply waited for at most a second). Returns a connected fd, or
 * TML_ECONN / TML_EAUTH (refused) / TML_EPROTO. *other_version (may be
 * NULL) is set when the aggregator speaks another wire version. */
int tml__client_connect(const char *addr, const tml_hello *hello, int timeout_ms,
                        int *other_version);
/* Sends all of buf; 0 or TML_ECONN (the caller closes the fd). */
int tml__client_send(int fd, const void *buf, size_t len);
/*
 * Asks the aggregator for the summary so far (SUMMARY_REQ) and waits at
 * most timeout_ms for its SUMMARY. *json (malloc'd, NUL-terminated, the
 * caller frees) on 0; TML_ECONN when the connection failed or timed out
 * (the caller closes the fd: the stream may be mid-frame), or the
 * aggregator's own error code.
 */
int tml__client_summary(int fd, int timeout_ms, char **json);

#endif
