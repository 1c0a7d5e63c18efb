/*
 * dist.c - the distributed shapes of `traceml run` (see dist.h).
 *
 * The launcher does not reimplement rank spawning: several ranks on a node
 * are started by PyTorch's own launcher, `python -m torch.distributed.run`
 * of the training's interpreter (python.c), with `--monitor_interval 1`, so
 * that a dead rank tears the group down within about a second instead of
 * five, and `--log_dir <run>/torchrun`. Only for torch 1.x it adds
 * `--redirects 2 --tee 2`: torchrun 1.13 crashes under Python 3.11 with its
 * default output options (2/2 keeps stdout untouched and copies each
 * rank's stderr, prefixed, to the terminal and to the log folder).
 *
 * What crosses node boundaries is kept to what a job script already has:
 * the run name (the same --run-name on every node; the run id is a hash of
 * it, so nothing else must be shared), the master address every node
 * already passes to torchrun, a port derived from the master port, and the
 * secret. The secret is the one thing that cannot be derived: it comes from
 * $TRACEML_SECRET when the job script exports it everywhere, or from a file
 * the host writes into its run folder for nodes that share the logs
 * directory. A follower that finds neither trains untraced, and the host's
 * summary lists its ranks as never reported: telemetry is optional,
 * training is not.
 */
#include "cli.h"
#include "dist.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/env.h"
#include "traceml/traceml.h"

static int slurm_task_count(void)
{
    /* srun sets the step's task count; a batch script's own step has
     * SLURM_NTASKS for the whole allocation but is a single process */
    if (!getenv("SLURM_PROCID") || !getenv("SLURM_STEP_ID"))
        return 0;
    if (!tml__env_bool(TML_ENV_SLURM))
        return 0;
    long n = tml__env_count("SLURM_STEP_NUM_TASKS", tml__env_count("SLURM_NTASKS", 0));
    return n > 1 && n < (1L << 20) ? (int)n : 0;
}

int tml__dist_setup(tml_dist *d, const tml_dist_args *a)
{
    memset(d, 0, sizeof(*d));
    d->nproc = a->nproc;
    d->nnodes = a->nnodes;
    d->node_rank = a->node_rank;
    d->master_addr = a->master_addr;
    d->master_port = a->master_port;
    d->host = 1;

    int tasks = (a->nproc > 1 || a->nnodes > 1) ? 0 : slurm_task_count();
    if (tasks) {
        d->slurm = 1;
        d->task = tml__env_count("SLURM_PROCID", 0);
        d->world_size = tasks;
        d->nnodes = tml__env_count("SLURM_STEP_NUM_NODES", tml__env_count("SLURM_NNODES", 1));
        d->node_rank = tml__env_count("SLURM_NODEID", 0);
        if (d->nnodes < 1)
            d->nnodes = 1;
        if (!a->addr_given) {
            const char *m = getenv("MASTER_ADDR");
            if (m && *m)
                d->master_addr = m;
            else if (d->nnodes > 1)
                return tml__cli_error("under srun on %ld nodes, set --master-addr (or "
                                      "MASTER_ADDR) to the host of task 0", d->nnodes);
        }
        if (!a->port_given)
            d->master_port = tml__env_count("MASTER_PORT", a->master_port);
        d->host = d->task == 0;
        d->followers = 1;
    } else if (a->nproc > 1 || a->nnodes > 1) {
        d->world_size = a->nproc * a->nnodes;
        d->host = a->node_rank == 0;
        d->followers = a->nnodes > 1;
    } else {
        return 0;   /* single process: nothing distributed to set up */
    }
    d->enabled = 1;
    d->multi_host = d->nnodes > 1;
    d->standalone = !d->slurm && d->nnodes == 1 && !a->port_given && !a->addr_given;
    d->agg_port = a->agg_port ? a->agg_port : d->master_port + 1;
    if (d->followers && d->agg_port > 65535)
        return tml__cli_error("--master-port %ld leaves no aggregator port; set "
                              "--aggregator-port", d->master_port);
    if (a->dashdash && !d->slurm)
        return tml__cli_error("--nproc-per-node/--nnodes launch through torch.distributed.run "
                              "and take a SCRIPT, not '-- COMMAND' (run 'traceml run -- "
                              "torchrun ...' instead)");
    return 0;
}

