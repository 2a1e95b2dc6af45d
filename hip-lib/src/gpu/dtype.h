/* dtype.h: bf16 / fp16 <-> fp32 in device code, templated on the kpick dtype
 * (0 bf16, 1 fp16; 2 fp8 names e4m3 weight codes, whose x and y are bf16). Rounding to the storage type is to nearest even, once, at
 * the very end of a kernel: accumulation is always fp32. */
#ifndef KPICK_GPU_DTYPE_H
#define KPICK_GPU_DTYPE_H

#include "compat.h"

enum { KP_DT_BF16 = 0, KP_DT_FP16 = 1, KP_DT_FP8 = 2 };

/* the low and the high value of a word holding two packed elements */
template <int DT>
__device__ __forceinline__ float kp_lo(uint32_t v) {
  if constexpr (DT == KP_DT_BF16) return __uint_as_float(v << 16);
  else return __half2float(__ushort_as_half((unsigned short)(v & 0xffffu)));
}
template <int DT>
__device__ __forceinline__ float kp_hi(uint32_t v) {
  if constexpr (DT == KP_DT_BF16) return __uint_as_float(v & 0xffff0000u);
  else return __half2float(__ushort_as_half((unsigned short)(v >> 16)));
}

/* the 8 values of a 16-byte piece, in memory order */
template <int DT>
__device__ __forceinline__ void kp_unpack8(const kp_v16 &v, float (&f)[8]) {
  f[0] = kp_lo<DT>(v.x); f[1] = kp_hi<DT>(v.x);
  f[2] = kp_lo<DT>(v.y); f[3] = kp_hi<DT>(v.y);
  f[4] = kp_lo<DT>(v.z); f[5] = kp_hi<DT>(v.z);
  f[6] = kp_lo<DT>(v.w); f[7] = kp_hi<DT>(v.w);
}

template <int DT>
__device__ __forceinline__ uint16_t kp_round(float f) {
  if constexpr (DT == KP_DT_BF16) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
  } else {
    return __half_as_ushort(__float2half_rn(f));
  }
}

template <int DT>
__device__ __forceinline__ float kp_load1(const uint16_t *p) {
  const uint32_t v = *p;
  return kp_lo<DT>(v);
}

/* v rounded to bf16 and back: where an fp8 path's vendor twin stores bf16 between two steps */
__device__ __forceinline__ float kp_bf16_round(float v) { return __uint_as_float((uint32_t)kp_round<KP_DT_BF16>(v) << 16); }

/* silu(g) * u, the gated op's epilogue, in fp32 */
__device__ __forceinline__ float kp_silu_mul(float g, float u) { return g / (1.0f + expf(-g)) * u; }

#endif
