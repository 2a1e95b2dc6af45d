/* random.h: the random values every backend generates alike (the model's
 * weights, the decode ops' self-checks). A leaf: backends and the model both
 * include it, and it includes nothing of either. */
#ifndef KPICK_RANDOM_H
#define KPICK_RANDOM_H

#include <stdint.h>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define KP_HOST_DEVICE __host__ __device__
#else
#define KP_HOST_DEVICE
#endif

/* splitmix64's finaliser: one well-mixed word per counter */
static inline KP_HOST_DEVICE uint64_t kp_mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Element i of the stream seed: an odd multiple of 2^-16 in (-1, 1), never
 * zero; four elements per mixed word. Exact in fp32, so host and device agree. */
static inline KP_HOST_DEVICE float kp_uniform(uint64_t seed, uint64_t i) {
  const uint64_t r = kp_mix64(seed ^ kp_mix64(i >> 2));
  const uint32_t bits = (uint32_t)(r >> (16 * (i & 3))) & 0xffffu;
  return ((float)bits - 32767.5f) / 32768.0f;
}

#endif
