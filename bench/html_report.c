/*
 * html_report.c - how big the summary and the HTML report get, and how long
 * building them takes, for long and wide runs.
 *
 *     ./build/bench/html_report [OUT_DIR] [repeats]
 *
 * Builds synthetic runs (steps x ranks, every phase, per-step memory, a
 * periodic slow step), makes final_summary.json with its per-step series
 * and final_summary.html from it, and prints a table of medians. With
 * OUT_DIR it also writes <OUT_DIR>/report_<steps>x<ranks>.{json,html} so
 * that bench/html_open.py (and tests/e2e/test_html.py) can open them in a
 * browser. docs/performance.md quotes the table.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/run.h"
#include "report/html.h"
#include "report/report.h"

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void make_run(tml_run *run, size_t steps, int ranks)
{
    char name[64];
    snprintf(name, sizeof(name), "bench_%zux%d", steps, ranks);
    tml__run_init(run, name, "0123456789abcdef");
    run->world_size = ranks;
    tml_step_record *recs = calloc(steps, sizeof(*recs));
    for (int r = 0; r < ranks; r++) {
        tml_rank_info info;
        memset(&info, 0, sizeof(info));
        info.rank = r;
        info.local_rank = r % 8;
        info.world_size = ranks;
        info.node_rank = r / 8;
        info.nnodes = (ranks + 7) / 8;
        info.instrumented = TML_PHASES_ALL;
        tml_rank *rk = tml__run_rank(run, &info);
        int64_t t = 1000000000LL;
        for (size_t i = 0; i < steps; i++) {
            tml_step_record *s = &recs[i];
            memset(s, 0, sizeof(*s));
            double slow = i % 50 == 0 ? 3.0 : 1.0;
            int64_t in = (int64_t)((8 + r % 3) * 1e6 * slow);
            s->step = i;
            s->phase_ns[TML_PHASE_INPUT] = in;
            s->phase_ns[TML_PHASE_H2D] = 400000;
            s->phase_ns[TML_PHASE_FORWARD] = 24000000 + (int64_t)(i % 7) * 100000;
            s->phase_ns[TML_PHASE_BACKWARD] = 38000000;
            s->phase_ns[TML_PHASE_OPTIMIZER] = 6000000;
            s->traced_ns = 400000 + 24000000 + 38000000 + 6000000 + 3600000;
            s->start_ns = t + in;
            t += in + s->traced_ns + 100000;
            s->gpu_traced_ns = -1;
            for (int p = 0; p < TML_PHASE_COUNT; p++)
                s->gpu_phase_ns[p] = -1;
            s->gap_ns = i ? 100000 : -1;
            s->rss_bytes = 3000000000LL + (int64_t)i * 1000;
            s->cuda_allocated_peak_bytes = 2900000000LL + r * 10000000LL;
            s->cuda_reserved_peak_bytes = 3200000000LL + r * 10000000LL;
            s->observed = TML_STEP_PHASES;
        }
        tml__run_add_steps(rk, recs, steps);
        rk->stats.overhead_ns_per_step = 1500;
    }
    free(recs);
}

int main(int argc, char **argv)
{
    const char *out_dir = argc > 1 && strcmp(argv[1], "-") != 0 ? argv[1] : NULL;
    int reps = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 5;
    static const struct { size_t steps; int ranks; } shapes[] = {
        {300, 1}, {10000, 1}, {10000, 8}, {100000, 8}, {10000, 64},
    };
    if (reps < 1)
        reps = 1;
    printf("%-16s %12s %12s %14s %14s\n", "steps x ranks", "json bytes", "html bytes",
           "summary ms", "html ms");
    for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
        tml_run run;
        make_run(&run, shapes[k].steps, shapes[k].ranks);
        double *tj = calloc((size_t)reps, sizeof(double)), *th = calloc((size_t)reps, sizeof(double));
        size_t jl = 0, hl = 0;
        for (int i = 0; i < reps; i++) {
            tml_strbuf text = TML_STRBUF_INIT, json = TML_STRBUF_INIT, html = TML_STRBUF_INIT;
            tml_report_opts o;
            memset(&o, 0, sizeof(o));
            o.duration_s = 60;
            o.generated_at = "2025-01-01T00:00:00Z";
            o.series = 1;
            double t0 = now_ms();
            tml__report_build(&run, &o, &text, &json);
            double t1 = now_ms();
            tml__html_render(json.buf, json.len, &html);
            double t2 = now_ms();
            tj[i] = t1 - t0;
            th[i] = t2 - t1;
            jl = json.len;
            hl = html.len;
            if (out_dir && i == 0) {
                char path[4096];
                snprintf(path, sizeof(path), "%s/report_%zux%d.json", out_dir, shapes[k].steps,
                         shapes[k].ranks);
                FILE *f = fopen(path, "w");
                if (f) {
                    fwrite(json.buf, 1, json.len, f);
                    fclose(f);
                }
                snprintf(path, sizeof(path), "%s/report_%zux%d.html", out_dir, shapes[k].steps,
                         shapes[k].ranks);
                f = fopen(path, "w");
                if (f) {
                    fwrite(html.buf, 1, html.len, f);
                    fclose(f);
                }
            }
            tml__sb_release(&text);
            tml__sb_release(&json);
            tml__sb_release(&html);
        }
        char shape[32];
        snprintf(shape, sizeof(shape), "%zu x %d", shapes[k].steps, shapes[k].ranks);
        printf("%-16s %12zu %12zu %14.1f %14.1f\n", shape, jl, hl, median(tj, reps),
               median(th, reps));
        free(tj);
        free(th);
        tml__run_release(&run);
    }
    return 0;
}
