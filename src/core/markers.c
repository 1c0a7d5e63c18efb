/*
 * markers.c - the public markers: what the training's own threads call.
 *
 * The training thread's side is kept as small as we can make it. A marker
 * reads the clock and writes one event into the calling thread's ring;
 * nesting depth and the start of the outermost call live in thread-local
 * storage, so a begin/end pair becomes a single "span" event written at the
 * end. No allocation, lock or system call besides the clock (vDSO); under
 * a launcher a step's end also stores its count and time into the
 * process's progress page (model/progress.h), plain stores.
 *
 * Rings come from a fixed pool claimed once per thread with a CAS; a thread
 * that exits gives its ring back through a pthread key destructor and the
 * shipper recycles it after draining it. A thread whose slot belongs to an
 * earlier run (the generation changed) claims a new one.
 *
 * A thread that called tml_set_cuda_stream() also records a CUDA event per
 * boundary (one cuEventRecord, no wait); the shipper resolves them
 * (gpuclock.c). Settings for the shipper (rank, loader, costs) go through
 * atomics (tml__req): a marker never waits for the shipper.
 *
 * Communication that completes on another thread (a DDP bucket's future,
 * finished by the process group's worker thread) has no step of its own:
 * it waits in the mailbox (commbox.c) until a thread ends a step, which
 * moves it into its own ring before the step's end.
 */
#include "core/engine.h"

#include <stdio.h>
#include <string.h>

#include "base/clock.h"

#define GPU_POOL_EVENTS 4096

typedef struct tls_state {
    tml_slot *s;
    uint32_t gen;              /* engine generation the slot belongs to */
    uint32_t step_depth;
    uint64_t next_step;
    uint32_t next_flags;       /* for the next step that ends (tml_mark_epoch_start) */
    uint32_t depth[TML_PHASE_COUNT];
    int64_t t0[TML_PHASE_COUNT];
    tml_gpu_pool *gpu;         /* set by tml_set_cuda_stream */
    void *stream;
    int64_t gseq[TML_PHASE_COUNT];
    int64_t gstep;
} tls_state;

static _Thread_local tls_state T;
static pthread_key_t exit_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

int64_t tml_now_ns(void)
{
    return tml__mono_ns();
}

const char *tml_version(void)
{
    return TML_VERSION_STRING;
}

static void on_thread_exit(void *p)
{
    tml_slot *s = p;
    if (s)
        atomic_store_explicit(&s->state, TML_SLOT_RETIRED, memory_order_release);
}

static void make_key(void)
{
    pthread_key_create(&exit_key, on_thread_exit);
}

/* Slow path, once per thread: claim a ring from the pool. */
static tml_slot *claim_slot(void)
{
    uint32_t gen = atomic_load_explicit(&tml__setup.gen, memory_order_acquire);
    tml_slot *pool = tml__rings.slot;
    for (int i = 0; pool && i < TML_MAX_RINGS; i++) {
        int expect = TML_SLOT_FREE;
        if (atomic_compare_exchange_strong(&pool[i].state, &expect, TML_SLOT_USED)) {
            pthread_once(&key_once, make_key);
            pthread_setspecific(exit_key, &pool[i]);
            memset(&T, 0, sizeof(T));
            T.s = &pool[i];
            T.gen = gen;
            return T.s;
        }
    }
    return NULL;
}

static inline tml_slot *my_slot(void)
{
    if (__builtin_expect(T.s != NULL && T.gen == atomic_load_explicit(&tml__setup.gen,
                                                                       memory_order_relaxed), 1))
        return T.s;
    return claim_slot();
}

static inline int push(uint32_t kind, uint32_t arg, int64_t t0, int64_t t1)
{
    tml_slot *s = my_slot();
    if (__builtin_expect(!s, 0)) {
        atomic_fetch_add_explicit(&tml__rings.no_slot_drops, 1, memory_order_relaxed);
        return TML_EFULL;
    }
    return tml__ring_push(&s->ring, kind, arg, t0, t1) < 0 ? TML_EFULL : 0;
}

static inline int check_on(void)
{
    int st = atomic_load_explicit(&tml__setup.state, memory_order_relaxed);
    if (__builtin_expect(st == TML_ST_ON, 1))
        return 0;
    return st == TML_ST_DISABLED ? TML_EDISABLED : TML_ESTATE;
}

int tml_step_begin(void)
{
    int rc = check_on();
    if (rc)
        return rc;
    int64_t t = tml__mono_ns();
    if (!my_slot())
        return push(TML_EV_STEP_BEGIN, 0, t, 0);
    if (T.step_depth++ > 0)
        return 0;
    if (T.gpu)
        T.gstep = tml__gpu_pool_record(T.gpu, T.stream);
    return push(TML_EV_STEP_BEGIN, 0, t, (int64_t)T.next_step++);
}

/* The overlapped collectives completed on other threads join the step
 * that ends here (at most a mailbox's worth: one read when it is empty). */
