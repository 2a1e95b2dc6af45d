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

/* An fp8 weight of rows x k into dst (KPICK_FP8 layout): drawn in bf16 as
 * fill() draws it, each row times its gain (kp_fp8_row_gain), then packed. */
static int fp8_fill(void *dst, int64_t rows, int64_t k, uint64_t stream) {
  size_t count = (size_t)(rows * k);
  uint16_t *w16 = malloc(count * 2);
  if (!w16) return kp_fail(KPICK_E_NOMEM, "problem_create", "host allocation of %.1f MiB failed", count * 2 / 1048576.0);
  fill(w16, count, KPICK_BF16, stream);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t i = 0; i < k; i++) w16[r * k + i] = kp_f32_to_bf16(kp_fp8_row_gain(r) * kp_bf16_to_f32(w16[r * k + i]));
  kp_fp8_pack(w16, rows, k, dst);
  free(w16);
  return KPICK_OK;
}

/* a failed fill frees the inputs it had made */
#define KP_TRY_FREE(call, p)     \
  do {                           \
    const int st_ = (call);      \
    if (st_ != KPICK_OK) {       \
      kp_free_inputs(p);         \
      return st_;                \
    }                            \
  } while (0)

int kp_fill_inputs(struct kpick_problem *p) {
  p->x_host = malloc(p->x_bytes);
  p->w_host = malloc(p->w_bytes);
  if (!p->x_host || !p->w_host) {
    kp_free_inputs(p);
    return kp_fail(KPICK_E_NOMEM, "problem_create", "host allocation of %.1f MiB failed",
                   (p->x_bytes + p->w_bytes) / 1048576.0);
  }
  fill(p->x_host, p->x_bytes / 2, p->dtype, mix(p->seed * 2 + 1));
  if (p->dtype != KPICK_FP8) {
    fill(p->w_host, p->w_bytes / 2, p->dtype, mix(p->seed * 2 + 2));
  } else if (p->op != KPICK_OP_MOE) {
    KP_TRY_FREE(fp8_fill(p->w_host, p->w_rows, p->k, mix(p->seed * 2 + 2)), p);
  } else { /* W_gate_up [E * 2n, k], then W_down [E * k, n], each packed on its own */
    const int64_t gu_rows = (int64_t)p->experts * 2 * p->n;
    KP_TRY_FREE(fp8_fill(p->w_host, gu_rows, p->k, mix(p->seed * 2 + 2)), p);
    KP_TRY_FREE(fp8_fill((char *)p->w_host + kp_moe_gate_up_bytes(KPICK_FP8, p->experts, p->n, p->k),
                         (int64_t)p->experts * p->k, p->n, mix(p->seed * 2 + 4)), p);
  }
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
