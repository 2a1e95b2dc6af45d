/* fp8.c: the e4m3 conversions and the fp8 weight packer of the ABI (kpick.h),
 * on the host. */
#include "fp8.h"

#include <math.h>
#include <string.h>

#include "error.h"
#include "numeric.h"

int64_t kp_weight_bytes(int32_t dtype, int64_t rows, int64_t k) {
  return dtype == KPICK_FP8 ? KPICK_FP8_W_BYTES(rows, k) : rows * k * 2;
}

void kp_fp8_pack(const uint16_t *w_bf16, int64_t rows, int64_t k, void *dst) {
  kp_fp8_pack_rows(w_bf16, rows, k, 0, rows, dst);
}

void kp_fp8_pack_rows(const uint16_t *w_bf16, int64_t rows, int64_t k, int64_t r0, int64_t r1, void *dst) {
  uint8_t *codes = dst;
  int64_t at = KPICK_FP8_SCALES_AT(rows, k);
  /* the padding after the last row's codes: no stray bytes in a copy */
  if (r1 == rows) memset(codes + rows * k, 0, (size_t)(at - rows * k));
  for (int64_t r = r0; r < r1; r++) {
    const uint16_t *w = w_bf16 + r * k;
    float amax = 0;
    for (int64_t i = 0; i < k; i++) amax = fmaxf(amax, fabsf(kp_bf16_to_f32(w[i])));
    float scale = amax > 0 ? amax / KP_E4M3_MAX : 1.0f;
    for (int64_t i = 0; i < k; i++) codes[r * k + i] = kp_f32_to_e4m3(kp_bf16_to_f32(w[i]) / scale);
    memcpy((char *)dst + at + 4 * r, &scale, 4);
  }
}

void kp_fp8_row(const void *w, int64_t rows, int64_t k, int64_t r, double *out) {
  const uint8_t *codes = (const uint8_t *)w + r * k;
  float scale;
  memcpy(&scale, (const char *)w + KPICK_FP8_SCALES_AT(rows, k) + 4 * r, 4);
  /* the row's 256 values once: decoding each code (ldexpf) cost the fp64
   * references of large fp8 problems minutes */
  double value[256];
  for (int c = 0; c < 256; c++) value[c] = (double)scale * (double)kp_e4m3_to_f32((uint8_t)c);
  for (int64_t i = 0; i < k; i++) out[i] = value[codes[i]];
}

#define KP_MAX_COUNT (1LL << 40)

int kpick_e4m3_encode(const float *src, uint8_t *dst, int64_t count) {
  kp_clear_error();
  KP_REQUIRE(src != NULL && dst != NULL, "src and dst must not be null");
  KP_REQUIRE(count > 0 && count <= KP_MAX_COUNT, "count must be in 1..2^40, got %lld", (long long)count);
  for (int64_t i = 0; i < count; i++) dst[i] = kp_f32_to_e4m3(src[i]);
  return KPICK_OK;
}

int kpick_e4m3_decode(const uint8_t *src, float *dst, int64_t count) {
  kp_clear_error();
  KP_REQUIRE(src != NULL && dst != NULL, "src and dst must not be null");
  KP_REQUIRE(count > 0 && count <= KP_MAX_COUNT, "count must be in 1..2^40, got %lld", (long long)count);
  for (int64_t i = 0; i < count; i++) dst[i] = kp_e4m3_to_f32(src[i]);
  return KPICK_OK;
}

int kpick_fp8_pack(const uint16_t *w_bf16, int64_t rows, int64_t k, void *dst, int64_t dst_bytes) {
  kp_clear_error();
  KP_REQUIRE(w_bf16 != NULL && dst != NULL, "w_bf16 and dst must not be null");
  KP_REQUIRE(rows > 0 && rows <= (1LL << 25) && k > 0 && k <= (1LL << 24) && rows * k <= (1LL << 36),
             "rows and k must be positive and rows * k at most 2^36, got %lld x %lld", (long long)rows, (long long)k);
  KP_REQUIRE(dst_bytes == KPICK_FP8_W_BYTES(rows, k), "dst_bytes is %lld, a %lld x %lld fp8 weight is %lld",
             (long long)dst_bytes, (long long)rows, (long long)k, (long long)KPICK_FP8_W_BYTES(rows, k));
  kp_fp8_pack(w_bf16, rows, k, dst);
  return KPICK_OK;
}
