/* tile-math.h: the W8A16 / bf16 16-row tensor-core tile's math as the probes write it
 * (fp8.hip's w8a16.mma, R = 1, outside the library's space.h and backend defines): a lane
 * (g = lane / 4, q = lane % 4) holds 16 weights of rows g and g + 8 at k = 16 q of a 64-wide
 * K block and the x values of x rows g (+ 8 t) at the same k; four m16n8k16 bf16 steps a
 * block, e4m3 codes decoded by fp8_core.h's kp_e4m3_bf16x2. Shared by
 * w8a16-ring-probe.cu and tile-read-probe.cu. */
#ifndef KPICK_TILE_MATH_H
#define KPICK_TILE_MATH_H
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

#endif
