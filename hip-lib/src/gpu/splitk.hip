/* splitk.hip: splitk.S[.pdl] -- the mma tile (mma_core.h) with K split over S
 * blocks per 16-row tile as well as over 4 warps inside each, U = 8 steps in
 * flight. Each block writes its fp32 partial tile to the scratch; the last
 * block of a column to arrive (an atomic counter) adds the S partials in
 * split order and stores y: one kernel, one graph node, the same bits on
 * every run, tolerance parity only against the other families. For small N,
 * where one tile per block leaves SMs idle. */
#include "../common/error.h"
#include "launch.h"
#include "mma_core.h"

static constexpr int kp_splitk_warps = 4;
static constexpr int kp_splitk_u = 8;

typedef void (*kp_splitk_fn)(kp_mma_args);

template <int DT, bool PDL>
static kp_splitk_fn pick_tiles(int nt) {
  switch (nt) {
    case 1: return kp_mma_kernel<DT, 1, kp_splitk_u, KP_MMA_SPLITK, PDL>;
    case 2: return kp_mma_kernel<DT, 2, kp_splitk_u, KP_MMA_SPLITK, PDL>;
    case 4: return kp_mma_kernel<DT, 4, kp_splitk_u, KP_MMA_SPLITK, PDL>;
    default: return nullptr; /* splitk rows stop at 32 (space.def) */
  }
}

template <int DT>
static kp_splitk_fn pick(int nt, int pdl) {
#if defined(KPICK_GPU_CUDA)
  if (pdl) return pick_tiles<DT, true>(nt);
#else
  if (pdl) return nullptr;
#endif
  return pick_tiles<DT, false>(nt);
}

int kp_splitk_has(int s, int pdl) { return s >= 2 && s <= 64 && pick<KP_DT_BF16>(1, pdl) != nullptr; }

size_t kp_splitk_temp_bytes(int s, int32_t m, int64_t n) { return (size_t)s * (size_t)m * (size_t)n * sizeof(float); }

size_t kp_splitk_counters(int64_t n) { return (size_t)((n + 15) / 16); }

int kp_splitk_launch(const struct kp_call *c, int s, const struct kp_scratch *ws) {
  const kp_splitk_fn k = c->dtype == KP_DT_BF16 ? pick<KP_DT_BF16>(kp_mma_tiles(c->m), c->pdl)
                                                : pick<KP_DT_FP16>(kp_mma_tiles(c->m), c->pdl);
  if (!k || !kp_splitk_has(s, c->pdl))
    return kp_fail(KPICK_E_UNSUPPORTED, "splitk", "no kernel for m=%d, S=%d, pdl=%d", (int)c->m, s, c->pdl);
  if (ws->temp_bytes < kp_splitk_temp_bytes(s, c->m, c->n) || ws->counters_len < kp_splitk_counters(c->n))
    return kp_fail(KPICK_E_STATE, "splitk", "scratch too small for S=%d, m=%d, n=%lld", s, (int)c->m,
                   (long long)c->n);
  kp_mma_args a = {(const uint16_t *)c->x, (const uint16_t *)c->w, (uint16_t *)c->y, (float *)ws->temp,
                   ws->counters, c->m, c->n, c->k};
  const dim3 grid((unsigned)((c->n + 15) / 16), (unsigned)s), block(kp_splitk_warps * c->warp);
  const hipError_t e = kp_launch(k, grid, block, c->stream, c->pdl != 0, a);
  if (e != hipSuccess) return kp_fail(KPICK_E_DEVICE, "splitk launch", "%s", hipGetErrorString(e));
  return KPICK_OK;
}
