/*
 * live_view.h - the terminal view of `traceml run --mode cli` (and the
 * dashboard notice of --mode dashboard), drawn by the launcher.
 *
 *     tml_view_opts o = {.live_port = p, .interval_ms = 1000, .run_dir = dir};
 *     tml_live_view *v = tml__view_new(&o);      // decides full screen or plain
 *     int fd = tml__view_child_fd(v);            // the training's stdout/stderr, or -1
 *     ... fork: in the child, dup2(fd, 1) and dup2(fd, 2) when fd >= 0 ...
 *     tml__view_started(v);                      // parent: closes its copy of fd
 *     while (training runs) tml__view_poll(v, 5);   // instead of sleeping
 *     tml__view_end(v);                          // terminal back as it was
 *     tml__view_free(v);
 *
 * Full screen (screen.h: any ANSI terminal) when stdout and stdin are
 * terminals and TERM is set and not "dumb"; otherwise plain text lines
 * every interval. In
 * full screen the training's output goes through a pseudo-terminal (so it
 * stays line-buffered, as on a terminal) that a drainer process empties
 * into <run_dir>/training_output.log (drain.h); the view tails that file
 * into a panel, so the training never waits for the launcher. `q` hides
 * the view; the tail then goes to the terminal.
 *
 * The view reads the aggregator's live server (GET /api/live on loopback):
 * it never talks to the ranks, so a slow terminal cannot slow training.
 */
#ifndef TML_CLI_LIVE_VIEW_H
#define TML_CLI_LIVE_VIEW_H

typedef struct tml_live_view tml_live_view;

typedef struct tml_view_opts {
    int live_port;            /* the aggregator's live server; <= 0: none */
    int interval_ms;          /* refresh; 0: 1000 */
    const char *run_dir;      /* training_output.log goes here; NULL: nowhere */
    const char *run_name;
    int force_plain;          /* never full screen */
} tml_view_opts;

/* Never NULL (a view that cannot draw falls back to plain lines; out of
 * memory gives a view that does nothing). */
tml_live_view *tml__view_new(const tml_view_opts *o);
int tml__view_child_fd(const tml_live_view *v);
void tml__view_started(tml_live_view *v);
/* Waits up to timeout_ms for training output or a key, redraws when due. */
void tml__view_poll(tml_live_view *v, int timeout_ms);
/* Reads what output is left, restores the terminal (idempotent). */
void tml__view_end(tml_live_view *v);
void tml__view_free(tml_live_view *v);

struct tml_cli_run;
/*
 * `traceml run`'s entry point, once the aggregator runs: for --mode
 * dashboard prints where the dashboard is (and the ssh -L line) and returns
 * NULL; for --mode cli returns the terminal view; NULL for summary mode.
 * port_got is the live server's port, -1 when it could not listen.
 */
tml_live_view *tml__view_start(const char *mode, int port_wanted, int port_got,
                               const char *bind, int interval_ms,
                               const struct tml_cli_run *r);

#endif
