/* numeric.h: bf16/fp16 <-> fp32 on the host, round to nearest even. */
#ifndef KPICK_NUMERIC_H
#define KPICK_NUMERIC_H

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

static inline float kp_to_f32(int dtype, uint16_t h) {
  return dtype == 0 ? kp_bf16_to_f32(h) : kp_f16_to_f32(h);
}
static inline uint16_t kp_from_f32(int dtype, float f) {
  return dtype == 0 ? kp_f32_to_bf16(f) : kp_f32_to_f16(f);
}

#endif
