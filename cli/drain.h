/*
 * drain.h - the training's terminal under `traceml run --mode cli`: a
 * pseudo-terminal that a process of its own, the drainer, empties into
 * <run_dir>/training_output.log as fast as the training writes; the
 * launcher's view tails that file.
 *
 *     tml_drain d;
 *     if (tml__drain_start(&d, log_path, &tty_before, leave_screen) < 0)
 *         ... no pty: leave the training's output alone ...
 *     ... fork the training with d.slave as its stdout and stderr ...
 *     tml__drain_started(&d);               // the launcher's copy of the slave closed
 *     tml__drain_pump(&d, sink, ctx);       // each refresh: the log's new bytes to sink
 *     tml__drain_set_screen(&d, 0);         // the terminal is no longer full screen
 *     while (!tml__drain_done(&d) && ...)   // at the end: wait a little, not forever
 *         tml__drain_pump(&d, sink, ctx);
 *     tml__drain_release(&d);
 *
 * The training never waits for the launcher: the drainer reads the pty
 * whatever the launcher does (stopped, killed, slow to draw), and when the
 * launcher is gone it also writes the output to the terminal (fd 1) it
 * inherited. It ends by itself once every writer has closed the pty.
 *
 * Ownership: the tml_drain is the caller's (embedded); everything it
 * opens is released by tml__drain_release, except one pipe end that is
 * kept open on purpose until the launcher exits (drain.c says why).
 */
#ifndef TML_CLI_DRAIN_H
#define TML_CLI_DRAIN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/types.h>
#include <termios.h>

struct tml_drain_share;

typedef struct tml_drain {
    int slave;                /* the training's stdout/stderr until tml__drain_started */
    int master;               /* kept for resizes; read here only if the drainer is gone */
    int log_wr, log_rd;       /* training_output.log: appended to, tailed */
    int alive_wr;             /* its EOF tells the drainer that the launcher is gone */
    pid_t pid;                /* the drainer; 0 once it has ended */
    uint64_t read_bytes;      /* how far into the log the tail has read */
    struct tml_drain_share *share;   /* one page shared with the drainer */
    int have_tty;
    struct termios tty_before;       /* the terminal's settings before full screen */
    char leave_screen[256];          /* the bytes that leave full screen (screen.h) */
    char log_path[4200];
} tml_drain;

/* Opens the pty and the log, forks the drainer. tty_before (NULL: unknown)
 * and leave_screen give the terminal back if the launcher dies while it
 * draws full screen. 0, or -1 with nothing left open. */
int tml__drain_start(tml_drain *d, const char *log_path, const struct termios *tty_before,
                     const char *leave_screen);
/* In the launcher once the training is started: closes its slave. */
void tml__drain_started(tml_drain *d);

typedef void (*tml_drain_sink)(void *ctx, const char *bytes, size_t n);
/* Hands what is new in the log to sink (at most ~1 MiB a call) and marks it
 * shown; reads the pty itself when the drainer is gone. */
void tml__drain_pump(tml_drain *d, tml_drain_sink sink, void *ctx);
/* 1 once the drainer has ended and the pty is closed: the log is complete. */
int tml__drain_done(const tml_drain *d);
/* full_screen 0: the launcher has given the terminal back (the view hidden). */
void tml__drain_set_screen(tml_drain *d, int full_screen);
void tml__drain_resize(tml_drain *d, const struct winsize *ws);
/* The launcher's end of it; a drainer still reading (descendants of the
 * training keep the pty open) goes on, and writes to the terminal once
 * the launcher has exited. Idempotent. */
void tml__drain_release(tml_drain *d);

#endif
