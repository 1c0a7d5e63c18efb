/*
 * setup.c - the engine's beginning and end: tml_init's settling of the
 * configuration (the layer above picks the sink and reads the
 * environment: host/local.c), the process's identity, tml_shutdown, and the results
 * a process can ask for after (or during) its run.
 *
 * tml_init is idempotent for the same configuration and refuses a
 * conflicting second one. A forked child (a DataLoader worker) inherits
 * none of the engine: its markers become no-ops.
 */
#include "core/engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fs.h"
#include "base/hmac.h"
#include "model/run.h"

tml_setup tml__setup;
tml_rings tml__rings;
tml_requests tml__req = {.auto_models_mu = PTHREAD_MUTEX_INITIALIZER};

/* ---- identity ----------------------------------------------------------- */

/* Who this process is, from torchrun's or Slurm's environment as the edge
 * read it (else rank 0 of 1, until tml_set_rank says otherwise). */
static void fill_rank_info(tml_rank_info *i, const tml_engine_env *env)
{
    memset(i, 0, sizeof(*i));
    tml__setup.identity_from_env = env->identity_set;
    i->rank = env->rank;
    i->local_rank = env->local_rank;
    i->world_size = env->world_size;
    i->node_rank = env->node_rank;
    i->nnodes = env->nnodes;
    i->pid = (int32_t)getpid();
    i->instrumented = tml__setup.instrumented;
    gethostname(i->host, sizeof(i->host) - 1);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    i->cpu_count = cores > 0 && cores < INT32_MAX ? (int32_t)cores : 0;
    /* this process image's: a re-exec under the same pid draws another */
    if (tml__random_bytes(&i->instance, sizeof(i->instance)) < 0 || !i->instance)
        i->instance = (uint64_t)tml__mono_ns() ^ ((uint64_t)getpid() << 40) ^ 1;
}

/* The script's stem from /proc/self/cmdline: "python3 train.py" -> "train". */
static void cmdline_stem(char *out, size_t cap)
{
    char buf[4096];
    out[0] = '\0';
    FILE *f = fopen("/proc/self/cmdline", "r");
    if (!f)
        return;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *arg0 = buf, *arg = buf;
    const char *base = strrchr(arg0, '/');
    base = base ? base + 1 : arg0;
    if (strncmp(base, "python", 6) == 0) {
        /* skip the interpreter and its options */
        const char *p = arg0 + strlen(arg0) + 1;
        while (p < buf + n && *p == '-')
            p += strlen(p) + 1;
        arg = p < buf + n ? p : "";
    }
    base = strrchr(arg, '/');
    base = base ? base + 1 : arg;
    snprintf(out, cap, "%s", base);
    char *dot = strrchr(out, '.');
    if (dot && strcmp(dot, ".py") == 0)
        *dot = '\0';
}

/* Cost of a begin/end pair through the real code path, on a scratch ring
 * so no event reaches the run: the fastest of a few short blocks. (One
 * mean over 4,000 pairs took in any preemption that hit it: on a busy
 * 2-core machine 5% of calibrations came out 3-60x too high, which is how
 * a run once reported 11 us/step against ~0.7.) */
int64_t tml__calibrate_pair(void)
{
    static tml_ring scratch;
    enum { BLOCKS = 8, N = 500 };
    int64_t best = INT64_MAX;
    for (int b = 0; b < BLOCKS; b++) {
        int64_t t0 = tml__mono_ns();
        for (int i = 0; i < N; i++) {
            int64_t a = tml__mono_ns();
            tml__ring_push(&scratch, TML_EV_SPAN, 0, a, tml__mono_ns());
            atomic_store_explicit(&scratch.tail, atomic_load(&scratch.head),
                                  memory_order_relaxed);
        }
        int64_t d = (tml__mono_ns() - t0) / N;
        if (d < best)
            best = d;
    }
    return best;
}

/* ---- init ----------------------------------------------------------------- */

static void on_fork_child(void)
{
    /* A forked child (e.g. a DataLoader worker) has no shipper thread and
     * must not write to its parent's sink: its markers become no-ops. */
    atomic_store(&tml__setup.state, TML_ST_DONE);
    tml__setup.sink = NULL;
    tml__setup.progress = NULL;   /* the parent's file (its mapping stays, unused) */
    tml__ship.started = 0;
    tml__ship.sampler = NULL;
}

