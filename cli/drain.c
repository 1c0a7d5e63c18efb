/*
 * drain.c - the training's output under `traceml run --mode cli`.
 *
 * The full-screen view needs the training's output in a panel, and the
 * training needs a terminal (Python line-buffers a tty, progress bars
 * draw): so its stdout and stderr are a pseudo-terminal. A pty holds only
 * a few KiB; whoever reads its master side decides whether the training
 * can go on printing. That must not be the launcher, which can be stopped
 * (kill -STOP, a debugger) or killed: a stopped reader fills the pty and
 * blocks the training in write(), a dead one turns its next print into
 * EIO. Summary mode has neither problem, and --mode cli must not add them.
 *
 * So a small process, the drainer, forked before the training, owns the
 * reading:
 *
 *     training ──pty──▶ drainer ──append──▶ training_output.log ──tail──▶ view
 *                          │                                     (launcher)
 *                          └──▶ the terminal, once the launcher is gone
 *
 * It does nothing but read the pty and append to a regular file, which
 * never stays full; the view reads the file's new bytes each refresh. It
 * holds the read end of a pipe whose only writer is the launcher: EOF
 * there (the launcher exited or was killed, at once, with no polling)
 * makes it write the output to the terminal too, after giving the
 * terminal back if the launcher left it full screen, and after replaying
 * what the launcher had not shown yet (a page shared with the launcher
 * says how far it got and how it left the screen). It ends when the pty
 * reports EOF (EIO): every writer, the training and its descendants,
 * has closed it. The launcher waits for that a little at the end, never
 * longer.
 *
 * It stands outside the training's job: a session of its own (setsid), so
 * that no terminal signal (Ctrl-C, Ctrl-Z, a hangup) and no signal sent
 * to the training's process group reaches it, and SIGINT, SIGTERM, SIGHUP
 * and the job-control signals ignored besides, so that the training's last
 * words (a KeyboardInterrupt traceback) still have a reader. Stopping the
 * launcher alone (kill -STOP PID) does not stop it: it is a process, not a
 * thread. It keeps no descriptor but its own: not the slave (or EOF would
 * never come) and not the aggregator's control pipe (whose EOF tells the
 * aggregator that the launcher is gone).
 *
 * If the drainer itself is killed, the launcher notices (waitpid) and
 * reads the pty itself, as it did before the drainer existed.
 */
#include "drain.h"
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fs.h"

enum { SCREEN_FULL, SCREEN_PLAIN, SCREEN_ENDED };

/* Written by the launcher, read by the drainer when it takes over. */
struct tml_drain_share {
    atomic_int screen;             /* SCREEN_*: how the launcher left the terminal */
    atomic_ullong shown_bytes;     /* how much of the log it has shown */
};

/* On a takeover, output the launcher had not shown is replayed up to this
 * much (a launcher stopped for an hour, then killed: the log has it all). */
#define REPLAY_MAX_BYTES (64u * 1024u)

/* ---- the drainer (a forked child; never returns) ------------------- */

