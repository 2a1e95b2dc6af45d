/* launch.h: one call's arguments and the launcher of each kernel family.
 * A launcher enqueues on c->stream and returns a kpick_status; on failure it
 * has recorded why (kp_fail). Each family file instantiates the kernels of
 * its space.def rows (rows.h) and finds them by the call's candidate id; its
 * *_built(cand) says whether this build holds them (no: a PDL row on HIP, a
 * wgmma row without an sm_90a pass), so be_available can say so first. */
#ifndef KPICK_GPU_LAUNCH_H
#define KPICK_GPU_LAUNCH_H

#include <stddef.h>

#include "compat.h"

struct kp_call {
  int32_t cand;        /* the space.def row: which instantiations to use */
  int32_t op, dtype;   /* enum kpick_op, enum kpick_dtype */
  const void *x;       /* [m, k] */
  const void *w;       /* [n, k], or [2n, k] for the gated op */
  void *y;             /* [m, n] */
  int32_t m;
  int64_t n, k;
  hipStream_t stream;
  int pdl;             /* launch with programmatic dependent launch */
  int warp;            /* the device's warp width, for block sizes: the host
                          pass of hipcc cannot know the target's (arch.h) */
  const struct kp_moe_call *moe; /* op moe only: the rest of its arguments */
};

/* W's rows: a gated call's gate and up halves together */
static inline int64_t kp_w_rows(int32_t op, int64_t n) { return op == KPICK_OP_GATED ? 2 * n : n; }

/* a moe call's arguments beyond kp_call's (x, w = W_gate_up, y [m, k], n, k) */
struct kp_moe_call {
  const void *w_down;
  const int32_t *ids;
  const float *weights;
  int32_t experts, topk;
  const struct kp_scratch *ws; /* temp holds kp_moe_scratch_bytes */
};

/* scratch a launch may use: backend-owned, stable while any graph uses it */
struct kp_scratch {
  void *blas;          /* BLAS workspace */
  size_t blas_bytes;
  void *temp;          /* gated.blaslt's [m, 2n] product, splitk's fp32 partials */
  size_t temp_bytes;
  uint32_t *counters;  /* splitk arrival counters, zero between launches */
  size_t counters_len;
};

/* gemv.hip: one warp per output row */
int kp_gemv_built(int32_t cand);
int kp_gemv_launch(const struct kp_call *c, int rows_per_block);
/* mma.hip: tensor-core skinny GEMM, one 16-row tile of W per block */
int kp_mma_built(int32_t cand);
int kp_mma_launch(const struct kp_call *c, int warps);
/* splitk.hip: the mma tile with K split over S blocks, last block reduces */
int kp_splitk_built(int32_t cand);
size_t kp_splitk_temp_bytes(int s, int32_t m, int64_t n);
size_t kp_splitk_counters(int64_t n);
int kp_splitk_launch(const struct kp_call *c, int s, const struct kp_scratch *ws);
/* gated.hip: fused gate/up + silu-mul in the gemv and mma families */
int kp_gated_gemv_built(int32_t cand);
int kp_gated_gemv_launch(const struct kp_call *c, int rows_per_block);
int kp_gated_mma_built(int32_t cand);
int kp_gated_mma_launch(const struct kp_call *c, int warps);
/* wgmma.hip: the Hopper (sm_90a) swap-AB tile, TMA ring, split-K over a cluster of s blocks.
 * fp8 (the W8A8 rows): xq[m, k] and sx[m] are x's e4m3 codes and row scales
 * (kp_e4m3_quant_launch), sw W's channel scales; null for bf16 and fp16, which read c->x */
int kp_wgmma_built(int32_t cand);
int kp_wgmma_fits(int wg, int stages, int s, int32_t m);
int kp_wgmma_launch(const struct kp_call *c, int wg, int stages, int s, const void *xq, const float *sx,
                    const float *sw);
/* wgmma.hip, moe.wgmma: one GEMM of a moe call (gate/up or down) over the work
 * items of moe.hip's plan, a block per (tile of W, item); chunk (1..64) is the
 * plan's rows per item */
