/*
 * finalize.c - the run's summary: asked of the aggregator, which sends
 * the box back on its status pipe; when it died or did not answer in
 * time, rebuilt here from telemetry.sqlite, with a line that says why it
 * is partial and how much of the run the telemetry covers.
 */
#include "run.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agg/agg.h"
#include "base/clock.h"
#include "base/env.h"
#include "base/fs.h"
#include "base/strbuf.h"
#include "model/progress.h"

/* What the aggregator says on its status pipe after "port": the box
 * ("summary <bytes>\n" and the bytes) and "done" (cmd_aggregate.c). */
typedef struct agg_reply {
    tml_strbuf sb;
    int eof;
} agg_reply;

/* Reads what the pipe holds, waiting up to wait_ms for it; 1 when some
 * came. Read while waiting, so a box larger than the pipe never blocks
 * the aggregator. */
static int read_reply(const tml_run_agg *ap, agg_reply *r, int wait_ms)
{
    struct pollfd pf = {r->eof ? -1 : ap->st, POLLIN, 0};   /* -1: just waits */
    char buf[16384];
    if (poll(&pf, 1, wait_ms) <= 0)
        return 0;
    if (!(pf.revents & (POLLIN | POLLHUP))) {
        r->eof = 1;   /* POLLERR, POLLNVAL: nothing more will come */
        return 0;
    }
    ssize_t n = read(ap->st, buf, sizeof(buf));
    if (n > 0 && r->sb.len < (64u << 20)) {
        tml__sb_add(&r->sb, buf, (size_t)n);
        return 1;
    }
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
        r->eof = 1;
    return 0;
}

/* The box the aggregator sent, NULL when none came whole. */
static char *reply_summary(const agg_reply *r)
{
    static const char key[] = "summary ";
    const char *p = r->sb.buf;
    char *end;
    if (r->sb.failed || !p || r->sb.len < sizeof(key) || memcmp(p, key, sizeof(key) - 1) != 0)
        return NULL;
    unsigned long long n = strtoull(p + sizeof(key) - 1, &end, 10);
    size_t head = (size_t)(end - p) + 1;
    if (*end != '\n' || n > r->sb.len || head > r->sb.len - n)
        return NULL;
    return strndup(p + head, (size_t)n);
}

/* Asks the aggregator to finalize; NULL when it did not (then: fallback).
 * An aggregator that exits 0 sent its whole box, even when the run folder
 * could not take the files (its NOT SAVED line says so). */
char *tml__launch_finalize_via_agg(const tml_run_ctx *c, tml_run_agg *ap,
                                     const tml_cli_run *r, const char *status, int code,
                                     int width)
{
    if (!ap->alive)
        return NULL;
    char line[96];
    snprintf(line, sizeof(line), "finalize %s %d %d\n", status, code, width);
    ssize_t w = write(ap->ctl, line, strlen(line));
    int interrupted = strcmp(status, "interrupted") == 0;
    double timeout_s = c->o.finalize_timeout_s;
    int64_t deadline = tml__mono_ms() + (interrupted ? 1300 : (int64_t)(timeout_s * 1000));
    int st = 0, done = 0;
    agg_reply reply = {TML_STRBUF_INIT, 0};
    while (w > 0) {
        pid_t p = waitpid(ap->pid, &st, WNOHANG);
        if (p == ap->pid) {
            done = 1;
            break;
        }
        if (tml__mono_ms() >= deadline)
            break;
        read_reply(ap, &reply, 5);
    }
    while (done && read_reply(ap, &reply, 0))
        ;
    char *text = reply_summary(&reply);
    tml__sb_release(&reply.sb);
    if (!done) {
        tml__run_log(r->dir, "launcher", "the aggregator did not finish in time; "
                     "building the summary from telemetry.sqlite");
        tml__launch_agg_lost(ap, "did not finish the summary within %g s",
                        interrupted ? 1.0 : timeout_s);
        ap->hung = 1;
        kill(ap->pid, SIGKILL);
        waitpid(ap->pid, &st, 0);
        tml__launch_agg_exited(ap, st);
        ap->alive = 0;
        free(text);
        return NULL;
    }
    ap->alive = 0;
    tml__launch_agg_exited(ap, st);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        tml__launch_agg_reap(ap, r->dir, st);
        free(text);
        return NULL;
    }
    char path[4200];
    size_t len;
    snprintf(path, sizeof(path), "%s/final_summary.txt", r->dir);
    if (!text && tml__read_file(path, 64u << 20, &text, &len) < 0)
        return NULL;
    return text;
}

/* How much of the run telemetry.sqlite covers, after "the aggregator
 * ...": of the steps this node's processes traced (their progress files:
 * a count, not an estimate), else of an estimate at the pace of the last
 * steps, from the moment the last stored one began on a rank of this
 * host (here: the same monotonic clock), else from the loss. */
