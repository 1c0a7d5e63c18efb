/*
 * net.h - listening sockets, shared by the telemetry server and the live
 * views' HTTP server.
 */
#ifndef TML_NET_H
#define TML_NET_H

/* A non-blocking, close-on-exec TCP listener on bind_addr (NULL or "" =
 * 127.0.0.1: loopback unless told otherwise) and port (0 = ephemeral).
 * Returns the fd and sets *port_out to the bound port; TML_EINVAL for a bad
 * address, TML_ECONN (errno kept) when socket/bind/listen fail. */
int tml__net_listen(const char *bind_addr, int port, int backlog, int *port_out);

/* Raises this process's soft limit on open descriptors to its hard limit,
 * so that a server's connections, not EMFILE, meet its own caps. Only for
 * a process of TraceML's own (a training's libraries may use select(2),
 * which breaks past 1024). Returns the soft limit now (-1: unknown) and
 * sets *before to what it was. */
long tml__net_raise_fd_limit(long *before);

#endif
