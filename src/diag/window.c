/*
 * window.c - the analysed window: which steps count and what they average.
 *
 * A verdict is only as good as the steps it is computed over, so this file
 * decides three things before any rule runs.
 *
 * Which steps. Ranks run in lock-step in data-parallel training, so a step
 * is compared across ranks by its id: the common steps are the ids every
 * rank (that sent steps at all) reported. A step aborted on any rank (an
 * exception left the bracket) is left out on all of them: its timings stop
 * half-way. The window is then the last N common steps after the warm-up.
 * A long run's records between its first and its last steps are no longer
 * in memory (model/run.h): they are counted as common when every rank
 * dropped some (the fewest dropped, less aborted ones), not compared.
 *
 * Warm-up. The first steps of a run pay for compilation, autotuning, lazy
 * allocation and worker start-up; averaging them in would blame the input
 * pipeline for cuDNN autotuning. We leave out the longest leading run of
 * steps that are clearly slower than the run's typical step: slower than
 * median + max(0.5 * median, 4 * MAD) of the whole series (the slowest rank
 * per step id), and at most ceil(10%) of the steps, never more than 50 (and
 * none when fewer than 3 steps exist). A contiguous prefix, not every
 * outlier: a periodically slow step later in the run (a worker's batch
 * arriving late) is the run's behaviour, not warm-up, and must be seen.
 *
 * Which clock. CUDA-event durations are what the GPU actually did; CPU
 * durations can hide asynchronous kernels. We diagnose on the GPU clock only
 * when every window step of every rank carries GPU figures; a mix would
 * compare numbers of different kinds. (A few leading steps taken before GPU
 * timing was set up count as warm-up: see gpu_late_start.) The DataLoader fetch and the untraced
 * gap stay on the CPU clock either way.
 *
 * Missing versus zero: what a step is made of, and which phases count as
 * not measured, is the one step breakdown of model/breakdown.h, applied
 * with the phases never observed over the window.
 */
#include "diag/window.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct step_ref {
    uint64_t step;
    size_t idx;
} step_ref;

static int cmp_ref(const void *a, const void *b)
{
    const step_ref *x = a, *y = b;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    return x->idx < y->idx ? -1 : (x->idx > y->idx);
}

/* The k-th smallest of v[0..n) (k < n), v reordered so that nothing
 * before k is larger: Hoare's selection, linear on average (a summary of
 * 8 ranks x 10,000 steps once spent most of its time sorting). */
static double select_kth(double *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        double a = v[lo], b = v[lo + (hi - lo) / 2], c = v[hi];
        double pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        size_t i = lo, j = hi;
        for (;;) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i >= j)
                break;
            double t = v[i];
            v[i++] = v[j];
            v[j--] = t;
        }
        /* v[lo..j] <= pivot <= v[j+1..hi] */
        if (k <= j)
            hi = j;
        else
            lo = j + 1;
    }
    return v[k];
}

/* Reorders v. */
static double median_of(double *v, size_t n)
{
    if (n == 0)
        return NAN;
    double hi = select_kth(v, n, n / 2);
    if (n % 2)
        return hi;
    double lo = v[0];
    for (size_t i = 1; i < n / 2; i++)
        if (v[i] > lo)
            lo = v[i];
    return (lo + hi) / 2.0;
}

/* Nearest-rank percentile; reorders v. */
static double percentile_of(double *v, size_t n, double p)
{
    if (n == 0)
        return NAN;
    double r = ceil(p * (double)n);
    size_t k = r < 1.0 ? 0 : (size_t)r - 1;
    return select_kth(v, n, k < n ? k : n - 1);
}

size_t tml__warmup_count(const double *step_ns, size_t n)
{
    if (n < 3)
        return 0;
    double *tmp = malloc(n * sizeof(*tmp));
    if (!tmp)
        return 0;
    memcpy(tmp, step_ns, n * sizeof(*tmp));
    double med = median_of(tmp, n);
    for (size_t i = 0; i < n; i++)
        tmp[i] = fabs(step_ns[i] - med);
    double mad = median_of(tmp, n);
    free(tmp);

    double margin = 0.5 * med > 4.0 * mad ? 0.5 * med : 4.0 * mad;
    double limit = med + margin;
    size_t cap = (n + 9) / 10;
    if (cap > 50)
        cap = 50;
    size_t k = 0;
    while (k < cap && step_ns[k] > limit)
        k++;
    return k;
}

