/*
 * dist.h - how `traceml run` launches several ranks (dist.c).
 *
 * Three shapes, one rule: exactly one launcher hosts the aggregator and
 * prints the summary (node 0, or Slurm task 0); every other launcher is a
 * follower whose ranks ship their telemetry to it over TCP.
 *
 *   torchrun    --nproc-per-node N [--nnodes M --node-rank K ...]: this
 *               launcher starts `python -m torch.distributed.run` for its
 *               node; with M > 1 every node runs `traceml run`.
 *   Slurm       `srun traceml run train.py`: each task is one rank
 *               (SLURM_PROCID); task 0 hosts the aggregator.
 *   single      one process (or `-- CMD` that spawns its own ranks on this
 *               host): an ephemeral loopback port, as before.
 *
 * With more than one launcher the aggregator listens on a fixed port
 * (--aggregator-port, default master port + 1) and, across hosts, on every
 * interface. The run id is derived from the run name, which every launcher
 * must be given; the secret comes from $TRACEML_SECRET when the job script
 * sets it on every node, else the host writes it to <logs>/<run>/secret
 * (mode 0600) and followers read it there (a shared file system).
 * docs/distributed.md is the user-facing description.
 */
#ifndef TML_CLI_DIST_H
#define TML_CLI_DIST_H

#include <stddef.h>

#include "wire/wire.h"

typedef struct tml_dist {
    int enabled;          /* more than one rank is launched or expected */
    int slurm;            /* this launcher is one Slurm task */
    int host;             /* hosts the aggregator, prints the summary */
    int followers;        /* other launchers exist: fixed port, shared id */
    int multi_host;       /* ranks on other hosts: listen on every interface */
    int standalone;       /* one node, no --master-port: torchrun --standalone
                           * picks a free rendezvous port (two runs at once) */
    long nproc, nnodes, node_rank, task;
    long world_size;      /* ranks expected by the aggregator (0 = any) */
    const char *master_addr;
    long master_port, agg_port;
} tml_dist;

/* Launcher options as parsed (given = the user set them explicitly). */
typedef struct tml_dist_args {
    long nproc, nnodes, node_rank;
    const char *master_addr;
    long master_port, agg_port;   /* agg_port 0: master_port + 1 */
    int addr_given, port_given;
    int dashdash;
} tml_dist_args;

/* Decides the shape from the options and the environment (Slurm). Prints
 * the error and returns TML_EXIT_USAGE, or 0. */
int tml__dist_setup(tml_dist *d, const tml_dist_args *a);

/* argv for torch.distributed.run around SCRIPT args (malloc'd array; the
 * strings are static, from d or from script_argv, except those noted in
 * the body, which live in `store`); torch1: the interpreter has torch 1.x,
 * whose torchrun needs its output options set. NULL on OOM. */
char **tml__dist_torchrun_argv(const tml_dist *d, const char *python, int torch1,
                               const char *log_dir, char *const *script_argv, int n,
                               char store[][32]);
#define TML_DIST_STORE 8

/* The run id every launcher of a run derives from its name (32 hex). */
void tml__dist_run_id(const char *run_name, char out[TML_WIRE_RUNID_MAX]);

/* The host's hand-off of the secret: <run_dir>/secret, mode 0600. */
int tml__dist_write_secret(const char *run_dir, const char *secret);
void tml__dist_remove_secret(const char *run_dir);
/* A follower's wait for <logs_dir>/<run_name>/secret, at most timeout_ms.
 * 0 with the secret in out, -1 when it never appeared. */
int tml__dist_read_secret(const char *logs_dir, const char *run_name, int timeout_ms,
                          char *out, size_t cap);

#endif
