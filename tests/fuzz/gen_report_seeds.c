/*
 * gen_report_seeds.c - writes the seed corpus of fuzz_report
 * (tests/fuzz/corpus/report/) with the wire's own encoders, so that the
 * seeds are the frames a real rank sends after its handshake:
 *
 *     cc -std=c11 -D_GNU_SOURCE -Iinclude -Isrc tests/fuzz/gen_report_seeds.c \
 *         build/obj/libtraceml-internal.a -lpthread -ldl -lm -o build/gen_report_seeds
 *     build/gen_report_seeds tests/fuzz/corpus/report
 *
 * Each seed: the flags byte of fuzz_report.c, then each rank's frames,
 * ranks separated by "TMLNEXT!". Not run by the tests (the seeds are in
 * git); run again when the wire format changes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/record.h"
#include "model/sample.h"
#include "wire/wire.h"

#define SEP "TMLNEXT!"

typedef struct shape {
    int64_t input_ms, h2d_ms, fwd_ms, bwd_ms, opt_ms;
    int gpu;              /* GPU-clock figures and CUDA memory */
    int64_t comm_ms;      /* the collective's wait per step, 0: none */
} shape;

static void record(tml_step_record *r, uint64_t step, const shape *s, int64_t jitter_ms)
{
    const int64_t ms = 1000000;
    memset(r, 0, sizeof(*r));
    r->step = step;
    r->start_ns = (int64_t)step * 200 * ms;
    r->phase_ns[TML_PHASE_INPUT] = s->input_ms * ms;
    r->phase_ns[TML_PHASE_H2D] = s->h2d_ms * ms;
    r->phase_ns[TML_PHASE_FORWARD] = (s->fwd_ms + jitter_ms) * ms;
    r->phase_ns[TML_PHASE_BACKWARD] = s->bwd_ms * ms;
    r->phase_ns[TML_PHASE_OPTIMIZER] = s->opt_ms * ms;
    r->traced_ns = (s->h2d_ms + s->fwd_ms + jitter_ms + s->bwd_ms + s->opt_ms + 1) * ms;
    r->observed = TML_STEP_PHASES;
    r->gpu_traced_ns = -1;
    for (int p = 0; p < TML_PHASE_COUNT; p++)
        r->gpu_phase_ns[p] = -1;
    if (s->gpu) {
        r->gpu_traced_ns = r->traced_ns - ms / 2;
        for (int p = 0; p < TML_PHASE_COUNT; p++)
            r->gpu_phase_ns[p] = r->phase_ns[p];
        r->cuda_allocated_peak_bytes = (int64_t)(2000 + step) << 20;
        r->cuda_reserved_peak_bytes = (int64_t)(3000 + step) << 20;
    } else {
        r->cuda_allocated_peak_bytes = r->cuda_reserved_peak_bytes = -1;
    }
    if (s->comm_ms) {
        r->observed |= TML_PHASE_BIT(TML_PHASE_COMM);
        r->phase_ns[TML_PHASE_COMM] = s->comm_ms * ms;
        r->traced_ns += s->comm_ms * ms;
        r->comm_ns = (s->comm_ms + 3) * ms;
        r->comm_bytes = 64 << 20;
        r->comm_count = 3;
    }
    r->gap_ns = step ? ms : -1;
    r->rss_bytes = (int64_t)1500 << 20;
    r->flags = step == 0 ? TML_STEP_EPOCH_START : 0;
}

static void steps(tml_strbuf *out, size_t n, const shape *s)
{
    tml_step_record r[64];
    for (size_t done = 0; done < n;) {
        size_t k = n - done < 64 ? n - done : 64;
        for (size_t i = 0; i < k; i++)
            record(&r[i], done + i, s, (int64_t)((done + i) % 3));
        tml__wire_steps(out, r, k);
        done += k;
    }
}

