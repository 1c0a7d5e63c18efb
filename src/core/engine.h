/*
 * engine.h - the engine's state, by owner, and what its files share.
 *
 *   markers.c   the public markers, called by the training's threads: read
 *               the clock, write one event into the calling thread's ring
 *   shipper.c   the shipper thread: drains the rings into step records and
 *               delivers them, the samples and the counters to the sink
 *   gpuclock.c  the shipper's GPU clock: CUDA events into gpu_* durations
 *   commbox.c   collectives completed off the step's thread, until a step ends
 *   setup.c     init and shutdown, the identity, the results after the run
 *   client.c    the wire sink (sink.h)
 *
 * Who writes what. tml__setup is written by setup.c between tml_init and
 * the start of the shipper, and by tml_shutdown after it stopped; everyone
 * else only reads it (the identity in setup.hello is the shipper's once it
 * runs). tml__rings is claimed by the training threads (one CAS each) and
 * drained by the shipper. tml__ship belongs to the shipper thread except
 * the fields under its mutex. Other threads reach the shipper only through
 * tml__req, all atomics.
 */
#ifndef TML_ENGINE_H
#define TML_ENGINE_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/assemble.h"
#include "core/ring.h"
#include "core/sink.h"
#include "gpu/cuda.h"
#include "model/progress.h"
#include "sample/sampler.h"

#define TML_MAX_RINGS 64
#define TML_GPU_PENDING 256     /* steps waiting for their CUDA events, per ring */

enum { TML_ST_OFF = 0, TML_ST_ON = 1, TML_ST_DISABLED = 2, TML_ST_DONE = 3 };
enum { TML_SLOT_FREE = 0, TML_SLOT_USED = 1, TML_SLOT_RETIRED = 2 };

/* A step record waiting for its CUDA events. */
typedef struct tml_gpending {
    tml_step_record rec;
    tml_gpu_marks marks;
    int64_t since_ns;
} tml_gpending;

/* One ring of the pool, written by the thread that claimed it. */
typedef struct tml_slot {
    tml_ring ring;
    _Atomic int state;
    tml_assembler as;            /* shipper only */
    /* GPU clock: the event pool of the thread that owns this ring (kept
     * across threads and inits: events belong to a CUDA context) */
    _Atomic(tml_gpu_pool *) gpu;
    tml_gpending *pend;          /* shipper only: a ring of TML_GPU_PENDING */
    size_t phead, plen;
    /* glue calls of the owning thread that recorded nothing (one writer,
     * no read-modify-write shared between threads; the shipper sums) */
    _Atomic uint64_t glue_calls;
} tml_slot;

/* The ring pool, allocated at the first tml_init and kept (a thread may
 * still hold a slot of an earlier run). */
typedef struct tml_rings {
    tml_slot *slot;              /* TML_MAX_RINGS */
    _Atomic uint64_t no_slot_drops;   /* events from threads beyond the pool */
} tml_rings;

/* What init decided, fixed until shutdown. */
typedef struct tml_setup {
    _Atomic int state;
    _Atomic uint32_t gen;        /* bumped per init: threads re-claim a slot */
    uint32_t instrumented;
    int disabled_opt, explicit_name;
    pid_t pid;
    int64_t start_unix_ms;
    char run_name[128], logs_dir[PATH_MAX], run_dir[PATH_MAX];
    double interval_s;           /* the sampler's (tml_engine_env) */
    char libnvml[PATH_MAX], libcuda[PATH_MAX], visible_devices[256];
    int visible_devices_set;     /* CUDA_VISIBLE_DEVICES, even empty (no GPU) */
    tml_hello hello;             /* run id, secret, identity */
    int identity_from_env;
    int64_t pair_cost_ns;        /* one begin/end pair through the API */
    tml_sink *sink;
    char *summary_text;          /* the box a closing in-process sink wrote */
    tml_progress *progress;      /* run_dir/progress/<host>.<pid> under a launcher, else NULL */
} tml_setup;

/* Requests to the shipper from any thread. */
typedef struct tml_requests {
    _Atomic int64_t identity;    /* rank << 32 | world size, 0 none */
    _Atomic int64_t loader;      /* (workers << 1 | pin_memory) + 1, 0 none */
    _Atomic int64_t call_cost_ns;   /* the caller's glue, per call */
    _Atomic int64_t cuda_bytes[3];  /* allocated, reserved, device total; -1 unknown */
    _Atomic int hello_sent;      /* the sink knows who we are: too late for set_rank */
    _Atomic int launcher;        /* tml_set_launcher(): no hello without steps; 2: its
                                  * ranks were forked (tml_set_launcher_forked) */
    /* tml_set_auto_models(): a string, so under a mutex of its own (set
     * once per model found, never on the hot path); new: not yet taken */
    pthread_mutex_t auto_models_mu;
    char auto_models[TML_AUTO_MODELS_MAX];
    int auto_models_new;
} tml_requests;

