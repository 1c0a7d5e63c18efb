/*
 * _traceml.c - the CPython face of the engine (module traceml_ai._traceml).
 *
 * Everything that runs once per step, or once per phase, lives here, so that
 * the only Python code left on the hot path is the user's own loop. The
 * package's __init__.py decides *what* to instrument (which classes to patch,
 * which models to hook); this file decides nothing and only provides the
 * callables that are installed:
 *
 *   PhaseCall  a callable wrapping another callable with a phase. Calling it
 *              marks the phase around the wrapped call (also when it raises).
 *              It binds like a function (tp_descr_get, and it is a method
 *              descriptor so CPython's method-call fast path skips the bound
 *              method), so it can replace class attributes such as
 *              `_BaseDataLoaderIter.__next__`, `Tensor.backward` or an
 *              optimizer's `step`. Kinds: a plain phase; INPUT, timed only
 *              when the fetch returned a value (StopIteration at the end of
 *              an epoch is not a fetch); H2D for `Tensor.to`/`.cuda`/`copy_`,
 *              recorded only for a copy from a non-CUDA tensor to a CUDA one.
 *              FORWARD: a wrapper installed on one model instance (its
 *              __dict__["forward"], see __init__.py), so that the model's
 *              nn.Module.__call__ keeps its no-hook fast path (a forward
 *              hook costs 1.5-2 us per call in PyTorch 2.x); it deep-copies
 *              and pickles as the callable it wraps, so a copy of the model
 *              is exactly what it would be without TraceML. COMM: a
 *              blocking collective torch's own code calls (DDP's buffer
 *              broadcast, dist._broadcast_coalesced(group, tensors, ...)),
 *              with the bytes of its tensors; in C so that torch.compile,
 *              which runs DDP's forward outside its graphs, never meets a
 *              Python frame of TraceML's there. BEFORE / AFTER: no phase,
 *              a hook called with the call's arguments before the call or
 *              after it returned (DataLoader's iterator and DDP's
 *              constructor, os.exec*): torch's warnings.warn(...,
 *              stacklevel=2) inside the wrapped call names the frame that
 *              called it, and a Python wrapper would be that frame.
 *   TimedIter  the manual-mode `wrap_dataloader_fetch()`: an iterator whose
 *              fetches are timed as INPUT.
 *   the step context returned by trace_step(): one shared object whose
 *              __enter__/__exit__ are tml_step_begin and tml_step_end (or
 *              tml_step_abort when an exception leaves the bracket). The
 *              engine keeps the per-thread state, so the object is stateless
 *              and trace_step() allocates nothing.
 *
 * GPU runs: copies and fetches are marked with begin/end (tml_phase_cancel
 * when the call turns out not to be one), so that a thread with a CUDA
 * stream also records their CUDA events. The package may install two
 * callables: a GPU hook that trace_step() calls on its first steps until
 * it reports that the GPU clock is set up (it calls set_cuda_stream()),
 * and a memory probe called at the end of each step and of the traced
 * forward, returning the CUDA allocator's figures for tml_cuda_memory().
 *
 * Failures never reach the training loop: a marker that fails is ignored
 * (the engine counts what it drops), and anything that goes wrong while
 * installing hooks is reported by the package as a warning.
 *
 * The stable ABI: this file uses only the limited API of CPython 3.10
 * (Py_LIMITED_API below), so one build, `_traceml.abi3.so`, loads into
 * every CPython from 3.10 on and the wheel is tagged cp310-abi3. 3.10 is
 * the floor because its limited API is the first with METH_FASTCALL (the
 * per-step entries take their arguments without a tuple) and
 * PyObject_CallNoArgs. What that costs: the types are heap types made
 * from specs, and PhaseCall is called through tp_call (an argument tuple
 * CPython makes, handed on unchanged to the wrapped callable) instead of
 * vectorcall, whose limited API starts at 3.12: measured in
 * docs/performance.md, within the noise. Its __module__ is answered in
 * phasecall_getattro, since a heap type's own __module__ (a string in its
 * dictionary) would otherwise hide the wrapped callable's.
 */
#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

/* Py_XSETREF is not in the limited API */
#define XSETREF(dst, src) do { PyObject *old_ = (PyObject *)(dst); (dst) = (src); Py_XDECREF(old_); } while (0)

#include "traceml/traceml.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum {
    KIND_PHASE = 0,   /* phase_begin / call / phase_end */
    KIND_INPUT = 1,   /* timed, recorded only when a value came back */
    KIND_H2D = 2,     /* self -> result: recorded when non-CUDA -> CUDA */
    KIND_H2D_COPY = 3,/* dst.copy_(src): recorded when src non-CUDA, dst CUDA */
    KIND_PLAIN = 4,   /* no marker: used to measure the glue itself */
    KIND_FORWARD = 5, /* a model's forward: then the memory probe */
    KIND_COMM = 6,    /* fn(group, tensors, ...): a blocking collective, its bytes */
    KIND_BEFORE = 7,  /* hook(*args, **kwargs), then fn: no phase */
    KIND_AFTER = 8    /* fn, then hook(*args, **kwargs) when fn returned: no phase */
};

static PyObject *str_is_cuda;       /* interned "is_cuda" */
/* While a KIND_AFTER hook runs on this thread: when its wrapped call began. */
static _Thread_local int64_t after_t0;
static PyObject *step_ctx;          /* the shared step context */
static PyObject *h2d_ctx;           /* the shared H2D block context */
static PyObject *installer;         /* Python callable(model), or NULL */
static int hooks_enabled;           /* trace_step() wraps the model's forward */
static PyObject *gpu_hook;          /* callable() -> True once the GPU clock is set up */
static int gpu_hook_tries;
static PyObject *mem_probe;         /* callable() -> 5 ints (tml_cuda_memory) or None */
static PyObject *starter;           /* callable(): starts TraceML, once (deferred zero-edit) */
/* The other models of a marked step (a GAN traced as trace_step(D): its
 * generator). The package's finder (callable(optimizer)) is called when an
 * optimizer not seen before steps inside a trace_step(model) bracket, in
 * auto or selective mode with forward timing; it times the models that
 * hold that optimizer's parameters and are not already timed, and names
 * them in the summary (tml_set_auto_models): "also timed: Generator". */
static PyObject *extra_finder;
static _Thread_local int models_given;  /* the last trace_step() named a model */
static _Thread_local int marked_open;   /* in a step whose trace_step() named one */

#define GPU_HOOK_TRIES 50

/* Throughput: each batch a DataLoader fetch returns is counted
 * (tml_step_samples) once the package gave the callable that names
 * torch's Tensor type and the dtypes of token ids (_set_batch_types; it
 * is called at the first fetch, when torch is whole: the loader may be
 * patched while torch is still importing); a trace_step(samples=) turns
 * the counting off for good. */
static PyObject *batch_types;       /* callable() -> (Tensor, dtypes, UserDict), until called */
static PyObject *tensor_type;       /* torch.Tensor, or NULL: no counting */
static PyObject *token_dtypes;      /* a tuple: torch.int64, torch.int32 */
static PyObject *userdict_type;     /* collections.UserDict */
static PyObject *str_shape, *str_dtype, *str_input_ids, *str_data;
static int batches_counted = 1;
/* The batches the fetches inside the open one counted: the innermost
 * fetch (the DataLoader's) counts, never one around it (a Trainer's
 * accumulation window pulled as one fetch, whose result is a list of
 * batches), and the outermost hands the sum to the engine after its
 * Input span, so the window's batches count for the step it feeds. */
static _Thread_local long long fetched_samples, fetched_tokens;

/* Calls the memory probe, if any, and hands its figures to the engine.
 * Errors are swallowed: a failing probe is dropped for good. */
static void
probe_memory(void)
{
    PyObject *r;
    long long v[5];
    int i;

    if (mem_probe == NULL)
        return;
    r = PyObject_CallNoArgs(mem_probe);
    if (r == NULL) {
        PyErr_Clear();
        Py_CLEAR(mem_probe);
        return;
    }
    if (PyTuple_Check(r) && PyTuple_Size(r) == 5) {
        for (i = 0; i < 5; i++) {
            v[i] = PyLong_AsLongLong(PyTuple_GetItem(r, i));
            if (v[i] == -1 && PyErr_Occurred()) {
                PyErr_Clear();
                v[i] = -1;
            }
        }
        tml_cuda_memory(v[0], v[1], v[2], v[3], v[4]);
    }
    Py_DECREF(r);
}

/*
 * Automatic step detection (zero-edit tracing: `traceml run` on a script
 * that never calls trace_step). A step opens at the first training call
 * on a thread (a forward with gradients on, a backward, an optimizer step,
 * a copy to the GPU; never inside a fetch) and ends when optimizer.step()
 * returns (of several optimizers stepping in turn, the last of a round).
 * In a process where no optimizer stepped (a hand-written update) it ends
 * at the next forward after a backward instead. An explicit trace_step()
 * turns detection off for good: marked steps win.
 *
 * The models are found by the package (_zero_edit.discover), called from
 * here at the first backward and at the first step of every optimizer not
 * seen before, so a new optimizer (an LR finder's, then the real one; a new
 * one per epoch or fine-tuning phase) is found like the first one.
 *
 * Which optimizer closes a round is learnt from the order they step in:
 * while learning every optimizer step ends a step; when the first
 * optimizer of the round steps again, the last one of the round is the
 * closer (a GAN's discriminator, then generator: the generator). A round
 * is learnt again when an optimizer not seen before steps (an LR finder's
 * successor, the next fine-tuning phase's), when the closer is gone (a
 * weak reference: TraceML keeps no optimizer alive) or when another
 * optimizer steps twice without it.
 * Optimizers are otherwise only compared by address, never referenced.
 */
#define OPT_MAX 16
static int auto_steps;                  /* detection on (package: _set_auto_steps) */
static int auto_h2d;                    /* a copy to the GPU opens a step (CUDA present) */
static int auto_have_opt;               /* an optimizer exists: only its step ends one */
static PyObject *grad_enabled;          /* torch.is_grad_enabled */
static PyObject *discover;              /* callable(optimizer or None), or NULL */
static int discovered_backward;         /* discover(None) ran at the first backward */
static PyObject *known_opts[OPT_MAX];   /* weakrefs of the optimizers handed to discover */
static int known_next;
static PyObject *closer;                /* weakref of the closing optimizer; NULL: learning */
static uintptr_t round_ids[OPT_MAX];    /* learning: the round's optimizers, in order */
static int round_n;
static uintptr_t since_ids[OPT_MAX];    /* learnt: the others stepped since the closer */
static int since_n;
static _Thread_local int auto_open, auto_backward, auto_opt_seen, auto_in_fetch;
static _Thread_local int auto_in_backward;      /* Tensor.backward -> autograd.backward */
/* A whole train step compiled with torch.compile (forward, backward and
 * optimizer.step() in one compiled function): the forward and the
 * optimizer step run inside compiled code, which calls no hook, and only
 * the backward (a graph break: Dynamo runs it as is) is seen. While no
 * optimizer step was ever seen and torch.compile compiled something
 * (compiled(), the package's), a backward after a backward ends the step
 * and opens the next: one step per call of the compiled function. Not
 * once a timed forward ran: an eager model whose optimizer.step alone is
 * compiled keeps the summary's "a torch.compile'd optimizer.step() is not
 * seen" (its steps cannot be told apart honestly). */
