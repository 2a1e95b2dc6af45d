/* moe.c: CPU candidates for the moe op (kpick.h, KPICK_OP_MOE).
 *   moe.loop         the class default, what an engine without kpick runs: per
 *                    active expert, gather its rows, gated.plain (a linear pass
 *                    over 2N rows, then silu-mul), plain down, scatter
 *   moe.grouped.rR   one pass over every (row, expert) pair grouped by expert:
 *                    each expert's weights read once for all its rows, gate/up
 *                    fused with silu-mul, R weight rows per block
 *   moe.threads.tT   moe.grouped.rR with the active experts split over T threads
 * All three are one bitwise class: every (row, expert) pair's down output is
 * computed by the linear/gated kernels of kernels.c (whose bits do not depend
 * on R, MB or threads) and rounded to the dtype, and one combine sums a row's
 * pairs in ascending expert id.
 * fp8 experts (kpick.h): the same three over fp8.c's kernels, each with e's
 * codes and its rows of scales; moe.w8a8.loop (R 0) is the fp8 class default
 * (W8A8: x and each pair's h quantized per row, as an engine's fp8 matmul
 * takes them), moe.w8a16.grouped.rR and .threads.tT the W8A16 class (bf16 x
 * and h, W dequantized), bitwise with each other as the 16-bit three are. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../common/error.h"
#include "../common/fp8.h"
#include "../common/moe.h"
#include "../common/numeric.h"
#include "kernels.h"

#define MAX_THREADS 64

/* A call's (row, slot) pairs grouped by expert: pairs[start[u] .. start[u+1])
 * are those of used[u], rows ascending; a pair is t * topk + j. */
typedef struct moe_plan {
  int32_t used[KPICK_MAX_EXPERTS];
  int32_t start[KPICK_MAX_EXPERTS + 1];
  int32_t nused;
  int32_t *pairs;
} moe_plan;

static int plan_of(const cpu_call *c, moe_plan *pl) {
  const int32_t count = c->m * c->topk;
  pl->nused = kp_moe_experts_used(c->ids, count, c->experts, pl->used);
  pl->pairs = malloc(sizeof(int32_t) * (size_t)count);
  if (!pl->pairs) return kp_fail(KPICK_E_NOMEM, "cpu", "host allocation failed");
  int32_t at = 0;
  for (int32_t u = 0; u < pl->nused; u++) {
    pl->start[u] = at;
    for (int32_t i = 0; i < count; i++)
      if (c->ids[i] == pl->used[u]) pl->pairs[at++] = i;
  }
  pl->start[pl->nused] = at;
  return KPICK_OK;
}

/* Expert e's gate/up call and down call (x, y and m left to the caller):
 * 16-bit weights at e's offset, or fp8 codes there with e's rows of scales. */
static void expert_weights(const cpu_call *c, int32_t e, cpu_call *gate, cpu_call *down) {
  const int64_t N = c->n, K = c->k, E = c->experts;
  const kp_weight_rows g = kp_weight_rows_at(c->dtype, c->w, E * 2 * N, K, e * 2 * N);
  const kp_weight_rows d = kp_weight_rows_at(c->dtype, c->w_down, E * K, N, e * K);
  *gate = (cpu_call){.op = KPICK_OP_GATED, .dtype = c->dtype, .w = g.w, .n = N, .k = K, .w_scales = g.scales};
  *down = (cpu_call){.op = KPICK_OP_LINEAR, .dtype = c->dtype, .w = d.w, .n = K, .k = N, .w_scales = d.scales};
}

/* One expert's pairs: gather their x rows, gate/up (fused with R rows per
 * block, or the class default's two passes when R is 0), down, and each
 * pair's output row into o[pair]. fp8: R 0 is W8A8 (x and each pair's h
 * quantized per row), R > 0 W8A16. */
static int expert_pass(const cpu_call *c, int32_t e, const int32_t *pairs, int32_t count, int32_t R, uint16_t *o) {
  const int64_t N = c->n, K = c->k;
  uint16_t *xg = malloc(sizeof(uint16_t) * (size_t)(count * K));
  uint16_t *h = malloc(sizeof(uint16_t) * (size_t)(count * N));
  uint16_t *od = malloc(sizeof(uint16_t) * (size_t)(count * K));
  int st = xg && h && od ? KPICK_OK : kp_fail(KPICK_E_NOMEM, "cpu", "host allocation failed");
  if (st == KPICK_OK) {
    for (int32_t i = 0; i < count; i++) memcpy(xg + i * K, c->x + (pairs[i] / c->topk) * K, sizeof(uint16_t) * (size_t)K);
    const int32_t p[3] = {R, 0, 0};
    cpu_call gate, down;
    expert_weights(c, e, &gate, &down);
    gate.x = xg, gate.y = h, gate.m = count;
    down.x = h, down.y = od, down.m = count;
    cpu_launcher launch = c->dtype == KPICK_FP8 ? (R > 0 ? cpu_launch_w8a16 : cpu_launch_w8a8)
                                                : (R > 0 ? cpu_launch_rowblk : cpu_launch_plain);
    st = launch(&gate, p);
    if (st == KPICK_OK) st = launch(&down, p);
    if (st == KPICK_OK)
      for (int32_t i = 0; i < count; i++) memcpy(o + pairs[i] * K, od + i * K, sizeof(uint16_t) * (size_t)K);
  }
  free(xg);
  free(h);
  free(od);
  return st;
}