/* The shipper thread's own state. */
typedef struct tml_shipper {
    pthread_t thread;
    int started;
    pthread_mutex_t mu;          /* guards stop and the summary exchange */
    pthread_cond_t cv, sum_cv;
    _Atomic int stop;            /* read by say_hello outside the mutex */
    uint64_t sum_req, sum_done;
    uint64_t flush_req, flush_done;  /* tml_flush(): the passes asked for, made */
    char *sum_json;
    int sum_rc;
    tml_dd_window *dd;           /* tml_deep_dive()'s, not yet delivered (under mu) */
    int saw_events;
    int saw_steps;               /* a step that ended (not aborted) was shipped */
    tml_rank_stats stats;
    tml_step_record *batch;
    size_t nbatch;
    int64_t rss_prev, rss_prev_ns;   /* the last pass's RSS reading, -1 none */
    tml_event *events;           /* a ring's events, drained at once */
    tml_sampler *sampler;
    tml_sample *sbuf;
    uint64_t samples_dropped;
} tml_shipper;

extern tml_setup tml__setup;
extern tml_rings tml__rings;
extern tml_requests tml__req;
extern tml_shipper tml__ship;

/* markers.c: flag (TML_STEP_*) for the next step to end on this thread
 * (tml_mark_epoch_start, tml_mark_deep_dive: requests.c). */
int tml__mark_next(uint32_t flag);
/* markers.c: the names tml_set_auto_models() left for the shipper, into
 * dst (cap bytes); 1 when they are new since the last call, else 0. */
int tml__take_auto_models(char *dst, size_t cap);

/* shipper.c */
/* A marker's event into the calling thread's ring, when TraceML is on:
 * 0, TML_EFULL, TML_EDISABLED or TML_ESTATE (markers.c). */
int tml__marker_push(uint32_t kind, uint32_t arg, int64_t t0, int64_t t1);
int tml__shipper_start(void);
void tml__shipper_stop(void);
int tml__shipper_summary(char **out);     /* asks the shipper, waits <= 5 s */
int tml__shipper_flush(void);            /* asks the shipper, waits <= 5 s */
/* requests.c serves those in the shipper's pass; shipper.c ships for them */
void tml__serve_summary(int final);
void tml__serve_flush(void);
void tml__serve_deep_dive(void);
void tml__ship_all(void);                /* every step and sample out now */
void tml__ship_stats(void);              /* the counters so far (no goodbye) */
void tml__ship_record(const tml_step_record *r);
/* One line "<time> rank R[pid]: what: why" in the run's traceml.log. */
void tml__engine_log(const char *what, const char *why);

/* commbox.c: collectives completed off the step's thread, waiting for a
 * step to end (tml_comm_overlapped). */
#define TML_COMM_BOX 256u    /* a power of two */
typedef struct tml_comm_cell {
    int64_t t0, t1;
    uint32_t bytes;
} tml_comm_cell;
int tml__comm_box_put(const tml_comm_cell *in);    /* 0, TML_EFULL (dropped, counted) */
int tml__comm_box_take(tml_comm_cell *out);        /* 1 taken, 0 empty */
int tml__comm_box_empty(void);
uint64_t tml__comm_dropped(void);                  /* what the box had no room for */

/* gpuclock.c: a completed step waits for its CUDA events (or not). */
void tml__gpu_wait(tml_slot *s, const tml_step_record *r, int64_t now);
void tml__gpu_flush(tml_slot *s, int64_t now, int final);
size_t tml__gpu_waiting(void);

/* What the process's environment says to the engine: read by its edge,
 * tml_init (host/local.c), from the table of base/env.h; nothing in the
 * engine reads the environment itself. Strings: NULL when unset. */
typedef struct tml_engine_env {
    const char *logs_dir, *run_name;
    int disabled;
    int identity_set;                 /* RANK or SLURM_PROCID is set */
    int32_t rank, local_rank, world_size, node_rank, nnodes;
    double interval_s;                /* TRACEML_INTERVAL */
    const char *libnvml, *libcuda;    /* the GPU libraries to open */
    const char *visible_devices;      /* CUDA_VISIBLE_DEVICES */
} tml_engine_env;

/* setup.c, for the layer that picks the sink (host/local.c):
 * prepare settles the configuration; *done is set when there is nothing
 * more to do (running already with the same configuration, or disabled)
 * and the return value is tml_init's. start runs the engine with the sink. */
int tml__engine_prepare(const tml_options *o, const tml_engine_env *env, int *done);
int tml__engine_start(tml_sink *sink);
/* The cost of one begin/end pair, measured (robust to preemption). */
int64_t tml__calibrate_pair(void);
/* Where a sink puts the run's identity (before start). */
void tml__engine_set_run(const char *run_name, const char *run_dir, const char *run_id,
                         const char *secret);
/* Under a launcher: the markers keep run_dir/progress/<host>.<pid> (progress.h)
 * up to date, so that it knows the steps this process traced however it
 * ends. After set_run; a failure only means no such file. */
void tml__engine_track_progress(void);

/* client.c: the wire sink to the aggregator at "host:port". */
int tml__wire_sink_open(const char *addr, tml_sink **out);

#endif