static int same_config(const tml_options *o)
{
    if (o->logs_dir && strcmp(o->logs_dir, tml__setup.logs_dir) != 0)
        return 0;
    if (o->run_name && strcmp(o->run_name, tml__setup.run_name) != 0)
        return 0;
    uint32_t ins = o->instrumented ? o->instrumented : TML_PHASES_ALL;
    return ins == tml__setup.instrumented;
}

/* Names: the options, else TRACEML_LOGS_DIR / TRACEML_RUN_NAME, else
 * ./logs and "<script stem>_<time>". */
static void settle_names(const tml_options *o, const tml_engine_env *env)
{
    const char *env_logs = env->logs_dir, *env_name = env->run_name;
    tml_setup *c = &tml__setup;
    snprintf(c->logs_dir, sizeof(c->logs_dir), "%s",
             o->logs_dir ? o->logs_dir : env_logs && *env_logs ? env_logs : "logs");
    c->explicit_name = o->run_name || (env_name && *env_name);
    if (o->run_name) {
        snprintf(c->run_name, sizeof(c->run_name), "%s", o->run_name);
    } else if (env_name && *env_name) {
        snprintf(c->run_name, sizeof(c->run_name), "%s", env_name);
    } else {
        char stem[128];
        cmdline_stem(stem, sizeof(stem));
        tml__run_name_generate(stem[0] ? stem : NULL, c->run_name, sizeof(c->run_name));
    }
}

/* What the sampler and the GPU clock take from the environment. */
static void settle_env(const tml_engine_env *env)
{
    tml_setup *c = &tml__setup;
    c->interval_s = env->interval_s;
    snprintf(c->libnvml, sizeof(c->libnvml), "%s", env->libnvml ? env->libnvml : "");
    snprintf(c->libcuda, sizeof(c->libcuda), "%s", env->libcuda ? env->libcuda : "");
    snprintf(c->visible_devices, sizeof(c->visible_devices), "%s",
             env->visible_devices ? env->visible_devices : "");
    c->visible_devices_set = env->visible_devices != NULL;
}

int tml__engine_prepare(const tml_options *opts, const tml_engine_env *env, int *done)
{
    tml_options def = {0};
    const tml_options *o = opts ? opts : &def;
    tml_setup *c = &tml__setup;
    *done = 1;
    int st = atomic_load(&c->state);
    if (st == TML_ST_ON || st == TML_ST_DISABLED)
        return same_config(o) ? (st == TML_ST_ON ? 0 : TML_EDISABLED) : TML_ECONFIG;
    if (st == TML_ST_DONE && c->pid == getpid() && tml__ship.started)
        return TML_ESTATE;

    c->instrumented = o->instrumented ? o->instrumented & TML_PHASES_ALL : TML_PHASES_ALL;
    settle_names(o, env);
    if (o->disabled || env->disabled) {
        atomic_store(&c->state, TML_ST_DISABLED);
        return TML_EDISABLED;
    }
    if (!tml__run_name_valid(c->run_name))
        return TML_EINVAL;
    if (!tml__rings.slot) {   /* allocated once, kept: a thread may still hold a slot */
        /* a slot's rings are 64-byte aligned (no false sharing); calloc
         * only promises 16 (clang's UBSan: misaligned member access) */
        size_t size = TML_MAX_RINGS * sizeof(*tml__rings.slot);
        tml_slot *slots = aligned_alloc(_Alignof(tml_slot), size);
        if (!slots)
            return TML_ENOMEM;
        memset(slots, 0, size);
        tml__rings.slot = slots;
    }
    c->pid = getpid();
    c->start_unix_ms = tml__unix_ms();
    fill_rank_info(&c->hello.info, env);
    settle_env(env);   /* a tml_set_rank() before init still counts */
    c->run_dir[0] = '\0';
    c->hello.run_id[0] = c->hello.secret[0] = '\0';
    free(c->summary_text);
    c->summary_text = NULL;
    *done = 0;
    return 0;
}

void tml__engine_set_run(const char *run_name, const char *run_dir, const char *run_id,
                         const char *secret)
{
    tml_setup *c = &tml__setup;
    if (run_name)
        snprintf(c->run_name, sizeof(c->run_name), "%s", run_name);
    if (run_dir)
        snprintf(c->run_dir, sizeof(c->run_dir), "%s", run_dir);
    if (run_id)
        snprintf(c->hello.run_id, sizeof(c->hello.run_id), "%s", run_id);
    if (secret)
        snprintf(c->hello.secret, sizeof(c->hello.secret), "%s", secret);
}