static PyObject *compiled;              /* callable() -> true, or NULL */
static int opt_stepped;                 /* an optimizer's step hooks ran */
static int fwd_seen;                    /* a timed forward ran */

static void call_gpu_hook(void);

/* Deferred zero-edit tracing (a script that imports TraceML but reaches
 * it without init()): the first trace_step() or optimizer step starts
 * TraceML through the package's starter, once. */
static void
call_starter(void)
{
    PyObject *fn = starter, *r;

    if (fn == NULL)
        return;
    starter = NULL;
    r = PyObject_CallNoArgs(fn);
    if (r == NULL)
        PyErr_Clear();
    Py_XDECREF(r);
    Py_DECREF(fn);
}

static int
grad_on(void)
{
    PyObject *r;
    int on;

    if (grad_enabled == NULL)
        return 1;
    r = PyObject_CallNoArgs(grad_enabled);
    if (r == NULL) {
        PyErr_Clear();
        return 1;
    }
    on = r == Py_True;
    Py_DECREF(r);
    return on;
}

/* The deep dive's step hook (_deep_dive.py), or NULL: called with False
 * before a step begins and with True before it ends, so that what it does
 * (start and stop the profiler) lands in the step it flags. Set only
 * until its window is over: a step pays one pointer test after that. */
static PyObject *step_hook;

static void
call_step_hook(int end)
{
    PyObject *r;

    if (step_hook == NULL)
        return;
    r = PyObject_CallFunctionObjArgs(step_hook, end ? Py_True : Py_False, NULL);
    if (r == NULL)
        PyErr_Clear();          /* the hook reports its own failures */
    Py_XDECREF(r);
}

static void
auto_end(void)
{
    if (!auto_open)
        return;
    probe_memory();
    call_step_hook(1);
    tml_step_end_detected();
    auto_open = auto_backward = 0;
}

/* A training call begins: opens the step unless one is open; a forward
 * after a backward on a thread without optimizer steps starts the next. */
static void
auto_begin(int forward, int need_grad)
{
    if (!auto_steps || auto_in_fetch)
        return;
    if (auto_open && forward && auto_backward && !auto_opt_seen && !auto_have_opt)
        auto_end();
    if (auto_open || (need_grad && !grad_on()))
        return;
    call_gpu_hook();
    call_step_hook(0);
    if (tml_step_begin() == 0)
        auto_open = 1;
}

/* 1 when steps are told apart by their backwards: no optimizer step was
 * ever seen, and torch.compile compiled something (see `compiled`). */
static int
steps_by_backward(void)
{
    PyObject *r;
    int yes;

    if (opt_stepped || fwd_seen || compiled == NULL)
        return 0;
    r = PyObject_CallNoArgs(compiled);
    if (r == NULL) {
        PyErr_Clear();
        return 0;
    }
    yes = PyObject_IsTrue(r) == 1;
    Py_DECREF(r);
    PyErr_Clear();
    return yes;
}

/* fn(obj), if fn: the package's finders report their own failures. */
static void
call_fn(PyObject *fn, PyObject *obj)
{
    if (fn != NULL) {
        PyObject *r = PyObject_CallFunctionObjArgs(fn, obj, NULL);
        if (r == NULL)
            PyErr_Clear();
        Py_XDECREF(r);
    }
}

/* Hands obj (an optimizer, or None at the first backward) to the package's
 * discover(), which finds and times the models. */
static void
call_discover(PyObject *obj)
{
    call_fn(discover, obj);
}

static PyObject *
ref_target(PyObject *ref)
{
    return ref != NULL ? PyWeakref_GetObject(ref) : NULL;
}

/* 1 when opt was seen before; else it is noted (weakly) and 0. */
static int
opt_known(PyObject *opt)
{
    int i;

    for (i = 0; i < OPT_MAX; i++)
        if (ref_target(known_opts[i]) == opt)
            return 1;
    for (i = 0; i < OPT_MAX; i++)           /* a dead slot, else the oldest */
        if (known_opts[i] == NULL || ref_target(known_opts[i]) == Py_None)
            break;
    if (i == OPT_MAX)
        i = known_next++ % OPT_MAX;
    PyObject *ref = PyWeakref_NewRef(opt, NULL);
    if (ref == NULL)
        PyErr_Clear();
    XSETREF(known_opts[i], ref);
    return 0;
}

/* The weakref of the live known optimizer at address id, or NULL. */
static PyObject *
known_ref(uintptr_t id)
{
    for (int i = 0; i < OPT_MAX; i++)
        if ((uintptr_t)ref_target(known_opts[i]) == id)
            return known_opts[i];
    return NULL;
}

static int
ids_have(const uintptr_t *ids, int n, uintptr_t id)
{
    for (int i = 0; i < n; i++)
        if (ids[i] == id)
            return 1;
    return 0;
}

static void
relearn(void)
{
    Py_CLEAR(closer);
    round_n = since_n = 0;
}

/* Called when opt's step returns: 1 when it ends the detected step. */
static int
opt_closes_step(PyObject *opt)
{
    uintptr_t id = (uintptr_t)opt;
    PyObject *c = ref_target(closer);

    if (c == opt) {
        since_n = 0;
        return 1;
    }
    if (c != NULL && c != Py_None) {        /* a round was learnt */
        if (!ids_have(since_ids, since_n, id) && since_n < OPT_MAX) {
            since_ids[since_n++] = id;
            return 0;
        }
        relearn();      /* a whole round without the closer: it left */
    } else if (c != NULL) {
        relearn();      /* the closer is gone */
    }
    if (round_n > 0 && round_ids[0] == id) {        /* the round repeats */
        closer = known_ref(round_ids[round_n - 1]);
        Py_XINCREF(closer);
        round_n = since_n = 0;
    } else if (!ids_have(round_ids, round_n, id) && round_n < OPT_MAX) {
        round_ids[round_n++] = id;
    }
    return 1;           /* while learning, every optimizer step is a step */
}

#define MODEL_CACHE 8
static PyObject *model_cache[MODEL_CACHE];  /* weakrefs of hooked models */
static int model_cache_next;

/* 1 when obj.is_cuda is True, 0 when it is not, -1 when it cannot be told. */
static int
is_cuda(PyObject *obj)
{
    PyObject *v = PyObject_GetAttr(obj, str_is_cuda);
    int r;

    if (v == NULL) {
        PyErr_Clear();
        return -1;
    }
    r = (v == Py_True);
    Py_DECREF(v);
    return r;
}

/* Bytes a broadcast of the tensors args[1] sends in the group args[0]
 * (args: the call's tuple): their sizes when the group has more than one
 * rank, else 0. Never raises. */
static long long
coalesced_bytes(PyObject *args)
{
    long long n = 0;
    PyObject *size, *seq;

    if (PyTuple_Size(args) < 2)
        return 0;
    size = PyObject_CallMethod(PyTuple_GetItem(args, 0), "size", NULL);
    if (size == NULL || PyLong_AsLong(size) <= 1) {
        Py_XDECREF(size);
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(size);
    seq = PyTuple_GetItem(args, 1);
    Py_ssize_t len = PySequence_Size(seq);
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *t = PySequence_GetItem(seq, i);
        PyObject *b = t != NULL ? PyObject_GetAttrString(t, "nbytes") : NULL;
        long long v = b != NULL ? PyLong_AsLongLong(b) : -1;
        Py_XDECREF(b);
        Py_XDECREF(t);
        if (v < 0)
            PyErr_Clear();      /* not a tensor: counts nothing */
        n += v > 0 ? v : 0;
    }
    PyErr_Clear();
    return n;
}

/* ------------------------------------------------------------------ */
/* The fetch's CPU share, for `traceml tune` (docs/tune.md): the fetching
 * thread's CPU time and the wall time of the outermost fetches, summed.
 * Only where tune asks (TRACEML_TUNE_FETCH, a path): every 16 fetches and
 * at shutdown the sums go to PATH.<pid> as "cpu_ns wall_ns fetches". */

static const char *fetch_path;      /* NULL: not asked */
static int fetch_asked = -1;
static int64_t fetch_cpu_ns, fetch_wall_ns, fetch_count;

static int64_t
clock_ns(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* This thread's CPU time and run-queue wait (ns) from the scheduler's
 * statistics; without them, the CPU clock and no wait. A fetch that waits
 * for a core (a busy machine) is not a fetch that waits for data: the
 * share is CPU time over the wall time less that wait. */
static void
thread_sched(int64_t *cpu, int64_t *wait)
{
    char buf[96];
    long long c = -1, w = -1;
    int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n > 0) {
        buf[n] = '\0';
        if (sscanf(buf, "%lld %lld", &c, &w) != 2)
            c = w = -1;
    }
    if (c < 0 || w < 0) {
        c = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        w = 0;
    }
    *cpu = c;
    *wait = w;
}

static void
fetch_write(void)
{
    char file[4200], line[96];
    int fd, len;
    if (fetch_path == NULL || fetch_count == 0)
        return;
    snprintf(file, sizeof(file), "%s.%ld", fetch_path, (long)getpid());
    fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    len = snprintf(line, sizeof(line), "%lld %lld %lld\n", (long long)fetch_cpu_ns,
                   (long long)fetch_wall_ns, (long long)fetch_count);
    if (write(fd, line, (size_t)len) < 0) {
        /* nothing to do: tune plans without the share */
    }
    close(fd);
}

/* One outermost fetch, begun at wall time w0 with the thread's CPU time
 * c0 and run-queue wait q0, added to the sums. */
static void
fetch_add(int64_t c0, int64_t q0, int64_t w0)
{
    int64_t c1, q1;
    thread_sched(&c1, &q1);
    fetch_cpu_ns += c1 - c0;
    fetch_wall_ns += clock_ns(CLOCK_MONOTONIC) - w0 - (q1 - q0);
    if (++fetch_count % 16 == 0)
        fetch_write();
}

/* ------------------------------------------------------------------ */
/* PhaseCall                                                           */

