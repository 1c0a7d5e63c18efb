/*
 * traceml.h - the public C API of TraceML.
 *
 * TraceML tells you why a training step takes as long as it does. A training
 * loop marks where each step begins and ends and where its phases (input wait,
 * host-to-device copies, forward, backward, optimizer) begin and end; TraceML
 * assembles step records off the hot path and ships them to an aggregator
 * that diagnoses the run.
 *
 *     #include <traceml/traceml.h>        link with -ltraceml
 *
 *     tml_init(NULL);                     // settings from the environment
 *     for (...) {
 *         tml_phase_begin(TML_PHASE_INPUT);  load_batch();  tml_phase_end(TML_PHASE_INPUT);
 *         tml_step_begin();
 *         tml_phase_begin(TML_PHASE_FORWARD);  ...  tml_phase_end(TML_PHASE_FORWARD);
 *         ...
 *         tml_step_end();
 *     }
 *     tml_shutdown();
 *
 * Threads: every function may be called from any thread. Steps and phases are
 * tracked per thread; a step begun on one thread must end on the same thread.
 *
 * Cost: a phase or step marker reads the monotonic clock and writes one event
 * into a per-thread ring. It never allocates, locks, blocks or makes a system
 * call besides the clock. When a ring is full the event is dropped and
 * counted; the count appears in the run summary.
 *
 * Failures: TraceML never aborts and never writes to stdout. Every function
 * returns 0 or a negative TML_E* code; tml_strerror() names it. When the
 * aggregator cannot be reached, training goes on and telemetry is dropped
 * and counted.
 *
 * Ownership: TraceML copies every string it is given. Strings it returns
 * are owned by TraceML and stay valid until the next tml_init() or the end
 * of the process, whichever comes first.
 */
#ifndef TRACEML_H
#define TRACEML_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The public API: the only symbols libtraceml.so exports (the engine is
 * built with -fvisibility=hidden). */
#if defined(__GNUC__) && __GNUC__ >= 4
#define TML_API __attribute__((visibility("default")))
#else
#define TML_API
#endif

#define TML_VERSION_MAJOR 0
#define TML_VERSION_MINOR 1
#define TML_VERSION_PATCH 0
#define TML_VERSION_STRING "0.1.0"

/* Error codes: 0 is success, every error is negative. */
#define TML_OK         0
#define TML_EINVAL    -1   /* an argument is out of range */
#define TML_ENOMEM    -2   /* an allocation failed (outside the hot path) */
#define TML_ESTATE    -3   /* called in the wrong state (e.g. before tml_init) */
#define TML_ECONN     -4   /* the aggregator could not be reached */
#define TML_EAUTH     -5   /* the aggregator refused the handshake */
#define TML_EIO       -6   /* a file could not be read or written */
#define TML_EFULL     -7   /* a ring was full; the event was dropped and counted */
#define TML_EPROTO    -8   /* a malformed or unsupported frame */
#define TML_EDISABLED -9   /* TraceML is disabled; the call did nothing */
#define TML_ECONFIG  -10   /* a conflicting second tml_init() */
#define TML_EEXIST   -11   /* the run folder asked for (run_name) exists already */

/* The phases of a step (SPEC 3.1). */
typedef enum tml_phase {
    TML_PHASE_INPUT = 0,   /* waiting for the batch (the fetch before the step) */
    TML_PHASE_H2D,         /* host-to-device copies */
    TML_PHASE_FORWARD,
    TML_PHASE_BACKWARD,
    TML_PHASE_OPTIMIZER,
    /* communication the step waits for: a blocking collective (all_reduce,
     * broadcast, barrier) around which the loop can do nothing else. Its
     * time is "exposed" communication; a phase around it (a Backward that
     * waits for gradient buckets) keeps only its own time. */
    TML_PHASE_COMM,
    TML_PHASE_COUNT
} tml_phase;

#define TML_PHASE_BIT(p) (1u << (p))
#define TML_PHASES_ALL   ((1u << TML_PHASE_COUNT) - 1u)

