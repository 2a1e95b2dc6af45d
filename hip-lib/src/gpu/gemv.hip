/* gemv.hip: gemv.rpbR.uU[.pdl] -- one warp per output column n of y[M, N].
 *
 * The warp streams W row n in 16-byte pieces (U pieces in flight per lane), the
 * M activation rows (1..8) stay in registers, fp32 FMAs, a butterfly reduction,
 * and lane m stores y[m, n]. R warps (rows) share a block. Output bits do not
 * depend on R or U (gemv_core.h says why). Best at M = 1..2: at larger M the
 * FMA pipe, not memory, becomes the limit (the mma family takes over).
 * The kernels are those of the linear gemv rows of space.def (rows.h). */
#include "../common/error.h"
#include "check.h"
#include "gemv_core.h"
#include "launch.h"

template <int DT, int M, int U, bool PDL>
__global__ void __launch_bounds__(8 * KP_WARP)
    kp_gemv_kernel(const uint16_t *__restrict__ x, const uint16_t *__restrict__ w, uint16_t *__restrict__ y,
                   int64_t N, int64_t K) {
  if (PDL) kp_pdl_trigger();
  const int lane = threadIdx.x % kp_warp;
  const int64_t n = (int64_t)blockIdx.x * (blockDim.x / kp_warp) + threadIdx.x / kp_warp;
  if (n >= N) return; /* no block-wide barrier follows */
  const uint16_t *rows[1] = {w + n * K};
  float acc[1][M];
  kp_gemv_rows<DT, M, 1, U>(rows, x, K, lane, acc);
  float mine = 0.0f;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float s = kp_warp_sum<kp_warp>(acc[0][m]);
    if (lane == m) mine = s;
  }
  if (lane < M) y[lane * N + n] = kp_round<DT>(mine);
}

typedef void (*kp_gemv_fn)(const uint16_t *, const uint16_t *, uint16_t *, int64_t, int64_t);

/* The kernels of one gemv row of space.def (rows.h): k[dtype][m - 1] for m =
 * 1 .. its rows_max; empty for rows of other families. */
struct kp_gemv_set {
  kp_gemv_fn k[2][kp_gemv_max_rows];
};

template <int DT, int U, bool PDL, int M>
static void kp_gemv_fill(kp_gemv_fn (&k)[kp_gemv_max_rows]) {
  k[M - 1] = kp_gemv_kernel<DT, M, U, PDL>;
  if constexpr (M > 1) kp_gemv_fill<DT, U, PDL, M - 1>(k);
}

template <int ID>
static kp_gemv_set kp_gemv_row() {
  constexpr kp_def r = kp_defs[ID];
  kp_gemv_set s = {};
  if constexpr (r.family == KP_FAM_gemv && r.op == KPICK_OP_LINEAR && (!r.pdl() || kp_pdl_built)) {
    static_assert(r.rows_max >= 1 && r.rows_max <= kp_gemv_max_rows, "gemv: rows stop at 8 (one lane stores each)");
    static_assert(r.p0 >= 1 && r.p0 <= 8, "gemv: R is 1..8 warps per block");
    kp_gemv_fill<KP_DT_BF16, r.p1, r.pdl(), r.rows_max>(s.k[0]);
    kp_gemv_fill<KP_DT_FP16, r.p1, r.pdl(), r.rows_max>(s.k[1]);
  }
  return s;
}

static const kp_gemv_set kp_gemv_sets[KP_NCAND] = {
#define CPU(...)
#define GPU(id, ...) kp_gemv_row<KP_CAND_##id>(),
#include "../space.def"
};

int kp_gemv_built(int32_t cand) { return kp_gemv_sets[cand].k[0][0] != nullptr; }

int kp_gemv_launch(const struct kp_call *c, int rows_per_block) {
  const kp_gemv_fn k = c->m >= 1 && c->m <= kp_gemv_max_rows ? kp_gemv_sets[c->cand].k[c->dtype == KP_DT_BF16 ? 0 : 1][c->m - 1] : nullptr;
  if (!k || rows_per_block < 1 || rows_per_block > 8)
    return kp_fail(KPICK_E_UNSUPPORTED, "gemv", "no kernel for m=%d, R=%d, pdl=%d", (int)c->m, rows_per_block, c->pdl);
  const dim3 grid((unsigned)((c->n + rows_per_block - 1) / rows_per_block)), block(rows_per_block * c->warp);
  KP_GPU(kp_launch(k, grid, block, c->stream, c->pdl != 0, (const uint16_t *)c->x, (const uint16_t *)c->w,
                   (uint16_t *)c->y, c->n, c->k));
  return KPICK_OK;
}