typedef struct {
    PyObject_HEAD
    PyObject *fn;
    PyObject *hook;             /* KIND_BEFORE / KIND_AFTER, else NULL */
    PyObject *dict;
    PyObject *weaklist;
    int phase;
    int kind;
} phasecall;

static PyTypeObject *phasecall_type;
static PyObject *str_module;        /* interned "__module__" */

/* The argument at i of a call's tuple (borrowed), or NULL. */
static PyObject *
arg_at(PyObject *args, Py_ssize_t nargs, Py_ssize_t i)
{
    return i < nargs ? PyTuple_GetItem(args, i) : NULL;
}

/* A BEFORE / AFTER hook: TraceML's, so what it returns or raises never
 * reaches the training (an exception of the wrapped call, in flight, is
 * kept as it is). */
static void
call_hook(PyObject *hook, PyObject *args, PyObject *kwargs)
{
    PyObject *type, *value, *tb, *r;

    PyErr_Fetch(&type, &value, &tb);
    r = PyObject_Call(hook, args, kwargs);
    if (r == NULL)
        PyErr_Clear();
    Py_XDECREF(r);
    PyErr_Restore(type, value, tb);
}

static int
is_tensor(PyObject *o)
{
    return tensor_type != NULL && PyType_IsSubtype(Py_TYPE(o), (PyTypeObject *)tensor_type);
}

/* The types count_batch reads, from the package's callable: 1 when known.
 * Asked at most 16 times (a fetch before torch is imported fails). */
static int
know_batch_types(void)
{
    static int tries;
    if (tensor_type != NULL)
        return 1;
    if (batch_types == NULL)
        return 0;
    PyObject *r = PyObject_CallNoArgs(batch_types);
    if (r == NULL && ++tries < 16) {
        PyErr_Clear();
        return 0;
    }
    Py_CLEAR(batch_types);      /* done, whatever it answered */
    if (r != NULL && PyTuple_Check(r) && PyTuple_Size(r) == 3 &&
        PyType_Check(PyTuple_GetItem(r, 0)) && PyTuple_Check(PyTuple_GetItem(r, 1)) &&
        PyType_Check(PyTuple_GetItem(r, 2))) {
        tensor_type = PyTuple_GetItem(r, 0);
        token_dtypes = PyTuple_GetItem(r, 1);
        userdict_type = PyTuple_GetItem(r, 2);
        Py_INCREF(tensor_type);
        Py_INCREF(token_dtypes);
        Py_INCREF(userdict_type);
    }
    Py_XDECREF(r);
    PyErr_Clear();
    return tensor_type != NULL;
}

/* The tensor a batch leads with (borrowed, or NULL): the batch itself, the
 * first item of a tuple or list, a dict's input_ids or first value, the
 * same of a UserDict's data (Hugging Face's BatchEncoding), three levels
 * down at most. Runs none of the batch's own code. */
static PyObject *
lead_tensor(PyObject *b, int depth)
{
    if (b == NULL || depth > 3)
        return NULL;
    if (is_tensor(b))
        return b;
    if (PyTuple_Check(b))
        return PyTuple_Size(b) > 0 ? lead_tensor(PyTuple_GetItem(b, 0), depth + 1) : NULL;
    if (PyList_Check(b))
        return PyList_Size(b) > 0 ? lead_tensor(PyList_GetItem(b, 0), depth + 1) : NULL;
    if (PyDict_Check(b)) {
        PyObject *ids = PyDict_GetItemWithError(b, str_input_ids), *k, *v;
        Py_ssize_t pos = 0;
        if (ids != NULL && is_tensor(ids))
            return ids;
        return PyDict_Next(b, &pos, &k, &v) ? lead_tensor(v, depth + 1) : NULL;
    }
    if (userdict_type == NULL || !PyType_IsSubtype(Py_TYPE(b), (PyTypeObject *)userdict_type))
        return NULL;
    /* data from the instance's own __dict__: no property, no __getattr__ */
    PyObject *d = PyObject_GenericGetDict(b, NULL), *t = NULL;
    PyObject *data = d != NULL ? PyDict_GetItemWithError(d, str_data) : NULL;
    if (data != NULL && PyDict_Check(data))
        t = lead_tensor(data, depth + 1);   /* held by b's __dict__ */
    Py_XDECREF(d);
    return t;
}

static int
token_dtype(PyObject *t)
{
    PyObject *d = PyObject_GetAttr(t, str_dtype);
    int found = 0;
    for (Py_ssize_t i = 0; d != NULL && i < PyTuple_Size(token_dtypes); i++)
        found |= PyTuple_GetItem(token_dtypes, i) == d;
    Py_XDECREF(d);
    return found;
}

/* A fetched batch's samples (its lead tensor's first dimension) and
 * tokens (the elements of a 2-D integer lead tensor), into
 * fetched_samples / fetched_tokens. Never raises. */
static void
count_batch(PyObject *batch)
{
    PyObject *t = lead_tensor(batch, 0);
    PyObject *shape = t ? PyObject_GetAttr(t, str_shape) : NULL;
    Py_ssize_t nd = shape != NULL && PyTuple_Check(shape) ? PyTuple_Size(shape) : 0;
    long long samples = nd >= 1 ? PyLong_AsLongLong(PyTuple_GetItem(shape, 0)) : 0, tokens = -1;
    if (nd == 2 && token_dtype(t))
        tokens = samples * PyLong_AsLongLong(PyTuple_GetItem(shape, 1));
    Py_XDECREF(shape);
    if (PyErr_Occurred()) {
        PyErr_Clear();
    } else if (samples > 0) {
        fetched_samples = samples;
        fetched_tokens = tokens > 0 ? tokens : 0;
    }
}

/* A DataLoader fetch: begin/end (not a span) so that a GPU-timed thread
 * also records the fetch's CUDA events; a fetch that raised is no fetch. */
static PyObject *
call_input(phasecall *pc, PyObject *args, PyObject *kwargs)
{
    if (fetch_asked < 0) {
        fetch_path = getenv("TRACEML_TUNE_FETCH");
        fetch_asked = fetch_path != NULL && *fetch_path;
    }
    int measure = fetch_asked && auto_in_fetch == 0;   /* the outermost fetch */
    int64_t c0 = 0, q0 = 0, w0 = 0;
    if (measure) {
        w0 = clock_ns(CLOCK_MONOTONIC);
        thread_sched(&c0, &q0);
    }
    tml_phase_begin(TML_PHASE_INPUT);
    auto_in_fetch++;
    long long samples0 = fetched_samples, tokens0 = fetched_tokens;
    fetched_samples = fetched_tokens = 0;
    PyObject *r = PyObject_Call(pc->fn, args, kwargs);
    auto_in_fetch--;
    if (measure)
        fetch_add(c0, q0, w0);
    if (r != NULL) {
        tml_phase_end(TML_PHASE_INPUT);
        if (fetched_samples == 0 && batches_counted && know_batch_types())
            count_batch(r);
    } else {
        tml_phase_cancel(TML_PHASE_INPUT);
    }
    if (auto_in_fetch > 0) {          /* inside another fetch: its count */
        fetched_samples += samples0;
        fetched_tokens += tokens0;
    } else if (fetched_samples > 0) {
        tml_step_samples(fetched_samples, fetched_tokens > 0 ? fetched_tokens : -1);
        fetched_samples = fetched_tokens = 0;
    }
    return r;
}

/* Tensor.to / .cuda (KIND_H2D) and copy_ (KIND_H2D_COPY): a call that is
 * no host-to-device copy records nothing, but the training paid for the
 * wrapper: counted (tml_count_glue_calls). */
static PyObject *
call_h2d(phasecall *pc, PyObject *args, PyObject *kwargs)
{
    Py_ssize_t nargs = PyTuple_Size(args);
    int copy = pc->kind == KIND_H2D_COPY;
    int h2d = copy ? nargs >= 2 && is_cuda(arg_at(args, nargs, 0)) == 1
                         && is_cuda(arg_at(args, nargs, 1)) == 0
                   : nargs >= 1 && is_cuda(arg_at(args, nargs, 0)) == 0;
    if (!h2d) {
        tml_count_glue_calls(1);
        return PyObject_Call(pc->fn, args, kwargs);
    }
    if (auto_steps && !auto_open && auto_h2d)
        auto_begin(0, 1);
    tml_phase_begin(TML_PHASE_H2D);
    PyObject *r = PyObject_Call(pc->fn, args, kwargs);
    if (r != NULL && (copy || is_cuda(r) == 1)) {
        tml_phase_end(TML_PHASE_H2D);
    } else {
        tml_phase_cancel(TML_PHASE_H2D);
        if (!copy)
            tml_count_glue_calls(1);
    }
    return r;
}

/* A forward's one counted call: the counter (hook(fn, args, kwargs), the
 * package's FLOP count) runs it once, the first time, and is dropped. */
static PyObject *
count_forward(phasecall *pc, PyObject *args, PyObject *kwargs)
{
    PyObject *hook = pc->hook;
    pc->hook = NULL;
    PyObject *r = PyObject_CallFunctionObjArgs(hook, pc->fn, args, kwargs ? kwargs : Py_None,
                                               NULL);
    Py_DECREF(hook);
    return r;
}

/* tp_call: CPython made the argument tuple (and the keyword dict, if
 * any); the wrapped callable gets both unchanged, so a wrapper adds no
 * allocation of its own. */
static PyObject *
phasecall_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    phasecall *pc = (phasecall *)self;
    PyObject *r;

    switch (pc->kind) {
    case KIND_PHASE:
        if (pc->phase == TML_PHASE_BACKWARD && auto_steps) {
            if (!discovered_backward) {
                discovered_backward = 1;
                call_discover(Py_None);
            }
            if (!auto_in_backward && auto_open && auto_backward && steps_by_backward())
                auto_end();     /* a compiled train step's next call */
            auto_begin(0, 0);
            auto_backward = 1;
        }
        tml_phase_begin((tml_phase)pc->phase);
        auto_in_backward += pc->phase == TML_PHASE_BACKWARD;
        r = PyObject_Call(pc->fn, args, kwargs);
        auto_in_backward -= pc->phase == TML_PHASE_BACKWARD;
        tml_phase_end((tml_phase)pc->phase);
        return r;
    case KIND_INPUT:
        return call_input(pc, args, kwargs);
    case KIND_H2D:
    case KIND_H2D_COPY:
        return call_h2d(pc, args, kwargs);
    case KIND_FORWARD:
        if (auto_steps) {
            fwd_seen = 1;
            auto_begin(1, 1);
        }
        tml_phase_begin(TML_PHASE_FORWARD);
        r = pc->hook != NULL ? count_forward(pc, args, kwargs) : PyObject_Call(pc->fn, args, kwargs);
        tml_phase_end(TML_PHASE_FORWARD);
        if (r != NULL)
            probe_memory();     /* activations are alive: near the step's peak */
        return r;
    case KIND_COMM:
        tml_phase_begin(TML_PHASE_COMM);
        r = PyObject_Call(pc->fn, args, kwargs);
        tml_phase_end(TML_PHASE_COMM);
        if (r != NULL)
            tml_comm_bytes(coalesced_bytes(args));
        return r;
    case KIND_BEFORE:
        call_hook(pc->hook, args, kwargs);
        return PyObject_Call(pc->fn, args, kwargs);
    case KIND_AFTER: {
        int64_t t0 = tml_now_ns(), outer = after_t0;
        r = PyObject_Call(pc->fn, args, kwargs);
        if (r != NULL) {
            after_t0 = t0;
            call_hook(pc->hook, args, kwargs);
            after_t0 = outer;
        }
        return r;
    }
    default:
        return PyObject_Call(pc->fn, args, kwargs);
    }
}

