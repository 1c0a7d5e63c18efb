/*
 * peak.h - the peak FLOP/s of data-centre GPUs, for MFU.
 *
 * Dense (no sparsity) tensor-core figures from NVIDIA's data sheets, by
 * the name CUDA gives the device and the dtype the model computes in
 * (TML_FLOPS_FP32, _TF32, _16BIT of tml_set_flops' `how`). A GPU without
 * TF32 (V100, T4) has its FP32 figure for TF32. docs/summary-json.md
 * lists the table.
 */
#ifndef TML_GPU_PEAK_H
#define TML_GPU_PEAK_H

#include <stdint.h>

/* FLOP/s, or 0 for a device not in the table (a CPU: NULL or ""). */
int64_t tml__gpu_peak_flops(const char *device, uint32_t how);
/* The dtype of a TML_FLOPS_* `how`: "fp32", "tf32" or "16-bit". */
const char *tml__flops_dtype(uint32_t how);

#endif
