/* gated.hip: the gated op y = silu(x Wg^T) * (x Wu^T), W = [Wg; Wu] of 2N rows,
 * fused into one kernel in two families:
 *   gated.gemv.rpbR.uU[.pdl]  one warp per output column n streams gate row n
 *                             and up row N+n together (gemv_core.h, NR = 2);
 *   gated.mma.wW.uU[.pdl]     an mma tile of 8 gate rows and their 8 up rows
 *                             (mma_core.h), so each tile yields 8 columns.
 * The epilogue silu(g) * u runs in fp32 and rounds once. */
#include "../common/error.h"
#include "gemv_core.h"
#include "launch.h"
#include "mma_core.h"

/* ---- gated.gemv ---- */
template <int DT, int M, int U, bool PDL>
__global__ void __launch_bounds__(8 * KP_WARP)
    kp_gated_gemv_kernel(const uint16_t *__restrict__ x, const uint16_t *__restrict__ w, uint16_t *__restrict__ y,
                         int64_t N, int64_t K) {
  if (PDL) kp_pdl_trigger();
  const int lane = threadIdx.x % kp_warp;
  const int64_t n = (int64_t)blockIdx.x * (blockDim.x / kp_warp) + threadIdx.x / kp_warp;
  if (n >= N) return; /* no block-wide barrier follows */
  const uint16_t *rows[2] = {w + n * K, w + (N + n) * K};
  float acc[2][M];
  kp_gemv_rows<DT, M, 2, U>(rows, x, K, lane, acc);
  float mine = 0.0f;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float g = kp_warp_sum<kp_warp>(acc[0][m]), u = kp_warp_sum<kp_warp>(acc[1][m]);
    if (lane == m) mine = kp_silu_mul(g, u);
  }
  if (lane < M) y[lane * N + n] = kp_round<DT>(mine);
}

typedef void (*kp_gated_gemv_fn)(const uint16_t *, const uint16_t *, uint16_t *, int64_t, int64_t);

template <int DT, int U, bool PDL>
static kp_gated_gemv_fn pick_rows(int m) {
  switch (m) {
    case 1: return kp_gated_gemv_kernel<DT, 1, U, PDL>;
    case 2: return kp_gated_gemv_kernel<DT, 2, U, PDL>;
    case 3: return kp_gated_gemv_kernel<DT, 3, U, PDL>;
    case 4: return kp_gated_gemv_kernel<DT, 4, U, PDL>;
    case 5: return kp_gated_gemv_kernel<DT, 5, U, PDL>;
    case 6: return kp_gated_gemv_kernel<DT, 6, U, PDL>;
    case 7: return kp_gated_gemv_kernel<DT, 7, U, PDL>;
    case 8: return kp_gated_gemv_kernel<DT, 8, U, PDL>;
    default: return nullptr;
  }
}

/* the (U, PDL) pairs that space.def uses */
template <int DT>
static kp_gated_gemv_fn pick_gemv(int m, int u, int pdl) {
  if (!pdl) {
    if (u == 8) return pick_rows<DT, 8, false>(m);
  }
#if defined(KPICK_GPU_CUDA)
  if (pdl && u == 8) return pick_rows<DT, 8, true>(m);
#endif
  return nullptr;
}

int kp_gated_gemv_has(int u, int pdl) { return pick_gemv<KP_DT_BF16>(1, u, pdl) != nullptr; }

