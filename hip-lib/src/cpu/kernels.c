/* kernels.c: CPU candidates for the linear and gated ops.
 *   plain        one W row at a time; the class default and bitwise head
 *   rowblk.rR    R rows of W per pass over x: byte-identical to plain
 *   threads.tT   rowblk.rR over T threads splitting N: byte-identical to plain
 *   splitk.sS    K in S contiguous parts, partials summed in order: tolerance only
 *   gated.*      the same for silu(gate) * up; gated.plain runs two passes
 *                (linear over 2N rows, then silu-mul), the others are fused
 *   wrong        test-only candidates that parity must catch
 */
#include "kernels.h"

#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../common/error.h"
#include "../common/numeric.h"

#define LANES 16
#define HALF 8
#define MAX_R 8
#define MAX_MB 4

static _Thread_local int32_t stages;
void cpu_stages_reset(void) { stages = 0; }
int32_t cpu_stages(void) { return stages; }
void cpu_stages_set(int32_t n) { stages = n; }
void cpu_stage(void) { stages++; }

/* The 16 fp32 lanes as two halves of 8 (one ymm each with AVX2): a 64-byte
 * vector type on an AVX2 target is split by the compiler through the stack on
 * every step, which made each call several times slower than its arithmetic.
 * Half h holds lanes 8h..8h+7; every lane still runs its own fma chain. */
typedef float v8f __attribute__((vector_size(32)));
typedef uint32_t v8u __attribute__((vector_size(32)));
typedef uint16_t v8h __attribute__((vector_size(16)));

/* Eight W elements as fp32; dtype is a compile-time constant after inlining. */
static inline __attribute__((always_inline)) v8f load8(const uint16_t *w, int dtype) {
  v8f f;
  if (dtype == KPICK_BF16) {
#if defined(__AVX2__)
    __m256i u = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)w)), 16);
#else
    v8h h;
    memcpy(&h, w, sizeof h);
    v8u u = __builtin_convertvector(h, v8u) << 16;
#endif
    memcpy(&f, &u, sizeof f);
    return f;
  }
#if defined(__F16C__)
  __m256 c = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w));
  memcpy(&f, &c, sizeof f);
#else
  for (int j = 0; j < HALF; j++) f[j] = kp_f16_to_f32(w[j]);
#endif
  return f;
}

/* The fixed tree over the 16 lanes: lane j += lane j + s for s = 8, 4, 2, 1. */
static inline float reduce_lanes(v8f lo, v8f hi) {
  float l[LANES];
  memcpy(l, &lo, sizeof lo);
  memcpy(l + HALF, &hi, sizeof hi);
  for (int s = LANES / 2; s > 0; s /= 2)
    for (int j = 0; j < s; j++) l[j] += l[j + s];
  return l[0];
}

/* out[i*R + r] = sum over k in [k0, k1) of x[i*K + k] * w[r*K + k], for i < MB
 * rows of x and r < R rows of W: each W chunk is converted once for MB rows.
 * Lanes are indexed by (k - k0) mod 16 (a short tail is zero-padded), so a call
 * over the whole K defines the class order whatever R and MB are; a*b+c is
 * contracted to fma (-ffp-contract=fast). */
static inline __attribute__((always_inline)) void dot_block(const float *xf, const uint16_t *w, int64_t K,
                                                            int64_t k0, int64_t k1, int R, int MB,
                                                            int dtype, float *out) {
  v8f lo[MAX_MB][MAX_R], hi[MAX_MB][MAX_R];
  for (int i = 0; i < MB; i++)
    for (int r = 0; r < R; r++) lo[i][r] = hi[i][r] = (v8f){0};
  int64_t k = k0;
  for (; k + LANES <= k1; k += LANES) {
    v8f wl[MAX_R], wh[MAX_R];
    for (int r = 0; r < R; r++) {
      wl[r] = load8(w + r * K + k, dtype);
      wh[r] = load8(w + r * K + k + HALF, dtype);
    }
    for (int i = 0; i < MB; i++) {
      v8f xl, xh;
      memcpy(&xl, xf + i * K + k, sizeof xl);
      memcpy(&xh, xf + i * K + k + HALF, sizeof xh);
      for (int r = 0; r < R; r++) {
        lo[i][r] += xl * wl[r];
        hi[i][r] += xh * wh[r];
      }
    }
  }
  if (k < k1) {
    uint16_t wt[LANES] = {0};
    v8f wl[MAX_R], wh[MAX_R];
    for (int r = 0; r < R; r++) {
      memcpy(wt, w + r * K + k, sizeof(uint16_t) * (size_t)(k1 - k));
      wl[r] = load8(wt, dtype);
      wh[r] = load8(wt + HALF, dtype);
    }
    for (int i = 0; i < MB; i++) {
      float xt[LANES] = {0};
      memcpy(xt, xf + i * K + k, sizeof(float) * (size_t)(k1 - k));
      v8f xl, xh;
      memcpy(&xl, xt, sizeof xl);
      memcpy(&xh, xt + HALF, sizeof xh);
      for (int r = 0; r < R; r++) {
        lo[i][r] += xl * wl[r];
        hi[i][r] += xh * wh[r];
      }
    }
  }
  for (int i = 0; i < MB; i++)
    for (int r = 0; r < R; r++) out[i * R + r] = reduce_lanes(lo[i][r], hi[i][r]);
}

