/*
 * peak.c - the table of peak FLOP/s (peak.h).
 */
#include "gpu/peak.h"

#include <ctype.h>
#include <string.h>

#include "traceml/traceml.h"

typedef struct peak_row {
    const char *name;     /* a word of the device's name; the first row that matches counts */
    double fp32, tf32, bf16;   /* TFLOP/s, dense */
} peak_row;

static const peak_row peaks[] = {
    {"H100 PCIe", 51.2, 378, 756},
    {"H100 NVL", 60, 417.5, 835.5},
    {"H100", 66.9, 494.7, 989.4},      /* SXM: "NVIDIA H100 80GB HBM3" */
    {"H200", 66.9, 494.7, 989.4},
    {"B200", 75, 1125, 2250},
    {"A100", 19.5, 156, 312},
    {"A10", 31.2, 62.5, 125},
    {"L40S", 91.6, 183, 362},
    {"L40", 90.5, 90.5, 181},
    {"L4", 30.3, 60, 121},
    {"V100-SXM2", 15.7, 15.7, 125},
    {"V100", 14, 14, 112},
    {"T4", 8.1, 8.1, 65},
};

/* 1 when `word` appears in `name` (any case) as a whole word: "A10" is
 * not in "A100", nor "L40" in "L40S". */
static int has_word(const char *name, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = name; (p = strcasestr(p, word)) != NULL; p++) {
        int starts = p == name || !isalnum((unsigned char)p[-1]);
        if (starts && !isalnum((unsigned char)p[n]))
            return 1;
    }
    return 0;
}

const char *tml__flops_dtype(uint32_t how)
{
    return how & TML_FLOPS_16BIT ? "16-bit" : how & TML_FLOPS_TF32 ? "tf32" : "fp32";
}

int64_t tml__gpu_peak_flops(const char *device, uint32_t how)
{
    if (!device || !*device)
        return 0;
    for (size_t i = 0; i < sizeof(peaks) / sizeof(peaks[0]); i++) {
        const peak_row *r = &peaks[i];
        if (!has_word(device, r->name))
            continue;
        double t = how & TML_FLOPS_16BIT ? r->bf16 : how & TML_FLOPS_TF32 ? r->tf32 : r->fp32;
        return (int64_t)(t * 1e12);
    }
    return 0;
}
