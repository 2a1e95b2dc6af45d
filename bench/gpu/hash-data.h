/* hash-data.h: data the probes fill on the device and recompute on the host, value by value:
 * a hash of (stream, index) into [-0.5, 0.5), rounded to bf16 (norm-fold-probe.cu,
 * moe-prefetch-probe.cu). No transfer of gigabytes of weights, and the host's reference reads
 * the very values the device holds. */
#ifndef KPICK_HASH_DATA_H
#define KPICK_HASH_DATA_H
#include <stdint.h>
#include <string.h>

__host__ __device__ inline float hashed(uint32_t stream, uint64_t i) {
  uint64_t z = i * 0x9e3779b97f4a7c15ull + stream * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (float)((z >> 40) & 0xffff) / 65536.0f - 0.5f;
}
__host__ __device__ inline uint16_t to_bf16(float f) { /* round to nearest even; the data has no NaN */
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static inline float from_bf16(uint16_t b) {
  const uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
/* the stored values: weights scaled to keep outputs near 1, activations as hashed, gamma near 1 */
__host__ __device__ inline uint16_t w_val(uint32_t s, uint64_t i) { return to_bf16(hashed(s, i) * 0.0625f); }
__host__ __device__ inline uint16_t x_val(uint32_t s, uint64_t i) { return to_bf16(hashed(s, i)); }
__host__ __device__ inline uint16_t g_val(uint32_t s, uint64_t i) { return to_bf16(1.0f + 0.5f * hashed(s, i)); }

/* kind 0: w_val, 1: x_val, 2: g_val of stream s at every index of p */
__global__ void fill_kernel(uint16_t *p, int64_t n, uint32_t s, int kind) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    p[i] = kind == 0 ? w_val(s, i) : kind == 1 ? x_val(s, i) : g_val(s, i);
}
#endif