static PyObject *
phasecall_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"fn", "phase", "kind", "hook", NULL};
    PyObject *fn, *hook = Py_None;
    int phase, kind = KIND_PHASE;
    phasecall *pc;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "Oi|iO:PhaseCall", kwlist,
                                     &fn, &phase, &kind, &hook))
        return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "PhaseCall: fn must be callable");
        return NULL;
    }
    if (phase < 0 || phase >= TML_PHASE_COUNT || kind < KIND_PHASE || kind > KIND_AFTER) {
        PyErr_SetString(PyExc_ValueError, "PhaseCall: phase or kind out of range");
        return NULL;
    }
    int hooked = hook != Py_None && PyCallable_Check(hook);
    if ((kind == KIND_BEFORE || kind == KIND_AFTER) ? !hooked
                                                    : hook != Py_None && kind != KIND_FORWARD) {
        PyErr_SetString(PyExc_TypeError, "PhaseCall: a callable hook with KIND_BEFORE or "
                        "KIND_AFTER, and only then (or KIND_FORWARD's counter)");
        return NULL;
    }
    pc = (phasecall *)PyType_GenericAlloc(type, 0);
    if (pc == NULL)
        return NULL;
    Py_INCREF(fn);
    pc->fn = fn;
    if (hook != Py_None) {
        Py_INCREF(hook);
        pc->hook = hook;
    }
    pc->phase = phase;
    pc->kind = kind;
    return (PyObject *)pc;
}

static int
phasecall_traverse(phasecall *pc, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(pc));      /* a heap type: its instances own it */
    Py_VISIT(pc->fn);
    Py_VISIT(pc->hook);
    Py_VISIT(pc->dict);
    return 0;
}

static int
phasecall_clear(phasecall *pc)
{
    Py_CLEAR(pc->fn);
    Py_CLEAR(pc->hook);
    Py_CLEAR(pc->dict);
    return 0;
}

static void
phasecall_dealloc(phasecall *pc)
{
    PyTypeObject *type = Py_TYPE(pc);

    PyObject_GC_UnTrack(pc);
    if (pc->weaklist != NULL)
        PyObject_ClearWeakRefs((PyObject *)pc);
    phasecall_clear(pc);
    PyObject_GC_Del(pc);
    Py_DECREF(type);
}

/* Binds like a function: through an instance it is a bound method (whose
 * __func__ is this wrapper, which lr_scheduler's step counter relies on),
 * through the class it is itself. */
static PyObject *method_type;      /* types.MethodType (PyMethod_New is not limited API) */

static PyObject *
phasecall_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    (void)type;
    if (obj == NULL || obj == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyObject_CallFunctionObjArgs(method_type, self, obj, NULL);
}

/* Attributes the wrapper does not have come from the wrapped callable (the
 * profiler's `hooked` flag on an optimizer step, `__self__` of a bound
 * method, ...), and so does __module__ unless it was set on the wrapper. */
static PyObject *
phasecall_getattro(PyObject *self, PyObject *name)
{
    phasecall *pc = (phasecall *)self;
    PyObject *r;

    if (name == str_module || PyUnicode_Compare(name, str_module) == 0) {
        r = pc->dict != NULL ? PyDict_GetItemWithError(pc->dict, name) : NULL;
        if (r != NULL) {
            Py_INCREF(r);
            return r;
        }
        return PyErr_Occurred() ? NULL : PyObject_GetAttr(pc->fn, name);
    }
    r = PyObject_GenericGetAttr(self, name);

    if (r == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        r = PyObject_GetAttr(((phasecall *)self)->fn, name);
    }
    return r;
}

static PyObject *
phasecall_get_fnattr(PyObject *self, void *name)
{
    PyObject *d = ((phasecall *)self)->dict;

    if (d != NULL) {
        PyObject *v = PyDict_GetItemString(d, (const char *)name);
        if (v != NULL) {
            Py_INCREF(v);
            return v;
        }
    }
    return PyObject_GetAttrString(((phasecall *)self)->fn, (const char *)name);
}

static int
phasecall_set_fnattr(PyObject *self, PyObject *value, void *name)
{
    phasecall *pc = (phasecall *)self;

    if (pc->dict == NULL) {
        pc->dict = PyDict_New();
        if (pc->dict == NULL)
            return -1;
    }
    if (value == NULL)
        return PyDict_DelItemString(pc->dict, (const char *)name);
    return PyDict_SetItemString(pc->dict, (const char *)name, value);
}

static PyObject *
phasecall_repr(PyObject *self)
{
    phasecall *pc = (phasecall *)self;
    return PyUnicode_FromFormat("<traceml phase %d wrapper of %R>", pc->phase, pc->fn);
}

/* Pickling: a forward wrapper pickles as the callable it wraps (the
 * model's bound forward: getattr(model, "forward") when loaded), so a saved
 * model loads without TraceML; the class-level patches as themselves. */
static PyObject *
phasecall_reduce_ex(PyObject *self, PyObject *protocol)
{
    phasecall *pc = (phasecall *)self;
    if (pc->kind == KIND_FORWARD)
        return PyObject_CallMethod(pc->fn, "__reduce_ex__", "O", protocol);
    return Py_BuildValue("(O(OiiO))", (PyObject *)Py_TYPE(self), pc->fn, pc->phase, pc->kind,
                         pc->hook != NULL ? pc->hook : Py_None);
}

/* copy.deepcopy(model): the copy gets a deep copy of the wrapped callable
 * (the bound forward of the copy), untimed, as without TraceML. */
static PyObject *
phasecall_deepcopy(PyObject *self, PyObject *memo)
{
    phasecall *pc = (phasecall *)self;
    PyObject *copy = PyImport_ImportModule("copy"), *fn, *r;
    if (copy == NULL)
        return NULL;
    fn = PyObject_CallMethod(copy, "deepcopy", "OO", pc->fn, memo);
    Py_DECREF(copy);
    if (fn == NULL || pc->kind == KIND_FORWARD)
        return fn;
    r = PyObject_CallFunction((PyObject *)Py_TYPE(self), "OiiO", fn, pc->phase, pc->kind,
                              pc->hook != NULL ? pc->hook : Py_None);
    Py_DECREF(fn);
    return r;
}

static PyMemberDef phasecall_members[] = {
    {"__wrapped__", T_OBJECT, offsetof(phasecall, fn), READONLY, "the wrapped callable"},
    {"phase", T_INT, offsetof(phasecall, phase), READONLY, "the phase (TML_PHASE_*)"},
    {"kind", T_INT, offsetof(phasecall, kind), READONLY, "how the call is timed"},
    {"__dictoffset__", T_PYSSIZET, offsetof(phasecall, dict), READONLY, NULL},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(phasecall, weaklist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL}
};

static PyGetSetDef phasecall_getset[] = {
    {"__name__", phasecall_get_fnattr, phasecall_set_fnattr, NULL, "__name__"},
    {"__qualname__", phasecall_get_fnattr, phasecall_set_fnattr, NULL, "__qualname__"},
    {"__doc__", phasecall_get_fnattr, phasecall_set_fnattr, NULL, "__doc__"},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}
};

static PyMethodDef phasecall_methods[] = {
    {"__reduce_ex__", phasecall_reduce_ex, METH_O, NULL},
    {"__deepcopy__", phasecall_deepcopy, METH_O, NULL},
    {NULL, NULL, 0, NULL}
};

/* No Py_tp_doc: the wrapper's __doc__ is the wrapped callable's (the
 * getset above), as it was on the static type. */
static PyType_Slot phasecall_slots[] = {
    {Py_tp_new, phasecall_new},
    {Py_tp_dealloc, phasecall_dealloc},
    {Py_tp_traverse, phasecall_traverse},
    {Py_tp_clear, phasecall_clear},
    {Py_tp_call, phasecall_call},
    {Py_tp_descr_get, phasecall_descr_get},
    {Py_tp_getattro, phasecall_getattro},
    {Py_tp_setattro, PyObject_GenericSetAttr},
    {Py_tp_repr, phasecall_repr},
    {Py_tp_members, phasecall_members},
    {Py_tp_getset, phasecall_getset},
    {Py_tp_methods, phasecall_methods},
    {0, NULL}
};

/* METHOD_DESCRIPTOR: CPython's method calls (obj.step(), next(it)) call
 * the wrapper with the instance first instead of binding a method. */
static PyType_Spec phasecall_spec = {
    .name = "traceml_ai._traceml.PhaseCall",
    .basicsize = sizeof(phasecall),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_METHOD_DESCRIPTOR
           | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = phasecall_slots,
};

/* ------------------------------------------------------------------ */
/* TimedIter                                                           */

typedef struct {
    PyObject_HEAD
    PyObject *src;      /* what was wrapped */
    PyObject *it;       /* its iterator, NULL when src is a re-iterable */
} timediter;

static PyTypeObject *timediter_type;

static PyObject *
timediter_make(PyObject *src, PyObject *it)
{
    timediter *t = PyObject_GC_New(timediter, timediter_type);

    if (t == NULL)
        return NULL;
    Py_INCREF(src);
    t->src = src;
    Py_XINCREF(it);
    t->it = it;
    PyObject_GC_Track(t);
    return (PyObject *)t;
}

static PyObject *
timediter_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *src, *it, *r;
    (void)type;

    if (!PyArg_ParseTuple(args, "O:TimedIter", &src))
        return NULL;
    if (kwds != NULL && PyDict_Size(kwds) > 0) {
        PyErr_SetString(PyExc_TypeError, "TimedIter takes no keyword arguments");
        return NULL;
    }
    /* An iterator is wrapped as is; a loader (re-iterable) gives a fresh
     * timed iterator per epoch. */
    if (PyIter_Check(src)) {
        it = PyObject_GetIter(src);
        if (it == NULL)
            return NULL;
        r = timediter_make(src, it);
        Py_DECREF(it);
        return r;
    }
    return timediter_make(src, NULL);
}

