/* data.c: inputs from a counter-based generator, and the fp64 reference. */
#include "data.h"

#include <math.h>
#include <stdlib.h>

#include "error.h"
#include "fp8.h"
#include "moe.h"
#include "numeric.h"

static uint64_t mix(uint64_t z) { /* splitmix64 finaliser */
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void fill(uint16_t *dst, size_t count, int dtype, uint64_t stream) {
  for (size_t i = 0; i < count; i += 4) {
    uint64_t r = mix(stream ^ mix(i));
    for (size_t j = 0; j < 4 && i + j < count; j++) {
      /* 16 random bits -> odd multiples of 2^-16 in (-1, 1): never exactly zero */
      float v = ((float)(int32_t)((r >> (16 * j)) & 0xffffu) - 32767.5f) / 32768.0f;
      dst[i + j] = kp_from_f32(dtype, v);
    }
  }
}

int kp_fill_inputs(struct kpick_problem *p) {
  p->x_host = malloc(p->x_bytes);
  p->w_host = malloc(p->w_bytes);
  if (!p->x_host || !p->w_host) {
    kp_free_inputs(p);
    return kp_fail(KPICK_E_NOMEM, "problem_create", "host allocation of %.1f MiB failed",
                   (p->x_bytes + p->w_bytes) / 1048576.0);
  }
  fill(p->x_host, p->x_bytes / 2, p->dtype, mix(p->seed * 2 + 1));
  if (p->dtype == KPICK_FP8) {
    /* fp8 (linear and gated only): the bf16 weight of the same seed, packed */
    size_t count = (size_t)(p->w_rows * p->k);
    uint16_t *w16 = malloc(count * 2);
    if (!w16) {
      kp_free_inputs(p);
      return kp_fail(KPICK_E_NOMEM, "problem_create", "host allocation of %.1f MiB failed", count * 2 / 1048576.0);
    }
    fill(w16, count, KPICK_BF16, mix(p->seed * 2 + 2));
    for (int64_t r = 0; r < p->w_rows; r++)
      for (int64_t i = 0; i < p->k; i++)
        w16[r * p->k + i] = kp_f32_to_bf16(kp_fp8_row_gain(r) * kp_bf16_to_f32(w16[r * p->k + i]));
    kp_fp8_pack(w16, p->w_rows, p->k, p->w_host);
    free(w16);
    return KPICK_OK;
  }
  fill(p->w_host, p->w_bytes / 2, p->dtype, mix(p->seed * 2 + 2));
  if (p->op == KPICK_OP_MOE) {
    size_t slots = (size_t)p->m_max * (size_t)p->topk;
    p->ids_host = malloc(sizeof(int32_t) * slots);
    p->gates_host = malloc(sizeof(float) * slots);
    if (!p->ids_host || !p->gates_host) {
      kp_free_inputs(p);
      return kp_fail(KPICK_E_NOMEM, "problem_create", "host allocation failed");
    }
    kp_moe_draw_routing(p->experts, p->topk, p->m_max, p->routing, mix(p->seed * 2 + 3), p->ids_host, p->gates_host);
  }
  return KPICK_OK;
}

void kp_free_inputs(struct kpick_problem *p) {
  free(p->x_host);
  free(p->w_host);
  free(p->ids_host);
  free(p->gates_host);
  p->x_host = p->w_host = NULL;
  p->ids_host = NULL;
  p->gates_host = NULL;
}

/* wd: room for one fp8 row, dequantized (NULL for bf16 and fp16) */
static double dot_row(const struct kpick_problem *p, const double *xd, int64_t row, double *wd) {
  double acc = 0;
  if (p->dtype == KPICK_FP8) {
    kp_fp8_row(p->w_host, p->w_rows, p->k, row, wd);
    for (int64_t k = 0; k < p->k; k++) acc += xd[k] * wd[k];
    return acc;
  }
  const uint16_t *w = (const uint16_t *)p->w_host + row * p->k;
  for (int64_t k = 0; k < p->k; k++) acc += xd[k] * (double)kp_to_f32(p->dtype, w[k]);
  return acc;
}

int kp_reference(const struct kpick_problem *p, const int64_t *cols, int32_t ncols, double *y) {
  if (p->op == KPICK_OP_MOE) return kp_moe_reference(p, cols, ncols, y);
  int64_t K = p->k, N = p->n;
  double *xd = malloc(sizeof(double) * (size_t)(p->m * K));
  double *wd = p->dtype == KPICK_FP8 ? malloc(sizeof(double) * (size_t)K) : NULL;
  if (!xd || (p->dtype == KPICK_FP8 && !wd)) {
    free(xd);
    free(wd);
    return kp_fail(KPICK_E_NOMEM, "reference", "host allocation failed");
  }
  const uint16_t *x = p->x_host;
  for (int64_t i = 0; i < p->m * K; i++) xd[i] = kp_to_f32(p->dtype, x[i]);
  for (int32_t j = 0; j < ncols; j++) {
    int64_t n = cols ? cols[j] : j;
    for (int32_t m = 0; m < p->m; m++) {
      double g = dot_row(p, xd + m * K, n, wd);
      if (p->op == KPICK_OP_GATED) {
        double u = dot_row(p, xd + m * K, N + n, wd);
        g = g / (1.0 + exp(-g)) * u;
      }
      y[(int64_t)m * ncols + j] = g;
    }
  }
  free(xd);
  free(wd);
  return KPICK_OK;
}
