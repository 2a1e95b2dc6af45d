/* tile-math.h: the W8A16 / bf16 16-row tensor-core tile's math as the probes write it
 * (fp8.hip's w8a16.mma, R = 1, outside the library's space.h and backend defines): a lane
 * (g = lane / 4, q = lane % 4) holds 16 weights of rows g and g + 8 at k = 16 q of a 64-wide
 * K block and the x values of x rows g (+ 8 t) at the same k; four m16n8k16 bf16 steps a
 * block, e4m3 codes decoded by fp8_core.h's kp_e4m3_bf16x2; the loop that keeps a warp's W
 * in flight, for one tile or R. Shared by w8a16-ring-probe.cu, tile-read-probe.cu and
 * tile-split-probe.cu. */
#ifndef KPICK_TILE_MATH_H
#define KPICK_TILE_MATH_H
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "../../hip-lib/src/gpu/fp8_core.h"

__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* one 64-wide K block: this lane's 16 weights of rows g and g + 8 (WB = 1: codes, one
 * piece; 2: bf16, two pieces) against x rows g (+ 8 t) */
template <int T>
__device__ __forceinline__ void load_x(const uint16_t *const (&xr)[T], const bool (&xv)[T], int64_t kb, kp_v16 (&xa)[T],
                                       kp_v16 (&xb)[T]) {
#pragma unroll
  for (int t = 0; t < T; ++t) {
    xa[t] = xv[t] ? kp_ld_act(xr[t] + kb * 64) : kp_v16{0u, 0u, 0u, 0u};
    xb[t] = xv[t] ? kp_ld_act(xr[t] + kb * 64 + 8) : kp_v16{0u, 0u, 0u, 0u};
  }
}

/* the math of one block on x already in registers */
template <int T, int WB>
__device__ __forceinline__ void block_math_x(const kp_v16 (&wa)[WB], const kp_v16 (&wb)[WB], const kp_v16 (&xa)[T],
                                             const kp_v16 (&xb)[T], float (&acc)[T][4]) {
  uint32_t ra[4 * WB], rb[4 * WB];
#pragma unroll
  for (int p = 0; p < WB; ++p) {
    ra[4 * p] = wa[p].x, ra[4 * p + 1] = wa[p].y, ra[4 * p + 2] = wa[p].z, ra[4 * p + 3] = wa[p].w;
    rb[4 * p] = wb[p].x, rb[4 * p + 1] = wb[p].y, rb[4 * p + 2] = wb[p].z, rb[4 * p + 3] = wb[p].w;
  }
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    /* step s takes weights 4s..4s+3 of the lane's 16, and x alike (a permutation of k) */
    uint32_t a[4];
    if constexpr (WB == 1) {
      a[0] = kp_e4m3_bf16x2<0>(ra[s]), a[1] = kp_e4m3_bf16x2<0>(rb[s]);
      a[2] = kp_e4m3_bf16x2<1>(ra[s]), a[3] = kp_e4m3_bf16x2<1>(rb[s]);
    } else {
      a[0] = ra[2 * s], a[1] = rb[2 * s], a[2] = ra[2 * s + 1], a[3] = rb[2 * s + 1];
    }
#pragma unroll
    for (int t = 0; t < T; ++t) {
      const uint32_t xs[8] = {xa[t].x, xa[t].y, xa[t].z, xa[t].w, xb[t].x, xb[t].y, xb[t].z, xb[t].w};
      mma16816(acc[t], a, xs[2 * s], xs[2 * s + 1]);
    }
  }
}

template <int T, int WB>
__device__ __forceinline__ void block_math(const kp_v16 (&wa)[WB], const kp_v16 (&wb)[WB], const uint16_t *const (&xr)[T],
                                           const bool (&xv)[T], int64_t kb, float (&acc)[T][4]) {
  kp_v16 xa[T], xb[T];
  load_x<T>(xr, xv, kb, xa, xb);
  block_math_x<T, WB>(wa, wb, xa, xb, acc);
}


