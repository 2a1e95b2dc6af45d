/* splitk.hip: splitk.S[.pdl] -- the mma tile (mma_core.h) with K split over S
 * blocks per 16-row tile as well as over 4 warps inside each, U = 8 steps in
 * flight. Each block writes its fp32 partial tile to the scratch; the last
 * block of a column to arrive (an atomic counter) adds the S partials in
 * split order and stores y: one kernel, one graph node, the same bits on
 * every run, tolerance parity only against the other families. For small N,
 * where one tile per block leaves SMs idle. The kernels are those of the
 * splitk rows of space.def (rows.h). */
#include "../common/error.h"
#include "check.h"
#include "launch.h"
#include "mma_core.h"

static constexpr int kp_splitk_warps = 4;
static constexpr int kp_splitk_u = 8;
static constexpr int kp_splitk_max = 64;

template <int ID>
static kp_mma_set kp_splitk_row() {
  constexpr kp_def r = kp_defs[ID];
  if constexpr (r.family == KP_FAM_splitk && (!r.pdl() || kp_pdl_built)) {
    static_assert(r.op == KPICK_OP_LINEAR, "splitk: linear rows only (there is no gated splitk kernel)");
    static_assert(r.p0 >= 2 && r.p0 <= kp_splitk_max, "splitk: S is 2..64");
    return kp_mma_make<kp_splitk_u, KP_MMA_SPLITK, r.pdl(), kp_mma_tiles(r.rows_max)>();
  } else {
    return kp_mma_set{};
  }
}

static const kp_mma_set kp_splitk_sets[KP_NCAND] = {
#define CPU(...)
#define GPU(id, ...) kp_splitk_row<KP_CAND_##id>(),
#include "../space.def"
};

int kp_splitk_built(int32_t cand) { return kp_splitk_sets[cand].k[0][0] != nullptr; }

size_t kp_splitk_temp_bytes(int s, int32_t m, int64_t n) { return (size_t)s * (size_t)m * (size_t)n * sizeof(float); }

size_t kp_splitk_counters(int64_t n) { return (size_t)((n + 15) / 16); }

int kp_splitk_launch(const struct kp_call *c, int s, const struct kp_scratch *ws) {
  const kp_mma_fn k = kp_mma_pick(kp_splitk_sets[c->cand], c->dtype, c->m);
  if (!k || s < 2 || s > kp_splitk_max)
    return kp_fail(KPICK_E_UNSUPPORTED, "splitk", "no kernel for m=%d, S=%d, pdl=%d", (int)c->m, s, c->pdl);
  if (ws->temp_bytes < kp_splitk_temp_bytes(s, c->m, c->n) || ws->counters_len < kp_splitk_counters(c->n))
    return kp_fail(KPICK_E_STATE, "splitk", "scratch too small for S=%d, m=%d, n=%lld", s, (int)c->m,
                   (long long)c->n);
  kp_mma_args a = {(const uint16_t *)c->x, (const uint16_t *)c->w, (uint16_t *)c->y, (float *)ws->temp,
                   ws->counters, c->m, c->n, c->k};
  const dim3 grid((unsigned)((c->n + 15) / 16), (unsigned)s), block(kp_splitk_warps * c->warp);
  KP_GPU(kp_launch(k, grid, block, c->stream, c->pdl != 0, a));
  return KPICK_OK;
}
