/* block_sum.h: warp and block sums in a fixed order (lane butterfly, then the
 * warps in order), so a sum's bits depend on the block's shape only. Shared by
 * the gemv dot products (gemv_core.h), the decode ops (decode.hip) and the
 * sweep's producer (util.hip), which reduces as the norm before a linear does. */
#ifndef KPICK_GPU_BLOCK_SUM_H
#define KPICK_GPU_BLOCK_SUM_H

#include "arch.h"

static constexpr int kp_max_warps = 1024 / 32; /* the most warps a block of 1024 threads has */

/* fixed-order butterfly over WIDTH lanes: every lane ends with the same sum */
template <int WIDTH>
__device__ __forceinline__ float kp_warp_sum(float v) {
#pragma unroll
  for (int o = WIDTH / 2; o > 0; o >>= 1) v += kp_shfl_xor(v, o);
  return v;
}

/* every thread gets the block's total; red holds kp_max_warps floats */
__device__ __forceinline__ float kp_block_sum(float v, float *red) {
  v = kp_warp_sum<kp_warp>(v);
  const int warp = threadIdx.x / kp_warp, warps = blockDim.x / kp_warp;
  __syncthreads(); /* red may still be read by a previous reduction */
  if (threadIdx.x % kp_warp == 0) red[warp] = v;
  __syncthreads();
  float t = 0.0f;
  for (int i = 0; i < warps; ++i) t += red[i];
  return t;
}

#endif