static PyObject *
timediter_iter(PyObject *self)
{
    timediter *t = (timediter *)self;
    PyObject *it, *r;

    if (t->it != NULL) {
        Py_INCREF(self);
        return self;
    }
    it = PyObject_GetIter(t->src);
    if (it == NULL)
        return NULL;
    r = timediter_make(t->src, it);
    Py_DECREF(it);
    return r;
}

static PyObject *
timediter_next(PyObject *self)
{
    timediter *t = (timediter *)self;
    PyObject *r;
    int64_t t0;

    if (t->it == NULL) {
        PyErr_SetString(PyExc_TypeError,
                        "call iter() on the wrapped loader before next()");
        return NULL;
    }
    t0 = tml_now_ns();
    r = PyIter_Next(t->it);     /* NULL and no error at the end: StopIteration */
    if (r != NULL) {
        tml_phase_span(TML_PHASE_INPUT, t0, tml_now_ns());
        fetched_samples = fetched_tokens = 0;
        if (batches_counted && know_batch_types())
            count_batch(r);
        if (fetched_samples > 0)
            tml_step_samples(fetched_samples, fetched_tokens > 0 ? fetched_tokens : -1);
        fetched_samples = fetched_tokens = 0;
    }
    return r;
}

static Py_ssize_t
timediter_len(PyObject *self)
{
    return PyObject_Size(((timediter *)self)->src);
}

static PyObject *
timediter_getattro(PyObject *self, PyObject *name)
{
    PyObject *r = PyObject_GenericGetAttr(self, name);

    if (r == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        r = PyObject_GetAttr(((timediter *)self)->src, name);
    }
    return r;
}

static int
timediter_traverse(timediter *t, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(t));
    Py_VISIT(t->src);
    Py_VISIT(t->it);
    return 0;
}

static int
timediter_clear(timediter *t)
{
    Py_CLEAR(t->src);
    Py_CLEAR(t->it);
    return 0;
}

static void
timediter_dealloc(timediter *t)
{
    PyTypeObject *type = Py_TYPE(t);

    PyObject_GC_UnTrack(t);
    timediter_clear(t);
    PyObject_GC_Del(t);
    Py_DECREF(type);
}

static PyMemberDef timediter_members[] = {
    {"__wrapped__", T_OBJECT, offsetof(timediter, src), READONLY, "the wrapped loader or iterator"},
    {NULL, 0, 0, 0, NULL}
};

static PyType_Slot timediter_slots[] = {
    {Py_tp_doc, "TimedIter(loader_or_iterator): its fetches are timed as input wait."},
    {Py_tp_new, timediter_new},
    {Py_tp_dealloc, timediter_dealloc},
    {Py_tp_traverse, timediter_traverse},
    {Py_tp_clear, timediter_clear},
    {Py_tp_iter, timediter_iter},
    {Py_tp_iternext, timediter_next},
    {Py_tp_getattro, timediter_getattro},
    {Py_sq_length, timediter_len},
    {Py_tp_members, timediter_members},
    {0, NULL}
};

static PyType_Spec timediter_spec = {
    .name = "traceml_ai._traceml.TimedIter",
    .basicsize = sizeof(timediter),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = timediter_slots,
};

/* ------------------------------------------------------------------ */
/* Context objects: the step bracket and a manual H2D block.           */

typedef struct {
    PyObject_HEAD
    int h2d;    /* 0: step bracket, 1: H2D block */
} ctxobj;

static PyObject *
ctx_enter(PyObject *self, PyObject *unused)
{
    (void)unused;
    if (((ctxobj *)self)->h2d) {
        tml_phase_begin(TML_PHASE_H2D);
    } else {
        if (auto_steps) {       /* marked steps win over detected ones */
            auto_end();
            auto_steps = 0;
        }
        marked_open = models_given;
        models_given = 0;
        call_step_hook(0);
        tml_step_begin();
    }
    Py_INCREF(self);
    return self;
}

static PyObject *
ctx_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    int raised = nargs >= 1 && args[0] != Py_None;

    if (((ctxobj *)self)->h2d) {
        tml_phase_end(TML_PHASE_H2D);
        Py_RETURN_FALSE;
    }
    probe_memory();
    marked_open = 0;
    call_step_hook(1);
    if (raised)
        tml_step_abort();
    else
        tml_step_end();
    Py_RETURN_FALSE;   /* exceptions propagate unchanged */
}

static PyObject *
ctx_repr(PyObject *self)
{
    return PyUnicode_FromString(((ctxobj *)self)->h2d ? "<traceml h2d block>"
                                                      : "<traceml step>");
}

static PyMethodDef ctx_methods[] = {
    {"__enter__", ctx_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))ctx_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL}
};

static void
ctx_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);

    PyObject_Free(self);
    Py_DECREF(type);
}

static PyType_Slot ctx_slots[] = {
    {Py_tp_doc, "The context manager of one step (or of one manual H2D block)."},
    {Py_tp_dealloc, ctx_dealloc},
    {Py_tp_methods, ctx_methods},
    {Py_tp_repr, ctx_repr},
    {0, NULL}
};

static PyType_Spec ctx_spec = {
    .name = "traceml_ai._traceml.StepContext",
    .basicsize = sizeof(ctxobj),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = ctx_slots,
};

static PyTypeObject *ctx_type;

static PyObject *
ctx_make(int h2d)
{
    ctxobj *c = PyObject_New(ctxobj, ctx_type);

    if (c != NULL)
        c->h2d = h2d;
    return (PyObject *)c;
}

/* ------------------------------------------------------------------ */
/* Module functions                                                    */

static PyObject *
mod_init(PyObject *m, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"run_name", "logs_dir", "instrumented", "disabled", NULL};
    const char *run_name = NULL, *logs_dir = NULL;
    unsigned int mask = TML_PHASES_ALL;
    int disabled = 0, rc;
    tml_options o;
    (void)m;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|zzIp:init", kwlist,
                                     &run_name, &logs_dir, &mask, &disabled))
        return NULL;
    memset(&o, 0, sizeof o);
    o.run_name = run_name;
    o.logs_dir = logs_dir;
    o.instrumented = mask & TML_PHASES_ALL;
    o.disabled = disabled;
    Py_BEGIN_ALLOW_THREADS
    rc = tml_init(&o);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(rc);
}

static PyObject *
mod_shutdown(PyObject *m, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"status", "exit_code", NULL};
    const char *status = NULL, *text;
    int exit_code = 0;
    (void)m;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|zi:shutdown", kwlist, &status, &exit_code))
        return NULL;
    fetch_write();
    Py_BEGIN_ALLOW_THREADS
    if (status != NULL)
        tml_shutdown_with(status, exit_code);
    else
        tml_shutdown();
    Py_END_ALLOW_THREADS
    text = tml_summary_text();
    if (text == NULL)
        Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
}

static PyObject *
str_or_none(const char *s)
{
    if (s == NULL)
        Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

static PyObject *
mod_run_dir(PyObject *m, PyObject *unused)
{
    (void)m; (void)unused;
    return str_or_none(tml_run_dir());
}

/* summary_json() -> str or None: the run's summary so far (or the final
 * one); the wait (bounded) happens without the GIL. */
static PyObject *
mod_summary_json(PyObject *m, PyObject *unused)
{
    (void)m; (void)unused;
    char *out = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = tml_summary_json(&out);
    Py_END_ALLOW_THREADS
    if (rc < 0 || !out) {
        tml_free(out);
        Py_RETURN_NONE;
    }
    PyObject *r = PyUnicode_DecodeUTF8(out, (Py_ssize_t)strlen(out), "replace");
    tml_free(out);
    return r;
}

/* What tml_summary_flatten() / _html() made of a summary, as a str (and
 * freed), or ValueError. */
static PyObject *
summary_result(int rc, char *out)
{
    if (rc < 0) {
        PyErr_Format(PyExc_ValueError, "not a TraceML summary (%s)", tml_strerror(rc));
        return NULL;
    }
    PyObject *r = PyUnicode_DecodeUTF8(out, (Py_ssize_t)strlen(out), "replace");
    tml_free(out);
    return r;
}

/* summary_flatten(json_text) -> str: the flat traceml/... object as JSON
 * (the flattening is the engine's, src/report/flat.c). */
static PyObject *
mod_summary_flatten(PyObject *m, PyObject *arg)
{
    (void)m;
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(arg, &n);
    if (!s)
        return NULL;
    char *out = NULL;
    int rc = tml_summary_flatten(s, (size_t)n, &out);
    return summary_result(rc, out);
}

/* summary_html(json_text, what) -> str: HTML_PAGE the report, HTML_CARD
 * the card, HTML_NOTEBOOK both (src/report/notebook.c). */
static PyObject *
mod_summary_html(PyObject *m, PyObject *args)
{
    (void)m;
    const char *s;
    Py_ssize_t n;
    int what;
    if (!PyArg_ParseTuple(args, "s#i", &s, &n, &what))
        return NULL;
    char *out = NULL;
    int rc = tml_summary_html(s, (size_t)n, what, &out);
    return summary_result(rc, out);
}

static PyObject *
mod_live_port(PyObject *m, PyObject *unused)
{
    (void)m; (void)unused;
    return PyLong_FromLong(tml_live_port());
}

static PyObject *
mod_summary_text(PyObject *m, PyObject *unused)
{
    (void)m; (void)unused;
    return str_or_none(tml_summary_text());
}

static PyObject *
mod_step_begin(PyObject *m, PyObject *unused)
{
    (void)m; (void)unused;
    call_step_hook(0);
    return PyLong_FromLong(tml_step_begin());
}

static PyObject *
mod_step_end(PyObject *m, PyObject *unused)
{
    (void)m; (void)unused;
    call_step_hook(1);
    return PyLong_FromLong(tml_step_end());
}

/* mark_epoch_start(): from a KIND_AFTER hook (the DataLoader iterator's
 * __init__), the loader started when the wrapped call did. */
static PyObject *
mod_mark_epoch_start(PyObject *m, PyObject *unused)
{
    (void)m; (void)unused;
    return PyLong_FromLong(after_t0 > 0 ? tml_mark_loader_start(after_t0)
                                        : tml_mark_epoch_start());
}

static PyObject *
mod_step_abort(PyObject *m, PyObject *unused)
{
    (void)m; (void)unused;
    return PyLong_FromLong(tml_step_abort());
}

static int
phase_arg(PyObject *o, int *out)
{
    long p = PyLong_AsLong(o);

    if (p == -1 && PyErr_Occurred())
        return -1;
    if (p < 0 || p >= TML_PHASE_COUNT) {
        PyErr_SetString(PyExc_ValueError, "phase out of range");
        return -1;
    }
    *out = (int)p;
    return 0;
}

static PyObject *
mod_phase_begin(PyObject *m, PyObject *arg)
{
    int p;
    (void)m;
    if (phase_arg(arg, &p) < 0)
        return NULL;
    return PyLong_FromLong(tml_phase_begin((tml_phase)p));
}

static PyObject *
mod_phase_end(PyObject *m, PyObject *arg)
{
    int p;
    (void)m;
    if (phase_arg(arg, &p) < 0)
        return NULL;
    return PyLong_FromLong(tml_phase_end((tml_phase)p));
}

/* phase_cancel(phase): forget a phase_begin() whose end never comes (a
 * fetch that raised StopIteration); nothing is recorded. */
static PyObject *
mod_phase_cancel(PyObject *m, PyObject *arg)
{
    int p;
    (void)m;
    if (phase_arg(arg, &p) < 0)
        return NULL;
    return PyLong_FromLong(tml_phase_cancel((tml_phase)p));
}

static PyObject *
mod_phase_span(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    int p;
    long long b, e;
    (void)m;

    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "phase_span(phase, begin_ns, end_ns)");
        return NULL;
    }
    if (phase_arg(args[0], &p) < 0)
        return NULL;
    b = PyLong_AsLongLong(args[1]);
    e = PyLong_AsLongLong(args[2]);
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromLong(tml_phase_span((tml_phase)p, b, e));
}

