/* fp8_core.h: e4m3 codes (kpick.h, KPICK_FP8) in device code, shared by the
 * dense fp8 kernels (fp8.hip) and the fp8 moe families (moe.hip): the encode
 * the W8A8 activation quant uses, the exact decode, and the block max the
 * quant's scale comes from. */
#ifndef KPICK_GPU_FP8_CORE_H
#define KPICK_GPU_FP8_CORE_H

#include "arch.h"
#include "compat.h"

/* OCP E4M3FN, round to nearest even, saturating at +-448; NaN keeps its sign
 * (common/numeric.h kp_f32_to_e4m3, bit for bit). */
__device__ __forceinline__ uint8_t kp_e4m3_encode(float f) {
  const uint32_t u = __float_as_uint(f);
  const uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint8_t)(sign | 0x7fu);
  if (a >= 0x43e00000u) return (uint8_t)(sign | 0x7eu);
  if (a < 0x3c800000u) return (uint8_t)(sign | (uint8_t)rintf(fabsf(f) * 512.0f));
  const uint32_t r = a + 0x7ffffu + ((a >> 20) & 1u);
  return (uint8_t)(sign | (((r >> 20) - ((127u - 7u) << 3)) & 0x7fu));
}

/* Codes 2i and 2i+1 of a word (i = 0: the low two bytes) as fp32, exactly. */
template <int I>
__device__ __forceinline__ void kp_e4m3_pair(uint32_t word, float &lo, float &hi) {
#if defined(KPICK_GPU_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  const unsigned short pair = (unsigned short)(word >> (16 * I));
  uint32_t h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(pair));
  lo = __half2float(__ushort_as_half((unsigned short)(h2 & 0xffffu)));
  hi = __half2float(__ushort_as_half((unsigned short)(h2 >> 16)));
#else
  const uint32_t b0 = (word >> (16 * I)) & 0xffu, b1 = (word >> (16 * I + 8)) & 0xffu;
  lo = __uint_as_float(((b0 & 0x80u) << 24) | ((b0 & 0x7fu) << 20)) * 0x1p120f;
  hi = __uint_as_float(((b1 & 0x80u) << 24) | ((b1 & 0x7fu) << 20)) * 0x1p120f;
#endif
}

/* How the tensor-core rows turn codes into bf16 (kp_e4m3_bf16x2). 1 (NVIDIA
 * sm_80 and later): bit moves, then one multiply. A byte permute puts each code
 * in the high byte of its 16-bit half; sign, exponent and mantissa then shift
 * into bf16's fields, which read the code's value times 2^-120 (e4m3's bias 7
 * against bf16's 127; subnormal codes land on bf16 subnormals alike), and one
 * bf16x2 multiply by 2^120, exact, makes it the value: four integer ops and a
 * multiply a pair, none on the conversion units. The NaN codes (0x7f, 0xff)
 * read +-480 this way; kp_e4m3_encode never makes one from a finite weight.
 * 0: through the conversion units (e4m3 -> f16 pair -> two fp32 -> bf16 pair
 * on sm_89 and later; the fp32 bit moves elsewhere), NaN codes NaN. */
#ifndef KP_E4M3_BF16_BITS
#define KP_E4M3_BF16_BITS 1
#endif

/* codes 2i, 2i+1 of a word (i = 0: the low pair) as a bf16 pair, low first;
 * exact for every finite code */
template <int I>
__device__ __forceinline__ uint32_t kp_e4m3_bf16x2(uint32_t word) {
#if defined(KPICK_GPU_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && KP_E4M3_BF16_BITS
  const uint32_t t = __byte_perm(word, 0u, I ? 0x3424u : 0x1404u); /* bytes 2i, 2i+1 into bytes 1, 3 */
  const uint32_t b = (t & 0x80008000u) | ((t >> 4) & 0x07f007f0u);
  uint32_t r;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(b), "r"(0x7b807b80u), "r"(0x80008000u)); /* x 2^120, + -0 */
  return r;
#else
  float lo, hi;
  kp_e4m3_pair<I>(word, lo, hi); /* every e4m3 value is a bf16: the fp32's upper half */
  return (__float_as_uint(hi) & 0xffff0000u) | (__float_as_uint(lo) >> 16);
#endif
}

/* the 8 weights of two words (8 codes), in memory order */
__device__ __forceinline__ void kp_e4m3_unpack8(uint32_t a, uint32_t b, float (&f)[8]) {
  kp_e4m3_pair<0>(a, f[0], f[1]);
  kp_e4m3_pair<1>(a, f[2], f[3]);
  kp_e4m3_pair<0>(b, f[4], f[5]);
  kp_e4m3_pair<1>(b, f[6], f[7]);
}

/* the block's max of v (every thread gets it); shared holds a float per warp */
__device__ __forceinline__ float kp_block_max(float v, float *shared) {
  for (int o = kp_warp / 2; o > 0; o >>= 1) v = fmaxf(v, kp_shfl_xor(v, o));
  const int warp = threadIdx.x / kp_warp, lane = threadIdx.x % kp_warp, nwarps = blockDim.x / kp_warp;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float all = 0.0f;
  for (int i = 0; i < nwarps; ++i) all = fmaxf(all, shared[i]);
  return all;
}

#endif
