/* fp8.h: the KPICK_FP8 weight layout (kpick.h) and its packer, for the ABI
 * layer, the inputs and the decode model. */
#ifndef KPICK_FP8_H
#define KPICK_FP8_H

#include <stddef.h>
#include <stdint.h>

#include "../../include/kpick.h"

/* Bytes of one weight of rows x k in dtype: 2 per element, or the fp8 codes
 * and scales (KPICK_FP8_W_BYTES). */
int64_t kp_weight_bytes(int32_t dtype, int64_t rows, int64_t k);
/* The scales of a packed fp8 weight of rows x k. */
static inline const float *kp_fp8_scales(const void *w, int64_t rows, int64_t k) {
  return (const float *)((const char *)w + (((rows * k) + 15) / 16 * 16));
}
/* Rows r0.. of a weight of `rows` x k in dtype (one moe expert's rows of all
 * the experts' [E * rows_e, k]): where their elements start, and (fp8) where
 * their scales do, after all of the weight's codes; 16-bit: scales NULL. */
typedef struct kp_weight_rows {
  const void *w;
  const float *scales;
} kp_weight_rows;
static inline kp_weight_rows kp_weight_rows_at(int32_t dtype, const void *w, int64_t rows, int64_t k, int64_t r0) {
  if (dtype != KPICK_FP8) return (kp_weight_rows){(const uint16_t *)w + r0 * k, NULL};
  return (kp_weight_rows){(const uint8_t *)w + r0 * k, kp_fp8_scales(w, rows, k) + r0};
}
/* The gain of row r of the benchmark's fp8 weights (problems and the decode
 * model): 0.5, 0.71, 1, 1.41, 2 in turn, as real output channels differ in
 * range, so that every row's scale differs from its neighbours' and a kernel
 * that applies another row's scale fails parity. */
static inline float kp_fp8_row_gain(int64_t r) {
  static const float gains[5] = {0.5f, 0.70710678f, 1.0f, 1.41421356f, 2.0f};
  return gains[r % 5];
}
/* kpick_fp8_pack without the argument checks: dst holds kp_weight_bytes(fp8). */
void kp_fp8_pack(const uint16_t *w_bf16, int64_t rows, int64_t k, void *dst);
/* Rows r0..r1-1 of it (codes and scales; the range that ends at rows also
 * zeroes the padding): rows are independent, so disjoint ranges may be packed
 * at once (the decode model's threads). */
void kp_fp8_pack_rows(const uint16_t *w_bf16, int64_t rows, int64_t k, int64_t r0, int64_t r1, void *dst);
/* Row r of a packed weight, dequantized into out[k] (fp64). */
void kp_fp8_row(const void *w, int64_t rows, int64_t k, int64_t r, double *out);

#endif
