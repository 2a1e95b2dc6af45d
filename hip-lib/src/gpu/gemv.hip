/* gemv.hip: gemv.rpbR.uU[.pdl] -- one warp per output column n of y[M, N].
 *
 * The warp streams W row n in 16-byte pieces (U pieces in flight per lane), the
 * M activation rows (1..8) stay in registers, fp32 FMAs, a butterfly reduction,
 * and lane m stores y[m, n]. R warps (rows) share a block. Output bits do not
 * depend on R or U (gemv_core.h says why). Best at M = 1..2: at larger M the
 * FMA pipe, not memory, becomes the limit (the mma family takes over). */
#include "../common/error.h"
#include "gemv_core.h"
#include "launch.h"

template <int DT, int M, int U, bool PDL>
__global__ void __launch_bounds__(8 * KP_WARP)
    kp_gemv_kernel(const uint16_t *__restrict__ x, const uint16_t *__restrict__ w, uint16_t *__restrict__ y,
                   int64_t N, int64_t K) {
  if (PDL) kp_pdl_trigger();
  const int lane = threadIdx.x % kp_warp;
  const int64_t n = (int64_t)blockIdx.x * (blockDim.x / kp_warp) + threadIdx.x / kp_warp;
  if (n >= N) return; /* no block-wide barrier follows */
  const uint16_t *rows[1] = {w + n * K};
  float acc[1][M];
  kp_gemv_rows<DT, M, 1, U>(rows, x, K, lane, acc);
  float mine = 0.0f;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float s = kp_warp_sum<kp_warp>(acc[0][m]);
    if (lane == m) mine = s;
  }
  if (lane < M) y[lane * N + n] = kp_round<DT>(mine);
}

typedef void (*kp_gemv_fn)(const uint16_t *, const uint16_t *, uint16_t *, int64_t, int64_t);

template <int DT, int U, bool PDL>
static kp_gemv_fn pick_rows(int m) {
  switch (m) {
    case 1: return kp_gemv_kernel<DT, 1, U, PDL>;
    case 2: return kp_gemv_kernel<DT, 2, U, PDL>;
    case 3: return kp_gemv_kernel<DT, 3, U, PDL>;
    case 4: return kp_gemv_kernel<DT, 4, U, PDL>;
    case 5: return kp_gemv_kernel<DT, 5, U, PDL>;
    case 6: return kp_gemv_kernel<DT, 6, U, PDL>;
    case 7: return kp_gemv_kernel<DT, 7, U, PDL>;
    case 8: return kp_gemv_kernel<DT, 8, U, PDL>;
    default: return nullptr;
  }
}

/* the (U, PDL) pairs that space.def uses */
template <int DT>
static kp_gemv_fn pick(int m, int u, int pdl) {
  if (!pdl) {
    if (u == 8) return pick_rows<DT, 8, false>(m);
    if (u == 16) return pick_rows<DT, 16, false>(m);
  }
#if defined(KPICK_GPU_CUDA)
  if (pdl && u == 16) return pick_rows<DT, 16, true>(m);
#endif
  return nullptr;
}

int kp_gemv_has(int u, int pdl) { return pick<KP_DT_BF16>(1, u, pdl) != nullptr; }

int kp_gemv_launch(const struct kp_call *c, int rows_per_block, int u) {
  const kp_gemv_fn k = c->dtype == KP_DT_BF16 ? pick<KP_DT_BF16>(c->m, u, c->pdl) : pick<KP_DT_FP16>(c->m, u, c->pdl);
  if (!k || rows_per_block < 1 || rows_per_block > 8)
    return kp_fail(KPICK_E_UNSUPPORTED, "gemv", "no kernel for m=%d, R=%d, U=%d, pdl=%d", (int)c->m,
                   rows_per_block, u, c->pdl);
  const dim3 grid((unsigned)((c->n + rows_per_block - 1) / rows_per_block)), block(rows_per_block * c->warp);
  const hipError_t e = kp_launch(k, grid, block, c->stream, c->pdl != 0, (const uint16_t *)c->x,
                                 (const uint16_t *)c->w, (uint16_t *)c->y, c->n, c->k);
  if (e != hipSuccess) return kp_fail(KPICK_E_DEVICE, "gemv launch", "%s", hipGetErrorString(e));
  return KPICK_OK;
}