/* the lane's x rows g + 8 t (t < T) at k = 16 q of a K block; a row past M reads row 0 and is
 * masked (xv false: its values load as 0) */
template <int T>
__device__ __forceinline__ void tile_x_rows(const uint16_t *x, int M, int64_t K, const uint16_t *(&xr)[T], bool (&xv)[T]) {
  const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
#pragma unroll
  for (int t = 0; t < T; ++t) {
    xv[t] = g + 8 * t < M;
    xr[t] = x + (int64_t)(xv[t] ? g + 8 * t : 0) * K + q * 16;
  }
}

/* how a tile starts: the lane's x rows (tile_x_rows) and its sums at zero */
template <int T>
__device__ __forceinline__ void tile_start(const uint16_t *x, int M, int64_t K, const uint16_t *(&xr)[T], bool (&xv)[T],
                                           float (&acc)[T][4]) {
  tile_x_rows<T>(x, M, K, xr, xv);
#pragma unroll
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
}

/* a warp's K blocks kb_begin + warp, + W, ... below kb_end, for R tiles (w0[r], w1[r]: the
 * lane's first bytes of the tile's rows g and g + 8): two register sets of U blocks, the next
 * set's loads issued while this set is used; block(kb, wa, wb) gets each block's WB pieces of
 * the R tiles' rows. PDL: the first set's loads are issued before the wait for the previous
 * kernel (griddepcontrol.wait), as the library's .pdl tiles do. */
template <int WB, int R, int U, bool PDL = false, class Block>
__device__ __forceinline__ void tile_loop_rows(const uint8_t *const (&w0)[R], const uint8_t *const (&w1)[R], int64_t kb_begin,
                                               int64_t kb_end, Block block) {
  const int warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  const int64_t bstride = 64 * WB, step = (int64_t)nwarps * U;
  kp_v16 a0[U][R][WB], b0[U][R][WB], a1[U][R][WB], b1[U][R][WB];
  auto load = [&](int64_t b, kp_v16(&wa)[U][R][WB], kp_v16(&wb)[U][R][WB]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t kb = b + (int64_t)u * nwarps;
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int p = 0; p < WB; ++p) {
          wa[u][r][p] = kb < kb_end ? kp_ld_stream(w0[r] + kb * bstride + 16 * p) : kp_v16{0u, 0u, 0u, 0u};
          wb[u][r][p] = kb < kb_end ? kp_ld_stream(w1[r] + kb * bstride + 16 * p) : kp_v16{0u, 0u, 0u, 0u};
        }
    }
  };
  auto use = [&](int64_t b, const kp_v16(&wa)[U][R][WB], const kp_v16(&wb)[U][R][WB]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t kb = b + (int64_t)u * nwarps;
      if (kb < kb_end) block(kb, wa[u], wb[u]);
    }
  };
  int64_t b = kb_begin + warp;
  if (b < kb_end) load(b, a0, b0);
  if constexpr (PDL) asm volatile("griddepcontrol.wait;" ::: "memory");
#pragma unroll 1
  while (b < kb_end) {
    if (b + step < kb_end) load(b + step, a1, b1);
    use(b, a0, b0);
    b += step;
    if (b >= kb_end) break;
    if (b + step < kb_end) load(b + step, a0, b0);
    use(b, a1, b1);
    b += step;
  }
}

/* the library's loop (fp8.hip, U = 2) over all of a 16-row tile's nblocks K blocks */
template <int WB, class Block>
__device__ __forceinline__ void tile_loop(const uint8_t *w0, const uint8_t *w1, int64_t nblocks, Block block) {
  const uint8_t *const r0[1] = {w0}, *const r1[1] = {w1};
  tile_loop_rows<WB, 1, 2>(r0, r1, 0, nblocks, [&](int64_t kb, const kp_v16(&wa)[1][WB], const kp_v16(&wb)[1][WB]) {
    block(kb, wa[0], wb[0]);
  });
}