/* _set_batch_types(fn): fn() -> (Tensor, token_dtypes), what a fetched
 * batch is counted by (count_batch), asked at the first fetch. */
static PyObject *
mod_set_batch_types(PyObject *m, PyObject *fn)
{
    (void)m;
    if (!PyCallable_Check(fn)) {
        PyErr_SetString(PyExc_TypeError, "_set_batch_types(fn)");
        return NULL;
    }
    Py_INCREF(fn);
    XSETREF(batch_types, fn);
    Py_RETURN_NONE;
}

/* log_note(text) -> rc: a line in traceml.log (tml_log_note). */
static PyObject *
mod_log_note(PyObject *m, PyObject *arg)
{
    (void)m;
    const char *text = PyUnicode_AsUTF8AndSize(arg, NULL);
    if (text == NULL)
        return NULL;
    return PyLong_FromLong(tml_log_note(text));
}

/* set_flops(flops_per_sample, how, device) -> rc (tml_set_flops). */
static PyObject *
mod_set_flops(PyObject *m, PyObject *args)
{
    double per_sample;
    unsigned int how;
    const char *device = NULL;
    (void)m;
    if (!PyArg_ParseTuple(args, "dI|z:set_flops", &per_sample, &how, &device))
        return NULL;
    return PyLong_FromLong(tml_set_flops(per_sample, how, device));
}

/* comm_bytes(n): a blocking collective of n bytes ran in this step. */
static PyObject *
mod_comm_bytes(PyObject *m, PyObject *arg)
{
    long long n = PyLong_AsLongLong(arg);
    (void)m;
    if (n == -1 && PyErr_Occurred())
        return NULL;
    return PyLong_FromLong(tml_comm_bytes(n));
}

/* _comm_done(t0, nbytes, future) -> future.value(): the callback chained
 * (future.then) to a collective launched at t0: it completed now. In C so
 * that a gradient bucket costs one partial() and one C call. */
static PyObject *
mod_comm_done(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    long long t0, n;
    (void)m;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "_comm_done(t0, nbytes, future)");
        return NULL;
    }
    int64_t t1 = tml_now_ns();
    t0 = PyLong_AsLongLong(args[0]);
    n = PyLong_AsLongLong(args[1]);
    if (PyErr_Occurred())
        return NULL;
    tml_comm_overlapped(t0, t1, n);
    return PyObject_CallMethod(args[2], "value", NULL);
}

static PyObject *
mod_now_ns(PyObject *m, PyObject *unused)
{
    (void)m; (void)unused;
    return PyLong_FromLongLong(tml_now_ns());
}

static PyObject *
mod_set_call_cost_ns(PyObject *m, PyObject *arg)
{
    long long ns = PyLong_AsLongLong(arg);
    (void)m;
    if (ns == -1 && PyErr_Occurred())
        return NULL;
    return PyLong_FromLong(tml_set_call_cost_ns(ns));
}

static PyObject *
mod_set_loader_config(PyObject *m, PyObject *args)
{
    int workers, pin;
    (void)m;
    if (!PyArg_ParseTuple(args, "ip:set_loader_config", &workers, &pin))
        return NULL;
    return PyLong_FromLong(tml_set_loader_config(workers, pin));
}

static PyObject *
mod_set_rank(PyObject *m, PyObject *args)
{
    int rank, world;
    (void)m;
    if (!PyArg_ParseTuple(args, "ii:set_rank", &rank, &world))
        return NULL;
    return PyLong_FromLong(tml_set_rank(rank, world));
}

static PyObject *
mod_strerror(PyObject *m, PyObject *arg)
{
    long e = PyLong_AsLong(arg);
    (void)m;
    if (e == -1 && PyErr_Occurred())
        return NULL;
    return str_or_none(tml_strerror((int)e));
}

/* config(name): a TRACEML_* variable as the engine reads it (tml_config,
 * docs/cli.md "Environment variables"): True/False, an int, a float, a
 * str, or None for a string without a value; ValueError for a name the
 * table does not have. The package asks here instead of parsing again. */
static PyObject *
mod_config(PyObject *m, PyObject *arg)
{
    char out[4096];
    (void)m;
    const char *name = PyUnicode_AsUTF8AndSize(arg, NULL);
    if (!name)
        return NULL;
    const char *type = tml_config(name, out, sizeof(out));
    if (!type)
        return PyErr_Format(PyExc_ValueError, "%s is not a TraceML variable", name);
    if (strcmp(type, "bool") == 0)
        return PyBool_FromLong(strcmp(out, "1") == 0);
    if (strcmp(type, "int") == 0)
        return PyLong_FromString(out, NULL, 10);
    if (strcmp(type, "double") == 0)
        return PyFloat_FromDouble(strtod(out, NULL));
    if (!out[0])
        Py_RETURN_NONE;
    return PyUnicode_FromString(out);
}

static PyObject *
mod_version(PyObject *m, PyObject *unused)
{
    (void)m; (void)unused;
    return str_or_none(tml_version());
}

/* flush(*args, **kwargs): tml_flush(), the GIL released while the shipper
 * delivers; any arguments are ignored, so that it can be the BEFORE hook of
 * os.execv / os.execve (a PhaseCall: no Python frame between the training
 * and the exec). */
static PyObject *
mod_flush(PyObject *m, PyObject *args, PyObject *kwargs)
{
    PyThreadState *ts;
    int rc;

    (void)m; (void)args; (void)kwargs;
    ts = PyEval_SaveThread();
    rc = tml_flush();
    PyEval_RestoreThread(ts);
    return PyLong_FromLong(rc);
}

/* A C function that does nothing: the reference for calibrating the glue. */
static PyObject *
mod_noop(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    (void)m; (void)args; (void)nargs;
    Py_RETURN_NONE;
}

/* torch >= 2.0 optimizer step hooks: hook(optimizer, args, kwargs). */
static PyObject *
mod_opt_begin(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    (void)m;
    call_starter();
    if (auto_steps) {
        auto_have_opt = opt_stepped = 1;
        if (nargs >= 1 && !opt_known(args[0])) {
            if (closer != NULL)
                relearn();      /* a new optimizer: most often the old one's successor */
            call_discover(args[0]);
        }
        auto_begin(0, 0);
        auto_opt_seen = 1;
    } else if (marked_open && extra_finder != NULL && nargs >= 1 && !opt_known(args[0])) {
        call_fn(extra_finder, args[0]);     /* a new optimizer: its models are the step's */
    }
    tml_phase_begin(TML_PHASE_OPTIMIZER);
    Py_RETURN_NONE;
}

static PyObject *
mod_opt_end(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    (void)m;
    tml_phase_end(TML_PHASE_OPTIMIZER);
    if (auto_steps && (nargs < 1 || opt_closes_step(args[0])))
        auto_end();
    Py_RETURN_NONE;
}

static PyObject *
mod_configure(PyObject *m, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"installer", "forward_hooks", NULL};
    PyObject *inst = Py_None;
    int fwd = 0, i;
    (void)m;

    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|Op:_configure", kwlist, &inst, &fwd))
        return NULL;
    Py_CLEAR(installer);
    if (inst != Py_None) {
        Py_INCREF(inst);
        installer = inst;
    }
    hooks_enabled = fwd && installer != NULL;
    for (i = 0; i < MODEL_CACHE; i++)
        Py_CLEAR(model_cache[i]);
    Py_RETURN_NONE;
}

static int
model_cached(PyObject *model)
{
    int i;

    for (i = 0; i < MODEL_CACHE; i++)
        if (model_cache[i] != NULL && PyWeakref_GetObject(model_cache[i]) == model)
            return 1;
    return 0;
}

/* trace_step(*models): the one per-step entry. Installs the forward hooks
 * on a model it has not seen (through the package's installer, off the hot
 * path after the first step) and returns the shared step context. Several
 * models (a GAN's generator and discriminator) are each timed. */
static void
install_model(PyObject *model)
{
    if (model == Py_None)
        return;
    models_given = 1;
    if (model_cached(model))
        return;
    PyObject *r = PyObject_CallFunctionObjArgs(installer, model, NULL);

    if (r == NULL) {
        PyErr_Clear();   /* the installer reports its own failures */
    } else {
        PyObject *ref = PyWeakref_NewRef(model, NULL);
        Py_DECREF(r);
        if (ref == NULL) {
            PyErr_Clear();
        } else {
            XSETREF(model_cache[model_cache_next], ref);
            model_cache_next = (model_cache_next + 1) % MODEL_CACHE;
        }
    }
}

/* trace_step()'s keywords after the positional models: model= (as
 * TraceML 0.5.0's signature allows), samples= and tokens= (the step's
 * batch, which then replaces the loader's count for good). 0, or -1 with
 * a TypeError set. */
static int
step_keywords(PyObject *const *vals, PyObject *kwnames, long long *samples, long long *tokens)
{
    Py_ssize_t nkw = kwnames ? PyTuple_Size(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *name = PyTuple_GetItem(kwnames, k);
        long long *count = NULL;
        if (PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, "samples") == 0)
            count = samples;
        else if (PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, "tokens") == 0)
            count = tokens;
        else if (!PyUnicode_Check(name) || PyUnicode_CompareWithASCIIString(name, "model") != 0) {
            PyErr_Format(PyExc_TypeError, "trace_step() got an unexpected keyword argument '%S'",
                         name);
            return -1;
        }
        if (count && vals[k] != Py_None) {
            *count = PyLong_AsLongLong(vals[k]);
            if (*count < 0) {
                if (!PyErr_Occurred())
                    PyErr_Format(PyExc_ValueError, "trace_step(): %S must be >= 0", name);
                return -1;
            }
        }
    }
    return 0;
}

