/* mma.hip: mma.wW.uU[.pdl] -- tensor-core skinny GEMM (mma_core.h), one
 * 16-row tile of W per block, W warps splitting K inside the block, U K steps
 * of weight loads in flight per warp. The best kernel at M >= 4 on the H200
 * (shared/reference). Absent where the target has no matrix instruction. */
#include "../common/error.h"
#include "launch.h"
#include "mma_core.h"

typedef void (*kp_mma_fn)(kp_mma_args);

template <int DT, int U, bool PDL>
static kp_mma_fn pick_tiles(int nt) {
  switch (nt) {
    case 1: return kp_mma_kernel<DT, 1, U, KP_MMA_LINEAR, PDL>;
    case 2: return kp_mma_kernel<DT, 2, U, KP_MMA_LINEAR, PDL>;
    case 4: return kp_mma_kernel<DT, 4, U, KP_MMA_LINEAR, PDL>;
    case 8: return kp_mma_kernel<DT, 8, U, KP_MMA_LINEAR, PDL>;
#if defined(KPICK_GPU_CUDA) /* 8 activation rows per instruction: 16 tiles reach 128 rows */
    case 16:
      if constexpr (U <= 8) return kp_mma_kernel<DT, 16, U, KP_MMA_LINEAR, PDL>; /* U = 16 would spill: rows stop at 64 */
      else return nullptr;
#endif
    default: return nullptr;
  }
}

/* PDL rows stop at 16 (space.def): two tiles of 8 */
template <int DT, int U>
static kp_mma_fn pick_tiles_pdl(int nt) {
  switch (nt) {
    case 1: return kp_mma_kernel<DT, 1, U, KP_MMA_LINEAR, true>;
    case 2: return kp_mma_kernel<DT, 2, U, KP_MMA_LINEAR, true>;
    default: return nullptr;
  }
}

/* the (U, PDL) pairs that space.def uses */
template <int DT>
static kp_mma_fn pick(int nt, int u, int pdl) {
  if (!pdl) {
    if (u == 8) return pick_tiles<DT, 8, false>(nt);
    if (u == 16) return pick_tiles<DT, 16, false>(nt);
  }
#if defined(KPICK_GPU_CUDA)
  if (pdl) {
    if (u == 8) return pick_tiles_pdl<DT, 8>(nt);
    if (u == 16) return pick_tiles_pdl<DT, 16>(nt);
  }
#endif
  return nullptr;
}

int kp_mma_has(int u, int pdl) { return pick<KP_DT_BF16>(1, u, pdl) != nullptr; }

int kp_mma_launch(const struct kp_call *c, int warps, int u) {
  const int nt = kp_mma_tiles(c->m);
  const kp_mma_fn k = c->dtype == KP_DT_BF16 ? pick<KP_DT_BF16>(nt, u, c->pdl) : pick<KP_DT_FP16>(nt, u, c->pdl);
  if (!k || warps < 1 || warps > kp_mma_max_warps)
    return kp_fail(KPICK_E_UNSUPPORTED, "mma", "no kernel for m=%d, W=%d, U=%d, pdl=%d", (int)c->m, warps, u,
                   c->pdl);
  kp_mma_args a = {(const uint16_t *)c->x, (const uint16_t *)c->w, (uint16_t *)c->y, nullptr, nullptr,
                   c->m, c->n, c->k};
  const dim3 grid((unsigned)((c->n + 15) / 16)), block(warps * c->warp);
  const hipError_t e = kp_launch(k, grid, block, c->stream, c->pdl != 0, a);
  if (e != hipSuccess) return kp_fail(KPICK_E_DEVICE, "mma launch", "%s", hipGetErrorString(e));
  return KPICK_OK;
}
