/* moe.c: the moe op's routing draw, experts read and fp64 reference. */
#include "moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../include/kpick.h"
#include "error.h"
#include "fp8.h"
#include "numeric.h"
#include "random.h"

/* a uniform integer in 0..n-1 from counter i of the stream seed */
static int32_t pick(uint64_t seed, uint64_t i, int32_t n) {
  return (int32_t)(kp_mix64(seed ^ kp_mix64(i)) % (uint64_t)n);
}

void kp_moe_draw_routing(int32_t experts, int32_t topk, int32_t rows, int32_t routing, uint64_t seed, int32_t *ids,
                         float *weights) {
  int32_t perm[KPICK_MAX_EXPERTS];
  for (int32_t e = 0; e < experts; e++) perm[e] = e;
  /* the hot set of the skewed routing: the first `hot` of a seeded shuffle */
  const int32_t hot = routing == KPICK_ROUTING_SKEWED ? (2 * topk < experts ? 2 * topk : experts) : experts;
  const uint64_t s_hot = kp_mix64(seed ^ 0x686f74ull), s_row = kp_mix64(seed ^ 0x726f77ull),
                 s_w = kp_mix64(seed ^ 0x776569ull);
  for (int32_t i = 0; i < hot; i++) {
    int32_t j = i + pick(s_hot, (uint64_t)i, experts - i), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  int32_t pool[KPICK_MAX_EXPERTS];
  for (int32_t r = 0; r < rows; r++) {
    memcpy(pool, perm, sizeof(int32_t) * (size_t)hot);
    float sum = 0;
    for (int32_t j = 0; j < topk; j++) {
      const uint64_t c = (uint64_t)r * KPICK_MAX_TOPK + (uint64_t)j;
      int32_t at = j + pick(s_row, c, hot - j), t = pool[j];
      pool[j] = pool[at], pool[at] = t;
      ids[r * topk + j] = pool[j];
      /* in [0.1, 1.1): no weight near zero, so every expert's output counts */
      weights[r * topk + j] = 0.6f + 0.5f * kp_uniform(s_w, c);
      sum += weights[r * topk + j];
    }
    for (int32_t j = 0; j < topk; j++) weights[r * topk + j] /= sum;
  }
}

int32_t kp_moe_experts_used(const int32_t *ids, int64_t count, int32_t experts, int32_t *used) {
  uint8_t seen[KPICK_MAX_EXPERTS] = {0};
  for (int64_t i = 0; i < count; i++)
    if (ids[i] >= 0 && ids[i] < experts) seen[ids[i]] = 1;
  int32_t n = 0;
  for (int32_t e = 0; e < experts; e++)
    if (seen[e]) used[n++] = e;
  return n;
}

int kp_moe_check_ids(const int32_t *ids, int32_t m, int32_t topk, int32_t experts) {
  for (int32_t t = 0; t < m; t++) {
    for (int32_t j = 0; j < topk; j++) {
      const int32_t e = ids[t * topk + j];
      if (e < 0 || e >= experts)
        return kp_fail(KPICK_E_ARG, "moe", "ids[%d][%d] = %d is outside 0..%d", (int)t, (int)j, (int)e,
                       (int)experts - 1);
      for (int32_t i = 0; i < j; i++)
        if (ids[t * topk + i] == e)
          return kp_fail(KPICK_E_ARG, "moe", "row %d routes to expert %d twice (slots %d and %d)", (int)t, (int)e,
                         (int)i, (int)j);
    }
  }
  return KPICK_OK;
}

/* Row r of a moe weight buffer w of `rows` rows x k in dtype, as fp64 into out[k]. */
static void weight_row(int dtype, const void *w, int64_t rows, int64_t k, int64_t r, double *out) {
  if (dtype == KPICK_FP8) {
    kp_fp8_row(w, rows, k, r, out);
    return;
  }
  const uint16_t *row = (const uint16_t *)w + r * k;
  for (int64_t c = 0; c < k; c++) out[c] = kp_to_f32(dtype, row[c]);
}

int kp_moe_reference(const struct kpick_problem *p, const int64_t *cols, int32_t ncols, double *y) {
  const int64_t N = p->n, K = p->k, E = p->experts;
  const int dt = p->dtype, xt = dt == KPICK_FP8 ? KPICK_BF16 : dt; /* fp8: x and y are bf16 */
  const uint16_t *x = p->x_host;
  const void *wgu = p->w_host, *wd = (const char *)p->w_host + kp_moe_gate_up_bytes(dt, p->experts, N, K);
  double *xd = malloc(sizeof(double) * (size_t)K), *h = malloc(sizeof(double) * (size_t)N);
  double *wr = malloc(sizeof(double) * (size_t)(2 * K + N));
  if (!xd || !h || !wr) {
    free(xd);
    free(h);
    free(wr);
    return kp_fail(KPICK_E_NOMEM, "reference", "host allocation failed");
  }
  memset(y, 0, sizeof(double) * (size_t)p->m * (size_t)ncols);
  for (int32_t t = 0; t < p->m; t++) {
    for (int64_t c = 0; c < K; c++) xd[c] = kp_to_f32(xt, x[t * K + c]);
    for (int32_t j = 0; j < p->topk; j++) {
      const int32_t e = p->ids_host[t * p->topk + j];
      const double w = p->gates_host[t * p->topk + j];
      for (int64_t i = 0; i < N; i++) {
        weight_row(dt, wgu, E * 2 * N, K, e * 2 * N + i, wr);
        weight_row(dt, wgu, E * 2 * N, K, e * 2 * N + N + i, wr + K);
        double g = 0, u = 0;
        for (int64_t c = 0; c < K; c++) {
          g += xd[c] * wr[c];
          u += xd[c] * wr[K + c];
        }
        h[i] = g / (1.0 + exp(-g)) * u;
      }
      for (int32_t jc = 0; jc < ncols; jc++) {
        const int64_t col = cols ? cols[jc] : jc;
        weight_row(dt, wd, E * K, N, e * K + col, wr + 2 * K);
        double acc = 0;
        for (int64_t i = 0; i < N; i++) acc += h[i] * wr[2 * K + i];
        y[(int64_t)t * ncols + jc] += w * acc;
      }
    }
  }
  free(xd);
  free(h);
  free(wr);
  return KPICK_OK;
}