static PyObject *
mod_trace_step(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)m;
    long long samples = -1, tokens = -1;
    if (step_keywords(args + nargs, kwnames, &samples, &tokens) < 0)
        return NULL;
    call_starter();
    models_given = 0;
    Py_ssize_t nkw = kwnames ? PyTuple_Size(kwnames) : 0;
    for (Py_ssize_t k = 0; hooks_enabled && k < nargs + nkw; k++)
        if (k < nargs || PyUnicode_CompareWithASCIIString(PyTuple_GetItem(kwnames, k - nargs),
                                                          "model") == 0)
            install_model(args[k]);
    if (samples >= 0 || tokens >= 0) {
        batches_counted = 0;     /* the script knows its batch better than a guess */
        tml_step_samples(samples > 0 ? samples : 0, tokens > 0 ? tokens : -1);
    }
    call_gpu_hook();
    Py_INCREF(step_ctx);
    return step_ctx;
}

/* On the first steps, until it says the GPU clock is set up. */
static void
call_gpu_hook(void)
{
    if (gpu_hook != NULL) {
        PyObject *r = PyObject_CallNoArgs(gpu_hook);
        int done = r == Py_True || ++gpu_hook_tries >= GPU_HOOK_TRIES;
        if (r == NULL) {
            PyErr_Clear();
            done = 1;
        }
        Py_XDECREF(r);
        if (done)
            Py_CLEAR(gpu_hook);
    }
}

/* _set_have_optimizer(): an optimizer was made, so only optimizer steps
 * end steps (gradient accumulation: a forward after a backward does not). */
static PyObject *
mod_set_have_optimizer(PyObject *m, PyObject *unused)
{
    (void)m; (void)unused;
    auto_have_opt = 1;
    Py_RETURN_NONE;
}

/* _set_starter(fn): fn() is called once, by the next trace_step() or
 * optimizer step (None: not). */
static PyObject *
mod_set_starter(PyObject *m, PyObject *fn)
{
    (void)m;
    Py_CLEAR(starter);
    if (fn != Py_None) {
        Py_INCREF(fn);
        starter = fn;
    }
    Py_RETURN_NONE;
}

/* _set_launcher(forked=False): tml_set_launcher(), or
 * tml_set_launcher_forked() when the processes it starts are forked. */
static PyObject *
mod_set_launcher(PyObject *m, PyObject *args)
{
    (void)m;
    int forked = 0;
    if (!PyArg_ParseTuple(args, "|p", &forked))
        return NULL;
    return PyLong_FromLong(forked ? tml_set_launcher_forked() : tml_set_launcher());
}

/* _set_step_hook(fn): fn(end) before each step's begin (False) and end
 * (True), for the deep dive's window; None: off. */
static PyObject *
mod_set_step_hook(PyObject *m, PyObject *fn)
{
    (void)m;
    Py_CLEAR(step_hook);
    if (fn != Py_None) {
        Py_INCREF(fn);
        step_hook = fn;
    }
    Py_RETURN_NONE;
}

/* mark_deep_dive(): the step under way (or the next to end) is profiled. */
static PyObject *
mod_mark_deep_dive(PyObject *m, PyObject *unused)
{
    (void)m; (void)unused;
    return PyLong_FromLong(tml_mark_deep_dive());
}

/* One row of deep_dive()'s list, (module, op, self_ns, calls), into r;
 * its strings borrowed from the tuple. -1 with an exception set. */
static int
dd_row(PyObject *t, tml_deep_dive_row *r)
{
    long long ns, calls;

    if (!PyTuple_Check(t) || PyTuple_Size(t) != 4) {
        PyErr_SetString(PyExc_TypeError, "a row is (module, op, self_ns, calls)");
        return -1;
    }
    r->module = PyUnicode_AsUTF8AndSize(PyTuple_GetItem(t, 0), NULL);
    r->op = PyUnicode_AsUTF8AndSize(PyTuple_GetItem(t, 1), NULL);
    ns = PyLong_AsLongLong(PyTuple_GetItem(t, 2));
    calls = PyLong_AsLongLong(PyTuple_GetItem(t, 3));
    if (r->module == NULL || r->op == NULL || PyErr_Occurred())
        return -1;
    r->self_ns = ns;
    r->calls = calls;
    return 0;
}

/* deep_dive(first, last, wall_ns, cuda, skipped, rows): tml_deep_dive(). */
static PyObject *
mod_deep_dive(PyObject *m, PyObject *args)
{
    unsigned long long first, last;
    long long wall;
    int cuda;
    const char *skipped;
    PyObject *rows;
    tml_deep_dive_row *v = NULL;
    Py_ssize_t n, i;
    int rc = TML_ENOMEM;

    (void)m;
    if (!PyArg_ParseTuple(args, "KKLpzO", &first, &last, &wall, &cuda, &skipped, &rows))
        return NULL;
    if (!PyList_Check(rows)) {
        PyErr_SetString(PyExc_TypeError, "rows must be a list");
        return NULL;
    }
    n = PyList_Size(rows);
    if (n > 0 && (v = calloc((size_t)n, sizeof(*v))) == NULL)
        return PyLong_FromLong(rc);
    for (i = 0; i < n; i++)
        if (dd_row(PyList_GetItem(rows, i), &v[i]) < 0) {
            free(v);
            return NULL;
        }
    rc = tml_deep_dive(first, last, wall, cuda, skipped, v, (size_t)n);
    free(v);
    return PyLong_FromLong(rc);
}

/* _set_discover(fn): fn(optimizer or None) finds and times the models of
 * an optimizer not seen before (None: at the first backward); None: off. */
static PyObject *
mod_set_discover(PyObject *m, PyObject *fn)
{
    (void)m;
    Py_CLEAR(discover);
    if (fn != Py_None) {
        Py_INCREF(fn);
        discover = fn;
    }
    Py_RETURN_NONE;
}

/* _set_extra_finder(fn): fn(optimizer) finds and times the other models
 * of a trace_step(model) step (None: off). */
static PyObject *
mod_set_extra_finder(PyObject *m, PyObject *fn)
{
    (void)m;
    Py_CLEAR(extra_finder);
    if (fn != Py_None) {
        Py_INCREF(fn);
        extra_finder = fn;
    }
    Py_RETURN_NONE;
}

/* set_auto_models(names) -> rc: the models timed though no trace_step()
 * named them, for the summary (tml_set_auto_models). */
static PyObject *
mod_set_auto_models(PyObject *m, PyObject *arg)
{
    (void)m;
    const char *s = PyUnicode_AsUTF8AndSize(arg, NULL);
    if (s == NULL)
        return NULL;
    return PyLong_FromLong(tml_set_auto_models(s));
}

/* _set_auto_steps(is_grad_enabled, h2d_opens): automatic step detection
 * on (a callable) or off (None). */
static PyObject *
mod_set_auto_steps(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    (void)m;
    if (nargs != 2 && nargs != 3) {
        PyErr_SetString(PyExc_TypeError,
                        "_set_auto_steps(is_grad_enabled, h2d_opens[, compiled])");
        return NULL;
    }
    Py_CLEAR(grad_enabled);
    Py_CLEAR(compiled);
    relearn();
    auto_steps = args[0] != Py_None;
    auto_h2d = PyObject_IsTrue(args[1]) == 1;
    if (auto_steps) {
        Py_INCREF(args[0]);
        grad_enabled = args[0];
        if (nargs == 3 && args[2] != Py_None) {
            Py_INCREF(args[2]);
            compiled = args[2];
        }
    }
    Py_RETURN_NONE;
}

/* _set_gpu_hooks(gpu_hook, memory_probe): either may be None. */
static PyObject *
mod_set_gpu_hooks(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    (void)m;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_set_gpu_hooks(gpu_hook, memory_probe)");
        return NULL;
    }
    Py_CLEAR(gpu_hook);
    Py_CLEAR(mem_probe);
    gpu_hook_tries = 0;
    if (args[0] != Py_None) {
        Py_INCREF(args[0]);
        gpu_hook = args[0];
    }
    if (args[1] != Py_None) {
        Py_INCREF(args[1]);
        mem_probe = args[1];
    }
    Py_RETURN_NONE;
}

/* set_cuda_stream(handle) -> rc: the GPU clock on this thread's stream
 * (an int, as torch.cuda.Stream.cuda_stream gives it; 0 is the default
 * stream). */
static PyObject *
mod_set_cuda_stream(PyObject *m, PyObject *arg)
{
    (void)m;
    unsigned long long h = PyLong_AsUnsignedLongLong(arg);
    if (h == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    return PyLong_FromLong(tml_set_cuda_stream((void *)(uintptr_t)h));
}

/* cuda_memory(allocated, reserved, allocated_peak, reserved_peak, total) -> rc */
static PyObject *
mod_cuda_memory(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    long long v[5];
    Py_ssize_t i;
    (void)m;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "cuda_memory() takes 5 byte counts (-1 unknown)");
        return NULL;
    }
    for (i = 0; i < 5; i++) {
        v[i] = PyLong_AsLongLong(args[i]);
        if (v[i] == -1 && PyErr_Occurred())
            return NULL;
    }
    return PyLong_FromLong(tml_cuda_memory(v[0], v[1], v[2], v[3], v[4]));
}

static PyObject *
mod_h2d_block(PyObject *m, PyObject *unused)
{
    (void)m; (void)unused;
    Py_INCREF(h2d_ctx);
    return h2d_ctx;
}