static void drainer_signals(void)
{
    static const int ignored[] = {SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGTSTP, SIGTTIN,
                                  SIGTTOU, SIGPIPE};
    sigset_t none;
    for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
        signal(ignored[i], SIG_IGN);
    signal(SIGWINCH, SIG_DFL);   /* the screen's handler (screen.c), inherited */
    signal(SIGCHLD, SIG_DFL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

static int same_tty(const struct termios *a, const struct termios *b)
{
    return a->c_iflag == b->c_iflag && a->c_oflag == b->c_oflag &&
           a->c_cflag == b->c_cflag && a->c_lflag == b->c_lflag &&
           memcmp(a->c_cc, b->c_cc, sizeof(a->c_cc)) == 0;
}

/* Writes the log from `from` to its end on the terminal (the last
 * REPLAY_MAX_BYTES at most, from a line start). -1 when it fails. */
static int replay(const tml_drain *d, uint64_t from)
{
    struct stat st;
    if (fstat(d->log_rd, &st) < 0)
        return 0;
    uint64_t end = (uint64_t)st.st_size;
    int cut = end > from + REPLAY_MAX_BYTES;
    if (cut)
        from = end - REPLAY_MAX_BYTES;
    char buf[16384];
    while (from < end) {
        size_t want = end - from < sizeof(buf) ? (size_t)(end - from) : sizeof(buf);
        ssize_t r = pread(d->log_rd, buf, want, (off_t)from);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        from += (uint64_t)r;
        const char *p = buf;
        if (cut) {   /* from the first whole line */
            const char *nl = memchr(buf, '\n', (size_t)r);
            if (!nl)
                continue;
            cut = 0;
            p = nl + 1;
        }
        if (tml__write_all(1, p, (size_t)(buf + r - p)) < 0)
            return -1;
    }
    return 0;
}

/* The launcher is gone: from now on the output goes to the terminal too.
 * Returns the terminal's fd, or -1 when it cannot be written. */
static int take_over(const tml_drain *d, pid_t launcher, const struct termios *screen_tty)
{
    int screen = atomic_load(&d->share->screen);
    uint64_t shown = atomic_load(&d->share->shown_bytes);
    if (screen == SCREEN_FULL) {
        /* the settings back, unless someone (a shell) has set others since */
        struct termios now;
        if (d->have_tty && screen_tty && tcgetattr(1, &now) == 0 && same_tty(&now, screen_tty))
            tcsetattr(1, TCSANOW, &d->tty_before);
        tml__write_all(1, d->leave_screen, strlen(d->leave_screen));
    }
    if (screen != SCREEN_ENDED) {
        char note[4400];
        int n = snprintf(note, sizeof(note), "traceml: the launcher (pid %d) is gone; the "
                         "training goes on and its output follows (all of it: %s)\n",
                         (int)launcher, d->log_path);
        if (n > 0)
            tml__write_all(1, note, (size_t)n < sizeof(note) ? (size_t)n : sizeof(note) - 1);
    }
    return replay(d, shown) < 0 ? -1 : 1;
}

__attribute__((noreturn))
static void drainer(const tml_drain *d, int alive_rd)
{
    pid_t launcher = getppid();
    drainer_signals();
    setsid();
    prctl(PR_SET_NAME, "traceml-drain", 0, 0, 0);
    int nul = open("/dev/null", O_RDONLY);
    if (nul > 0)
        dup2(nul, 0);
    int keep[] = {d->master, d->log_wr, d->log_rd, alive_rd};
    tml__cli_close_all_but(keep, 4);
    struct termios screen_tty;   /* the terminal as full screen has it */
    int have_screen = tcgetattr(1, &screen_tty) == 0;
    char buf[65536];
    int term = -1;
    for (;;) {
        struct pollfd pf[2] = {{d->master, POLLIN, 0}, {alive_rd, POLLIN, 0}};
        if (poll(pf, alive_rd >= 0 ? 2 : 1, -1) < 0) {
            if (errno != EINTR)
                tml__sleep_ms(10);
            continue;
        }
        if (alive_rd >= 0 && pf[1].revents) {   /* nothing is written there: EOF */
            close(alive_rd);
            alive_rd = -1;
            term = take_over(d, launcher, have_screen ? &screen_tty : NULL);
        }
        if (!pf[0].revents)
            continue;
        ssize_t r = read(d->master, buf, sizeof(buf));
        if (r < 0 && (errno == EINTR || errno == EAGAIN)) {
            if (pf[0].revents & POLLHUP)
                tml__sleep_ms(1);
            continue;
        }
        if (r <= 0)
            break;   /* EIO: every writer has closed the slave */
        tml__write_all(d->log_wr, buf, (size_t)r);   /* a full disk costs the log, not the run */
        if (term >= 0 && tml__write_all(1, buf, (size_t)r) < 0)
            term = -1;   /* the terminal is gone (hung up) */
    }
    _exit(0);
}

/* ---- the launcher's side ------------------------------------------- */

static int open_pty(tml_drain *d)
{
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0)
        return -1;
    if (grantpt(m) < 0 || unlockpt(m) < 0)
        goto fail;
    char name[128];
    if (ptsname_r(m, name, sizeof(name)) != 0)
        goto fail;
    int s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (s < 0)
        goto fail;
    struct termios t;
    if (tcgetattr(s, &t) == 0) {
        t.c_oflag &= ~(tcflag_t)OPOST;   /* "\n" stays "\n" */
        t.c_lflag &= ~(tcflag_t)ECHO;
        tcsetattr(s, TCSANOW, &t);
    }
    fcntl(m, F_SETFL, fcntl(m, F_GETFL) | O_NONBLOCK);
    d->master = m;
    d->slave = s;
    return 0;
fail:
    close(m);
    return -1;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static void release_fds(tml_drain *d)
{
    close_fd(&d->slave);
    close_fd(&d->master);
    close_fd(&d->log_wr);
    close_fd(&d->log_rd);
    if (d->share)
        munmap(d->share, sizeof(*d->share));
    d->share = NULL;
}

int tml__drain_start(tml_drain *d, const char *log_path, const struct termios *tty_before,
                     const char *leave_screen)
{
    memset(d, 0, sizeof(*d));
    d->slave = d->master = d->log_wr = d->log_rd = d->alive_wr = -1;
    snprintf(d->log_path, sizeof(d->log_path), "%s", log_path);
    snprintf(d->leave_screen, sizeof(d->leave_screen), "%s", leave_screen ? leave_screen : "");
    if (tty_before) {
        d->tty_before = *tty_before;
        d->have_tty = 1;
    }
    struct stat st;
    int alive[2];
    /* O_NOFOLLOW: never the file a link planted at the log's name points at */
    d->log_wr = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
    d->log_rd = open(log_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (d->log_wr < 0 || d->log_rd < 0 || fstat(d->log_rd, &st) < 0)
        goto fail;
    d->read_bytes = (uint64_t)st.st_size;
    void *page = mmap(NULL, sizeof(*d->share), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED)
        goto fail;
    d->share = page;
    atomic_init(&d->share->screen, SCREEN_FULL);
    atomic_init(&d->share->shown_bytes, d->read_bytes);
    if (open_pty(d) < 0 || pipe2(alive, O_CLOEXEC) < 0)
        goto fail;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0)
        drainer(d, alive[0]);
    close(alive[0]);
    if (pid < 0) {
        close(alive[1]);
        goto fail;
    }
    d->pid = pid;
    d->alive_wr = alive[1];
    return 0;
fail:
    release_fds(d);
    return -1;
}

void tml__drain_started(tml_drain *d)
{
    close_fd(&d->slave);
}

static void reap(tml_drain *d)
{
    if (d->pid <= 0)
        return;
    pid_t p = waitpid(d->pid, NULL, WNOHANG);
    if (p == d->pid || (p < 0 && errno == ECHILD))
        d->pid = 0;
}

/* With the drainer gone (killed; one that ended saw the pty's EOF, which
 * this then finds too): the pty into the log here. */
static void pump_pty(tml_drain *d)
{
    char buf[16384];
    for (int k = 0; k < 64 && d->master >= 0; k++) {
        ssize_t r = read(d->master, buf, sizeof(buf));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (r <= 0) {
            close_fd(&d->master);
            return;
        }
        if (d->log_wr >= 0)
            tml__write_all(d->log_wr, buf, (size_t)r);
    }
}

void tml__drain_pump(tml_drain *d, tml_drain_sink sink, void *ctx)
{
    if (d->log_rd < 0)
        return;
    reap(d);
    if (d->pid == 0)
        pump_pty(d);
    char buf[16384];
    for (int k = 0; k < 64; k++) {
        ssize_t r = pread(d->log_rd, buf, sizeof(buf), (off_t)d->read_bytes);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        sink(ctx, buf, (size_t)r);
        d->read_bytes += (uint64_t)r;
        atomic_store(&d->share->shown_bytes, d->read_bytes);
    }
}

int tml__drain_done(const tml_drain *d)
{
    return d->pid == 0 && d->master < 0;
}

void tml__drain_set_screen(tml_drain *d, int full_screen)
{
    if (d->share)
        atomic_store(&d->share->screen, full_screen ? SCREEN_FULL : SCREEN_PLAIN);
}

void tml__drain_resize(tml_drain *d, const struct winsize *ws)
{
    if (d->master >= 0)
        ioctl(d->master, TIOCSWINSZ, ws);
}

void tml__drain_release(tml_drain *d)
{
    if (d->share) {
        atomic_store(&d->share->shown_bytes, d->read_bytes);
        atomic_store(&d->share->screen, SCREEN_ENDED);
    }
    release_fds(d);
    reap(d);
    /* A drainer still running (descendants of the training hold the pty)
     * keeps its reader: alive_wr stays open until the launcher exits, so
     * that their late output comes after the summary, not through it. */
    if (d->pid == 0)
        close_fd(&d->alive_wr);
}