static void coverage(const tml_cli_run *r, tml_agg *agg, const tml_run_pace *pace, int here,
                     int64_t lost, int64_t ended_ns, char *out, size_t cap)
{
    uint64_t seen = tml__agg_steps_seen(agg);
    tml_progress_sum ps;
    tml__progress_read(r->dir, &ps);
    int counted = ps.steps > seen && ps.last_end_ns >= r->start_mono_ns &&
                  ps.last_end_ns <= ended_ns;
    double est = NAN;
    if (!isnan(pace->steps_per_s) && here)
        est = (double)pace->last_step + 1 +
              pace->steps_per_s * (double)(ended_ns - pace->last_start_ns) / 1e9;
    else if (!isnan(pace->steps_per_s) && ended_ns > lost)
        est = (double)seen + pace->steps_per_s * (double)(ended_ns - lost) / 1e9;
    if (seen == 0 && counted)
        snprintf(out, cap, "; telemetry.sqlite holds none of the %llu steps traced on this node",
                 (unsigned long long)ps.steps);
    else if (seen == 0)
        snprintf(out, cap, "; telemetry.sqlite holds no step");
    else if (counted)
        snprintf(out, cap, "; telemetry covers steps 0-%llu, of %llu traced on this node",
                 (unsigned long long)(seen - 1), (unsigned long long)ps.steps);
    else if (est >= (double)seen + 1)
        snprintf(out, cap, "; telemetry covers steps 0-%llu, of ~%.0f at the pace of its last "
                 "steps", (unsigned long long)(seen - 1), est);
    else
        snprintf(out, cap, "; telemetry covers steps 0-%llu", (unsigned long long)(seen - 1));
}

/* Why a summary rebuilt from telemetry.sqlite is partial: what happened
 * to the aggregator, when, and how much of the run the telemetry covers.
 * A hung aggregator is dated by the last step it stored (on a rank of
 * this host), not by our giving up on it. ended_ns: when the training
 * ended (tml__mono_ns). */
static void partial_reason(const tml_run_agg *ap, const tml_cli_run *r, tml_agg *agg,
                           int64_t ended_ns, char *out, size_t cap)
{
    char host[64] = "";
    tml_run_pace pace;
    gethostname(host, sizeof(host) - 1);
    tml__run_pace(tml__agg_run(agg), host, &pace);
    int here = pace.rank >= 0 && pace.last_start_ns >= r->start_mono_ns &&
               pace.last_start_ns <= ended_ns;
    if (!here)   /* only its pace then: its clock is another host's */
        tml__run_pace(tml__agg_run(agg), NULL, &pace);
    int64_t lost = ap->lost_ns ? ap->lost_ns : ended_ns;
    if (ap->hung && here)
        lost = pace.last_start_ns;
    double into = (double)(lost - r->start_mono_ns) / 1e9;
    int n = ap->hung && here
            ? snprintf(out, cap, "the aggregator stopped answering %.1f s into the run (its "
                       "last step reached it then; it %s)", into > 0 ? into : 0.0, ap->lost)
            : snprintf(out, cap, "the aggregator %s %.1f s into the run",
                       ap->lost[0] ? ap->lost : "was lost", into > 0 ? into : 0.0);
    if (n > 0 && (size_t)n < cap)
        coverage(r, agg, &pace, here, lost, ended_ns, out + n, cap - (size_t)n);
}

char *tml__launch_finalize_here(const tml_run_ctx *c, const tml_run_agg *ap, const tml_cli_run *r,
                           const char *status, int code, int width, int64_t ended_ns)
{
    const tml_dist *d = &c->o.dist;
    tml_agg *agg = NULL;
    char *text = NULL;
    tml_agg_opts ao = {.run_name = r->name, .run_id = r->id, .run_dir = r->dir,
                       .world_size = d->enabled ? (int32_t)d->world_size : 0,
                       .nnodes = d->enabled ? (int32_t)d->nnodes : 0,
                       .start_mono_ns = r->start_mono_ns,
                       .window_steps = (int)c->o.window_steps};
    tml__cli_agg_env(&ao.thresholds, &ao.window_steps, &ao.memory_mb);
    tml__run_log(r->dir, "launcher", "finalizing from telemetry.sqlite");
    if (tml__agg_open_existing(&ao, &agg) == 0) {
        char why[256];
        partial_reason(ap, r, agg, ended_ns, why, sizeof(why));
        tml__agg_set_partial(agg, why);
        tml__agg_set_launch(agg, c->launch_kind);
        tml__agg_set_applied(agg, c->apply_settings);
        tml__agg_set_watch(agg, c->watch);
        tml__agg_set_html_report(agg, c->o.html);
        tml__agg_set_tune_trial(agg, tml__env_bool(TML_ENV_TUNE_TRIAL));
        tml__agg_finalize(agg, status, code, width, &text);
        tml__agg_free(agg);
    }
    return text;
}
