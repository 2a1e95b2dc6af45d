/* blaslt.h: the vendor BLAS behind one small interface (blaslt.cpp):
 * cuBLASLt on NVIDIA, hipBLASLt on AMD. It computes y[m, n] = x[m, k] W[n, k]^T
 * (row-major, fp32 accumulation) with the I-th algo of the library's own
 * heuristic for that shape; I = 0 is the heuristic's top-1, what an engine
 * that calls the BLAS plainly gets. */
#ifndef KPICK_GPU_BLASLT_H
#define KPICK_GPU_BLASLT_H

#include <stddef.h>

#include "compat.h"

#define KP_BLAS_MAX_ALGOS 8

#ifdef __cplusplus
extern "C" {
#endif

/* create the library handle; idempotent */
int kp_blas_init(void);
/* "cublasLt 13.1.0" from the library actually loaded */
int kp_blas_version(char *out, size_t cap);
/* workspace each call may use: the caller provides this many bytes */
size_t kp_blas_workspace_bytes(void);
/* how many heuristic algos (0..KP_BLAS_MAX_ALGOS) the library offers for this
 * problem; answers are cached per (dtype, m, n, k) */
int kp_blas_algo_count(int32_t dtype, int32_t m, int64_t n, int64_t k, int *count);
/* enqueue y = x W^T with heuristic algo `algo` on stream */
int kp_blas_matmul(int algo, int32_t dtype, const void *x, const void *w, void *y, int32_t m, int64_t n, int64_t k,
                   void *workspace, hipStream_t stream);

/* ---- fp8 (KPICK_FP8): the W8A8 default's matmul ----
 * d = xq[m, k] wq[rows, k]^T over e4m3 codes, fp32 sums: with per-row scales
 * (sx[m] of x, sw[rows] of W) applied by the library into bf16 d where it
 * takes outer-vector scales, else unit-scale fp32 sums (the caller applies
 * the scales: fp8.hip's epilogue). 1 when this build has an fp8 matmul
 * (cuBLASLt; not hipBLASLt, blaslt.cpp says why). */
int kp_blas_fp8_built(void);
/* heuristic algos for the shape, and *scaled: 1 when the library applies the
 * scales (bf16 out), 0 when it gives unit-scale fp32 sums */
int kp_blas_fp8_plan(int32_t m, int64_t rows, int64_t k, int *count, int *scaled);
/* enqueue it with heuristic algo `algo`; d is bf16 [m, rows] when the plan
 * is scaled, else fp32 [m, rows]; sx, sw are device fp32 vectors */
int kp_blas_fp8_matmul(int algo, const void *xq, const float *sx, const void *wq, const float *sw, void *d, int32_t m,
                       int64_t rows, int64_t k, void *workspace, hipStream_t stream);
/* the fp8 moe default's batched GEMVs: for i < batch, d[i] (fp32 [rows]) =
 * a[i] (e4m3 [rows, k]) . b[i] (e4m3 [k]), unit scales, from device arrays of
 * device pointers (cuBLASLt's pointer-array batch mode; none on HIP). Plans
 * (heuristic algos: *count) are cached per (batch, rows, k). */
int kp_blas_fp8_batch_plan(int32_t batch, int64_t rows, int64_t k, int *count);
int kp_blas_fp8_batch(int algo, const void *const *a, const void *const *b, void *const *d, int32_t batch, int64_t rows,
                      int64_t k, void *workspace, hipStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
