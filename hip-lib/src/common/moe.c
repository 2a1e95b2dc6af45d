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

/* Per active expert: its gate/up rows and the down rows of the wanted columns
 * dequantized once (fp8) or widened once, then every pair routed to it; the
 * pairs of a row add in expert order, in fp64. */
int kp_moe_reference(const struct kpick_problem *p, const int64_t *cols, int32_t ncols, double *y) {
  const int64_t N = p->n, K = p->k, E = p->experts;
  const int dt = p->dtype, xt = dt == KPICK_FP8 ? KPICK_BF16 : dt; /* fp8: x and y are bf16 */
  const uint16_t *x = p->x_host;
  const void *wgu = p->w_host, *wd = (const char *)p->w_host + kp_moe_gate_up_bytes(dt, p->experts, N, K);
  const int64_t count = (int64_t)p->m * p->topk;
  int32_t used[KPICK_MAX_EXPERTS];
  const int32_t nused = kp_moe_experts_used(p->ids_host, count, p->experts, used);
  double *xd = malloc(sizeof(double) * (size_t)(p->m * K)), *h = malloc(sizeof(double) * (size_t)N);
  double *gu = malloc(sizeof(double) * (size_t)(2 * N * K)), *dn = malloc(sizeof(double) * (size_t)(ncols * N));
  if (!xd || !h || !gu || !dn) {
    free(xd);
    free(h);
    free(gu);
    free(dn);
    return kp_fail(KPICK_E_NOMEM, "reference", "host allocation failed");
  }
  for (int64_t i = 0; i < p->m * K; i++) xd[i] = kp_to_f32(xt, x[i]);
  memset(y, 0, sizeof(double) * (size_t)p->m * (size_t)ncols);
  for (int32_t u = 0; u < nused; u++) {
    const int64_t e = used[u];
    for (int64_t i = 0; i < 2 * N; i++) weight_row(dt, wgu, E * 2 * N, K, e * 2 * N + i, gu + i * K);
    for (int32_t jc = 0; jc < ncols; jc++) weight_row(dt, wd, E * K, N, e * K + (cols ? cols[jc] : jc), dn + (int64_t)jc * N);
    for (int64_t pair = 0; pair < count; pair++) {
      if (p->ids_host[pair] != e) continue;
      const int64_t t = pair / p->topk;
      const double w = p->gates_host[pair], *xt_row = xd + t * K;
      for (int64_t i = 0; i < N; i++) {
        const double *gr = gu + i * K, *ur = gu + (N + i) * K;
        double g = 0, v = 0;
        for (int64_t c = 0; c < K; c++) {
          g += xt_row[c] * gr[c];
          v += xt_row[c] * ur[c];
        }
        h[i] = g / (1.0 + exp(-g)) * v;
      }
      for (int32_t jc = 0; jc < ncols; jc++) {
        const double *dr = dn + (int64_t)jc * N;
        double acc = 0;
        for (int64_t i = 0; i < N; i++) acc += h[i] * dr[i];
        y[t * ncols + jc] += w * acc;
      }
    }
  }
  free(xd);
  free(h);
  free(gu);
  free(dn);
  return KPICK_OK;
}