typedef struct tml_options {
    /* Run name ([A-Za-z0-9_.-]+). NULL: $TRACEML_RUN_NAME, else generated. */
    const char *run_name;
    /* Folder for run folders. NULL: $TRACEML_LOGS_DIR, else "./logs". */
    const char *logs_dir;
    /* Bit mask (TML_PHASE_BIT) of the phases this process instruments.
     * A phase that is instrumented but never seen in a step measured zero;
     * one that is not instrumented is missing ("n/a"). 0 means all. */
    uint32_t instrumented;
    /* Non-zero: every call is a no-op returning TML_EDISABLED. Also set by
     * the environment variable TRACEML_DISABLED=1. */
    int disabled;
} tml_options;

/*
 * Starts TraceML in this process. With TRACEML_ADDR set (by `traceml run`
 * or `traceml serve`) it connects to that aggregator; otherwise it runs an
 * aggregator inside this process and writes the run folder at
 * tml_shutdown(). A second call with the same options returns 0; with
 * different options TML_ECONFIG. In-process, a run_name (or
 * $TRACEML_RUN_NAME) whose run folder exists already is TML_EEXIST; a
 * generated name takes the next free one. opts may be NULL.
 */
TML_API int tml_init(const tml_options *opts);

/*
 * Flushes the steps not yet shipped, says goodbye to the aggregator and
 * stops the background thread. In-process mode it also diagnoses the run
 * and writes logs/<run>/; tml_summary_text() then returns the box.
 * Waits at most about one second for an unresponsive aggregator.
 */
TML_API int tml_shutdown(void);
/*
 * Ships every step completed so far, with the samples and counters, and
 * waits until they were handed over (at most about five seconds); TraceML
 * keeps running. For a process about to replace itself (execv()): the
 * steps still in this image would be lost with it. Under a launcher the
 * new image, when it starts TraceML again, is the same rank restarted,
 * its steps counted after these. In-process mode the aggregator lives in
 * this image: call tml_shutdown() instead. TML_ESTATE when TraceML is not
 * running in this process (a child forked from it); TML_ECONN when the
 * background thread did not answer in time.
 */
TML_API int tml_flush(void);
/* tml_shutdown() for a process that knows how it ends: status is
 * "completed", "failed" or "interrupted" and goes into the run's manifest
 * in in-process mode (tml_shutdown() means "completed", 0). */
TML_API int tml_shutdown_with(const char *status, int exit_code);

/* Step and phase markers. Steps nest per thread: a step begun inside a
 * step is part of the outer one. Phases nest per thread: only the outermost
 * begin/end pair of a phase is timed, so wrapping a call that calls itself
 * is safe. A phase ended without a begin is ignored. */
TML_API int tml_step_begin(void);
TML_API int tml_step_end(void);
/* Ends the step as failed (an exception left the bracket). */
TML_API int tml_step_abort(void);
/* Ends a step that automatic step detection found rather than the code
 * marked (the Python package's zero-edit tracing: a step ends when
 * optimizer.step() returns); the summary says its steps were detected. */
TML_API int tml_step_end_detected(void);
/* The next step to end on this thread is the first of an epoch whose data
 * loader starts its workers anew (the Python package marks it when a
 * DataLoader with num_workers > 0 and persistent_workers=False makes a new
 * iterator): its wait is spin-up, left out of the window and reported
 * apart (docs/diagnosis.md, EPOCH START). */
TML_API int tml_mark_epoch_start(void);
/* A data loader that starts its workers anew began its start at start_ns
 * (tml_now_ns()): the step that its first fetch (TML_PHASE_INPUT) on this
 * thread feeds is an epoch start, its wait counted from start_ns (the
 * loader's own start), and the time before start_ns since the last step
 * stays Untraced as the script's own between epochs (validation,
 * checkpoints). A loader whose batches feed no step (validation) marks
 * none. The Python package calls it with the start of the DataLoader
 * iterator's __init__; tml_mark_epoch_start() is the form without a
 * loader. */
TML_API int tml_mark_loader_start(int64_t start_ns);
/* The next step to end on this thread ran under the deep dive's profiler
 * (docs/deep-dive.md): it is left out of the window and the diagnosis,
 * like warm-up, and the summary says so. */
TML_API int tml_mark_deep_dive(void);
TML_API int tml_phase_begin(tml_phase phase);
TML_API int tml_phase_end(tml_phase phase);
/* Records a phase that the caller timed itself with tml_now_ns(). */
TML_API int tml_phase_span(tml_phase phase, int64_t begin_ns, int64_t end_ns);