static PyMethodDef mod_methods[] = {
    {"init", (PyCFunction)(void (*)(void))mod_init, METH_VARARGS | METH_KEYWORDS,
     "init(run_name=None, logs_dir=None, instrumented=ALL, disabled=False) -> rc"},
    {"shutdown", (PyCFunction)(void (*)(void))mod_shutdown, METH_VARARGS | METH_KEYWORDS,
     "shutdown(status=None, exit_code=0) -> summary text (in-process mode) or None"},
    {"run_dir", mod_run_dir, METH_NOARGS, "the run folder, or None"},
    {"summary_text", mod_summary_text, METH_NOARGS, "the summary box, or None"},
    {"live_port", mod_live_port, METH_NOARGS,
     "the live dashboard's port of a run without the launcher (TRACEML_DASHBOARD_PORT), "
     "or -1"},
    {"summary_json", mod_summary_json, METH_NOARGS,
     "the run's summary so far (final_summary.json's shape) as text, or None"},
    {"summary_html", mod_summary_html, METH_VARARGS,
     "summary_html(json, what): the summary as HTML (HTML_PAGE, HTML_CARD, HTML_NOTEBOOK)"},
    {"summary_flatten", mod_summary_flatten, METH_O,
     "summary JSON text -> the flat traceml/... object as JSON text"},
    {"step_begin", mod_step_begin, METH_NOARGS, NULL},
    {"step_end", mod_step_end, METH_NOARGS, NULL},
    {"mark_epoch_start", mod_mark_epoch_start, METH_NOARGS, NULL},
    {"step_abort", mod_step_abort, METH_NOARGS, NULL},
    /* text signatures: a framework that inspects its callbacks (PyTorch
     * Ignite's event handlers) can call these directly, no Python between */
    {"phase_begin", mod_phase_begin, METH_O,
     "phase_begin($module, phase, /)\n--\n\nthe phase starts now (tml_phase_begin) -> rc"},
    {"phase_end", mod_phase_end, METH_O,
     "phase_end($module, phase, /)\n--\n\nthe phase ends now (tml_phase_end) -> rc"},
    {"phase_cancel", mod_phase_cancel, METH_O,
     "phase_cancel($module, phase, /)\n--\n\nforget the open phase_begin (tml_phase_cancel) -> rc"},
    {"phase_span", (PyCFunction)(void (*)(void))mod_phase_span, METH_FASTCALL, NULL},
    {"now_ns", mod_now_ns, METH_NOARGS, "the engine's monotonic clock (ns)"},
    {"comm_bytes", mod_comm_bytes, METH_O, "comm_bytes(n): a blocking collective sent n bytes"},
    {"_set_batch_types", mod_set_batch_types, METH_O,
     "_set_batch_types(fn): fn() -> (Tensor, token_dtypes), to count the loader's batches"},
    {"log_note", mod_log_note, METH_O, "log_note(text) -> rc: a line in traceml.log"},
    {"set_flops", mod_set_flops, METH_VARARGS,
     "set_flops(flops_per_sample, how, device=None) -> rc (tml_set_flops)"},
    {"_comm_done", (PyCFunction)(void (*)(void))mod_comm_done, METH_FASTCALL, NULL},
    {"set_call_cost_ns", mod_set_call_cost_ns, METH_O, NULL},
    {"set_rank", mod_set_rank, METH_VARARGS, NULL},
    {"set_loader_config", mod_set_loader_config, METH_VARARGS, NULL},
    {"strerror", mod_strerror, METH_O, NULL},
    {"version", mod_version, METH_NOARGS, NULL},
    {"config", mod_config, METH_O, "config(name): a TRACEML_* variable, typed, as the engine reads it"},
    {"trace_step", (PyCFunction)(void (*)(void))mod_trace_step, METH_FASTCALL | METH_KEYWORDS,
     "trace_step($module, /, *models, model=None)\n--\n\n"
     "A context manager of one training step.\n\n"
     "The first time it sees a model (a plain module, a DDP/FSDP wrapper or\n"
     "the module inside one; several for a step that runs several, as a GAN)\n"
     "in auto or selective mode it wraps its forward\n"
     "(on that instance). An exception inside the bracket propagates unchanged (the\n"
     "step is recorded as aborted)."},
    {"h2d_block", mod_h2d_block, METH_NOARGS,
     "context manager timing its block as host-to-device copies"},
    {"_noop", (PyCFunction)(void (*)(void))mod_noop, METH_FASTCALL, NULL},
    {"flush", (PyCFunction)(void (*)(void))mod_flush, METH_VARARGS | METH_KEYWORDS,
     "flush(*ignored) -> rc: ship the steps so far now and wait (tml_flush)"},
    {"_opt_begin", (PyCFunction)(void (*)(void))mod_opt_begin, METH_FASTCALL, NULL},
    {"_opt_end", (PyCFunction)(void (*)(void))mod_opt_end, METH_FASTCALL, NULL},
    {"_configure", (PyCFunction)(void (*)(void))mod_configure, METH_VARARGS | METH_KEYWORDS, NULL},
    {"_set_gpu_hooks", (PyCFunction)(void (*)(void))mod_set_gpu_hooks, METH_FASTCALL, NULL},
    {"_set_auto_steps", (PyCFunction)(void (*)(void))mod_set_auto_steps, METH_FASTCALL, NULL},
    {"_set_discover", mod_set_discover, METH_O, NULL},
    {"_set_step_hook", mod_set_step_hook, METH_O, NULL},
    {"mark_deep_dive", mod_mark_deep_dive, METH_NOARGS, NULL},
    {"deep_dive", mod_deep_dive, METH_VARARGS, NULL},
    {"_set_extra_finder", mod_set_extra_finder, METH_O, NULL},
    {"set_auto_models", mod_set_auto_models, METH_O,
     "set_auto_models(names) -> rc: models timed though no trace_step() named them"},
    {"_set_starter", mod_set_starter, METH_O, NULL},
    {"_set_launcher", mod_set_launcher, METH_VARARGS,
     "_set_launcher(forked=False) -> rc: this process launches the ranks (tml_set_launcher)"},
    {"_set_have_optimizer", mod_set_have_optimizer, METH_NOARGS, NULL},
    {"set_cuda_stream", mod_set_cuda_stream, METH_O,
     "set_cuda_stream(handle) -> rc: record CUDA events on this stream (GPU clock)"},
    {"cuda_memory", (PyCFunction)(void (*)(void))mod_cuda_memory, METH_FASTCALL,
     "cuda_memory(allocated, reserved, allocated_peak, reserved_peak, device_total) -> rc"},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "traceml_ai._traceml",
    .m_doc = "TraceML engine bindings (see traceml_ai).",
    .m_size = -1,
    .m_methods = mod_methods,
};

PyMODINIT_FUNC
PyInit__traceml(void)
{
    PyObject *m = NULL, *types = NULL;

    phasecall_type = (PyTypeObject *)PyType_FromSpec(&phasecall_spec);
    timediter_type = (PyTypeObject *)PyType_FromSpec(&timediter_spec);
    ctx_type = (PyTypeObject *)PyType_FromSpec(&ctx_spec);
    if (phasecall_type == NULL || timediter_type == NULL || ctx_type == NULL)
        goto fail;
    str_is_cuda = PyUnicode_InternFromString("is_cuda");
    str_module = PyUnicode_InternFromString("__module__");
    str_shape = PyUnicode_InternFromString("shape");
    str_dtype = PyUnicode_InternFromString("dtype");
    str_input_ids = PyUnicode_InternFromString("input_ids");
    str_data = PyUnicode_InternFromString("data");
    if (!str_shape || !str_dtype || !str_input_ids || !str_data)
        goto fail;
    types = PyImport_ImportModule("types");
    if (str_is_cuda == NULL || str_module == NULL || types == NULL)
        goto fail;
    method_type = PyObject_GetAttrString(types, "MethodType");
    if (method_type == NULL)
        goto fail;
    step_ctx = ctx_make(0);
    h2d_ctx = ctx_make(1);
    if (step_ctx == NULL || h2d_ctx == NULL)
        goto fail;
    m = PyModule_Create(&moddef);
    if (m == NULL)
        goto fail;
    if (PyModule_AddObjectRef(m, "PhaseCall", (PyObject *)phasecall_type) < 0
        || PyModule_AddObjectRef(m, "TimedIter", (PyObject *)timediter_type) < 0
        || PyModule_AddObjectRef(m, "StepContext", (PyObject *)ctx_type) < 0
        || PyModule_AddIntConstant(m, "INPUT", TML_PHASE_INPUT) < 0
        || PyModule_AddIntConstant(m, "H2D", TML_PHASE_H2D) < 0
        || PyModule_AddIntConstant(m, "FORWARD", TML_PHASE_FORWARD) < 0
        || PyModule_AddIntConstant(m, "BACKWARD", TML_PHASE_BACKWARD) < 0
        || PyModule_AddIntConstant(m, "OPTIMIZER", TML_PHASE_OPTIMIZER) < 0
        || PyModule_AddIntConstant(m, "COMM", TML_PHASE_COMM) < 0
        || PyModule_AddIntConstant(m, "PHASES_ALL", TML_PHASES_ALL) < 0
        || PyModule_AddIntConstant(m, "HTML_PAGE", TML_HTML_PAGE) < 0
        || PyModule_AddIntConstant(m, "HTML_CARD", TML_HTML_CARD) < 0
        || PyModule_AddIntConstant(m, "HTML_NOTEBOOK", TML_HTML_NOTEBOOK) < 0
        || PyModule_AddIntConstant(m, "KIND_PHASE", KIND_PHASE) < 0
        || PyModule_AddIntConstant(m, "KIND_INPUT", KIND_INPUT) < 0
        || PyModule_AddIntConstant(m, "KIND_H2D", KIND_H2D) < 0
        || PyModule_AddIntConstant(m, "KIND_H2D_COPY", KIND_H2D_COPY) < 0
        || PyModule_AddIntConstant(m, "KIND_PLAIN", KIND_PLAIN) < 0
        || PyModule_AddIntConstant(m, "KIND_FORWARD", KIND_FORWARD) < 0
        || PyModule_AddIntConstant(m, "KIND_COMM", KIND_COMM) < 0
        || PyModule_AddIntConstant(m, "KIND_BEFORE", KIND_BEFORE) < 0
        || PyModule_AddIntConstant(m, "KIND_AFTER", KIND_AFTER) < 0
        || PyModule_AddIntConstant(m, "FLOPS_COUNTED", TML_FLOPS_COUNTED) < 0
        || PyModule_AddIntConstant(m, "FLOPS_TF32", TML_FLOPS_TF32) < 0
        || PyModule_AddIntConstant(m, "FLOPS_16BIT", TML_FLOPS_16BIT) < 0
        || PyModule_AddIntConstant(m, "EDISABLED", TML_EDISABLED) < 0
        || PyModule_AddIntConstant(m, "ECONFIG", TML_ECONFIG) < 0
        || PyModule_AddStringConstant(m, "VERSION", TML_VERSION_STRING) < 0)
        goto fail;
    Py_DECREF(types);
    return m;
fail:
    Py_XDECREF(m);
    Py_XDECREF(types);
    Py_CLEAR(step_ctx);
    Py_CLEAR(h2d_ctx);
    Py_CLEAR(str_is_cuda);
    Py_CLEAR(str_module);
    Py_CLEAR(method_type);
    Py_CLEAR(phasecall_type);
    Py_CLEAR(timediter_type);
    Py_CLEAR(ctx_type);
    return NULL;
}
