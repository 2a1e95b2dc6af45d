/* fp8.c: CPU candidates for fp8 weights (kpick.h, KPICK_FP8), linear and gated.
 *   w8a8.plain        the class default: each row of x quantized to e4m3 with
 *                     its own scale (amax / 448), e4m3 x e4m3 products (exact
 *                     in fp32), fp32 sum, y = sum * (x scale * W row scale);
 *                     the arithmetic of a vendor fp8 matmul after a per-token
 *                     activation quant. gated: two passes, as gated.plain
 *   w8a16.plain       W dequantized in the loop, x in bf16 (as fp32), fp32 sum,
 *                     y = sum * W row scale; the W8A16 class head
 *   w8a16.rowblk.rR   R rows of W per pass over x: byte-identical to w8a16.plain
 *   wrong8            test-only: W8A16 with row 0's scale on every row, the
 *                     indexing slip parity must catch (the benchmark's rows
 *                     differ in range: fp8.h kp_fp8_row_gain)
 * Both classes share one accumulation (16 fp32 lanes over K, lane = k mod 16,
 * fma, a fixed tree: kernels.h), so the rows blocking never changes a byte.
 * Codes decode by moving their bits into an fp32 (sign, then exponent and
 * mantissa 20 bits up) and scaling by 2^120, subnormals included; the NaN code
 * would read as 480, but kpick_fp8_pack never writes one (it saturates). */
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../common/error.h"
#include "../common/fp8.h"
#include "../common/numeric.h"
#include "kernels.h"

#define LANES 16
#define MAX_R 8
#define MAX_MB 4

/* The 64-byte vectors are returned only by always-inline functions and passed
 * by pointer, so gcc's note on their calling convention without AVX-512 does
 * not apply. */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float v16f __attribute__((vector_size(64)));
typedef uint32_t v16u __attribute__((vector_size(64)));

/* Sixteen codes widened to 32 bits: intrinsics where the target has them
 * (gcc scalarises __builtin_convertvector from bytes, byte by byte through the
 * stack: 4x slower than the bf16 kernels it sits beside). */
static inline __attribute__((always_inline)) v16u widen16(const uint8_t *w) {
  v16u u;
#if defined(__AVX512F__)
  __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)w));
  memcpy(&u, &v, sizeof u);
#elif defined(__AVX2__)
  __m128i b = _mm_loadu_si128((const __m128i *)w);
  __m256i v[2] = {_mm256_cvtepu8_epi32(b), _mm256_cvtepu8_epi32(_mm_srli_si128(b, 8))};
  memcpy(&u, v, sizeof u);
#else
  for (int j = 0; j < LANES; j++) u[j] = w[j];
#endif
  return u;
}

static inline __attribute__((always_inline)) v16f dec16(const uint8_t *w) {
  v16u u = widen16(w);
  v16u bits = ((u & 0x80u) << 24) | ((u & 0x7fu) << 20);
  v16f f;
  memcpy(&f, &bits, sizeof f);
  return f * 0x1p120f;
}

static inline float reduce_lanes(const v16f *a) {
  float l[LANES];
  memcpy(l, a, sizeof l);
  for (int s = LANES / 2; s > 0; s /= 2)
    for (int j = 0; j < s; j++) l[j] += l[j + s];
  return l[0];
}

/* out[i*R + r] = sum over k of xf[i*K + k] * e4m3(w[r*K + k]), i < MB, r < R. */
static inline __attribute__((always_inline)) void dot_block(const float *xf, const uint8_t *w, int64_t K, int R,
                                                            int MB, float *out) {
  v16f acc[MAX_MB][MAX_R];
  for (int i = 0; i < MB; i++)
    for (int r = 0; r < R; r++) acc[i][r] = (v16f){0};
  int64_t k = 0;
  for (; k + LANES <= K; k += LANES) {
    v16f wv[MAX_R];
    for (int r = 0; r < R; r++) wv[r] = dec16(w + r * K + k);
    for (int i = 0; i < MB; i++) {
      v16f xv;
      memcpy(&xv, xf + i * K + k, sizeof xv);
      for (int r = 0; r < R; r++) acc[i][r] += xv * wv[r];
    }
  }
  if (k < K) {
    v16f wv[MAX_R];
    for (int r = 0; r < R; r++) {
      uint8_t wt[LANES] = {0};
      memcpy(wt, w + r * K + k, (size_t)(K - k));
      wv[r] = dec16(wt);
    }
    for (int i = 0; i < MB; i++) {
      float xt[LANES] = {0};
      memcpy(xt, xf + i * K + k, sizeof(float) * (size_t)(K - k));
      v16f xv;
      memcpy(&xv, xt, sizeof xv);
      for (int r = 0; r < R; r++) acc[i][r] += xv * wv[r];
    }
  }
  for (int i = 0; i < MB; i++)
    for (int r = 0; r < R; r++) out[i * R + r] = reduce_lanes(&acc[i][r]);
}

#define DEFINE_DOT(R, MB) \
  static void dot_r##R##_m##MB(const float *xf, const uint8_t *w, int64_t K, float *out) { dot_block(xf, w, K, R, MB, out); }
DEFINE_DOT(1, 4) DEFINE_DOT(1, 1) DEFINE_DOT(2, 4) DEFINE_DOT(2, 1) DEFINE_DOT(4, 4) DEFINE_DOT(4, 1)
DEFINE_DOT(8, 2) DEFINE_DOT(8, 1)

