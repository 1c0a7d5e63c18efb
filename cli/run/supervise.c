/*
 * supervise.c - the training child: fork and exec the training with the
 * signal dispositions the launcher inherited, then wait for it, passing
 * on the signals that were the launcher's alone (signals.c), drawing the
 * live view, and noting the aggregator's death.
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

pid_t tml__launch_start_training(const tml_run_ctx *c, char **argv)
{
    const char *prog = c->prog;
    fflush(stdout);
    fflush(stderr);
    sigset_t was;
    tml__launch_signals_block(&was);   /* none lost between fork and exec */
    pid_t pid = fork();
    if (pid != 0) {
        tml__launch_signals_restore(&was);
        return pid;
    }
    tml__launch_signals_for_child();
    int fd = tml__view_child_fd(c->live_view);
    if (fd >= 0) {   /* the terminal view's output panel */
        dup2(fd, 1);
        dup2(fd, 2);
    }
    execve(prog, argv, c->env.v);
    fprintf(stderr, "traceml: error: cannot run '%s': %s\n", prog, strerror(errno));
    _exit(127);
}

/* Waits for the training; passes on signals, kills it --kill-after
 * seconds after a signal that asks it to end (never on a clock of its
 * own), notes the aggregator's death. */
int tml__launch_supervise(const tml_run_ctx *c, pid_t train, tml_run_agg *ap, const char *run_dir,
                       tml_run_end *end)
{
    int status = 0, killed = 0;
    int64_t kill_at = 0;
    for (;;) {
        int st;
        /* ours only: the terminal view's drainer is the view's to reap */
        if (waitpid(train, &st, WNOHANG) == train) {
            status = st;
            break;
        }
        if (ap && ap->alive && waitpid(ap->pid, &st, WNOHANG) == ap->pid)
            tml__launch_agg_reap(ap, run_dir, st);
        int64_t now = tml__mono_ms();
        int ending = tml__launch_pass_signals(train, now);
        if (ending) {
            end->interrupted = 1;
            if (c->o.kill_after_s > 0 && !kill_at)
                kill_at = now + (int64_t)(c->o.kill_after_s * 1000.0);
        }
        if (kill_at && !killed && now >= kill_at) {
            killed = 1;
            tml__cli_warn("the training (pid %d) did not end within --kill-after %g s of "
                          "the signal; SIGKILL", (int)train, c->o.kill_after_s);
            kill(train, SIGKILL);
        }
        if (c->live_view)
            tml__view_poll(c->live_view, 5);   /* draws, reads the training's output */
        else
            tml__sleep_ms(5);
    }
    end->signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    /* a group's signal may end the training before it was looked at; a
     * KeyboardInterrupt raised in the script ends Python by SIGINT, as
     * Ctrl-C does: interrupted either way */
    if (tml__launch_asked_to_end() || end->signal == SIGINT)
        end->interrupted = 1;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return end->signal ? 128 + end->signal : 1;
}
