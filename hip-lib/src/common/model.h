/* model.h: what model.c and the backends' decode ops share: the random values
 * every backend generates alike, and the limits of the decode model. */
#ifndef KPICK_MODEL_H
#define KPICK_MODEL_H

#include <stdint.h>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define KP_HOST_DEVICE __host__ __device__
#else
#define KP_HOST_DEVICE
#endif

/* Attention keeps a row's scores in shared memory: context + max_new <= this. */
#define KP_MODEL_MAX_POSITIONS 8192
/* head_dim limit: the attention kernel gives each thread pair of dims one lane. */
#define KP_MODEL_MAX_HEAD_DIM 512
#define KP_MODEL_MAX_ROWS 128

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