static void samples(tml_strbuf *out, int32_t node, int32_t rank, int gpu)
{
    tml_sample v[32];
    size_t n = 0;
    for (int t = 0; t < 4; t++) {
        int64_t ts = 1735689600000LL + t * 1000;
        tml_sample base = {ts, node, rank, -1, 0, 0};
#define S(m, val, g) do { v[n] = base; v[n].metric = (m); v[n].value = (val); \
        v[n].gpu = (g); n++; } while (0)
        S(TML_S_HOST_CPU_PERCENT, 35 + t, -1);
        S(TML_S_HOST_RAM_USED_BYTES, 8e9, -1);
        S(TML_S_HOST_RAM_TOTAL_BYTES, 32e9, -1);
        S(TML_S_PROC_CPU_PERCENT, 110, -1);
        S(TML_S_PROC_RSS_BYTES, 1.5e9, -1);
        if (gpu) {
            S(TML_S_GPU_UTIL_PERCENT, 60, 0);
            S(TML_S_GPU_MEM_USED_BYTES, 20e9, 0);
            S(TML_S_GPU_MEM_TOTAL_BYTES, 80e9, 0);
        }
#undef S
    }
    tml__wire_samples(out, v, n);
}

static void bye(tml_strbuf *out, int type)
{
    tml_rank_stats st = {0, 0, 60, 4000, 20000000};
    tml__wire_stats(out, (uint16_t)type, &st);
}

static void write_seed(const char *dir, const char *name, uint8_t flags, const tml_strbuf *r,
                       size_t nranks)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    fputc(flags, f);
    for (size_t i = 0; i < nranks; i++) {
        if (i)
            fputs(SEP, f);
        fwrite(r[i].buf, 1, r[i].len, f);
    }
    fclose(f);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: gen_report_seeds DIR\n");
        return 2;
    }
    const char *dir = argv[1];
    tml_strbuf r[4] = {TML_STRBUF_INIT, TML_STRBUF_INIT, TML_STRBUF_INIT, TML_STRBUF_INIT};

    /* one rank, input-bound on the CPU clock, a goodbye */
    shape input = {30, 1, 4, 8, 2, 0, 0};
    steps(&r[0], 40, &input);
    samples(&r[0], 0, 0, 0);
    bye(&r[0], TML_FRAME_BYE);
    write_seed(dir, "one_rank_input_bound", 0x00, r, 1);

    /* two ranks on a GPU, rank 1 a compute straggler that rank 0 waits for */
    tml__sb_reset(&r[0]);
    shape fast = {1, 1, 10, 35, 3, 1, 2}, slow = {1, 1, 25, 20, 3, 1, 2};   /* fast waits in backward */
    steps(&r[0], 40, &fast);
    samples(&r[0], 0, 0, 1);
    bye(&r[0], TML_FRAME_BYE);
    steps(&r[1], 40, &slow);
    samples(&r[1], 0, 1, 1);
    bye(&r[1], TML_FRAME_BYE);
    write_seed(dir, "two_ranks_gpu_straggler", 0x08, r, 2);

    /* `traceml watch`: samples only */
    tml__sb_reset(&r[0]);
    samples(&r[0], 0, 0, 1);
    bye(&r[0], TML_FRAME_BYE);
    write_seed(dir, "watch", 0x01, r, 1);

    /* a failed run of 8 claimed ranks, 3 connected: one lost (no goodbye)
     * after asking for the summary and describing itself anew */
    for (int i = 0; i < 3; i++)
        tml__sb_reset(&r[i]);
    shape mid = {5, 2, 10, 10, 2, 0, 0};
    steps(&r[0], 30, &mid);
    bye(&r[0], TML_FRAME_STATS);
    bye(&r[0], TML_FRAME_BYE);
    steps(&r[1], 12, &mid);
    tml__wire_summary_req(&r[1]);
    tml_hello h;
    memset(&h, 0, sizeof(h));
    h.info.rank = 1;
    h.info.world_size = 8;
    h.info.loader_known = 1;
    h.info.loader_workers = 0;
    h.info.cpu_count = 16;
    snprintf(h.info.auto_models, sizeof(h.info.auto_models), "Encoder,Decoder");
    tml__wire_identity(&r[1], &h);
    steps(&r[2], 30, &mid);
    bye(&r[2], TML_FRAME_BYE);
    write_seed(dir, "lost_rank_failed", 0x1a, r, 3);

    for (int i = 0; i < 4; i++)
        tml__sb_release(&r[i]);
    return 0;
}
