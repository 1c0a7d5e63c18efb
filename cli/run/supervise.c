/*
 * supervise.c - the training child and the launcher's signals: fork and
 * exec the training, then wait for it, forwarding a SIGINT or SIGTERM
 * that was the launcher's alone (the essay in run.c), drawing the live
 * view, and noting the aggregator's death.
 *
 * The signal handler's three counters are this file's only state: a
 * handler can reach nothing else (no parameter), so they are file-scope
 * statics of type volatile sig_atomic_t, read in this file only.
 */
#include "run.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fs.h"

static volatile sig_atomic_t got_int, int_code, got_term;

static void on_signal(int sig, siginfo_t *info, void *ctx)
{
    (void)ctx;
    if (sig == SIGINT) {
        if (!got_int)
            int_code = info ? info->si_code : 0;
        got_int++;
    } else {
        got_term = sig;
    }
}

void tml__run_install_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO;   /* no SA_RESTART: waits wake up */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static void child_signals_default(void)
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
}

pid_t tml__run_start_training(const tml_run_ctx *c, char **argv)
{
    const char *prog = c->prog;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    child_signals_default();
    int fd = tml__view_child_fd(c->live_view);
    if (fd >= 0) {   /* the terminal view's output panel */
        dup2(fd, 1);
        dup2(fd, 2);
    }
    execve(prog, argv, c->env.v);
    fprintf(stderr, "traceml: error: cannot run '%s': %s\n", prog, strerror(errno));
    _exit(127);
}

/* 1 when a pending SIGINT shows in pid's /proc status (it blocks SIGINT). */
static int sigint_pending_in(pid_t pid)
{
    char path[64], *buf = NULL;
    size_t len;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if (tml__read_file(path, 1 << 16, &buf, &len) < 0)
        return 0;
    int found = 0;
    const char *keys[] = {"\nSigPnd:", "\nShdPnd:"};
    for (int k = 0; k < 2; k++) {
        const char *p = strstr(buf, keys[k]);
        if (p) {
            unsigned long long mask = strtoull(p + strlen(keys[k]), NULL, 16);
            if (mask & (1ull << (SIGINT - 1)))
                found = 1;
        }
    }
    free(buf);
    return found;
}

/* Waits for the training; handles Ctrl-C and the aggregator's death. */
int tml__run_supervise(const tml_run_ctx *c, pid_t train, tml_run_agg *ap, const char *run_dir,
                     int *interrupted)
{
    int status = 0, forwarded_int = 0, killed = 0, forwarded_term = 0;
    int64_t int_at = 0, kill_at = 0;
    for (;;) {
        int st;
        /* ours only: the terminal view's drainer is the view's to reap */
        if (waitpid(train, &st, WNOHANG) == train) {
            status = st;
            break;
        }
        if (ap && ap->alive && waitpid(ap->pid, &st, WNOHANG) == ap->pid)
            tml__run_agg_reap(ap, run_dir, st);
        int64_t now = tml__mono_ms();
        if (got_int && !int_at) {
            int_at = now;
            *interrupted = 1;
        }
        /* decide after 20 ms, once a group-wide signal has reached everyone */
        if (int_at && !forwarded_int && now - int_at >= 20) {
            forwarded_int = 1;
            int group = int_code == SI_KERNEL ||
                        (ap && ap->alive && sigint_pending_in(ap->pid));
            if (!group)
                kill(train, SIGINT);
            kill_at = now + 1000;
        }
        if (got_term && !forwarded_term) {
            forwarded_term = 1;
            *interrupted = 1;
            kill(train, got_term);
            kill_at = now + 1000;
        }
        if (!killed && ((kill_at && now >= kill_at) || got_int > 1)) {
            killed = 1;
            kill(train, SIGKILL);
        }
        if (c->live_view)
            tml__view_poll(c->live_view, 5);   /* draws, reads the training's output */
        else
            tml__sleep_ms(5);
    }
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    /* a KeyboardInterrupt raised in the script ends Python by SIGINT, as
     * Ctrl-C does: interrupted either way */
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGINT)
        *interrupted = 1;
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 1;
}

int tml__run_exit_code(int code, int interrupted)
{
    return interrupted && got_int ? 130 : code;
}