/*
 * Communication (docs/diagnosis.md, COMMUNICATION-BOUND). Per step TraceML
 * reports the communication time (the union of the step's collectives,
 * overlapped with compute or not), the exposed part (what the step waited
 * for: TML_PHASE_COMM spans, plus the tail of the overlapped collectives
 * after the last of them was launched), the bytes and the bandwidth.
 *
 * tml_comm_bytes: a collective of `bytes` (what this rank sends, as NCCL's
 * bus-bandwidth count has it: 2(n-1)/n of the buffer for an all-reduce of n
 * ranks, (n-1)/n of the output for an all-gather) ran inside the
 * TML_PHASE_COMM span open on this thread, or just ended there. Counts one
 * collective of the step open on this thread.
 *
 * tml_comm_overlapped: a collective that ran beside compute, launched at
 * begin_ns and completed at end_ns (tml_now_ns()): a DDP gradient bucket,
 * an async_op=True collective. Callable from any thread (the one that
 * completes it): it joins the step open on the calling thread, else the
 * next step to end on any thread. Bytes as above, counted up to 4 GiB per
 * collective. No allocation, lock or system call; when more than 256 are
 * waiting for a step to end, the rest are dropped and counted.
 */
TML_API int tml_comm_bytes(int64_t bytes);
TML_API int tml_comm_overlapped(int64_t begin_ns, int64_t end_ns, int64_t bytes);

/*
 * Throughput (docs/summary-json.md, `throughput`). tml_step_samples: the
 * step open on this thread consumed `samples` samples (the batch dimension
 * of its input) and `tokens` tokens (the elements of a (batch, sequence)
 * integer input; -1 when the input is not tokens). Several calls in one
 * step add up (gradient accumulation). Called between steps it counts for
 * the next step to begin on this thread, and a fetch (TML_PHASE_INPUT)
 * between steps forgets what the fetches before it counted: the batches
 * of a validation loop feed no step. The Python package calls it for
 * every DataLoader batch (and trace_step(samples=, tokens=)).
 *
 * tml_set_flops: one sample costs `flops_per_sample` floating-point
 * operations, forward and backward, from now on (0 forgets it); `how` is
 * TML_FLOPS_COUNTED (the Python package counted a forward pass under
 * torch.utils.flop_counter.FlopCounterMode and took 3 times it) or
 * TML_FLOPS_GIVEN (the caller's own figure), or'ed with the dtype the
 * model computes in (TML_FLOPS_FP32, _TF32, _16BIT). `device` is the GPU's
 * name as CUDA gives it ("NVIDIA H100 80GB HBM3"; NULL or "" on a CPU):
 * a data-centre GPU of TraceML's table has a peak for that dtype, and the
 * summary its MFU (achieved over peak); any other device has the achieved
 * FLOP/s alone. A step's FLOPs are its samples times the figure, so steps
 * without samples have none. Call it on the training thread; one ring
 * write.
 */
/* One line in the run folder's traceml.log, "rank N: TEXT": for the
 * bindings to say what TraceML did or left out, and why, without a word
 * on the training's own output. 0, or TML_ESTATE when TraceML is not
 * running (or has no run folder). */
TML_API int tml_log_note(const char *text);

#define TML_FLOPS_GIVEN 0x0u
#define TML_FLOPS_COUNTED 0x1u
#define TML_FLOPS_FP32 0x00u
#define TML_FLOPS_TF32 0x10u
#define TML_FLOPS_16BIT 0x20u
TML_API int tml_step_samples(int64_t samples, int64_t tokens);
TML_API int tml_set_flops(double flops_per_sample, uint32_t how, const char *device);

/* Forgets an open phase without recording it: for a call that turned out
 * not to be what the phase means (a fetch that raised StopIteration, a
 * .to() that did not copy to a GPU). Ends one level of nesting. */
TML_API int tml_phase_cancel(tml_phase phase);

