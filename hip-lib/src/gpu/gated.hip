/* gated.hip: the gated op y = silu(x Wg^T) * (x Wu^T), W = [Wg; Wu] of 2N rows,
 * fused into one kernel in two families:
 *   gated.gemv.rpbR.uU[.pdl]  one warp per output column n streams gate row n
 *                             and up row N+n together (gemv_core.h, NR = 2);
 *   gated.mma.wW.uU[.pdl]     an mma tile of 8 gate rows and their 8 up rows
 *                             (mma_core.h), so each tile yields 8 columns.
 * The epilogue silu(g) * u runs in fp32 and rounds once. The kernels are
 * those of the gated gemv and mma rows of space.def (rows.h). */
#include "../common/error.h"
#include "check.h"
#include "gemv_core.h"
#include "launch.h"
#include "mma_core.h"

/* ---- gated.gemv ---- */
template <int DT, int M, int U, bool PDL>
__global__ void __launch_bounds__(8 * KP_WARP)
    kp_gated_gemv_kernel(const uint16_t *__restrict__ x, const uint16_t *__restrict__ w, uint16_t *__restrict__ y,
                         int64_t N, int64_t K) {
  if (PDL) kp_pdl_trigger();
  const int lane = threadIdx.x % kp_warp;
  const int64_t n = (int64_t)blockIdx.x * (blockDim.x / kp_warp) + threadIdx.x / kp_warp;
  if (n >= N) return; /* no block-wide barrier follows */
  const uint16_t *rows[2] = {w + n * K, w + (N + n) * K};
  float acc[2][M];
  kp_gemv_rows<DT, M, 2, U>(rows, x, K, lane, acc);
  float mine = 0.0f;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float g = kp_warp_sum<kp_warp>(acc[0][m]), u = kp_warp_sum<kp_warp>(acc[1][m]);
    if (lane == m) mine = kp_silu_mul(g, u);
  }
  if (lane < M) y[lane * N + n] = kp_round<DT>(mine);
}

typedef void (*kp_gated_gemv_fn)(const uint16_t *, const uint16_t *, uint16_t *, int64_t, int64_t);

/* The kernels of one gated gemv row (rows.h): k[dtype][m - 1], m = 1 .. rows_max */
struct kp_gated_gemv_set {
  kp_gated_gemv_fn k[2][kp_gemv_max_rows];
};

template <int DT, int U, bool PDL, int M>
static void kp_gated_gemv_fill(kp_gated_gemv_fn (&k)[kp_gemv_max_rows]) {
  k[M - 1] = kp_gated_gemv_kernel<DT, M, U, PDL>;
  if constexpr (M > 1) kp_gated_gemv_fill<DT, U, PDL, M - 1>(k);
}

template <int ID>
static kp_gated_gemv_set kp_gated_gemv_row() {
  constexpr kp_def r = kp_defs[ID];
  kp_gated_gemv_set s = {};
  if constexpr (r.family == KP_FAM_gemv && r.op == KPICK_OP_GATED && (!r.pdl() || kp_pdl_built)) {
    static_assert(r.rows_max >= 1 && r.rows_max <= kp_gemv_max_rows, "gated gemv: rows stop at 8 (one lane stores each)");
    static_assert(r.p0 >= 1 && r.p0 <= 8, "gated gemv: R is 1..8 warps per block");
    kp_gated_gemv_fill<KP_DT_BF16, r.p1, r.pdl(), r.rows_max>(s.k[0]);
    kp_gated_gemv_fill<KP_DT_FP16, r.p1, r.pdl(), r.rows_max>(s.k[1]);
  }
  return s;
}

static const kp_gated_gemv_set kp_gated_gemv_sets[KP_NCAND] = {
#define CPU(...)
#define GPU(id, ...) kp_gated_gemv_row<KP_CAND_##id>(),
#include "../space.def"
};

int kp_gated_gemv_built(int32_t cand) { return kp_gated_gemv_sets[cand].k[0][0] != nullptr; }

int kp_gated_gemv_launch(const struct kp_call *c, int rows_per_block) {
  const kp_gated_gemv_fn k =
      c->m >= 1 && c->m <= kp_gemv_max_rows ? kp_gated_gemv_sets[c->cand].k[c->dtype == KP_DT_BF16 ? 0 : 1][c->m - 1] : nullptr;
  if (!k || rows_per_block < 1 || rows_per_block > 8)
    return kp_fail(KPICK_E_UNSUPPORTED, "gated.gemv", "no kernel for m=%d, R=%d, pdl=%d", (int)c->m, rows_per_block,
                   c->pdl);
  const dim3 grid((unsigned)((c->n + rows_per_block - 1) / rows_per_block)), block(rows_per_block * c->warp);
  KP_GPU(kp_launch(k, grid, block, c->stream, c->pdl != 0, (const uint16_t *)c->x, (const uint16_t *)c->w,
                   (uint16_t *)c->y, c->n, c->k));
  return KPICK_OK;
}

/* ---- gated.mma ---- */
template <int ID>
static kp_mma_set kp_gated_mma_row() {
  constexpr kp_def r = kp_defs[ID];
  if constexpr (r.family == KP_FAM_mma && r.op == KPICK_OP_GATED && (!r.pdl() || kp_pdl_built)) {
    static_assert(r.p0 >= 1 && r.p0 <= kp_mma_max_warps, "gated mma: W is 1..8 warps");
    static_assert(r.p2 == 1 || r.p2 == 2 || r.p2 == 4, "gated mma: R is 1, 2 or 4 tiles a block");
    return kp_mma_make<r.p1, KP_MMA_GATED, r.pdl(), kp_mma_tiles(r.rows_max), r.p2>();
  } else {
    return kp_mma_set{};
  }
}

static const kp_mma_set kp_gated_mma_sets[KP_NCAND] = {
#define CPU(...)
#define GPU(id, ...) kp_gated_mma_row<KP_CAND_##id>(),
#include "../space.def"
};

int kp_gated_mma_built(int32_t cand) { return kp_gated_mma_sets[cand].k[0][0] != nullptr; }

int kp_gated_mma_launch(const struct kp_call *c, int warps) {
  const kp_mma_fn k = kp_mma_pick(kp_gated_mma_sets[c->cand], c->dtype, c->m);
  if (!k || warps < 1 || warps > kp_mma_max_warps)
    return kp_fail(KPICK_E_UNSUPPORTED, "gated.mma", "no kernel for m=%d, W=%d, pdl=%d", (int)c->m, warps, c->pdl);
  kp_mma_args a = {(const uint16_t *)c->x, (const uint16_t *)c->w, (uint16_t *)c->y, nullptr, nullptr,
                   c->m, c->n, c->k};
  const int64_t per_block = 8 * (int64_t)kp_gated_mma_sets[c->cand].r;
  const dim3 grid((unsigned)((c->n + per_block - 1) / per_block)), block(warps * c->warp);
  KP_GPU(kp_launch(k, grid, block, c->stream, c->pdl != 0, a));
  return KPICK_OK;
}