/* y[t] = the row's pair outputs o weighted and summed in fp32 in ascending
 * expert id, rounded once: the one combine of the class. */
static void combine(const cpu_call *c, const uint16_t *o) {
  const int64_t K = c->k;
  for (int32_t t = 0; t < c->m; t++) {
    int32_t order[KPICK_MAX_TOPK];
    for (int32_t j = 0; j < c->topk; j++) { /* insertion sort by expert id */
      int32_t i = j;
      while (i > 0 && c->ids[t * c->topk + order[i - 1]] > c->ids[t * c->topk + j]) order[i] = order[i - 1], i--;
      order[i] = j;
    }
    for (int64_t col = 0; col < K; col++) {
      float sum = 0;
      for (int32_t i = 0; i < c->topk; i++) {
        const int32_t pair = t * c->topk + order[i];
        sum += c->weights[pair] * kp_to_f32(c->dtype, o[(int64_t)pair * K + col]);
      }
      c->y[t * K + col] = kp_from_f32(c->dtype, sum);
    }
  }
}

typedef struct expert_share {
  const cpu_call *c;
  const moe_plan *pl;
  int32_t first, stride, R;
  uint16_t *o;
  int st;
} expert_share;

static void *share_main(void *arg) {
  expert_share *s = arg;
  for (int32_t u = s->first; u < s->pl->nused && s->st == KPICK_OK; u += s->stride)
    s->st = expert_pass(s->c, s->pl->used[u], s->pl->pairs + s->pl->start[u], s->pl->start[u + 1] - s->pl->start[u],
                        s->R, s->o);
  return NULL;
}

/* The active experts over T threads (experts u, u + T, ... each), R as
 * expert_pass takes it; then the combine. */
static int run_moe(const cpu_call *c, int32_t R, int32_t T) {
  if (c->op != KPICK_OP_MOE) return kp_fail(KPICK_E_ARG, "cpu", "a moe candidate got op %d", (int)c->op);
  if (T < 1 || T > MAX_THREADS) return kp_fail(KPICK_E_ARG, "cpu", "moe needs 1..%d threads, got %d", MAX_THREADS, T);
  moe_plan *pl = malloc(sizeof *pl);
  uint16_t *o = malloc(sizeof(uint16_t) * (size_t)c->m * (size_t)c->topk * (size_t)c->k);
  int st = pl && o ? plan_of(c, pl) : kp_fail(KPICK_E_NOMEM, "cpu", "host allocation failed");
  if (st == KPICK_OK) {
    expert_share shares[MAX_THREADS];
    pthread_t tids[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int32_t t = 0; t < T; t++) shares[t] = (expert_share){c, pl, t, T, R, o, KPICK_OK};
    for (int32_t t = 1; t < T; t++) {
      started[t] = pthread_create(&tids[t], NULL, share_main, &shares[t]) == 0;
      if (!started[t]) share_main(&shares[t]);
    }
    share_main(&shares[0]);
    for (int32_t t = 1; t < T; t++)
      if (started[t]) pthread_join(tids[t], NULL);
    for (int32_t t = 0; t < T && st == KPICK_OK; t++) st = shares[t].st;
    if (st == KPICK_OK) combine(c, o);
    free(pl->pairs);
  }
  free(pl);
  free(o);
  return st;
}

int cpu_launch_moe_loop(const cpu_call *c, const int32_t params[3]) {
  const int32_t before = cpu_stages();
  int st = run_moe(c, 0, 1);
  if (st == KPICK_OK) cpu_stages_set(cpu_stages() + 1); /* the combine: 3 passes an expert, then this */
  else cpu_stages_set(before);
  return st;
}

int cpu_launch_moe_grouped(const cpu_call *c, const int32_t params[3]) {
  const int32_t before = cpu_stages();
  int st = run_moe(c, params[0], 1);
  cpu_stages_set(before + (st == KPICK_OK)); /* one pass over the pairs, each expert read once */
  return st;
}

int cpu_launch_moe_threads(const cpu_call *c, const int32_t params[3]) {
  const int32_t before = cpu_stages();
  int st = run_moe(c, params[0], params[1]);
  cpu_stages_set(before + (st == KPICK_OK));
  return st;
}