/* A rank's records sorted by step id, first occurrence of each id kept. */
static step_ref *sorted_refs(const tml_rank *r, size_t *out_n)
{
    *out_n = 0;
    if (r->nsteps == 0)
        return NULL;
    step_ref *refs = malloc(r->nsteps * sizeof(*refs));
    if (!refs)
        return NULL;
    for (size_t i = 0; i < r->nsteps; i++) {
        refs[i].step = r->steps[i].step;
        refs[i].idx = i;
    }
    int sorted = 1;   /* the usual case: records arrive in step order */
    for (size_t i = 1; i < r->nsteps && sorted; i++)
        sorted = refs[i - 1].step < refs[i].step;
    if (!sorted)
        qsort(refs, r->nsteps, sizeof(*refs), cmp_ref);
    size_t m = 0;
    for (size_t i = 0; i < r->nsteps; i++)
        if (m == 0 || refs[m - 1].step != refs[i].step)
            refs[m++] = refs[i];
    *out_n = m;
    return refs;
}

static int64_t nonneg(int64_t v)
{
    return v > 0 ? v : 0;
}

/* Duration of phase p in record s on the chosen clock (never negative). */
static double phase_on(const tml_step_record *s, int p, tml_clock clock)
{
    return (double)nonneg(clock == TML_CLOCK_GPU ? s->gpu_phase_ns[p] : s->phase_ns[p]);
}

static void rank_empty(tml_rank_window *rw, const tml_rank *r)
{
    memset(rw, 0, sizeof(*rw));
    rw->rank = r->info.rank;
    rw->node = r->info.node_rank;
    rw->local_rank = r->info.local_rank;
    rw->loader_known = r->info.loader_known != 0;
    rw->loader_workers = r->info.loader_workers;
    rw->loader_pin_memory = r->info.loader_pin_memory;
    rw->cpu_count = r->info.cpu_count;
    for (int m = 0; m < TML_M_COUNT; m++)
        rw->avg_ns[m] = NAN;
    rw->step_median_ns = rw->step_p90_ns = NAN;
    rw->step_stddev_ns = rw->step_mad_ns = NAN;
    rw->rss_bytes = rw->cuda_allocated_bytes = rw->cuda_reserved_bytes = NAN;
    rw->comm_bytes_per_step = rw->comm_bytes_per_s = rw->comm_collectives_per_step = NAN;
    rw->cpu_percent = rw->runq_wait_percent = NAN;
    rw->missing = TML_PHASES_ALL;
    rw->overhead_ns_per_step = r->stats.overhead_ns_per_step;
    rw->records_dropped = r->stats.records_dropped;
    rw->events_dropped = r->stats.events_dropped;
    rw->has_gpu = r->past_gpu;
    for (size_t i = 0; i < r->nsteps && !rw->has_gpu; i++) {
        const tml_step_record *s = &r->steps[i];
        if (s->gpu_traced_ns >= 0 || s->cuda_allocated_peak_bytes >= 0 ||
            s->cuda_reserved_peak_bytes >= 0)
            rw->has_gpu = 1;
    }
}

/* Block medians of the window's Step Times st (window order), into rw;
 * tmp has room for nwin values. */
static void block_medians(tml_rank_window *rw, const double *st, size_t nwin, double *tmp)
{
    size_t nb = nwin / TML_STEP_BLOCK_MIN;
    if (nb > TML_STEP_BLOCKS)
        nb = TML_STEP_BLOCKS;
    for (size_t b = 0; b < nb; b++) {
        size_t from = b * nwin / nb, to = (b + 1) * nwin / nb;
        memcpy(tmp, st + from, (to - from) * sizeof(*tmp));
        rw->block_ns[b] = median_of(tmp, to - from);
    }
    rw->nblocks = nb;
}

/* Averages of one rank over the window rows (idx[j * stride + col]): the
 * step breakdown (model/breakdown.h) summed over the steps, then the
 * phases never observed in the window marked missing (one pass over the
 * records). */
