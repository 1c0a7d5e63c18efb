/*
 * server.h - the aggregator's socket server: accepts rank connections,
 * checks each one's handshake, decodes frames and feeds them to a tml_agg.
 *
 *     tml_server *srv;
 *     tml_server_opts o = {.run_id = id, .secret = secret, .run_dir = dir,
 *                          .control_fd = -1};
 *     tml__server_new(&o, agg, &srv);          // binds 127.0.0.1:<ephemeral>
 *     printf("%d\n", tml__server_port(srv));
 *     tml_server_cmd cmd;
 *     tml__server_run(srv, &cmd);              // until finalize / stop
 *     tml__server_drain(srv, 1500);            // ranks say BYE or close
 *     tml__agg_finalize(agg, cmd.status, cmd.exit_code, cmd.width, &text);
 *     tml__server_free(srv);
 *
 * One thread, one epoll(7) loop, non-blocking sockets: a slow or silent
 * client only ever costs a buffer, never a stalled loop. Connections that
 * do not start with a valid HELLO (right run id, right secret) get REJECT,
 * are closed and logged to <run_dir>/traceml.log. Garbage or oversized
 * frames close the connection.
 *
 * The control fd (a pipe from `traceml run`) carries lines
 *     finalize <status> <exit_code> <width>\n
 * and its end of file means the launcher is gone.
 *
 * Ownership: the server copies the strings in opts; it does not own agg.
 */
#ifndef TML_SERVER_H
#define TML_SERVER_H

#include <signal.h>
#include <stddef.h>

#include "agg/agg.h"

typedef struct tml_server tml_server;

typedef struct tml_server_opts {
    const char *bind_addr;        /* NULL: "127.0.0.1" */
    int port;                     /* 0: ephemeral */
    const char *run_id;
    const char *secret;
    const char *run_dir;          /* traceml.log goes here; NULL: no log */
    int control_fd;               /* -1: none */
    volatile sig_atomic_t *stop;  /* run() returns once *stop is set; may be NULL */
    /* Periodic work on the loop's own thread (the live snapshot), every
     * timer_ms while run() turns; NULL: none. */
    void (*timer)(void *ctx);
    void *timer_ctx;
    int timer_ms;
} tml_server_opts;

enum tml_server_event {
    TML_SERVER_STOPPED = 1,       /* *stop was set */
    TML_SERVER_FINALIZE = 2,      /* a finalize line arrived */
    TML_SERVER_CONTROL_EOF = 3,   /* the control fd closed */
};

typedef struct tml_server_cmd {
    int event;                    /* enum tml_server_event */
    char status[16];              /* FINALIZE: completed / failed / interrupted */
    int exit_code;
    int width;
} tml_server_cmd;

/* 0, TML_EINVAL (bad bind address), TML_ECONN (cannot bind/listen; errno
 * kept), TML_ENOMEM. */
int tml__server_new(const tml_server_opts *o, tml_agg *agg, tml_server **out);
/* Closes every connection and the listener. NULL is fine. */
void tml__server_free(tml_server *s);
int tml__server_port(const tml_server *s);

/* One turn of the loop, waiting at most timeout_ms. Returns 1 when a
 * control event is ready in *cmd, else 0. */
int tml__server_poll(tml_server *s, int timeout_ms, tml_server_cmd *cmd);
/* Turns until *stop, a finalize line or the control fd's end, calling the
 * timer once at the start and then every timer_ms. A turn that found
 * hundreds of ranks' connections with data leaves them out for a short
 * wait, so that the next reads take several frames each; handshakes and
 * the control pipe are served meanwhile (tml__server_paced counts). */
int tml__server_run(tml_server *s, tml_server_cmd *cmd);
/* Turns until every connection has said BYE or closed (and none is still
 * in its handshake), at most timeout_ms. Returns the number still open. */
size_t tml__server_drain(tml_server *s, int timeout_ms);

/* Connections open now / rejected since start (for tests and logs). */
size_t tml__server_connections(const tml_server *s);
/* The most connections it keeps: the descriptor limit at its start less a
 * reserve for the rest of the process, at most 65,536. */
size_t tml__server_max_connections(const tml_server *s);
/* Takes a connected, non-blocking socket as if it had been accepted (the
 * fuzz target feeds the frame handling through a socketpair). 0, or
 * TML_EFULL when no slot is free (fd not taken). */
int tml__server_adopt(tml_server *s, int fd, const char *peer);
size_t tml__server_rejected(const tml_server *s);
size_t tml__server_paced(const tml_server *s);

#endif