typedef void (*dot_fn)(const float *, const uint8_t *, int64_t, float *);
typedef struct dot_pair {
  dot_fn many, one;
  int mb;
} dot_pair;

static const dot_pair *pick_dot(int R) {
  static const dot_pair table[4] = {{dot_r1_m4, dot_r1_m1, 4}, {dot_r2_m4, dot_r2_m1, 4},
                                    {dot_r4_m4, dot_r4_m1, 4}, {dot_r8_m2, dot_r8_m1, 2}};
  int i = R == 1 ? 0 : R == 2 ? 1 : R == 4 ? 2 : R == 8 ? 3 : -1;
  return i < 0 ? NULL : &table[i];
}

static float to_bf16(float v) { return kp_bf16_to_f32(kp_f32_to_bf16(v)); }

/* The x side of a call: fp32 values and, for W8A8, a scale per row. */
typedef struct x_side {
  float *xf;
  float *scale; /* [m]; NULL: W8A16, the sums are not scaled by x */
} x_side;

/* W8A16: x as fp32. W8A8: each row quantized to e4m3 with scale amax / 448
 * (1 for a zero row) and decoded again, so the products are fp8 x fp8. */
static int x_prepare(const cpu_call *c, int quantize, x_side *xs) {
  int64_t K = c->k, count = (int64_t)c->m * K;
  xs->xf = malloc(sizeof(float) * (size_t)count);
  xs->scale = quantize ? malloc(sizeof(float) * (size_t)c->m) : NULL;
  if (!xs->xf || (quantize && !xs->scale)) {
    free(xs->xf);
    free(xs->scale);
    return kp_fail(KPICK_E_NOMEM, "cpu", "host allocation failed");
  }
  for (int64_t i = 0; i < count; i++) xs->xf[i] = kp_bf16_to_f32(c->x[i]);
  if (!quantize) return KPICK_OK;
  for (int32_t m = 0; m < c->m; m++) xs->scale[m] = kp_e4m3_quant_row(xs->xf + m * K, K);
  return KPICK_OK;
}

static void x_release(x_side *xs) {
  free(xs->xf);
  free(xs->scale);
}

/* Output rows [0, N) in blocks of R W rows; W rows of output n are n (linear)
 * or n and N+n (gated, fused: gate and up rounded to bf16 first, as the
 * two-pass default stores them). rows_w is the packed weight's row count;
 * row r takes scale r * stride (1; 0 only in the test-only wrong8). */
static void rows_all(const cpu_call *c, const x_side *xs, int R, int64_t rows_w, int64_t stride) {
  int64_t N = c->n, K = c->k;
  const uint8_t *w = (const uint8_t *)c->w;
  const float *ws = c->w_scales ? c->w_scales : kp_fp8_scales(c->w, rows_w, K);
  float g[MAX_MB * MAX_R], u[MAX_MB * MAX_R];
  int gated = c->op == KPICK_OP_GATED;
  for (int64_t n = 0; n < N;) {
    int r = R;
    while (n + r > N) r /= 2;
    const dot_pair *dot = pick_dot(r);
    for (int32_t m = 0; m < c->m;) {
      int mb = c->m - m >= dot->mb ? dot->mb : 1;
      dot_fn f = mb > 1 ? dot->many : dot->one;
      const float *xm = xs->xf + m * K;
      f(xm, w + n * K, K, g);
      if (gated) f(xm, w + (N + n) * K, K, u);
      for (int i = 0; i < mb; i++) {
        float sx = xs->scale ? xs->scale[m + i] : 1.0f;
        for (int j = 0; j < r; j++) {
          const float sg = ws[(n + j) * stride], su = gated ? ws[(N + n + j) * stride] : 0.0f; /* linear: no up rows */
          float v = g[i * r + j] * (xs->scale ? sx * sg : sg);
          if (gated) v = cpu_silu_mul(to_bf16(v), to_bf16(u[i * r + j] * (xs->scale ? sx * su : su)));
          c->y[(m + i) * N + n + j] = kp_f32_to_bf16(v);
        }
      }
      m += mb;
    }
    n += r;
  }
}

static int run(const cpu_call *c, int quantize, int R, int64_t stride) {
  if (c->dtype != KPICK_FP8) return kp_fail(KPICK_E_ARG, "cpu", "an fp8 candidate needs dtype fp8 (2), got %d", (int)c->dtype);
  if (!pick_dot(R)) return kp_fail(KPICK_E_ARG, "cpu", "rows per block must be 1, 2, 4 or 8, got %d", R);
  x_side xs;
  KP_TRY(x_prepare(c, quantize, &xs));
  rows_all(c, &xs, R, c->op == KPICK_OP_GATED ? 2 * c->n : c->n, stride);
  x_release(&xs);
  cpu_stage();
  return KPICK_OK;
}

int cpu_launch_w8a16(const cpu_call *c, const int32_t params[3]) { return run(c, 0, params[0], 1); }
int cpu_launch_wrong8(const cpu_call *c, const int32_t params[3]) { return run(c, 0, 1, 0); }

static int w8a8_linear(const cpu_call *c) { return run(c, 1, 1, 1); }

int cpu_launch_w8a8(const cpu_call *c, const int32_t params[3]) {
  return c->op == KPICK_OP_LINEAR ? w8a8_linear(c) : cpu_gated_by_linear(c, w8a8_linear);
}