/*
 * GPU clock (CUDA). After tml_set_cuda_stream(stream) on a thread, every
 * step and phase boundary on that thread also records a CUDA event on
 * `stream` (a CUstream / cudaStream_t; NULL is the legacy default stream,
 * which is what PyTorch's default stream is). The events come from a pool
 * made here, on the calling thread, in its current CUDA context (so call
 * it after CUDA is initialised, with the training's device current); the
 * shipper thread resolves them later with cuEventQuery and never waits
 * for the GPU. A step then has GPU figures when every boundary of it was
 * recorded and completed, and the run is diagnosed on the GPU clock when
 * every step of the window has them. Phases timed with tml_phase_span()
 * have no GPU boundaries: use begin/end on a GPU-timed thread.
 *
 * libcuda.so.1 is loaded at run time ($TRACEML_LIBCUDA names another
 * file). Returns 0, TML_EIO when there is no CUDA driver or no current
 * context (nothing changes then), TML_ENOMEM. Cost: each boundary adds
 * one cuEventRecord (an enqueue, about a microsecond) to the marker.
 */
TML_API int tml_set_cuda_stream(void *stream);
/* Stops recording CUDA events on this thread. */
TML_API int tml_unset_cuda_stream(void);

/*
 * Per-step CUDA memory: reports the caching allocator's figures for the
 * traced device now (-1 for any that is unknown): bytes allocated and
 * reserved, the allocator's own all-time peaks of both (read, never reset:
 * a peak that grew during the step makes that step's peak exact), and the
 * device's total memory. Call it at the end of a step and at points where
 * memory peaks (after the forward pass); a step's peak is the largest
 * figure reported inside it. One ring write, no system call.
 */
TML_API int tml_cuda_memory(int64_t allocated_bytes, int64_t reserved_bytes,
                    int64_t allocated_peak_bytes, int64_t reserved_peak_bytes,
                    int64_t device_total_bytes);

/* Says which global rank this process is and how many there are, for
 * processes whose environment does not (no RANK / SLURM_PROCID: e.g. ranks
 * started by torch.multiprocessing.spawn that initialise torch.distributed
 * themselves). Call it before tml_init() or before the first step ends;
 * without an identity from the environment the handshake with the
 * aggregator waits for the first step. Later it returns TML_ESTATE. */
TML_API int tml_set_rank(int32_t rank, int32_t world_size);

/* Says this process launches the ranks and is not one itself (a
 * torch.multiprocessing.spawn parent): unless it records a step after
 * all, it never reports to the aggregator, so it cannot claim a rank that
 * one of its children holds. Call it before the first step ends. */
TML_API int tml_set_launcher(void);
/* tml_set_launcher(), for a process whose training processes are forked
 * from it (multiprocessing's fork start method: Accelerate's
 * notebook_launcher, a Hogwild loop): a forked process is not traced, and
 * a summary without ranks says so (in-process runs). */
TML_API int tml_set_launcher_forked(void);

/* Describes the input pipeline (a DataLoader's num_workers and
 * pin_memory), so an INPUT-BOUND diagnosis can say what to change
 * ("DataLoader(num_workers=0) on 16 cores: try num_workers=8"). Call it
 * after tml_init(), any time. */
TML_API int tml_set_loader_config(int32_t num_workers, int pin_memory);

/* Names the models whose forward TraceML times although the step did not
 * name them (the Python package: a GAN traced as trace_step(D), whose
 * generator it found from the optimizer that steps inside the step), so
 * that the summary says so: "also timed: Generator". `names` is a
 * comma-separated list of class names ("" or NULL: none), copied (at most
 * TML_AUTO_MODELS_MAX - 1 bytes are kept); each call replaces the list.
 * Call it after tml_init(), any time. */
#define TML_AUTO_MODELS_MAX 128
TML_API int tml_set_auto_models(const char *names);

/* Tells TraceML what one call of the caller's own instrumentation glue
 * costs (e.g. a Python hook around a marker), measured by the caller. The
 * summary's overhead per step is then markers per step times (marker cost,
 * measured by TraceML at init, plus this). */
TML_API int tml_set_call_cost_ns(int64_t ns);

/* Counts n calls of that glue that recorded nothing (a wrapper that
 * passed a call through: a CPU-to-CPU .to(), a copy between host
 * tensors), so the overhead the summary reports includes them too. A
 * counter of the calling thread's own (no lock, nothing shared written);
 * TML_ESTATE / TML_EDISABLED when TraceML is not running. */
TML_API int tml_count_glue_calls(uint32_t n);

/* The clock every marker uses: CLOCK_MONOTONIC in nanoseconds. */
TML_API int64_t tml_now_ns(void);

