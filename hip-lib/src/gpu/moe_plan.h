/* moe_plan.h: the moe plan as the device sees it, written by moe.hip's plan
 * kernel and read by every planned moe family (moe.hip's, and the grouped
 * wgmma tile in wgmma.hip). */
#ifndef KPICK_GPU_MOE_PLAN_H
#define KPICK_GPU_MOE_PLAN_H

#include <stdint.h>

#include "../../include/kpick.h"

static constexpr int kp_moe_max_pairs = KPICK_MAX_ROWS * KPICK_MAX_TOPK;
static constexpr int kp_moe_max_items = KPICK_MAX_EXPERTS + kp_moe_max_pairs;

struct kp_moe_plan {
  int32_t nused, nitems, pad[2];
  int32_t used[KPICK_MAX_EXPERTS];      /* active experts, ascending */
  int32_t start[KPICK_MAX_EXPERTS + 1]; /* pairs of used[u]: order[start[u] .. start[u+1]) */
  int32_t order[kp_moe_max_pairs];      /* pair t * topk + j, grouped by expert, rows ascending */
  int32_t pos[kp_moe_max_pairs];        /* where pair i sits in order, -1 for an id outside 0..E-1 */
  int32_t item_u[kp_moe_max_items];     /* work item: expert u, its pairs from item_r0 on, at most C */
  int32_t item_r0[kp_moe_max_items];
};

#endif
