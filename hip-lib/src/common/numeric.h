/* numeric.h: bf16/fp16/e4m3 <-> fp32 on the host, round to nearest even. */
#ifndef KPICK_NUMERIC_H
#define KPICK_NUMERIC_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float kp_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline uint16_t kp_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static inline float kp_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else { /* subnormal: normalise */
      exp = 127 - 15 + 1;
      while (!(man & 0x400u)) { man <<= 1; exp--; }
      u = sign | (exp << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline uint16_t kp_f32_to_f16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* overflow -> inf */
  if (a < 0x38800000u) { /* subnormal or zero in fp16 */
    if (a < 0x33000000u) return (uint16_t)sign;
    uint32_t e = a >> 23, man = (a & 0x7fffffu) | 0x800000u;
    uint32_t s = 126 - e; /* right shift of man into units of 2^-24 */
    uint32_t q = man >> s, rem = man & ((1u << s) - 1), half = 1u << (s - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q);
  }
  uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
  return (uint16_t)(sign | (((r >> 13) - ((127 - 15) << 10)) & 0xffffu));
}

/* The 16-bit type of x and y: the dtype itself, bf16 for fp8 (dtype 2). */
static inline float kp_to_f32(int dtype, uint16_t h) {
  return dtype == 1 ? kp_f16_to_f32(h) : kp_bf16_to_f32(h);
}
static inline uint16_t kp_from_f32(int dtype, float f) {
  return dtype == 1 ? kp_f32_to_f16(f) : kp_f32_to_bf16(f);
}

/* OCP FP8 E4M3FN (kpick.h, KPICK_FP8): bias 7, no infinities, S.1111.111 is
 * NaN, largest 448 (0x7E), smallest subnormal 2^-9 (0x01). */
#define KP_E4M3_MAX 448.0f

static inline float kp_e4m3_to_f32(uint8_t c) {
  uint32_t e = (c >> 3) & 15u, m = c & 7u;
  float v;
  if ((c & 0x7fu) == 0x7fu) v = NAN;
  else if (e == 0) v = (float)m * 0x1p-9f;
  else v = ldexpf(1.0f + (float)m / 8.0f, (int)e - 7);
  return (c & 0x80u) ? -v : v;
}

/* Round to nearest even, saturating: beyond +-448 (infinities too) gives
 * +-448, as the satfinite conversions of the GPUs do; NaN keeps its sign. */
static inline uint8_t kp_f32_to_e4m3(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint8_t)(sign | 0x7fu);
  if (a >= 0x43e00000u) return (uint8_t)(sign | 0x7eu); /* >= 448 */
  if (a < 0x3c800000u) { /* below 2^-6: a subnormal step of 2^-9; 8 steps round up to 2^-6 (0x08) */
    float q = rintf(fabsf(f) * 512.0f); /* exact scaling; rintf rounds to even in the default mode */
    return (uint8_t)(sign | (uint8_t)q);
  }
  uint32_t r = a + 0x7ffffu + ((a >> 20) & 1u); /* round 23 mantissa bits to 3 */
  return (uint8_t)(sign | (((r >> 20) - ((127u - 7u) << 3)) & 0x7fu));
}

/* W8A8's activation quant of one row, in place: x[i] becomes the value of its
 * e4m3 code at scale amax / 448 (1 for a zero row), which it returns, so that
 * x[i] * scale approximates the original. */
static inline float kp_e4m3_quant_row(float *x, int64_t k) {
  float amax = 0;
  for (int64_t i = 0; i < k; i++) amax = fmaxf(amax, fabsf(x[i]));
  const float s = amax > 0 ? amax / KP_E4M3_MAX : 1.0f;
  for (int64_t i = 0; i < k; i++) x[i] = kp_e4m3_to_f32(kp_f32_to_e4m3(x[i] / s));
  return s;
}

#endif