static void take_comm(void)
{
    tml_comm_cell c;
    if (tml__comm_box_empty())
        return;
    for (uint32_t n = 0; n < TML_COMM_BOX && tml__comm_box_take(&c); n++)
        push(TML_EV_COMM_OVERLAPPED, c.bytes, c.t0, c.t1);
}

static int step_end(uint32_t flags)
{
    int rc = check_on();
    if (rc)
        return rc;
    int64_t t = tml__mono_ns();
    if (!my_slot() || T.step_depth == 0)
        return TML_ESTATE;
    if (--T.step_depth > 0)
        return 0;
    /* A phase left open by an exception must not leak into the next step. */
    for (int p = 0; p < TML_PHASE_COUNT; p++)
        T.depth[p] = 0;
    take_comm();
    if (T.gpu)
        push(TML_EV_GPU_STEP, 0, T.gstep, tml__gpu_pool_record(T.gpu, T.stream));
    flags |= T.next_flags;
    T.next_flags = 0;
    tml_progress *p = tml__setup.progress;   /* two plain stores into a shared page */
    if (p) {
        atomic_store_explicit(&p->steps, T.next_step, memory_order_relaxed);
        atomic_store_explicit(&p->last_end_ns, t, memory_order_relaxed);
    }
    return push(TML_EV_STEP_END, flags, t, 0);
}

int tml_step_end(void)
{
    return step_end(0);
}

int tml_step_abort(void)
{
    return step_end(TML_STEP_ABORTED);
}

int tml_step_end_detected(void)
{
    return step_end(TML_STEP_DETECTED);
}

int tml__mark_next(uint32_t flag)
{
    int rc = check_on();
    if (rc)
        return rc;
    T.next_flags |= flag;
    return 0;
}

int tml_mark_loader_start(int64_t start_ns)
{
    int rc = check_on();
    if (rc)
        return rc;
    if (start_ns <= 0 || start_ns > tml__mono_ns())
        return TML_EINVAL;
    return push(TML_EV_LOADER_START, 0, start_ns, 0);   /* the assembler marks the step */
}

int tml_phase_begin(tml_phase phase)
{
    int rc = check_on();
    if (rc)
        return rc;
    if ((unsigned)phase >= TML_PHASE_COUNT)
        return TML_EINVAL;
    if (!my_slot())
        return TML_EFULL;
    if (T.depth[phase]++ == 0) {
        if (T.gpu)
            T.gseq[phase] = tml__gpu_pool_record(T.gpu, T.stream);
        T.t0[phase] = tml__mono_ns();
    }
    return 0;
}

int tml_phase_end(tml_phase phase)
{
    int rc = check_on();
    if (rc)
        return rc;
    if ((unsigned)phase >= TML_PHASE_COUNT)
        return TML_EINVAL;
    if (!my_slot() || T.depth[phase] == 0)
        return 0;
    if (--T.depth[phase] > 0)
        return 0;
    int64_t t = tml__mono_ns();
    if (!T.gpu)
        return push(TML_EV_SPAN, (uint32_t)phase, T.t0[phase], t);
    int64_t e = tml__gpu_pool_record(T.gpu, T.stream);
    rc = push(TML_EV_SPAN, (uint32_t)phase, T.t0[phase], t);
    push(TML_EV_GPU_SPAN, (uint32_t)phase, T.gseq[phase], e);
    return rc;
}

int tml_phase_cancel(tml_phase phase)
{
    int rc = check_on();
    if (rc)
        return rc;
    if ((unsigned)phase >= TML_PHASE_COUNT)
        return TML_EINVAL;
    if (my_slot() && T.depth[phase] > 0)
        T.depth[phase]--;
    return 0;
}

int tml_phase_span(tml_phase phase, int64_t begin_ns, int64_t end_ns)
{
    int rc = check_on();
    if (rc)
        return rc;
    if ((unsigned)phase >= TML_PHASE_COUNT || end_ns < begin_ns)
        return TML_EINVAL;
    return push(TML_EV_SPAN, (uint32_t)phase, begin_ns, end_ns);
}

int tml_comm_bytes(int64_t bytes)
{
    int rc = check_on();
    if (rc)
        return rc;
    if (bytes < 0)
        return TML_EINVAL;
    return push(TML_EV_COMM_BYTES, 0, bytes, 0);
}

int tml_comm_overlapped(int64_t begin_ns, int64_t end_ns, int64_t bytes)
{
    int rc = check_on();
    if (rc)
        return rc;
    if (end_ns < begin_ns || bytes < 0)
        return TML_EINVAL;
    uint32_t b = bytes > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)bytes;
    if (T.s != NULL && T.step_depth > 0 && my_slot())
        return push(TML_EV_COMM_OVERLAPPED, b, begin_ns, end_ns);
    tml_comm_cell c = { begin_ns, end_ns, b };
    return tml__comm_box_put(&c);
}

int tml__marker_push(uint32_t kind, uint32_t arg, int64_t t0, int64_t t1)
{
    int rc = check_on();
    return rc ? rc : push(kind, arg, t0, t1);
}