char **tml__dist_torchrun_argv(const tml_dist *d, const char *python, int torch1,
                               const char *log_dir, char *const *script_argv, int n,
                               char store[][32])
{
    char **v = calloc((size_t)n + 32, sizeof(*v));
    if (!v)
        return NULL;
    int k = 0;
    snprintf(store[0], 32, "%ld", d->nproc);
    snprintf(store[1], 32, "%ld", d->nnodes);
    snprintf(store[2], 32, "%ld", d->node_rank);
    snprintf(store[3], 32, "%ld", d->master_port);
    v[k++] = (char *)python;
    v[k++] = "-m";
    v[k++] = "torch.distributed.run";
    v[k++] = "--nproc_per_node";
    v[k++] = store[0];
    v[k++] = "--nnodes";
    v[k++] = store[1];
    v[k++] = "--node_rank";
    v[k++] = store[2];
    if (d->standalone) {
        v[k++] = "--standalone";
    } else {
        v[k++] = "--master_addr";
        v[k++] = (char *)d->master_addr;
        v[k++] = "--master_port";
        v[k++] = store[3];
    }
    if (torch1) {   /* torchrun 1.x crashes under Python 3.11 with its default output */
        v[k++] = "--redirects";
        v[k++] = "2";
        v[k++] = "--tee";
        v[k++] = "2";
    }
    v[k++] = "--monitor_interval";
    v[k++] = "1";
    if (log_dir) {
        v[k++] = "--log_dir";
        v[k++] = (char *)log_dir;
    }
    for (int i = 0; i < n; i++)
        v[k++] = script_argv[i];
    v[k] = NULL;
    return v;
}

/* FNV-1a, 64 bits. */
static uint64_t fnv1a(const char *s, uint64_t h)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ull;
    }
    return h;
}

void tml__dist_run_id(const char *run_name, char out[TML_WIRE_RUNID_MAX])
{
    uint64_t a = fnv1a(run_name, fnv1a("traceml-run:", 0xcbf29ce484222325ull));
    uint64_t b = fnv1a(run_name, fnv1a("traceml-run-2:", 0x84222325cbf29ce4ull));
    snprintf(out, TML_WIRE_RUNID_MAX, "%016llx%016llx", (unsigned long long)a,
             (unsigned long long)b);
}

int tml__dist_write_secret(const char *run_dir, const char *secret)
{
    char line[TML_WIRE_SECRET_MAX + 2];
    int n = snprintf(line, sizeof(line), "%s\n", secret);
    if (n < 0 || (size_t)n >= sizeof(line))
        return -1;
    return tml__write_file_atomic(run_dir, "secret", line, (size_t)n, 0600) == 0 ? 0 : -1;
}

void tml__dist_remove_secret(const char *run_dir)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/secret", run_dir);
    unlink(path);
}

int tml__dist_read_secret(const char *logs_dir, const char *run_name, int timeout_ms,
                          char *out, size_t cap)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s/secret", logs_dir, run_name);
    int64_t deadline = tml__mono_ms() + timeout_ms;
    for (;;) {
        char *buf = NULL;
        size_t len = 0;
        if (tml__read_file(path, 4096, &buf, &len) == 0) {
            while (len && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
                buf[--len] = '\0';
            int ok = len > 0 && len < cap;
            if (ok)
                memcpy(out, buf, len + 1);
            free(buf);
            if (ok)
                return 0;
        }
        if (tml__mono_ms() >= deadline)
            return -1;
        tml__sleep_ms(100);
    }
}
