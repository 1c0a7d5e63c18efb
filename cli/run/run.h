/*
 * run.h - the wing of `traceml run` (and `traceml watch`), private to
 * cli/run/ and to `traceml tune` (cli/cmd_tune.c, whose trials take
 * `traceml run`'s options, parsed and checked here): one context struct, tml_run_ctx, that every step takes as its
 * first parameter instead of reading globals, and the steps themselves,
 * one file each:
 *
 *     run.c        the command: parse, validate, launch, the traced run
 *     options.c    the option table, the command line, the project's file
 *     check.c      everything checked before anything is created
 *     env.c        the training's environment, zero-edit tracing's folder
 *     aggregator.c the aggregator child: exec, ports, its death
 *     finalize.c   the summary: via the aggregator, else rebuilt here
 *     supervise.c  signals, the training child, waiting for it
 *     follow.c     several nodes: the shared identity, a follower's launch
 *     guard.c      a guarded run's node outcomes (traceml.yaml's guard:)
 *
 * The functions here are named tml__launch_<what> and act on a
 * tml_run_ctx (or the part named); model/run.h's tml__run_* act on a
 * tml_run, the run's model.
 */
#ifndef TML_CLI_RUN_H
#define TML_CLI_RUN_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../cli.h"
#include "../dist.h"
#include "../live_view.h"
#include "../python.h"
#include "agg/rundir.h"
#include "judge/tune.h"
#include "traceml/traceml.h"

/* the training's environment: environ's entries, then ours */
typedef struct tml_run_env {
    char **v;
    size_t n, cap;
    size_t owned_from;   /* v[owned_from..n) were malloc'd here */
} tml_run_env;

/* The options, from the project's file and then the command line
 * (options.c). */
typedef struct tml_run_opts {
    const char *mode, *run_name, *logs_dir, *master_addr, *python;
    long nproc, nnodes, node_rank, master_port, dashboard_port;
    double interval;
    long window_steps;     /* --window-steps, 0 = the default (10,000) */
    int html, disabled, dashdash;
    int no_auto_trace;     /* --no-auto-trace: no zero-edit tracing */
    int deep_dive, no_deep_dive;   /* --deep-dive, --no-deep-dive (TRACEML_DEEP_DIVE) */
    char **cmd;            /* SCRIPT args... or COMMAND args... */
    int ncmd;
    int cmd_owned;         /* cmd was allocated (SCRIPT args...), not argv's */
    long agg_port;         /* --aggregator-port, 0 = master port + 1 */
    int addr_given, port_given;
    tml_dist dist;         /* the distributed shape (dist.h) */
    tml_python py;         /* the interpreter of SCRIPT (python.h) */
    char follower_dir[160];   /* a follower's own folder name */
    char slurm_name[128];     /* a Slurm run's name when none was given */
    const char *live_bind;    /* --dashboard-bind, NULL: the live server's default */
    const char *apply;        /* --apply FILE: a tune.json whose settings the training gets */
    const char *agg_bind;     /* --aggregator-bind-host: node 0's aggregator, multi-host */
    double finalize_timeout_s;   /* --finalize-timeout-sec: fractions too (0.5.0's float) */
    double kill_after_s;         /* --kill-after: SIGKILL this long after a signal, 0 never */
} tml_run_opts;

/* One `traceml run` (or `traceml watch`): its options and what the launch
 * learns on the way, passed to every step instead of kept in globals. */
typedef struct tml_run_ctx {
    tml_run_opts o;
    int watch;                 /* `traceml watch`: system and process metrics only */
    const char *cmd_name;      /* "run" or "watch", for the error lines */
    tml_cli_config project;    /* the project's file (config_file.c), for the run's life:
                                * a value still pointing into it came from it */
    char prog[4096];           /* what is exec'd: the interpreter, or COMMAND */
    char python_from[80];      /* where --python came from, quoted by o.py */
    char origin[64];           /* "traceml.yaml:3": tml__cli_origin()'s, for the run's life */
    tml_launch launch_kind;    /* how the training is run, for a summary in which no
                                * rank reported */
    const char *zero_edit_script;   /* SCRIPT when zero-edit tracing is on */
    char apply_settings[TML_TUNE_SETTING];   /* --apply's settings (TRACEML_TUNE_SETTINGS), "" none */
    char zero_edit_dir[4200];  /* <run>/zero-edit, once written */
    /* live views (--mode cli / dashboard, live_view.h): what the aggregator
     * is asked to serve (-1: none), what it serves, and the terminal view
     * supervise() keeps drawing */
    int live_port_wanted, live_port_got, live_interval_ms;
    tml_live_view *live_view;
    tml_run_env env;           /* the training's environment */
    int died_of;               /* the training died of this signal: so does the launcher */
    char launch_json[6144];    /* the manifest's launch block (TraceML 0.5.0's) */
} tml_run_ctx;

