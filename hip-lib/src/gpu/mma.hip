/* mma.hip: mma.wW.uU[.rR][.pdl] -- tensor-core skinny GEMM (mma_core.h), R
 * 16-row tiles of W per block (sharing each x piece a warp loads), W warps
 * splitting K inside the block, U K steps of weight loads in flight per warp. The best kernel at M >= 4 on the H200
 * (shared/reference). Absent where the target has no matrix instruction.
 * The kernels are those of the linear mma rows of space.def (rows.h). */
#include "../common/error.h"
#include "check.h"
#include "launch.h"
#include "mma_core.h"

template <int ID>
static kp_mma_set kp_mma_row() {
  constexpr kp_def r = kp_defs[ID];
  if constexpr (r.family == KP_FAM_mma && r.op == KPICK_OP_LINEAR && (!r.pdl() || kp_pdl_built)) {
    static_assert(r.p0 >= 1 && r.p0 <= kp_mma_max_warps, "mma: W is 1..8 warps");
    static_assert(r.p2 == 1 || r.p2 == 2 || r.p2 == 4, "mma: R is 1, 2 or 4 tiles a block");
    return kp_mma_make<r.p1, KP_MMA_LINEAR, r.pdl(), kp_mma_tiles(r.rows_max), r.p2>();
  } else {
    return kp_mma_set{};
  }
}

static const kp_mma_set kp_mma_sets[KP_NCAND] = {
#define CPU(...)
#define GPU(id, ...) kp_mma_row<KP_CAND_##id>(),
#include "../space.def"
};

int kp_mma_built(int32_t cand) { return kp_mma_sets[cand].k[0][0] != nullptr; }

int kp_mma_launch(const struct kp_call *c, int warps) {
  const kp_mma_fn k = kp_mma_pick(kp_mma_sets[c->cand], c->dtype, c->m);
  if (!k || warps < 1 || warps > kp_mma_max_warps)
    return kp_fail(KPICK_E_UNSUPPORTED, "mma", "no kernel for m=%d, W=%d, pdl=%d", (int)c->m, warps, c->pdl);
  kp_mma_args a = {(const uint16_t *)c->x, (const uint16_t *)c->w, (uint16_t *)c->y, nullptr, nullptr,
                   c->m, c->n, c->k};
  const kp_mma_set &set = kp_mma_sets[c->cand];
  const int64_t per_block = 16 * (int64_t)set.r;
  const dim3 grid((unsigned)((c->n + per_block - 1) / per_block)), block(warps * c->warp);
  KP_GPU(kp_launch(k, grid, block, c->stream, c->pdl != 0, a));
  return KPICK_OK;
}
