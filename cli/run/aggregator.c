/*
 * aggregator.c - the aggregator child, `traceml __aggregate`: a process
 * of its own so that its death never touches the training. Started with
 * the signals the launcher passes on blocked (run.c), its output into traceml.log, a
 * control pipe (finalize) and a status pipe ("port N [live M]", then the
 * summary: finalize.c).
 */
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/env.h"

void tml__launch_agg_lost(tml_run_agg *ap, const char *fmt, ...)
{
    va_list va;
    va_start(va, fmt);
    vsnprintf(ap->lost, sizeof(ap->lost), fmt, va);
    va_end(va);
    ap->lost_ns = tml__mono_ns();
}

/* In the forked child: the aggregator process, `traceml __aggregate`, with
 * the signals the launcher passes on blocked (run.c), its output into traceml.log and
 * the control and status pipes kept open. Never returns. */
__attribute__((noreturn))
static void exec_aggregator(const tml_run_ctx *c, const tml_cli_run *r, int ctl, int st)
{
    const tml_dist *d = &c->o.dist;
    char logp[4200], cfd[16], sfd[16];
    snprintf(logp, sizeof(logp), "%s/traceml.log", r->dir);
    snprintf(cfd, sizeof(cfd), "%d", ctl);
    snprintf(sfd, sizeof(sfd), "%d", st);
    tml__launch_signals_for_aggregator();
    fcntl(ctl, F_SETFD, 0);
    fcntl(st, F_SETFD, 0);
    int nul = open("/dev/null", O_RDONLY);
    int log = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0644);
    if (nul >= 0)
        dup2(nul, 0);
    if (log >= 0) {   /* never the user's terminal */
        dup2(log, 1);
        dup2(log, 2);
    }
    setenv(tml__env_name(TML_ENV_SECRET), r->secret, 1);
    tml_run_argv a = {.n = 0};
    const char *fixed[] = {"traceml", "__aggregate", "--run-dir", r->dir, "--run-name", r->name,
                           "--run-id", r->id, "--control-fd", cfd, "--status-fd", sfd,
                           "--launch", tml__launch_word(c->launch_kind)};
    for (size_t k = 0; k < sizeof(fixed) / sizeof(fixed[0]); k++)
        tml__launch_arg(&a, fixed[k]);
    if (d && d->enabled) {   /* expected ranks and nodes: the summary names those missing */
        tml__launch_arg(&a, "--world-size");
        tml__launch_arg_long(&a, d->world_size);
        tml__launch_arg(&a, "--nnodes");
        tml__launch_arg_long(&a, d->nnodes);
    }
    if (c->apply_settings[0]) {   /* --apply: the Next lines keep to it */
        tml__launch_arg(&a, "--applied");
        tml__launch_arg(&a, c->apply_settings);
    }
    if (d && d->followers) {
        /* other launchers find it at a known port; other hosts need
         * more than loopback */
        tml__launch_arg(&a, "--port");
        tml__launch_arg_long(&a, d->agg_port);
        if (d->multi_host) {
            tml__launch_arg(&a, "--bind");
            tml__launch_arg(&a, c->o.agg_bind);
        }
    }
    if (c->live_port_wanted >= 0) {
        tml__launch_arg(&a, "--live-port");
        tml__launch_arg_long(&a, c->live_port_wanted);
        tml__launch_arg(&a, "--live-interval-ms");
        tml__launch_arg_long(&a, c->live_interval_ms);
        if (c->o.live_bind) {
            tml__launch_arg(&a, "--live-bind");
            tml__launch_arg(&a, c->o.live_bind);
        }
    }
    tml__launch_agg_options(&c->o, &a);   /* --html-report, --window-steps: the table's */
    if (c->watch)
        tml__launch_arg(&a, "--watch");
    if (a.full) {   /* into traceml.log; the launcher says the aggregator did not start */
        fprintf(stderr, "traceml: the aggregator's command line is over %d words\n",
                TML_RUN_ARGV_MAX);
        _exit(127);
    }
    execv("/proc/self/exe", a.v);
    _exit(127);
}

void tml__launch_arg(tml_run_argv *a, const char *s)
{
    if (a->n >= TML_RUN_ARGV_MAX) {
        a->full = 1;
        return;
    }
    a->v[a->n++] = (char *)s;
    a->v[a->n] = NULL;
}

void tml__launch_arg_long(tml_run_argv *a, long v)
{
    if (a->n < TML_RUN_ARGV_MAX)
        snprintf(a->num[a->n], sizeof(a->num[a->n]), "%ld", v);
    tml__launch_arg(a, a->n < TML_RUN_ARGV_MAX ? a->num[a->n] : NULL);
}

/* The aggregator's first status line, "port N [live M]", within 5 s. */
static int read_ports(tml_run_ctx *c, tml_run_agg *ap)
{
    char line[64];
    size_t n = 0;
    int64_t deadline = tml__mono_ms() + 5000;
    while (n < sizeof(line) - 1) {
        int64_t left = deadline - tml__mono_ms();
        if (left <= 0)
            break;
        struct pollfd pf = {ap->st, POLLIN, 0};
        int pr = poll(&pf, 1, (int)left);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            break;
        ssize_t rd = read(ap->st, line + n, 1);
        if (rd <= 0)
            break;
        if (line[n] == '\n')
            break;
        n++;
    }
    line[n] = '\0';
    int port = 0;
    if (sscanf(line, "port %d", &port) != 1 || port <= 0)
        return -1;
    ap->port = port;
    if (sscanf(line, "port %*d live %d", &c->live_port_got) != 1)
        c->live_port_got = -1;
    return 0;
}

int tml__launch_agg_start(tml_run_ctx *c, tml_run_agg *ap, const tml_cli_run *r)
{
    int ctl[2], st[2];
    memset(ap, 0, sizeof(*ap));
    ap->ctl = ap->st = -1;
    if (pipe2(ctl, O_CLOEXEC) < 0)
        return -1;
    if (pipe2(st, O_CLOEXEC) < 0) {
        close(ctl[0]);
        close(ctl[1]);
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0)
        exec_aggregator(c, r, ctl[0], st[1]);
    close(ctl[0]);
    close(st[1]);
    if (pid < 0) {
        close(ctl[1]);
        close(st[0]);
        return -1;
    }
    ap->pid = pid;
    ap->alive = 1;
    ap->ctl = ctl[1];
    ap->st = st[0];
    return read_ports(c, ap);
}

void tml__launch_agg_exited(tml_run_agg *ap, int status)
{
    ap->exited = 1;
    ap->exit_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

void tml__launch_agg_reap(tml_run_agg *ap, const char *run_dir, int status)
{
    ap->alive = 0;
    tml__launch_agg_exited(ap, status);
    if (WIFSIGNALED(status))
        tml__launch_agg_lost(ap, "was killed by signal %d", WTERMSIG(status));
    else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        tml__launch_agg_lost(ap, "exited with status %d", WEXITSTATUS(status));
    if (WIFSIGNALED(status))
        tml__run_log(run_dir, "launcher",
                     "the aggregator (pid %d) was killed by signal %d; training continues, "
                     "the summary will be built from telemetry.sqlite",
                     (int)ap->pid, WTERMSIG(status));
    else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        tml__run_log(run_dir, "launcher", "the aggregator (pid %d) exited with status %d",
                     (int)ap->pid, WEXITSTATUS(status));
}