/* One instantiation per (R, MB, dtype) so the inner loops see constants; MB
 * is 4 rows of x (2 with R = 8, to stay inside the vector registers) or 1. */
#define DEFINE_DOT(R, MB, DT) \
  static void dot_r##R##_m##MB##_##DT(const float *xf, const uint16_t *w, int64_t K, int64_t k0, int64_t k1, \
                                      float *out) { \
    dot_block(xf, w, K, k0, k1, R, MB, DT, out); \
  }
#define DEFINE_DOTS(R, MB) DEFINE_DOT(R, MB, 0) DEFINE_DOT(R, MB, 1) DEFINE_DOT(R, 1, 0) DEFINE_DOT(R, 1, 1)
DEFINE_DOTS(1, 4) DEFINE_DOTS(2, 4) DEFINE_DOTS(4, 4) DEFINE_DOTS(8, 2)

typedef void (*dot_fn)(const float *, const uint16_t *, int64_t, int64_t, int64_t, float *);

typedef struct dot_pair {
  dot_fn many; /* MB rows of x */
  dot_fn one;  /* one row of x */
  int mb;
} dot_pair;

static const dot_pair *pick_dot(int R, int dtype) {
  static const dot_pair table[4][2] = {
      {{dot_r1_m4_0, dot_r1_m1_0, 4}, {dot_r1_m4_1, dot_r1_m1_1, 4}},
      {{dot_r2_m4_0, dot_r2_m1_0, 4}, {dot_r2_m4_1, dot_r2_m1_1, 4}},
      {{dot_r4_m4_0, dot_r4_m1_0, 4}, {dot_r4_m4_1, dot_r4_m1_1, 4}},
      {{dot_r8_m2_0, dot_r8_m1_0, 2}, {dot_r8_m2_1, dot_r8_m1_1, 2}}};
  int i = R == 1 ? 0 : R == 2 ? 1 : R == 4 ? 2 : R == 8 ? 3 : -1;
  return i < 0 ? NULL : &table[i][dtype];
}

static float round_trip(int dtype, float v) { return kp_to_f32(dtype, kp_from_f32(dtype, v)); }

/* x as fp32, converted once per call (x is tiny next to W). */
static float *x_to_f32(const cpu_call *c) {
  int64_t count = (int64_t)c->m * c->k;
  float *xf = malloc(sizeof(float) * (size_t)count);
  if (xf)
    for (int64_t i = 0; i < count; i++) xf[i] = kp_to_f32(c->dtype, c->x[i]);
  return xf;
}

/* Rows [n0, n1) of the output with blocks of R rows. W rows for output n are n
 * (linear) or n and N+n (gated, fused: gate and up rounded to dtype first, as
 * the two-pass default stores them). */
static void rows_range(const cpu_call *c, const float *xf, int R, int64_t n0, int64_t n1) {
  int64_t N = c->n, K = c->k;
  float g[MAX_MB * MAX_R], u[MAX_MB * MAX_R];
  int64_t n = n0;
  while (n < n1) {
    int r = R;
    while (n + r > n1) r /= 2; /* tail in smaller blocks: the order per output is unchanged */
    const dot_pair *dot = pick_dot(r, c->dtype);
    for (int32_t m = 0; m < c->m;) {
      int mb = c->m - m >= dot->mb ? dot->mb : 1;
      dot_fn f = mb > 1 ? dot->many : dot->one;
      const float *xm = xf + m * K;
      f(xm, c->w + n * K, K, 0, K, g);
      if (c->op == KPICK_OP_GATED) {
        f(xm, c->w + (N + n) * K, K, 0, K, u);
        for (int i = 0; i < mb * r; i++)
          g[i] = cpu_silu_mul(round_trip(c->dtype, g[i]), round_trip(c->dtype, u[i]));
      }
      for (int i = 0; i < mb; i++)
        for (int j = 0; j < r; j++) c->y[(m + i) * N + n + j] = kp_from_f32(c->dtype, g[i * r + j]);
      m += mb;
    }
    n += r;
  }
}