struct kp_wgmma_moe_op {
  int gated;            /* gate/up: h = silu(g) * u in the dtype; else o in fp32 */
  const void *w;        /* every expert's weights, wrows x len (an expert wexp rows) */
  int64_t wrows, len, wexp;
  const void *x;        /* the pairs' rows in plan order, xrows x len */
  int64_t xrows;
  void *out;            /* [xrows, ncols] in plan order */
  int64_t ncols;
  const void *plan;     /* kp_moe_plan */
  int chunk, items;     /* the plan's rows per item, the grid's items (at least the plan's) */
};
int kp_wgmma_moe_built(int32_t cand);
/* an item's most rows (the widest x box) of a moe.wgmma or moe.wgmma.x128 row: 64 or 128 */
int kp_wgmma_moe_chunk(int32_t cand);
int kp_wgmma_moe_fits(int wg, int stages, int kb, int chunk);
int kp_wgmma_moe_launch(const struct kp_call *c, int wg, int stages, int kb, const struct kp_wgmma_moe_op *op);
/* cmma.hip: mma.sync tile of B W rows over w warps, x staged once in shared memory, split-K over a cluster of s blocks (CUDA sm_90) */
int kp_cmma_built(int32_t cand);
int kp_cmma_fits(int b, int s, int w, int32_t m);
int kp_cmma_launch(const struct kp_call *c, int b, int s, int w);
/* fp8.hip: fp8 weights (KPICK_FP8). w8a16.gemv: one warp per rows_per_warp
 * output rows; the W8A8 default's activation quant (x[m, k] -> e4m3 codes
 * xq[m, k] and per-row scales sx[m]) and its epilogue from unit-scale fp32
 * sums d[m, rows] (rows = n, or 2n for the gated op) */
int kp_w8a16_built(int32_t cand);
int kp_w8a16_launch(const struct kp_call *c, int rows_per_block, int rows_per_warp);
/* the tensor-core W8A16 tile: 16 weight rows a block, W warps splitting K (CUDA sm_89+) */
int kp_w8a16_mma_built(int32_t cand);
int kp_w8a16_mma_launch(const struct kp_call *c, int warps);
/* let_next: the kernel after it is a PDL launch that may start before this one ends */
int kp_e4m3_quant_launch(const void *x, void *xq, float *sx, int32_t m, int64_t k, int let_next, hipStream_t stream);
int kp_w8a8_epilogue_launch(int32_t op, const float *d, const float *sx, const float *sw, void *y, int32_t m, int64_t n,
                            hipStream_t stream);
/* moe.hip: the moe op's families (plan, grouped gemv, grouped mma, the batched-BLAS
 * default; fp8 experts: the W8A8 default over cuBLASLt's fp8 batch, the W8A16 grouped
 * gemv), its read floor over the experts read (dtype: their bytes, fp8 codes and
 * scales), and the routing of the step */
size_t kp_moe_scratch_bytes(int32_t dtype, int32_t m, int32_t topk, int64_t n, int64_t k);
int kp_moe_blas_available(void);
int kp_moe_blas_launch(const struct kp_call *c);
int kp_moe_gemv_built(int32_t cand);
int kp_moe_gemv_launch(const struct kp_call *c, int rows_per_block);
int kp_moe_mma_built(int32_t cand);
int kp_moe_mma_launch(const struct kp_call *c, int warps);
int kp_moe_wgmma_launch(const struct kp_call *c, int wg, int stages, int kb);
int kp_moe_w8a8_blas_launch(const struct kp_call *c);
int kp_moe_w8a16_built(int32_t cand);
int kp_moe_w8a16_launch(const struct kp_call *c, int rows_per_block);
int kp_moe_floor_launch(int32_t dtype, const void *w, const int32_t *used, int32_t nused, int32_t experts, int64_t n,
                        int64_t k, float *sink, hipStream_t stream, int pdl);
int kp_moe_route_launch(int32_t dtype, const void *logits, int32_t m, int32_t experts, int32_t topk, int32_t *ids,
                        float *weights, hipStream_t stream, int warp);
/* util.hip: the read floor, the producer of in-step timing, the silu-mul node,
 * the warp probe. pdl: launch with programmatic dependent launch (CUDA sm_90). */
int kp_floor_launch(const void *w, size_t bytes, float *sink, hipStream_t stream, int pdl);
/* x[m, k] = src[m, k] (dtype: x's, bf16 or fp16), written as the norm before a linear
 * writes its output: one block per row, after the previous kernel, reading and storing
 * resid[m, k] (fp32) and summing over the row first */
int kp_producer_launch(int32_t dtype, float *resid, const void *src, void *x, int32_t m, int64_t k,
                       hipStream_t stream, int pdl);
int kp_silu_mul_launch(int32_t dtype, const void *gu, void *y, int32_t m, int64_t n, hipStream_t stream);
int kp_warp_probe(int *device_warp);

#endif