/* the warps' sums added in warp order through shared memory (red, [warps][32][4 T]): true in
 * warp 0, whose acc then holds the block's sums; every warp passes one barrier (none after it:
 * a caller that reuses red passes another first) */
template <int T, int MAXW>
__device__ __forceinline__ bool tile_warp_sum(float (&red)[MAXW][32][4 * T], float (&acc)[T][4]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
#pragma unroll
  for (int t = 0; t < T; ++t)
#pragma unroll
    for (int i = 0; i < 4; ++i) red[warp][lane][4 * t + i] = acc[t][i];
  __syncthreads();
  if (warp != 0) return false;
#pragma unroll
  for (int t = 0; t < T; ++t)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float v = red[0][lane][4 * t + i];
      for (int j = 1; j < nwarps; ++j) v += red[j][lane][4 * t + i];
      acc[t][i] = v;
    }
  return true;
}

/* each (x row m < M, weight row n0 or n0 + 8) of warp 0's sums to put(m, n, value, scale),
 * where in0, in1 */
template <int T, class Put>
__device__ __forceinline__ void tile_each_output(const float (&acc)[T][4], int M, int64_t n0, bool in0, bool in1, float s0,
                                                 float s1, Put put) {
  const int q = threadIdx.x % 4;
#pragma unroll
  for (int t = 0; t < T; ++t)
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int m = 8 * t + 2 * q + c;
      if (m >= M) continue;
      if (in0) put(m, n0, acc[t][c], s0);
      if (in1) put(m, n0 + 8, acc[t][2 + c], s1);
    }
}

__device__ __forceinline__ uint16_t tile_bf16(float v) { return __bfloat16_as_ushort(__float2bfloat16_rn(v)); }

/* the block's end: the warps' sums, then warp 0 stores y of the rows m < M at weight rows n0
 * and n0 + 8 (where in0, in1), scaled by s0, s1 and rounded to bf16 */
template <int T, int MAXW>
__device__ __forceinline__ void tile_sum_store(float (&red)[MAXW][32][4 * T], float (&acc)[T][4], int M, int64_t N, int64_t n0,
                                               bool in0, bool in1, float s0, float s1, uint16_t *y) {
  if (!tile_warp_sum<T>(red, acc)) return;
  tile_each_output<T>(acc, M, n0, in0, in1, s0, s1,
                      [&](int m, int64_t n, float v, float s) { y[(int64_t)m * N + n] = tile_bf16(v * s); });
}
/* the library's tile, the probes' baseline: one 16-row tile a block (rows 16 blockIdx.x ..), the
 * loop of tile_loop (two sets of two K blocks a warp), the warps' sum and warp 0's store */
template <int T, int WB, int MAXW>
__device__ __forceinline__ void tile_lib(float (&red)[MAXW][32][4 * T], const uint16_t *__restrict__ x,
                                         const uint8_t *__restrict__ w, const float *__restrict__ scales,
                                         uint16_t *__restrict__ y, int M, int64_t N, int64_t K) {
  constexpr int piece = 16 * WB;
  const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  const int64_t n0 = (int64_t)blockIdx.x * 16 + g, rowb = K * WB;
  const uint8_t *w0 = w + n0 * rowb + q * piece, *w1 = w + (n0 + 8) * rowb + q * piece;
  const uint16_t *xr[T];
  bool xv[T];
  float acc[T][4];
  tile_start<T>(x, M, K, xr, xv, acc);
  tile_loop<WB>(w0, w1, K / 64, [&](int64_t kb, const kp_v16(&wa)[WB], const kp_v16(&wb)[WB]) {
    block_math<T, WB>(wa, wb, xr, xv, kb, acc);
  });
  tile_sum_store<T>(red, acc, M, N, n0, true, true, WB == 1 ? scales[n0] : 1.0f, WB == 1 ? scales[n0 + 8] : 1.0f, y);
}
#endif