/* The aggregator child (aggregator.c) as the launcher sees it. */
typedef struct tml_run_agg {
    pid_t pid;
    int ctl, st;     /* our ends: write control, read status */
    int port;
    int alive;
    char lost[96];   /* what happened to it ("was killed by signal 9"), "" */
    int64_t lost_ns;  /* when (tml__mono_ns), 0 not lost */
    int hung;         /* alive but did not answer: lost_ns is when we gave up */
    int exited, exit_code;   /* once reaped: its exit code (128 + signal) */
} tml_run_agg;

/* run.c: a manifest of run r as it starts (status running, the command
 * targv, the distributed shape), for tml__manifest_write. */
void tml__launch_manifest_start(tml_run_ctx *c, const tml_cli_run *r, tml_manifest *m,
                             char **targv);

/* guard.c: a guarded run (traceml.yaml's guard:), TraceML 0.5.0's way.
 * Writes this node's <logs>/<run>/nodes/node_<k>/guard_outcome.json
 * (nothing without a guard, or when node 0's run folder is not on this
 * disk: a note says so). */
void tml__launch_guard_record(const tml_run_ctx *c, const tml_cli_run *r, int exit_code);
/* Node 0: every node's outcome, waiting up to timeout_s for them, as the
 * manifest's guard.training JSON appended to out. -1 without a guard. */
int tml__launch_guard_collect(const tml_run_ctx *c, const tml_cli_run *r, double timeout_s,
                           tml_strbuf *out);

/* options.c: fills c->o from the project's file, then argv; dies on a
 * bad option (exit 2), exits 0 after --help. */
void tml__launch_parse(tml_run_ctx *c, int argc, char **argv);
/* Frees what tml__launch_parse allocated: the command's array and the words
 * --args split (those of argc/argv, the same, are not). */
void tml__launch_opts_release(tml_run_opts *o, int argc, char **argv);
/* 1: name ("--html-report") is an option of `traceml run` without a value. */
int tml__launch_is_flag(const char *name);
/* "traceml.yaml:3" in buf when value is the one that line of the
 * project's file gave (buf returned), else NULL. */
const char *tml__launch_from_file(const tml_run_ctx *c, const char *value, char *buf,
                               size_t cap);

/* check.c: everything that can be checked before creating anything, and
 * c->prog (the interpreter, or COMMAND); 0, or TML_EXIT_USAGE after one
 * error line (naming the project file's line a value came from). */
int tml__launch_validate(tml_run_ctx *c);

/* env.c: builds c->env for the training: environ without the variables
 * TraceML owns, then the run's (TRACEML_ADDR on port, else untraced;
 * disabled: TRACEML_DISABLED=1 only) and zero-edit tracing's PYTHONPATH. */
void tml__launch_build_env(tml_run_ctx *c, const tml_cli_run *r, int port, int disabled);
void tml__launch_env_release(tml_run_env *e);

/* The aggregator's command line, bounded: a word past TML_RUN_ARGV_MAX
 * sets full (and is dropped), and a full one is not run. */
#define TML_RUN_ARGV_MAX 48
typedef struct tml_run_argv {
    char *v[TML_RUN_ARGV_MAX + 1];         /* n words, NULL-terminated */
    char num[TML_RUN_ARGV_MAX][24];        /* num[k]: word k when it is a number */
    int n, full;
} tml_run_argv;
/* aggregator.c: appends s (which must outlive a), or the number v. */
void tml__launch_arg(tml_run_argv *a, const char *s);
void tml__launch_arg_long(tml_run_argv *a, long v);
/* options.c: appends each option that has a channel to the aggregator
 * (its row in options.c: a FLAG, LONG, int VAR or STR) and is set:
 * "--html-report", "--window-steps N". */
