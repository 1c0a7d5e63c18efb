/*
 * chrome_trace.c - a run's steps as a Chrome / Perfetto trace (the JSON
 * "Trace Event Format"), for `traceml export --chrome-trace`.
 *
 * The summary says which phase dominates on average; a timeline shows the
 * steps themselves: the one slow step every 50, the rank whose input waits
 * drift, the pause outside the loop. Open the file in ui.perfetto.dev or
 * chrome://tracing.
 *
 * Layout: one process (the run), one track (thread) per rank named
 * "R<rank>/N<node>". Each step is a "Step N" slice from the start of its
 * input wait to the end of its bracket, with the phases as child slices;
 * time outside every bracket and fetch is an "Untraced" slice before it.
 * Times are the CPU monotonic clock of each rank, in microseconds from the
 * run's earliest event (ranks on one node share that clock; across nodes
 * the clocks are independent, so tracks of different nodes line up only
 * approximately).
 *
 * What is exact and what is laid out: a step record holds the bracket's
 * start, its traced duration, the input wait before it and the total time
 * of each phase, not where each phase's calls sat inside the step. So the
 * Step, Input Wait and Untraced slices are where they happened, and inside
 * the bracket the phases are laid end to end in the order a training step
 * runs them (H2D, Forward, Backward, Optimizer), each as long as it
 * measured; what is left of the bracket is the residual. GPU-clock figures
 * and memory are in the Step slice's args.
 */
#include "report/chrome_trace.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Durations and times as read from telemetry.sqlite, bounded (a duration
 * to ~11 days, a time to ~36 years either way) so that the sums and
 * differences below cannot overflow, whatever a hand-made file holds. */
#define MAX_DURATION_NS 1000000000000000LL
#define MAX_TIME_NS (1LL << 60)

static int64_t nonneg(int64_t v)
{
    return v > 0 ? (v < MAX_DURATION_NS ? v : MAX_DURATION_NS) : 0;
}

static int64_t start_of(const tml_step_record *s)
{
    return s->start_ns > MAX_TIME_NS ? MAX_TIME_NS : s->start_ns < -MAX_TIME_NS ? -MAX_TIME_NS
                                                                                : s->start_ns;
}

/* Microseconds from t0, nanosecond precision. */
static void add_us(tml_strbuf *sb, int64_t ns)
{
    int64_t us = ns / 1000, frac = ns % 1000;
    if (ns < 0) {
        tml__sb_addf(sb, "%.3f", (double)ns / 1000.0);
        return;
    }
    tml__sb_addf(sb, "%lld.%03lld", (long long)us, (long long)frac);
}

static void slice(tml_strbuf *sb, const char *name, const char *cat, int tid, int64_t ts,
                  int64_t dur, const char *args)
{
    tml__sb_adds(sb, ",\n{\"ph\":\"X\",\"pid\":0,\"tid\":");
    tml__sb_addf(sb, "%d,\"name\":", tid);
    tml__sb_add_json_str(sb, name);
    tml__sb_addf(sb, ",\"cat\":\"%s\",\"ts\":", cat);
    add_us(sb, ts);
    tml__sb_adds(sb, ",\"dur\":");
    add_us(sb, dur);
    if (args) {
        tml__sb_adds(sb, ",\"args\":");
        tml__sb_adds(sb, args);
    }
    tml__sb_addc(sb, '}');
}

static void arg_ms(tml_strbuf *a, const char *key, int64_t ns)
{
    if (ns < 0)
        tml__sb_addf(a, ",\"%s\":null", key);
    else
        tml__sb_addf(a, ",\"%s\":%.3f", key, (double)ns / 1e6);
}

static const char *const phase_names[TML_PHASE_COUNT] = {
    "Input Wait", "H2D", "Forward", "Backward", "Optimizer", "Communication"
};

/* Where the phases lie in a step's slices: the exposed communication (the
 * wait for the gradient all-reduce) at the end of Backward. */
static const int phase_order[] = {
    TML_PHASE_H2D, TML_PHASE_FORWARD, TML_PHASE_BACKWARD, TML_PHASE_COMM, TML_PHASE_OPTIMIZER
};

/* A rank's communication in flight has a track of its own below the rank's. */
#define COMM_TID(rank) ((1 << 20) + (rank))

int tml__chrome_trace_has_comm(const tml_step_record *s)
{
    return (s->observed & TML_PHASE_BIT(TML_PHASE_COMM)) != 0;
}

