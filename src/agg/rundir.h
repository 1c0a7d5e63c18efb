/*
 * rundir.h - run names, run folders, secrets and the manifest.
 *
 * A run folder is never reused: creating one that exists fails, so nothing
 * a user had is overwritten.
 */
#ifndef TML_RUNDIR_H
#define TML_RUNDIR_H

#include <stddef.h>
#include <stdint.h>

#include "base/strbuf.h"
#include "base/clock.h"
#include "traceml/traceml.h"
#include "base/fs.h"
#include "model/run.h"


/* Creates logs_dir (and parents) and logs_dir/name. 0, TML_EEXIST, or TML_EIO
 * (errno kept). out receives the run folder path. */
int tml__rundir_create(const char *logs_dir, const char *name, char *out, size_t cap);
/* nbytes random bytes as 2*nbytes hex characters (tml__random_bytes). */
int tml__random_hex(char *out, size_t nbytes);

typedef struct tml_manifest {
    const char *run_name;
    const char *run_id;
    const char *status;        /* running, completed, failed, interrupted */
    int exit_code;             /* meaningful unless status is running */
    int64_t start_unix_ms, end_unix_ms;   /* end 0 while running */
    /* the run's length on the monotonic clock, not end - start (a
     * wall-clock jump); negative: unknown. Written once it ended. */
    double duration_s;
    int argc;                  /* the command that was run */
    char **argv;
    int32_t world_size, nnodes;
    const char *profile;       /* "watch" for `traceml watch`; NULL: "run" */
    const char *guard;         /* traceml.yaml's guard: as JSON; NULL/"" none */
    /* TraceML 0.5.0's fields (docs/summary-json.md): the training's own
     * start and end (0: not yet), the launch as a JSON object (NULL: none),
     * the state of the telemetry (NULL: derived, "running" while the run
     * runs, then "complete" with a final_summary.json, else "unavailable")
     * and why when it is not complete, the aggregator's exit code (when
     * aggregator_exited), and the nodes' outcomes of a guarded run as
     * JSON (guard.training; NULL: null). */
    int64_t training_started_unix_ms, training_ended_unix_ms;
    const char *launch;
    const char *telemetry_status, *telemetry_reason;
    int aggregator_exited, aggregator_exit_code;
    const char *guard_training;
    const char *lifecycle;     /* written as is instead (manifest_finish) */
} tml_manifest;

/* Writes run_dir/manifest.json atomically (temp file + rename), listing the
 * artifacts that exist in run_dir at the time of writing. */
int tml__manifest_write(const char *run_dir, const tml_manifest *m);
/* Ends the manifest.json another process started (the launcher's, when
 * the launcher is gone): its status, exit code (negative: null), end
 * time and duration (negative: null), the rest as it was. 0, TML_EIO or
 * TML_EPROTO. */
int tml__manifest_finish(const char *run_dir, const char *status, int exit_code,
                         double duration_s);

/* TraceML 0.5.0's run_context of the summary (compact JSON), from
 * run_dir/manifest.json and the run's status: run {status, profile},
 * declaration (the guard), execution {expected_nodes, processes_per_node,
 * expected_world_size, launcher_completion}. 0, or a TML_E* code. */
int tml__manifest_run_context(const char *run_dir, const char *status, tml_strbuf *out);

/* What ran, from run_dir/manifest.json, as the summary's meta.workload
 * (compact JSON, docs/summary-json.md): script, args, world_size, guard.
 * 0, or a TML_E* code (no manifest: the caller writes null). */
int tml__manifest_workload(const char *run_dir, tml_strbuf *out);

/* TraceML 0.5.0's direct launch (docs/cli.md, traceml serve): a serve
 * advertises its run to this user's trainings on this machine in
 * <dir>/serve-<port>.json, <dir> $XDG_RUNTIME_DIR/traceml, else
 * /tmp/traceml-<uid>, a folder of this user's only (0700; another owner's
 * or a link is never read). A training given TRACEML_AGGREGATOR_HOST/PORT
 * (or, given nothing, one on 0.5.0's port 29765) takes the run id, secret
 * and folder from it. */
#define TML_SERVE_PORT_05 29765
typedef struct tml_serve_advert {
    long pid;
    char run_id[64], secret[96], run_dir[4096];
} tml_serve_advert;
/* Writes (0600, atomically) or removes (a NULL a) port's advert. 0 or -1. */
int tml__serve_advert(int port, const tml_serve_advert *a);
/* Reads port's advert: 0 when it is this user's and its serve is alive. */
int tml__serve_advert_read(int port, tml_serve_advert *a);

/* Appends one line "<UTC ISO time> <who>[pid]: <message>" to
 * run_dir/traceml.log, TraceML's own log (never the user's stdout or
 * stderr). Failures are ignored: logging must not break a run. */
void tml__run_log(const char *run_dir, const char *who, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