static int rank_fill(tml_rank_window *rw, const tml_rank *r, const size_t *idx,
                     size_t nwin, size_t stride, size_t col, tml_clock clock)
{
    double sum[TML_M_COUNT] = {0}, v[TML_M_COUNT];
    double rss = 0, alloc = 0, resv = 0, comm_bytes = 0, comm_ns = 0, comm_count = 0;
    size_t n_gap = 0, n_rss = 0, n_alloc = 0, n_resv = 0;
    uint32_t observed = 0;
    double *st = NULL;

    if (nwin == 0)
        return 0;
    st = malloc(2 * nwin * sizeof(*st));     /* the step times, and room to sort */
    if (!st)
        return TML_ENOMEM;
    for (size_t j = 0; j < nwin; j++) {
        const tml_step_record *s = &r->steps[idx[j * stride + col]];
        observed |= s->observed;
        tml__step_breakdown_all(s, clock, v);
        st[j] = v[TML_M_STEP];
        for (int m = 0; m < TML_M_COUNT; m++)
            if (m != TML_M_UNTRACED)
                sum[m] += v[m];
        if (!isnan(v[TML_M_UNTRACED])) {
            sum[TML_M_UNTRACED] += v[TML_M_UNTRACED];
            n_gap++;
        }
        if (s->observed & TML_PHASE_BIT(TML_PHASE_COMM)) {
            comm_bytes += (double)s->comm_bytes;
            comm_ns += (double)s->comm_ns;
            comm_count += s->comm_count;
        }
        if (s->rss_bytes >= 0) {
            rss += (double)s->rss_bytes;
            n_rss++;
        }
        if (s->cuda_allocated_peak_bytes >= 0) {
            alloc += (double)s->cuda_allocated_peak_bytes;
            n_alloc++;
        }
        if (s->cuda_reserved_peak_bytes >= 0) {
            resv += (double)s->cuda_reserved_peak_bytes;
            n_resv++;
        }
    }

    /* the phases never observed in the window are missing, not zero */
    rw->missing = tml__phases_missing(observed, r->info.instrumented);
    tml__breakdown_mask(sum, rw->missing);
    rw->nsteps = nwin;
    for (int m = 0; m < TML_M_COUNT; m++)
        rw->avg_ns[m] = sum[m] / (double)nwin;
    rw->avg_ns[TML_M_UNTRACED] = n_gap ? sum[TML_M_UNTRACED] / (double)n_gap : NAN;
    rw->rss_bytes = n_rss ? rss / (double)n_rss : NAN;
    rw->cuda_allocated_bytes = n_alloc ? alloc / (double)n_alloc : NAN;
    rw->cuda_reserved_bytes = n_resv ? resv / (double)n_resv : NAN;
    if (!(rw->missing & TML_PHASE_BIT(TML_PHASE_COMM))) {
        rw->comm_bytes_per_step = comm_bytes / (double)nwin;
        rw->comm_collectives_per_step = comm_count / (double)nwin;
        rw->comm_bytes_per_s = comm_ns > 0 && comm_bytes > 0 ? comm_bytes / (comm_ns / 1e9) : NAN;
    }

    block_medians(rw, st, nwin, st + nwin);
    rw->step_median_ns = median_of(st, nwin);
    rw->step_p90_ns = percentile_of(st, nwin, 0.90);
    /* Noise: what `traceml compare` holds a change against. */
    double mean = sum[TML_M_STEP] / (double)nwin, var = 0;
    for (size_t j = 0; j < nwin; j++)
        var += (st[j] - mean) * (st[j] - mean);
    rw->step_stddev_ns = nwin > 1 ? sqrt(var / (double)(nwin - 1)) : 0;
    for (size_t j = 0; j < nwin; j++)
        st[j] = fabs(st[j] - rw->step_median_ns);
    rw->step_mad_ns = median_of(st, nwin);
    free(st);
    return 0;
}

/* Median rank (nearest the median Step Time; ties to the upper median),
 * worst rank and skew. */
