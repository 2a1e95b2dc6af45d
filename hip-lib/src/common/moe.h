/* moe.h: the host side of the moe op (kpick.h, KPICK_OP_MOE) every backend
 * shares: the routing a problem draws from its seed, the experts a call reads,
 * the check of caller routing, and the fp64 reference. */
#ifndef KPICK_MOE_H
#define KPICK_MOE_H

#include <stdint.h>

#include "../../include/kpick.h"
#include "problem.h"

/* ids[rows, topk] and weights[rows, topk] of `routing` (enum kpick_routing)
 * from seed; a row's ids are distinct, its weights positive and sum to 1. */
void kp_moe_draw_routing(int32_t experts, int32_t topk, int32_t rows, int32_t routing, uint64_t seed, int32_t *ids,
                         float *weights);
/* The distinct experts of ids[count], ascending, into used[] (room for
 * KPICK_MAX_EXPERTS); returns how many. Ids outside 0..experts-1 are skipped. */
int32_t kp_moe_experts_used(const int32_t *ids, int64_t count, int32_t experts, int32_t *used);
/* KPICK_OK, or KPICK_E_ARG naming the first id outside 0..experts-1 or the
 * first row that repeats an expert. */
int kp_moe_check_ids(const int32_t *ids, int32_t m, int32_t topk, int32_t experts);
/* Bytes of W_gate_up of E experts ([E * 2n, k]) and of W_down ([E * k, n]) in
 * dtype (fp8: one KPICK_FP8 buffer each, kpick.h); a problem holds the two
 * back to back, W_down from the first's end. */
static inline int64_t kp_moe_gate_up_bytes(int32_t dtype, int32_t experts, int64_t n, int64_t k) {
  return dtype == KPICK_FP8 ? KPICK_FP8_W_BYTES((int64_t)experts * 2 * n, k) : (int64_t)experts * 2 * n * k * 2;
}
static inline int64_t kp_moe_down_bytes(int32_t dtype, int32_t experts, int64_t n, int64_t k) {
  return dtype == KPICK_FP8 ? KPICK_FP8_W_BYTES((int64_t)experts * k, n) : (int64_t)experts * k * n * 2;
}
/* Bytes a call reads of one expert: its codes and scales (fp8), or 2 an element. */
static inline int64_t kp_moe_expert_bytes(int32_t dtype, int64_t n, int64_t k) {
  return dtype == KPICK_FP8 ? 3 * n * k + 4 * (2 * n + k) : 3 * n * k * 2;
}
/* y[m][j] in fp64 of problem p (op moe) at its active rows, for output
 * columns cols[j] of K (all when cols is NULL). */
int kp_moe_reference(const struct kpick_problem *p, const int64_t *cols, int32_t ncols, double *y);

#endif