static int blocked(const cpu_call *c, int R) {
  if (!pick_dot(R, c->dtype)) return kp_fail(KPICK_E_ARG, "cpu", "rows per block must be 1, 2, 4 or 8, got %d", R);
  float *xf = x_to_f32(c);
  if (!xf) return kp_fail(KPICK_E_NOMEM, "cpu", "host allocation failed");
  rows_range(c, xf, R, 0, c->n);
  free(xf);
  stages++;
  return KPICK_OK;
}

int cpu_launch_rowblk(const cpu_call *c, const int32_t params[3]) { return blocked(c, params[0]); }

int cpu_gated_by_linear(const cpu_call *c, int (*linear)(const cpu_call *lin)) {
  int64_t N = c->n;
  uint16_t *gu = malloc(sizeof(uint16_t) * (size_t)(c->m * 2 * N));
  if (!gu) return kp_fail(KPICK_E_NOMEM, "cpu", "host allocation failed");
  cpu_call lin = *c;
  lin.op = KPICK_OP_LINEAR;
  lin.n = 2 * N;
  lin.y = gu;
  int st = linear(&lin);
  if (st == KPICK_OK) {
    for (int32_t m = 0; m < c->m; m++)
      for (int64_t n = 0; n < N; n++)
        c->y[m * N + n] = kp_from_f32(c->dtype, cpu_silu_mul(kp_to_f32(c->dtype, gu[m * 2 * N + n]),
                                                             kp_to_f32(c->dtype, gu[m * 2 * N + N + n])));
    stages++;
  }
  free(gu);
  return st;
}

static int plain_linear(const cpu_call *c) { return blocked(c, 1); }

int cpu_launch_plain(const cpu_call *c, const int32_t params[3]) {
  return c->op == KPICK_OP_LINEAR ? plain_linear(c) : cpu_gated_by_linear(c, plain_linear);
}

typedef struct slice {
  const cpu_call *c;
  const float *xf;
  int R;
  int64_t n0, n1;
} slice;

static void *slice_main(void *arg) {
  slice *s = arg;
  rows_range(s->c, s->xf, s->R, s->n0, s->n1);
  return NULL;
}

int cpu_launch_threads(const cpu_call *c, const int32_t params[3]) {
  int R = params[0], T = params[1];
  if (!pick_dot(R, c->dtype) || T < 1 || T > 64)
    return kp_fail(KPICK_E_ARG, "cpu", "threads needs R in {1,2,4,8} and 1..64 threads");
  float *xf = x_to_f32(c);
  if (!xf) return kp_fail(KPICK_E_NOMEM, "cpu", "host allocation failed");
  slice parts[64];
  pthread_t tids[64];
  int started[64] = {0};
  int64_t per = (c->n + T - 1) / T;
  per = (per + R - 1) / R * R;
  for (int t = 0; t < T; t++) {
    int64_t n0 = t * per, n1 = n0 + per < c->n ? n0 + per : c->n;
    parts[t] = (slice){c, xf, R, n0 < c->n ? n0 : c->n, n1};
  }
  /* thread 0's share runs here; a failed pthread_create runs its share inline */
  for (int t = 1; t < T; t++) {
    started[t] = pthread_create(&tids[t], NULL, slice_main, &parts[t]) == 0;
    if (!started[t]) slice_main(&parts[t]);
  }
  slice_main(&parts[0]);
  for (int t = 1; t < T; t++)
    if (started[t]) pthread_join(tids[t], NULL);
  free(xf);
  stages++;
  return KPICK_OK;
}