static void across_ranks(tml_window *w)
{
    double *v = NULL;
    size_t n = 0;

    w->median_rank = w->worst_rank = -1;
    w->skew = NAN;
    if (w->nranks == 0)
        return;
    v = malloc(w->nranks * sizeof(*v));
    if (!v)
        return;
    for (size_t i = 0; i < w->nranks; i++) {
        double s = w->ranks[i].avg_ns[TML_M_STEP];
        if (!isnan(s))
            v[n++] = s;
    }
    double med = median_of(v, n);
    free(v);
    if (n == 0)
        return;
    for (size_t i = 0; i < w->nranks; i++) {
        double s = w->ranks[i].avg_ns[TML_M_STEP];
        if (isnan(s))
            continue;
        if (w->median_rank < 0) {
            w->median_rank = (int)i;
        } else {
            double cur = w->ranks[w->median_rank].avg_ns[TML_M_STEP];
            double d = fabs(s - med), dc = fabs(cur - med);
            /* Ties go to the upper median (the larger Step Time, then the
             * higher rank), as the straggler's victim does. */
            if (d < dc || (d == dc && s >= cur))
                w->median_rank = (int)i;
        }
        if (w->worst_rank < 0 || s > w->ranks[w->worst_rank].avg_ns[TML_M_STEP])
            w->worst_rank = (int)i;
    }
    double m = w->ranks[w->median_rank].avg_ns[TML_M_STEP];
    double worst = w->ranks[w->worst_rank].avg_ns[TML_M_STEP];
    if (m > 0)
        w->skew = (worst - m) / m;
}

void tml__window_release(tml_window *w)
{
    free(w->ranks);
    memset(w, 0, sizeof(*w));
    w->median_rank = w->worst_rank = -1;
    w->skew = NAN;
}

static int window_compute(const tml_run *run, size_t max_steps, int allow_gpu,
                          tml_window *w);

/* GPU timing is often set up during the first step (CUDA initialises
 * lazily), so the first few steps may lack GPU figures while every later
 * one has them. Those few (at most GPU_LATE_MAX, and only when all later
 * common steps have GPU figures) count as warm-up rather than sending the
 * whole run to the CPU clock. */
#define GPU_LATE_MAX 5

static size_t gpu_late_start(const tml_run *run, const size_t *col, size_t nactive,
                             const size_t *idx, size_t ncommon, size_t from)
{
    size_t k = 0;
    for (size_t j = from; j < ncommon; j++) {
        int all = 1;
        for (size_t c = 0; c < nactive && all; c++)
            if (run->ranks[col[c]].steps[idx[j * nactive + c]].gpu_traced_ns < 0)
                all = 0;
        if (all)
            break;
        k++;
    }
    if (k == 0 || k > GPU_LATE_MAX || from + k >= ncommon)
        return 0;
    for (size_t j = from + k; j < ncommon; j++)
        for (size_t c = 0; c < nactive; c++)
            if (run->ranks[col[c]].steps[idx[j * nactive + c]].gpu_traced_ns < 0)
                return 0;
    return k;
}

int tml__window_compute(const tml_run *run, size_t max_steps, tml_window *w)
{
    return window_compute(run, max_steps, 1, w);
}

int tml__window_compute_cpu(const tml_run *run, size_t max_steps, tml_window *w)
{
    return window_compute(run, max_steps, 0, w);
}

/* An empty window over the run: no steps, CPU clock, no median or worst rank. */
static void window_reset(tml_window *w, size_t max_steps)
{
    memset(w, 0, sizeof(*w));
    w->median_rank = w->worst_rank = -1;
    w->skew = NAN;
    w->max_steps = max_steps ? max_steps : TML_WINDOW_DEFAULT_STEPS;
    w->clock = TML_CLOCK_CPU;
    w->epoch_start_wait_ns = NAN;
}

/* Every rank's empty window; the ranks that sent steps become the active
 * columns, each with its records sorted by step id. */
static int collect_ranks(const tml_run *run, tml_window *w, step_ref **refs, size_t *nrefs,
                         size_t *col, size_t *nactive)
{
    for (size_t i = 0; i < run->nranks; i++) {
        rank_empty(&w->ranks[i], &run->ranks[i]);
        if (run->ranks[i].nsteps == 0)
            continue;
        refs[i] = sorted_refs(&run->ranks[i], &nrefs[i]);
        if (!refs[i])
            return TML_ENOMEM;
        col[(*nactive)++] = i;
    }
    return 0;
}

/* Epoch starts after warm-up leave the rows of idx (compacted in place);
 * their wait is averaged into the window. Returns the rows left. */