/* The step slice's args: its breakdown and memory. */
static void step_args(tml_strbuf *args, const tml_step_record *s, int32_t rank)
{
    static const char *const cpu_keys[TML_PHASE_COUNT] = {
        "input_wait_ms", "h2d_ms", "forward_ms", "backward_ms", "optimizer_ms",
        "communication_ms"
    };
    static const char *const gpu_keys[TML_PHASE_COUNT] = {
        "gpu_input_wait_ms", "gpu_h2d_ms", "gpu_forward_ms", "gpu_backward_ms",
        "gpu_optimizer_ms", "gpu_communication_ms"
    };
    int64_t in = nonneg(s->phase_ns[TML_PHASE_INPUT]), traced = nonneg(s->traced_ns);

    tml__sb_reset(args);
    tml__sb_addf(args, "{\"step\":%llu,\"rank\":%d", (unsigned long long)s->step, (int)rank);
    arg_ms(args, "step_time_ms", in + traced);
    arg_ms(args, "traced_ms", traced);
    for (int p = 0; p < TML_PHASE_COUNT; p++)
        arg_ms(args, cpu_keys[p], (s->observed & TML_PHASE_BIT(p)) ? s->phase_ns[p] : -1);
    if (s->gpu_traced_ns >= 0) {
        arg_ms(args, "gpu_traced_ms", s->gpu_traced_ns);
        for (int p = 0; p < TML_PHASE_COUNT; p++)
            arg_ms(args, gpu_keys[p], s->gpu_phase_ns[p]);
    }
    if (tml__chrome_trace_has_comm(s)) {
        arg_ms(args, "communication_in_flight_ms", s->comm_ns);
        tml__sb_addf(args, ",\"communication_bytes\":%lld,\"collectives\":%u",
                     (long long)s->comm_bytes, s->comm_count);
    }
    if (s->rss_bytes >= 0)
        tml__sb_addf(args, ",\"rss_bytes\":%lld", (long long)s->rss_bytes);
    if (s->cuda_allocated_peak_bytes >= 0)
        tml__sb_addf(args, ",\"peak_allocated_bytes\":%lld",
                     (long long)s->cuda_allocated_peak_bytes);
    if (s->cuda_reserved_peak_bytes >= 0)
        tml__sb_addf(args, ",\"peak_reserved_bytes\":%lld",
                     (long long)s->cuda_reserved_peak_bytes);
    if (s->flags & TML_STEP_ABORTED)
        tml__sb_adds(args, ",\"aborted\":true");
    tml__sb_addc(args, '}');
}

/* One step's slices on its rank's track: the untraced gap before it, the
 * step, its Input Wait, then its phases in order, clipped to the step.
 * Returns the number of slices. */
size_t tml__chrome_trace_step(tml_strbuf *out, tml_strbuf *args, const tml_step_record *s,
                              int32_t rank, int64_t t0)
{
    int tid = rank;
    int64_t in = nonneg(s->phase_ns[TML_PHASE_INPUT]), traced = nonneg(s->traced_ns);
    int64_t begin = start_of(s) - in - t0;
    size_t n = 0;
    char name[64];

    snprintf(name, sizeof(name), "Step %llu%s", (unsigned long long)s->step,
             (s->flags & TML_STEP_ABORTED) ? " (aborted)" : "");
    if (s->gap_ns > 0) {
        int64_t gap = nonneg(s->gap_ns);
        slice(out, "Untraced", "untraced", tid, begin - gap, gap, NULL);
        n++;
    }
    step_args(args, s, rank);
    slice(out, name, "step", tid, begin, in + traced, args->buf);
    n++;
    if ((s->observed & TML_PHASE_BIT(TML_PHASE_INPUT)) && in > 0) {
        slice(out, phase_names[TML_PHASE_INPUT], "input", tid, begin, in, NULL);
        n++;
    }
    int64_t at = start_of(s) - t0, end = at + traced, comm_end = -1;
    for (size_t k = 0; k < sizeof(phase_order) / sizeof(phase_order[0]); k++) {
        int p = phase_order[k];
        int64_t d = nonneg(s->phase_ns[p]);
        if (!(s->observed & TML_PHASE_BIT(p)) || d == 0)
            continue;
        if (at + d > end)
            d = end - at;
        if (d <= 0)
            break;
        slice(out, phase_names[p], p == TML_PHASE_COMM ? "comm" : "phase", tid, at, d, NULL);
        n++;
        at += d;
        if (p == TML_PHASE_BACKWARD || p == TML_PHASE_COMM)
            comm_end = at;
    }
    /* the time some collective was in flight, ending with the exposed wait
     * (overlapped buckets run beside Backward) */
    int64_t fly = nonneg(s->comm_ns);
    if (tml__chrome_trace_has_comm(s) && fly > 0) {
        int64_t from = start_of(s) - t0;
        if (comm_end < 0)
            comm_end = end;
        if (comm_end - fly < from)
            fly = comm_end - from;
        if (fly > 0) {
            slice(out, "Communication in flight", "comm", COMM_TID(rank), comm_end - fly, fly,
                  NULL);
            n++;
        }
    }
    return n;
}