int cpu_launch_splitk(const cpu_call *c, const int32_t params[3]) {
  int S = params[0];
  if (S < 1 || S > 64) return kp_fail(KPICK_E_ARG, "cpu", "splitk needs 1..64 parts, got %d", S);
  int64_t N = c->n, K = c->k;
  int64_t part = ((K + S - 1) / S + LANES - 1) / LANES * LANES;
  float *xf = x_to_f32(c);
  if (!xf) return kp_fail(KPICK_E_NOMEM, "cpu", "host allocation failed");
  /* each output's partials are summed in part order, as one row of x at a
   * time would; a group of rows of x only shares the W conversion */
  const dot_pair *dot = pick_dot(1, c->dtype);
  int rows = c->op == KPICK_OP_GATED ? 2 : 1;
  for (int64_t n = 0; n < N; n++) {
    for (int32_t m = 0; m < c->m;) {
      int mb = c->m - m >= dot->mb ? dot->mb : 1;
      dot_fn f = mb > 1 ? dot->many : dot->one;
      float acc[2][MAX_MB] = {{0}}, v[MAX_MB];
      for (int r = 0; r < rows; r++)
        for (int64_t k0 = 0; k0 < K; k0 += part) {
          f(xf + m * K, c->w + (n + r * N) * K, K, k0, k0 + part < K ? k0 + part : K, v);
          for (int i = 0; i < mb; i++) acc[r][i] += v[i];
        }
      for (int i = 0; i < mb; i++) {
        float out = acc[0][i];
        if (c->op == KPICK_OP_GATED) out = cpu_silu_mul(round_trip(c->dtype, acc[0][i]), round_trip(c->dtype, acc[1][i]));
        c->y[(m + i) * N + n] = kp_from_f32(c->dtype, out);
      }
      m += mb;
    }
  }
  free(xf);
  stages++;
  return KPICK_OK;
}

/* Test-only, never shipped: each is wrong in one way parity must catch.
 * p0: 0 scaled by 1.1, 1 one low bit flipped (claims bitwise), 2 last element
 * left unwritten, 3 one NaN. */
int cpu_launch_wrong(const cpu_call *c, const int32_t params[3]) {
  uint16_t last = c->y[c->m * c->n - 1];
  int st = blocked(c, 1);
  if (st != KPICK_OK) return st;
  int64_t count = c->m * c->n;
  switch (params[0]) {
    case 0:
      for (int64_t i = 0; i < count; i++) c->y[i] = kp_from_f32(c->dtype, 1.1f * kp_to_f32(c->dtype, c->y[i]));
      break;
    case 1: c->y[count / 2] ^= 1; break;
    case 2: c->y[count - 1] = last; break;
    default: c->y[0] = kp_from_f32(c->dtype, NAN); break;
  }
  return KPICK_OK;
}

/* Words [w0, w1) of the regions laid end to end (a region's count / 4
 * 64-bit words: the tail under 8 bytes is not read, as before regions). */
typedef struct floor_part {
  const cpu_region *regions;
  int32_t nregions;
  int64_t w0, w1;
  uint64_t sum;
} floor_part;

static uint64_t xor_words(const uint64_t *p, int64_t words) {
  uint64_t acc[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= words; i += 8)
    for (int j = 0; j < 8; j++) acc[j] ^= p[i + j];
  for (; i < words; i++) acc[0] ^= p[i];
  for (int j = 1; j < 8; j++) acc[0] ^= acc[j];
  return acc[0];
}

static void *floor_main(void *arg) {
  floor_part *f = arg;
  uint64_t sum = 0;
  int64_t at = 0;
  for (int32_t r = 0; r < f->nregions && at < f->w1; r++) {
    const int64_t words = f->regions[r].bytes / 8;
    const int64_t lo = f->w0 > at ? f->w0 : at, hi = f->w1 < at + words ? f->w1 : at + words;
    if (lo < hi) sum ^= xor_words((const uint64_t *)f->regions[r].w + (lo - at), hi - lo);
    at += words;
  }
  f->sum = sum;
  return NULL;
}

uint64_t cpu_read_floor(const cpu_region *regions, int32_t nregions, int threads) {
  if (threads < 1) threads = 1;
  if (threads > 64) threads = 64;
  int64_t words = 0;
  for (int32_t r = 0; r < nregions; r++) words += regions[r].bytes / 8;
  int64_t per = (words + threads - 1) / threads;
  floor_part parts[64];
  pthread_t tids[64];
  int ok[64] = {0};
  for (int t = 0; t < threads; t++) {
    int64_t w0 = t * per < words ? t * per : words, w1 = w0 + per < words ? w0 + per : words;
    parts[t] = (floor_part){regions, nregions, w0, w1, 0};
  }
  for (int t = 1; t < threads; t++) {
    ok[t] = pthread_create(&tids[t], NULL, floor_main, &parts[t]) == 0;
    if (!ok[t]) floor_main(&parts[t]);
  }
  floor_main(&parts[0]);
  uint64_t sum = parts[0].sum;
  for (int t = 1; t < threads; t++) {
    if (ok[t]) pthread_join(tids[t], NULL);
    sum ^= parts[t].sum;
  }
  return sum;
}