static size_t drop_epoch_starts(const tml_run *run, const size_t *col, size_t nactive,
                                size_t *idx, size_t ncommon, tml_window *w)
{
    size_t out = w->warmup_steps;
    double sum = 0;
    for (size_t j = w->warmup_steps; j < ncommon; j++) {
        const size_t *row = idx + j * nactive;
        int start = 0;
        double wait = 0;
        for (size_t k = 0; k < nactive; k++) {
            const tml_step_record *s = &run->ranks[col[k]].steps[row[k]];
            start |= (s->flags & TML_STEP_EPOCH_START) != 0;
            double v = (double)s->phase_ns[TML_PHASE_INPUT] + (double)(s->gap_ns > 0 ? s->gap_ns : 0);
            if (v > wait)
                wait = v;
        }
        if (!start) {
            if (out != j)
                memmove(idx + out * nactive, row, nactive * sizeof(*idx));
            out++;
            continue;
        }
        w->epoch_start_steps++;
        sum += wait;
    }
    if (w->epoch_start_steps)
        w->epoch_start_wait_ns = sum / (double)w->epoch_start_steps;
    return out;
}

/* The common steps: the ids every active rank reported, none aborted, as
 * rows of record indices (*idx, ncommon x nactive). Counts aborted ids. */
static int common_steps(const tml_run *run, step_ref *const *refs, const size_t *nrefs,
                        const size_t *col, size_t nactive, size_t **idx_out, tml_window *w)
{
    size_t first = col[0], ncommon = 0;
    size_t *idx = malloc(nrefs[first] * nactive * sizeof(*idx));
    size_t *at = calloc(nactive, sizeof(*at));   /* each rank's cursor: ids ascend */
    if (!idx || !at) {
        free(idx);
        free(at);
        return TML_ENOMEM;
    }
    *idx_out = idx;
    for (size_t j = 0; j < nrefs[first]; j++) {
        uint64_t id = refs[first][j].step;
        int common = 1, aborted = 0;
        for (size_t k = 0; k < nactive && common; k++) {
            size_t ri = col[k];
            while (at[k] < nrefs[ri] && refs[ri][at[k]].step < id)
                at[k]++;
            const step_ref *f = at[k] < nrefs[ri] ? &refs[ri][at[k]] : NULL;
            if (!f || f->step != id) {
                common = 0;
                break;
            }
            if (run->ranks[ri].steps[f->idx].flags & TML_STEP_ABORTED)
                aborted = 1;
            idx[ncommon * nactive + k] = f->idx;
        }
        if (!common)
            continue;
        if (aborted) {
            w->aborted_steps++;
            continue;
        }
        ncommon++;
    }
    free(at);
    w->common_steps = ncommon;
    return 0;
}

/* The dropped middle of a long run (model/run.h): counted as common when
 * every active rank dropped some (the fewest, less aborted ones), not
 * compared. */
static void count_dropped(const tml_run *run, const size_t *col, size_t nactive,
                          tml_window *w)
{
    uint64_t past = UINT64_MAX, past_aborted = 0;
    for (size_t k = 0; k < nactive; k++) {
        const tml_rank *r = &run->ranks[col[k]];
        uint64_t clean = r->past_steps - r->past_aborted;
        if (clean < past)
            past = clean;
        if (r->past_aborted > past_aborted)
            past_aborted = r->past_aborted;
    }
    if (nactive > 0 && past > 0) {
        w->common_steps += (size_t)past;
        w->aborted_steps += (size_t)past_aborted;
    }
}

/* Warm-up over the slowest rank's CPU step time per common step, plus the
 * leading steps that lack GPU figures when the GPU clock is allowed. */
static int warmup_steps(const tml_run *run, const size_t *col, size_t nactive,
                        const size_t *idx, size_t ncommon, int allow_gpu, tml_window *w)
{
    double *series = malloc(ncommon * sizeof(*series));
    if (!series)
        return TML_ENOMEM;
    for (size_t j = 0; j < ncommon; j++) {
        double mx = 0;
        for (size_t k = 0; k < nactive; k++) {
            const tml_step_record *s = &run->ranks[col[k]].steps[idx[j * nactive + k]];
            /* in double: two int64 durations from a wire may overflow */
            double t = (double)nonneg(s->phase_ns[TML_PHASE_INPUT]) + (double)nonneg(s->traced_ns);
            if (t > mx)
                mx = t;
        }
        series[j] = mx;
    }
    w->warmup_steps = tml__warmup_count(series, ncommon);
    free(series);
    if (allow_gpu)
        w->warmup_steps += gpu_late_start(run, col, nactive, idx, ncommon, w->warmup_steps);
    return 0;
}

/* The window's step ids and clock: GPU only when allowed and every window
 * step of every active rank carries GPU figures. */