void tml__engine_track_progress(void)
{
    tml_setup *c = &tml__setup;
    if (!c->progress)
        c->progress = tml__progress_create(c->run_dir);
}

int tml__engine_start(tml_sink *sink)
{
    tml_setup *c = &tml__setup;
    for (int i = 0; i < TML_MAX_RINGS; i++) {
        tml_slot *s = &tml__rings.slot[i];
        atomic_store(&s->ring.head, 0);
        atomic_store(&s->ring.tail, 0);
        atomic_store(&s->ring.dropped, 0);
        atomic_store(&s->state, TML_SLOT_FREE);
        atomic_store(&s->glue_calls, 0);
        tml__asm_init(&s->as);
    }
    atomic_fetch_add(&c->gen, 1);
    for (int k = 0; k < 3; k++)
        atomic_store(&tml__req.cuda_bytes[k], -1);
    atomic_store(&tml__req.hello_sent, 0);
    c->pair_cost_ns = tml__calibrate_pair();
    c->sink = sink;
    static int atfork_done;
    if (!atfork_done) {
        pthread_atfork(NULL, NULL, on_fork_child);
        atfork_done = 1;
    }
    atomic_store(&c->state, TML_ST_ON);
    int rc = tml__shipper_start();
    if (rc < 0) {
        atomic_store(&c->state, TML_ST_OFF);
        char *ignored = NULL;
        sink->ops->close(sink, "failed", 1, &ignored);
        free(ignored);
        c->sink = NULL;
    }
    return rc;
}

/* ---- shutdown and results ------------------------------------------------- */

int tml_shutdown_with(const char *status, int exit_code)
{
    tml_setup *c = &tml__setup;
    int st = atomic_load(&c->state);
    if (st == TML_ST_DISABLED) {
        atomic_store(&c->state, TML_ST_OFF);
        return 0;
    }
    if (st != TML_ST_ON || c->pid != getpid())
        return TML_ESTATE;
    atomic_store(&c->state, TML_ST_DONE);
    tml__shipper_stop();
    tml_sink *sink = c->sink;
    c->sink = NULL;
    int rc = sink->ops->close(sink, status ? status : "completed", exit_code, &c->summary_text);
    tml__progress_watch_exit(c->progress);   /* a death at exit, after the goodbye */
    atomic_store(&tml__req.launcher, 0);     /* a later run (a notebook's next cell) is its own */
    return rc;
}

int tml_flush(void)
{
    tml_setup *c = &tml__setup;
    int st = atomic_load(&c->state);
    if (st == TML_ST_DISABLED)
        return TML_EDISABLED;
    if (st != TML_ST_ON || c->pid != getpid() || !tml__ship.started)
        return TML_ESTATE;
    return tml__shipper_flush();
}

int tml_shutdown(void)
{
    return tml_shutdown_with("completed", 0);
}

const char *tml_summary_text(void)
{
    return tml__setup.summary_text;
}

const char *tml_run_dir(void)
{
    return tml__setup.run_dir[0] ? tml__setup.run_dir : NULL;
}

/* After the run: the final_summary.json this process's run wrote. */
static int read_final(char **out)
{
    char path[PATH_MAX + 32];
    size_t len;
    if (!tml__setup.run_dir[0])
        return TML_ESTATE;
    snprintf(path, sizeof(path), "%s/final_summary.json", tml__setup.run_dir);
    if (tml__read_file(path, (size_t)1 << 30, out, &len) < 0)
        return errno == ENOMEM ? TML_ENOMEM : TML_EIO;
    if (len == 0) {
        free(*out);
        *out = NULL;
        return TML_EIO;
    }
    return 0;
}

int tml_summary_json(char **out)
{
    if (!out)
        return TML_EINVAL;
    *out = NULL;
    tml_setup *c = &tml__setup;
    int st = atomic_load(&c->state);
    if (st == TML_ST_DISABLED)
        return TML_EDISABLED;
    if (st != TML_ST_ON || c->pid != getpid() || !tml__ship.started)
        return st == TML_ST_DONE && c->pid == getpid() ? read_final(out) : TML_ESTATE;
    int rc = tml__shipper_summary(out);
    if (rc == TML_ESTATE && atomic_load(&c->state) == TML_ST_DONE)
        return read_final(out);
    return rc;
}

void tml_free(void *p)
{
    free(p);
}
