/* gemv_core.h: the warp-per-row dot product shared by gemv.hip and gated.hip.
 *
 * K is consumed in chunks of kp_warp * 8 elements: lane l takes the 16-byte
 * piece at chunk * kp_warp * 8 + l * 8 of every weight row it serves (NR rows:
 * 1 for linear, gate and up for gated) and of each of the M activation rows,
 * which stay in registers. Each lane accumulates its pieces strictly in chunk
 * order, element by element, and the warp then reduces with a fixed butterfly:
 * so the result depends on neither U (loads in flight) nor the rows per block.
 * That is what lets every gemv configuration claim bitwise equality with one
 * class head. */
#ifndef KPICK_GPU_GEMV_CORE_H
#define KPICK_GPU_GEMV_CORE_H

#include "arch.h"
#include "block_sum.h"
#include "dtype.h"
#include "rows.h"

/* activation rows a gemv kernel holds in registers; lane m stores row m */
static constexpr int kp_gemv_max_rows = 8;

/* B pieces per weight row, all loads issued before the first use; the first
 * batch also holds the PDL wait (kp_batch_fence). */
template <int DT, int M, int NR, int B>
__device__ __forceinline__ void kp_gemv_batch(const uint16_t *const (&w)[NR], const uint16_t *x, int64_t K,
                                              int64_t off, float (&acc)[NR][M], bool first) {
  constexpr int64_t chunk = (int64_t)kp_warp * 8;
  kp_v16 wv[NR][B];
#pragma unroll
  for (int r = 0; r < NR; ++r)
#pragma unroll
    for (int b = 0; b < B; ++b) wv[r][b] = kp_ld_stream(w[r] + off + b * chunk);
  kp_batch_fence(first);
#pragma unroll
  for (int b = 0; b < B; ++b) {
    float wf[NR][8];
#pragma unroll
    for (int r = 0; r < NR; ++r) kp_unpack8<DT>(wv[r][b], wf[r]);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float xf[8];
      kp_unpack8<DT>(kp_ld_act(x + m * K + off + b * chunk), xf);
#pragma unroll
      for (int r = 0; r < NR; ++r) {
        float a = acc[r][m];
#pragma unroll
        for (int e = 0; e < 8; ++e) a = fmaf(wf[r][e], xf[e], a);
        acc[r][m] = a;
      }
    }
  }
}

/* acc[r][m] = this lane's share of dot(w[r], x[m]); the caller reduces.
 * w[r] and x point at the row starts; K % 8 == 0. */
template <int DT, int M, int NR, int U>
__device__ __forceinline__ void kp_gemv_rows(const uint16_t *const (&w)[NR], const uint16_t *x, int64_t K,
                                             int lane, float (&acc)[NR][M]) {
  static_assert(U == 8 || U == 16, "U is 8 or 16");
  constexpr int64_t chunk = (int64_t)kp_warp * 8;
  const int64_t nfull = K / chunk, tail = K - nfull * chunk;
  const uint16_t *wl[NR];
#pragma unroll
  for (int r = 0; r < NR; ++r) wl[r] = w[r] + lane * 8;
  const uint16_t *xl = x + lane * 8;
#pragma unroll
  for (int r = 0; r < NR; ++r)
#pragma unroll
    for (int m = 0; m < M; ++m) acc[r][m] = 0.0f;
  int64_t c = 0;
  bool first = true;
#pragma unroll 1
  for (; c + U <= nfull; c += U, first = false) kp_gemv_batch<DT, M, NR, U>(wl, xl, K, c * chunk, acc, first);
  /* the rest in shrinking batches: same chunk order, fewer loads in flight */
  if constexpr (U > 8) if (c + 8 <= nfull) { kp_gemv_batch<DT, M, NR, 8>(wl, xl, K, c * chunk, acc, first); c += 8; first = false; }
  if constexpr (U > 4) if (c + 4 <= nfull) { kp_gemv_batch<DT, M, NR, 4>(wl, xl, K, c * chunk, acc, first); c += 4; first = false; }
  if (c + 2 <= nfull) { kp_gemv_batch<DT, M, NR, 2>(wl, xl, K, c * chunk, acc, first); c += 2; first = false; }
  if (c + 1 <= nfull) { kp_gemv_batch<DT, M, NR, 1>(wl, xl, K, c * chunk, acc, first); c += 1; first = false; }
  /* a partial last chunk: the lanes whose piece lies inside K */
  if (lane * 8 < tail) kp_gemv_batch<DT, M, NR, 1>(wl, xl, K, nfull * chunk, acc, first);
  kp_batch_fence(true); /* lanes that loaded nothing still wait before any store */
}

#endif
