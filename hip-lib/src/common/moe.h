/* moe.h: the host side of the moe op (kpick.h, KPICK_OP_MOE) every backend
 * shares: the routing a problem draws from its seed, the experts a call reads,
 * the check of caller routing, and the fp64 reference. */
#ifndef KPICK_MOE_H
#define KPICK_MOE_H

#include <stdint.h>

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
/* Bytes of one expert's weights: W_gate_up[2n, k] and W_down[k, n]. */
static inline int64_t kp_moe_expert_bytes(int64_t n, int64_t k) { return 3 * n * k * 2; }
/* y[m][j] in fp64 of problem p (op moe) at its active rows, for output
 * columns cols[j] of K (all when cols is NULL). */
int kp_moe_reference(const struct kpick_problem *p, const int64_t *cols, int32_t ncols, double *y);

#endif