/* The summary box written by tml_shutdown() in in-process mode, or NULL
 * (under `traceml run` the launcher prints it instead). */
TML_API const char *tml_summary_text(void);
/* The port of the live dashboard this process serves (a run without the
 * launcher, with TRACEML_DASHBOARD_PORT set: docs/live.md), or -1. */
TML_API int tml_live_port(void);
/* The run folder of this process's run, or NULL before tml_init(). */
TML_API const char *tml_run_dir(void);

/*
 * The run's summary as final_summary.json text (docs/summary-json.md),
 * mid-run or at the end. While the run goes on it is the summary so far
 * (status "running", "series" null), built by the aggregator (in-process,
 * or the launcher's over this rank's connection) from every step this
 * process completed before the call; no file is written and the final
 * artifacts are not affected. After tml_shutdown() in in-process mode it
 * is the final_summary.json written then. Waits at most about 5 s.
 * *out is malloc'd: free it with tml_free(). Returns 0, TML_ESTATE (not
 * started), TML_EDISABLED, TML_ECONN (no aggregator answered), TML_EIO.
 */
TML_API int tml_summary_json(char **out);
/*
 * A summary's JSON flattened into one object of `traceml/...` scalars for
 * experiment trackers (W&B, MLflow): traceml/primary/kind,
 * traceml/step_time/input_wait_ms, ... (docs/python-api.md lists the
 * rules). Nulls are left out. *out is malloc'd (free with tml_free()).
 * Returns 0, TML_EPROTO (not a JSON object), TML_ENOMEM.
 */
TML_API int tml_summary_flatten(const char *json, size_t len, char **out);
/*
 * A summary's JSON as HTML (docs/notebooks.md): TML_HTML_PAGE the HTML
 * report (final_summary.html's page); TML_HTML_CARD a fragment without
 * script, the run, its verdict and the step's phases (a notebook's live
 * view); TML_HTML_NOTEBOOK the card, then the report in a sandboxed
 * iframe (what a notebook cell displays at the end of a run). *out is
 * malloc'd (free with tml_free()). Returns 0, TML_EINVAL, TML_EPROTO (not
 * a JSON object), TML_ENOMEM.
 */
enum { TML_HTML_PAGE = 0, TML_HTML_CARD = 1, TML_HTML_NOTEBOOK = 2 };
TML_API int tml_summary_html(const char *json, size_t len, int what, char **out);
/* A TRACEML_* environment variable read the one way TraceML reads it
 * (docs/cli.md, "Environment variables"): its value as text in out (a
 * boolean "1" or "0"; an integer or a number in range, else the default;
 * a string or path, else its default, else ""), and its type as the
 * return value: "bool", "int", "double", "string" or "path". NULL for a
 * name TraceML does not read (or no room). The returned string is static. */
TML_API const char *tml_config(const char *name, char *out, size_t cap);
/*
 * The deep dive's result (docs/deep-dive.md): one row per (module,
 * operator) of a short profiled window, self time summed over it, for the
 * report's "where the compute goes". The rows are copied (at most 256;
 * names cut to 95 bytes) and delivered by the shipper; the call never
 * waits. first_step and last_step are this thread's step ids of the
 * window, wall_ns its wall time, cuda 1 when CUDA activity was profiled.
 * skipped: why no window ran (n must be 0 then), NULL or "" when one did.
 * A later call replaces an earlier one. Returns 0, TML_ESTATE (not
 * started), TML_EDISABLED, TML_EINVAL, TML_ENOMEM.
 */
typedef struct tml_deep_dive_row {
    const char *module;      /* the module's path in the model, "" outside any */
    const char *op;          /* the operator, e.g. "aten::addmm" */
    int64_t self_ns;         /* self time over the window */
    int64_t calls;
} tml_deep_dive_row;
TML_API int tml_deep_dive(uint64_t first_step, uint64_t last_step, int64_t wall_ns, int cuda,
                          const char *skipped, const tml_deep_dive_row *rows, size_t n);
/* Frees what tml_summary_json() / _flatten() / _html() returned. */
TML_API void tml_free(void *p);

TML_API const char *tml_strerror(int err);
TML_API const char *tml_version(void);

#ifdef __cplusplus
}
#endif
#endif /* TRACEML_H */