int kp_gated_gemv_launch(const struct kp_call *c, int rows_per_block, int u) {
  const kp_gated_gemv_fn k =
      c->dtype == KP_DT_BF16 ? pick_gemv<KP_DT_BF16>(c->m, u, c->pdl) : pick_gemv<KP_DT_FP16>(c->m, u, c->pdl);
  if (!k || rows_per_block < 1 || rows_per_block > 8)
    return kp_fail(KPICK_E_UNSUPPORTED, "gated.gemv", "no kernel for m=%d, R=%d, U=%d, pdl=%d", (int)c->m,
                   rows_per_block, u, c->pdl);
  const dim3 grid((unsigned)((c->n + rows_per_block - 1) / rows_per_block)), block(rows_per_block * c->warp);
  const hipError_t e = kp_launch(k, grid, block, c->stream, c->pdl != 0, (const uint16_t *)c->x,
                                 (const uint16_t *)c->w, (uint16_t *)c->y, c->n, c->k);
  if (e != hipSuccess) return kp_fail(KPICK_E_DEVICE, "gated.gemv launch", "%s", hipGetErrorString(e));
  return KPICK_OK;
}

/* ---- gated.mma ---- */
typedef void (*kp_gated_mma_fn)(kp_mma_args);

template <int DT, int U, bool PDL>
static kp_gated_mma_fn pick_tiles(int nt) {
  switch (nt) {
    case 1: return kp_mma_kernel<DT, 1, U, KP_MMA_GATED, PDL>;
    case 2: return kp_mma_kernel<DT, 2, U, KP_MMA_GATED, PDL>;
    case 4: return kp_mma_kernel<DT, 4, U, KP_MMA_GATED, PDL>;
    case 8: return kp_mma_kernel<DT, 8, U, KP_MMA_GATED, PDL>;
#if defined(KPICK_GPU_CUDA) /* 8 activation rows per instruction: 16 tiles reach 128 rows */
    case 16:
      if constexpr (U <= 8) return kp_mma_kernel<DT, 16, U, KP_MMA_GATED, PDL>; /* U = 16 would spill: rows stop at 64 */
      else return nullptr;
#endif
    default: return nullptr;
  }
}

/* PDL rows stop at 16 (space.def): two tiles of 8 */
template <int DT, int U>
static kp_gated_mma_fn pick_tiles_pdl(int nt) {
  switch (nt) {
    case 1: return kp_mma_kernel<DT, 1, U, KP_MMA_GATED, true>;
    case 2: return kp_mma_kernel<DT, 2, U, KP_MMA_GATED, true>;
    default: return nullptr;
  }
}

/* the (U, PDL) pairs that space.def uses */
template <int DT>
static kp_gated_mma_fn pick_mma(int nt, int u, int pdl) {
  if (!pdl) {
    if (u == 8) return pick_tiles<DT, 8, false>(nt);
  }
#if defined(KPICK_GPU_CUDA)
  if (pdl && u == 8) return pick_tiles_pdl<DT, 8>(nt);
#endif
  return nullptr;
}

int kp_gated_mma_has(int u, int pdl) { return pick_mma<KP_DT_BF16>(1, u, pdl) != nullptr; }

int kp_gated_mma_launch(const struct kp_call *c, int warps, int u) {
  const int nt = kp_mma_tiles(c->m);
  const kp_gated_mma_fn k =
      c->dtype == KP_DT_BF16 ? pick_mma<KP_DT_BF16>(nt, u, c->pdl) : pick_mma<KP_DT_FP16>(nt, u, c->pdl);
  if (!k || warps < 1 || warps > kp_mma_max_warps)
    return kp_fail(KPICK_E_UNSUPPORTED, "gated.mma", "no kernel for m=%d, W=%d, U=%d, pdl=%d", (int)c->m, warps,
                   u, c->pdl);
  kp_mma_args a = {(const uint16_t *)c->x, (const uint16_t *)c->w, (uint16_t *)c->y, nullptr, nullptr,
                   c->m, c->n, c->k};
  const dim3 grid((unsigned)((c->n + 7) / 8)), block(warps * c->warp);
  const hipError_t e = kp_launch(k, grid, block, c->stream, c->pdl != 0, a);
  if (e != hipSuccess) return kp_fail(KPICK_E_DEVICE, "gated.mma launch", "%s", hipGetErrorString(e));
  return KPICK_OK;
}