int64_t tml__chrome_trace_t0(int64_t t0, const tml_step_record *s)
{
    int64_t t = start_of(s) - nonneg(s->phase_ns[TML_PHASE_INPUT]) - nonneg(s->gap_ns);
    return t < t0 ? t : t0;
}

void tml__chrome_trace_begin(tml_strbuf *out, const char *run_name, const char *run_id)
{
    tml__sb_adds(out, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"run_name\":");
    tml__sb_add_json_str(out, run_name);
    tml__sb_adds(out, ",\"run_id\":");
    tml__sb_add_json_str(out, run_id);
    tml__sb_addf(out, ",\"traceml_version\":\"%s\",\"clock\":\"cpu monotonic\"},\n"
                 "\"traceEvents\":[\n{\"ph\":\"M\",\"pid\":0,\"name\":\"process_name\","
                 "\"args\":{\"name\":", TML_VERSION_STRING);
    char pn[200];
    snprintf(pn, sizeof(pn), "TraceML run %s", run_name);
    tml__sb_add_json_str(out, pn);
    tml__sb_adds(out, "}}");
}

/* A track's name and place: R<rank>/N<node>, and its communication track
 * just below it. */
static void track(tml_strbuf *out, int tid, int sort, int32_t rank, int32_t node,
                  const char *suffix)
{
    char label[128];
    snprintf(label, sizeof(label), "R%d/N%d%s", (int)rank, (int)node, suffix);
    tml__sb_addf(out, ",\n{\"ph\":\"M\",\"pid\":0,\"tid\":%d,\"name\":\"thread_name\","
                 "\"args\":{\"name\":", tid);
    tml__sb_add_json_str(out, label);
    tml__sb_addf(out, "}},\n{\"ph\":\"M\",\"pid\":0,\"tid\":%d,"
                 "\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%d}}", tid, sort);
}

void tml__chrome_trace_track(tml_strbuf *out, int32_t rank, int32_t node, int comm)
{
    if (comm)
        track(out, COMM_TID(rank), 2 * rank + 1, rank, node, " communication");
    else
        track(out, rank, 2 * rank, rank, node, "");
}

void tml__chrome_trace_end(tml_strbuf *out)
{
    tml__sb_adds(out, "\n]}\n");
}

int tml__chrome_trace(const tml_run *run, tml_strbuf *out, size_t *nslices)
{
    int64_t t0 = INT64_MAX;
    size_t n = 0;
    tml_strbuf args = TML_STRBUF_INIT;

    for (size_t i = 0; i < run->nranks; i++)
        for (size_t j = 0; j < run->ranks[i].nsteps; j++)
            t0 = tml__chrome_trace_t0(t0, &run->ranks[i].steps[j]);
    if (t0 == INT64_MAX)
        t0 = 0;
    tml__chrome_trace_begin(out, run->name, run->id);
    for (size_t i = 0; i < run->nranks; i++) {
        const tml_rank *r = &run->ranks[i];
        tml__chrome_trace_track(out, r->info.rank, r->info.node_rank, 0);
        int comm = 0;
        for (size_t j = 0; j < r->nsteps && !comm; j++)
            comm = tml__chrome_trace_has_comm(&r->steps[j]);
        if (comm)
            tml__chrome_trace_track(out, r->info.rank, r->info.node_rank, 1);
        for (size_t j = 0; j < r->nsteps; j++)
            n += tml__chrome_trace_step(out, &args, &r->steps[j], r->info.rank, t0);
    }
    tml__chrome_trace_end(out);
    tml__sb_release(&args);
    if (nslices)
        *nslices = n;
    return out->failed ? TML_ENOMEM : 0;
}
