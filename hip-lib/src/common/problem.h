/* problem.h: one decode-linear problem, shared by the ABI layer and a backend. */
#ifndef KPICK_PROBLEM_H
#define KPICK_PROBLEM_H

#include <stddef.h>
#include <stdint.h>

struct kpick_problem {
  int32_t op, dtype;
  int64_t n, k;       /* output columns and reduction length */
  int32_t m;          /* active rows */
  int32_t m_max;      /* rows x was generated with */
  int32_t copies;     /* rotating weight copies */
  uint64_t seed;
  int64_t w_rows;     /* n, or 2n for the gated op (moe: 3n per expert) */
  int64_t y_cols;     /* columns of y: n, or k for moe */
  size_t w_bytes;     /* one weight copy (moe: W_gate_up of every expert, then W_down) */
  /* moe only (op KPICK_OP_MOE), else 0 / NULL */
  int32_t experts, topk, routing;
  int32_t *ids_host;  /* [m_max, topk] expert ids, from seed */
  float *gates_host;  /* [m_max, topk] routing weights */
  size_t x_bytes, y_bytes; /* at the active rows */
  void *x_host;       /* the inputs as generated, kept for the fp64 reference */
  void *w_host;       /* weight copy 0 */
  void *be;           /* backend state */
};

#endif