int tml_cuda_memory(int64_t allocated_bytes, int64_t reserved_bytes,
                    int64_t allocated_peak_bytes, int64_t reserved_peak_bytes,
                    int64_t device_total_bytes)
{
    int rc = check_on();
    if (rc)
        return rc;
    _Atomic int64_t *cb = tml__req.cuda_bytes;
    if (allocated_bytes >= 0)
        atomic_store_explicit(&cb[0], allocated_bytes, memory_order_relaxed);
    if (reserved_bytes >= 0)
        atomic_store_explicit(&cb[1], reserved_bytes, memory_order_relaxed);
    if (device_total_bytes > 0)
        atomic_store_explicit(&cb[2], device_total_bytes, memory_order_relaxed);
    if (allocated_bytes >= 0)
        rc = push(TML_EV_MEM, 0, allocated_bytes,
                  allocated_peak_bytes >= 0 ? allocated_peak_bytes : -1);
    if (reserved_bytes >= 0 && rc == 0)
        rc = push(TML_EV_MEM, 1, reserved_bytes,
                  reserved_peak_bytes >= 0 ? reserved_peak_bytes : -1);
    return rc;
}

int tml_set_cuda_stream(void *stream)
{
    int rc = check_on();
    if (rc)
        return rc;
    tml_slot *sl = my_slot();
    if (!sl)
        return TML_EFULL;
    tml_cuda *cu = tml__cuda_get(tml__setup.libcuda);
    if (!cu)
        return TML_EIO;
    tml_gpu_pool *p = atomic_load(&sl->gpu);
    if (!p) {
        rc = tml__gpu_pool_new(cu, GPU_POOL_EVENTS, &p);
        if (rc < 0)
            return rc;
        atomic_store(&sl->gpu, p);
    }
    T.stream = stream;
    T.gpu = p;
    return 0;
}

int tml_unset_cuda_stream(void)
{
    int rc = check_on();
    if (rc)
        return rc;
    if (!my_slot())
        return TML_EFULL;
    T.gpu = NULL;
    T.stream = NULL;
    return 0;
}

/* ---- settings for the shipper (atomics only) ---------------------------- */

int tml_set_rank(int32_t rank, int32_t world_size)
{
    if (rank < 0 || world_size < 1 || rank >= world_size)
        return TML_EINVAL;
    int st = atomic_load(&tml__setup.state);
    if (st == TML_ST_DISABLED)
        return TML_EDISABLED;
    if (st == TML_ST_ON && atomic_load(&tml__req.hello_sent))
        return TML_ESTATE;     /* too late: the aggregator knows us already */
    atomic_store(&tml__req.identity, ((int64_t)rank << 32) | world_size);
    return 0;
}

static int set_launcher(int how)
{
    int st = atomic_load(&tml__setup.state);
    if (st == TML_ST_DISABLED)
        return TML_EDISABLED;
    int was = atomic_load(&tml__req.launcher);
    if (how > was)
        atomic_store(&tml__req.launcher, how);
    return 0;
}

int tml_set_launcher(void)
{
    return set_launcher(1);
}

int tml_set_launcher_forked(void)
{
    return set_launcher(2);
}

int tml_set_loader_config(int32_t num_workers, int pin_memory)
{
    if (num_workers < 0)
        return TML_EINVAL;
    int st = atomic_load(&tml__setup.state);
    if (st == TML_ST_DISABLED)
        return TML_EDISABLED;
    if (st != TML_ST_ON)
        return TML_ESTATE;
    atomic_store(&tml__req.loader, (((int64_t)num_workers << 1) | (pin_memory ? 1 : 0)) + 1);
    return 0;
}

int tml_set_auto_models(const char *names)
{
    int st = atomic_load(&tml__setup.state);
    if (st == TML_ST_DISABLED)
        return TML_EDISABLED;
    if (st != TML_ST_ON)
        return TML_ESTATE;
    pthread_mutex_lock(&tml__req.auto_models_mu);
    snprintf(tml__req.auto_models, sizeof(tml__req.auto_models), "%s", names ? names : "");
    tml__req.auto_models_new = 1;
    pthread_mutex_unlock(&tml__req.auto_models_mu);
    return 0;
}

int tml__take_auto_models(char *dst, size_t cap)
{
    pthread_mutex_lock(&tml__req.auto_models_mu);
    int fresh = tml__req.auto_models_new;
    if (fresh)
        snprintf(dst, cap, "%s", tml__req.auto_models);
    tml__req.auto_models_new = 0;
    pthread_mutex_unlock(&tml__req.auto_models_mu);
    return fresh;
}

int tml_count_glue_calls(uint32_t n)
{
    int rc = check_on();
    if (rc)
        return rc;
    tml_slot *s = my_slot();
    if (s)
        atomic_store_explicit(&s->glue_calls,
                              atomic_load_explicit(&s->glue_calls, memory_order_relaxed) + n,
                              memory_order_relaxed);
    return 0;
}

int tml_set_call_cost_ns(int64_t ns)
{
    if (ns < 0)
        return TML_EINVAL;
    atomic_store(&tml__req.call_cost_ns, ns);
    return 0;
}