static void window_bounds(const tml_run *run, const size_t *col, size_t nactive,
                          const size_t *win, size_t nwin, int allow_gpu, tml_window *w)
{
    const tml_rank *r0 = &run->ranks[col[0]];
    w->first_step = r0->steps[win[0]].step;
    w->last_step = r0->steps[win[(nwin - 1) * nactive]].step;
    w->clock = allow_gpu ? TML_CLOCK_GPU : TML_CLOCK_CPU;
    for (size_t j = 0; j < nwin && w->clock == TML_CLOCK_GPU; j++)
        for (size_t k = 0; k < nactive; k++)
            if (run->ranks[col[k]].steps[win[j * nactive + k]].gpu_traced_ns < 0) {
                w->clock = TML_CLOCK_CPU;
                break;
            }
}

/* Per-step straggler culprit: the rank that waited least in Backward and
 * its exposed communication (the all-reduce). */
static void count_culprits(const tml_run *run, const size_t *col, size_t nactive,
                           const size_t *win, size_t nwin, tml_window *w)
{
    for (size_t j = 0; j < nwin; j++) {
        size_t best = 0;
        double bv = INFINITY;
        for (size_t k = 0; k < nactive; k++) {
            const tml_step_record *s = &run->ranks[col[k]].steps[win[j * nactive + k]];
            double b = phase_on(s, TML_PHASE_BACKWARD, w->clock) +
                       phase_on(s, TML_PHASE_COMM, w->clock);
            if (b < bv) {
                bv = b;
                best = k;
            }
        }
        w->ranks[col[best]].culprit_steps++;
    }
}

static int window_compute(const tml_run *run, size_t max_steps, int allow_gpu,
                          tml_window *w)
{
    step_ref **refs = NULL;
    size_t *nrefs = NULL;
    size_t *idx = NULL;       /* common steps x active ranks */
    size_t *col = NULL;       /* active rank k -> index in run->ranks */
    size_t nactive = 0;
    int err = TML_ENOMEM;

    window_reset(w, max_steps);
    w->launch = run->launch;
    if (run->nranks == 0)
        return 0;

    w->ranks = calloc(run->nranks, sizeof(*w->ranks));
    refs = calloc(run->nranks, sizeof(*refs));
    nrefs = calloc(run->nranks, sizeof(*nrefs));
    col = calloc(run->nranks, sizeof(*col));
    if (!w->ranks || !refs || !nrefs || !col)
        goto fail;
    w->nranks = run->nranks;
    if (collect_ranks(run, w, refs, nrefs, col, &nactive) < 0)
        goto fail;
    if (nactive > 0 && common_steps(run, refs, nrefs, col, nactive, &idx, w) < 0)
        goto fail;
    size_t ncommon = w->common_steps;
    if (ncommon > 0 && warmup_steps(run, col, nactive, idx, ncommon, allow_gpu, w) < 0)
        goto fail;

    ncommon = drop_epoch_starts(run, col, nactive, idx, ncommon, w);
    size_t avail = ncommon - w->warmup_steps;
    size_t nwin = avail < w->max_steps ? avail : w->max_steps;
    size_t start = ncommon - nwin;
    const size_t *win = idx ? idx + start * nactive : NULL;
    w->window_steps = nwin;
    if (nwin > 0)
        window_bounds(run, col, nactive, win, nwin, allow_gpu, w);

    for (size_t k = 0; k < nactive; k++) {
        err = rank_fill(&w->ranks[col[k]], &run->ranks[col[k]], win, nwin,
                        nactive, k, w->clock);
        if (err < 0)
            goto fail;
    }
    for (size_t i = 0; i < w->nranks; i++)
        w->missing |= w->ranks[i].nsteps ? w->ranks[i].missing : 0;
    if (nwin == 0)
        w->missing = 0;

    if (nactive >= 2 && nwin > 0 && !(w->missing & TML_PHASE_BIT(TML_PHASE_BACKWARD)))
        count_culprits(run, col, nactive, win, nwin, w);
    across_ranks(w);
    count_dropped(run, col, nactive, w);
    err = 0;
    goto done;

fail:
    free(w->ranks);
    w->ranks = NULL;
    w->nranks = 0;
done:
    if (refs)
        for (size_t i = 0; i < run->nranks; i++)
            free(refs[i]);
    free(refs);
    free(nrefs);
    free(col);
    free(idx);
    return err;
}