void tml__launch_agg_options(const tml_run_opts *o, tml_run_argv *a);

/* aggregator.c: forks `traceml __aggregate` for run r and reads its
 * ports (ap->port, c->live_port_got); -1 when it did not start or say. */
int tml__launch_agg_start(tml_run_ctx *c, tml_run_agg *ap, const tml_cli_run *r);
/* Notes what happened to the aggregator (ap->lost) and when. */
void tml__launch_agg_lost(tml_run_agg *ap, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Its exit code from waitpid's status (the manifest's aggregator_exit_code). */
void tml__launch_agg_exited(tml_run_agg *ap, int status);
/* The aggregator ended with status (waitpid's): noted and logged. */
void tml__launch_agg_reap(tml_run_agg *ap, const char *run_dir, int status);

/* finalize.c: the summary box (malloc'd), asked of the aggregator; NULL
 * when it did not send one (then: tml__launch_finalize_here, which rebuilds
 * the run from telemetry.sqlite and says why it is partial). */
char *tml__launch_finalize_via_agg(const tml_run_ctx *c, tml_run_agg *ap, const tml_cli_run *r,
                                const char *status, int code, int width);
char *tml__launch_finalize_here(const tml_run_ctx *c, const tml_run_agg *ap,
                             const tml_cli_run *r, const char *status, int code, int width,
                             int64_t ended_ns);

/* signals.c: the launcher as the training's transparent parent (the
 * essay there). install_handlers: once, first: catches every signal a
 * training could handle that was not inherited ignored, starts the
 * witness; signals_block/restore: the caught ones blocked around a fork;
 * signals_for_child: in a forked training, the dispositions and mask the
 * launcher inherited; signals_for_aggregator: the caught ones blocked
 * (its end is the launcher's to decide); pass_signals: sends on to train
 * the signals caught 20 ms ago or more that did not reach its process
 * group, and returns the last of them that asks a training to end
 * (SIGINT, SIGTERM, SIGHUP, SIGQUIT), else 0; asked_to_end: 1 once one
 * of those four was caught (passed on or not); witness_end: at the end;
 * die_as: the launcher dies of sig, as the training did (no core file);
 * returns code when sig does not kill. */
void tml__launch_install_handlers(void);
void tml__launch_signals_block(sigset_t *was);
void tml__launch_signals_restore(const sigset_t *was);
void tml__launch_signals_for_child(void);
void tml__launch_signals_for_aggregator(void);
int tml__launch_pass_signals(pid_t train, int64_t now_ms);
int tml__launch_asked_to_end(void);
void tml__launch_witness_end(void);
int tml__launch_die_as(int sig, int code);

/* How the training ended, beside its exit code. */
typedef struct tml_run_end {
    int interrupted;   /* a SIGINT, SIGTERM, SIGHUP or SIGQUIT came, or it died of SIGINT */
    int signal;        /* it died of this signal, 0: it exited */
} tml_run_end;

/* supervise.c: the training, forked and exec'd (c->prog, argv, c->env),
 * its pid or -1; waiting for it while the live view draws, passing on
 * signals and reaping a dying aggregator (ap, may be NULL). Returns the
 * training's exit code (128 + signal), *end filled. */
pid_t tml__launch_start_training(const tml_run_ctx *c, char **argv);
int tml__launch_supervise(const tml_run_ctx *c, pid_t train, tml_run_agg *ap, const char *run_dir,
                       tml_run_end *end);

/* follow.c: with several launchers, the run id and secret they share
 * (-1: a follower found no secret; *secret_file: the host wrote one); a
 * follower's whole launch, returning the training's exit code. */
int tml__launch_share_identity(const tml_run_opts *o, tml_cli_run *r, int *secret_file);
int tml__launch_follow(tml_run_ctx *c, tml_cli_run *r, char **targv, int have_secret);

/* The zero-edit sitecustomize the launcher writes into the run folder:
 * python/traceml_ai/_sitecustomize.py, embedded at build time
 * (build/gen/zero_edit_site.c, scripts/gen-web-assets --site). */
extern const unsigned char tml__zero_edit_site[];
extern const size_t tml__zero_edit_site_len;

#endif
