/* fp8.hip: the GPU kernels of fp8 weights (kpick.h, KPICK_FP8: e4m3 codes,
 * then one fp32 scale per weight row at the next 16-byte boundary; x and y
 * bf16), for the linear and gated ops.
 *   w8a16.gemv.rpbR.uU[.nN][.pdl]   W8A16: one warp per N output rows (N = 1,
 *        2 or 4; gated: their gate and up rows), R warps a block, U 16-byte
 *        pieces of codes (16 weights) in flight per weight row and lane. The
 *        codes are decoded in registers (exact: every e4m3 value is an fp16
 *        and an fp32), multiplied with the bf16 x in fp32 FMAs, the lane sums
 *        reduced by a fixed butterfly, and the row's scale applied once:
 *        y = bf16(sum * scale[n]); gated: silu(bf16(g)) * bf16(u), as the CPU
 *        rows round them. Each lane takes its pieces in chunk order, element
 *        by element, so R, U and N never change a bit: one class head per op.
 *   w8a16.mma.wW.uU[.pdl]   W8A16 on the tensor cores (NVIDIA sm_89+): a
 *        16-row tile of W a block, codes decoded exactly to bf16, m16n8k16
 *        with fp32 sums, W warps splitting K (bits depend on W alone).
 *   w8a8 quant   the W8A8 default's first node (blaslt.cpp runs the fp8
 *        matmul after it): each row of x quantized to e4m3 with its own scale
 *        amax / 448 (1 for a zero row), as common/numeric.h's kp_e4m3_quant_row
 *        does: the same division and the same round-to-nearest-even encoding,
 *        so the codes are those of the CPU's w8a8.plain.
 *   w8a8 epilogue  y = bf16(sum * x scale * W scale) (gated: its silu-mul)
 *        from the fp32 sums of a matmul run with unit scales, where the BLAS
 *        cannot apply per-row scales itself (blaslt.cpp says when).
 * The decode of a code pair is one cvt.rn.f16x2.e4m3x2 on NVIDIA sm_89 and
 * later; elsewhere (HIP, older NVIDIA) bit moves into an fp32 scaled by 2^120,
 * as cpu/fp8.c decodes, exact for subnormal codes too.
 * The kernels are those of the w8a16 and w8a16mma rows of space.def (rows.h). */
#include "../common/error.h"
#include "check.h"
#include "dtype.h"
#include "fp8_core.h"
#include "gemv_core.h"
#include "launch.h"

/* ---- w8a16.gemv ---- */

/* activation rows a w8a16 kernel holds; lane m reduces and stores row m */
static constexpr int kp_w8a16_max_rows = 16;

/* One batch of B pieces (16 codes each) of every weight row this warp serves,
 * all loads issued before the first use (the first batch also holds the PDL
 * wait). A piece is taken in two halves of 8 weights: decode the NW rows'
 * halves, then for each activation row one 16-byte load of its 8 x values and
 * the NW x 8 FMAs. */
template <int M, int NW, int B>
__device__ __forceinline__ void kp_w8a16_batch(const uint8_t *const (&w)[NW], const uint16_t *x, int64_t K, int64_t off,
                                               float (&acc)[NW][M], bool first) {
  constexpr int64_t chunk = (int64_t)kp_warp * 16;
  kp_v16 wv[NW][B];
#pragma unroll
  for (int r = 0; r < NW; ++r)
#pragma unroll
    for (int b = 0; b < B; ++b) wv[r][b] = kp_ld_stream(w[r] + off + b * chunk);
  kp_batch_fence(first);
#pragma unroll
  for (int b = 0; b < B; ++b) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float wf[NW][8];
#pragma unroll
      for (int r = 0; r < NW; ++r) kp_e4m3_unpack8(h ? wv[r][b].z : wv[r][b].x, h ? wv[r][b].w : wv[r][b].y, wf[r]);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[8];
        kp_unpack8<KP_DT_BF16>(kp_ld_act(x + m * K + off + b * chunk + h * 8), xf);
#pragma unroll
        for (int r = 0; r < NW; ++r) {
          float a = acc[r][m];
#pragma unroll
          for (int e = 0; e < 8; ++e) a = fmaf(wf[r][e], xf[e], a);
          acc[r][m] = a;
        }
      }
    }
  }
}

/* NR output rows from n0 (N >= n0 + 1; rows past N repeat row N - 1 and are
 * not stored), each the dot of its weight row (linear) or of its gate row and
 * up row N + n (gated) with the M rows of x. */
template <int M, int NR, int U, bool GATED, bool PDL>
__global__ void __launch_bounds__(8 * KP_WARP)
    kp_w8a16_kernel(const uint16_t *__restrict__ x, const uint8_t *__restrict__ w, uint16_t *__restrict__ y, int64_t N,
                    int64_t K, int64_t w_rows) {
  constexpr int NW = GATED ? 2 * NR : NR;
  if (PDL) kp_pdl_trigger();
  const int lane = threadIdx.x % kp_warp;
  const int64_t n0 = ((int64_t)blockIdx.x * (blockDim.x / kp_warp) + threadIdx.x / kp_warp) * NR;
  if (n0 >= N) return; /* no block-wide barrier follows */
  const float *scales = reinterpret_cast<const float *>(w + KPICK_FP8_SCALES_AT(w_rows, K));
  const uint8_t *rows[NW];
#pragma unroll
  for (int r = 0; r < NR; ++r) {
    const int64_t n = n0 + r < N ? n0 + r : N - 1;
    rows[r] = w + n * K + lane * 16;
    if (GATED) rows[NR + r] = w + (N + n) * K + lane * 16;
  }
  const uint16_t *xl = x + lane * 16;
  float acc[NW][M];
#pragma unroll
  for (int r = 0; r < NW; ++r)
#pragma unroll
    for (int m = 0; m < M; ++m) acc[r][m] = 0.0f;
  constexpr int64_t chunk = (int64_t)kp_warp * 16;
  const int64_t nfull = K / chunk, tail = K - nfull * chunk;
  int64_t c = 0;
  bool first = true;
#pragma unroll 1
  for (; c + U <= nfull; c += U, first = false) kp_w8a16_batch<M, NW, U>(rows, xl, K, c * chunk, acc, first);
#pragma unroll 1
  for (; c < nfull; ++c, first = false) kp_w8a16_batch<M, NW, 1>(rows, xl, K, c * chunk, acc, first);
  if (lane * 16 < tail) kp_w8a16_batch<M, NW, 1>(rows, xl, K, nfull * chunk, acc, first);
  kp_batch_fence(true); /* lanes that loaded nothing still wait before any store */
#pragma unroll
  for (int r = 0; r < NR; ++r) {
    const int64_t n = n0 + r;
    float mine = 0.0f;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float s = kp_warp_sum<kp_warp>(acc[r][m]);
      if (GATED) {
        const float u = kp_warp_sum<kp_warp>(acc[NR + r][m]);
        if (lane == m && n < N)
          mine = kp_silu_mul(kp_bf16_round(s * scales[n]), kp_bf16_round(u * scales[N + n]));
      } else if (lane == m && n < N) {
        mine = s * scales[n];
      }
    }
    if (lane < M && n < N) y[lane * N + n] = kp_round<KP_DT_BF16>(mine);
  }
}

typedef void (*kp_w8a16_fn)(const uint16_t *, const uint8_t *, uint16_t *, int64_t, int64_t, int64_t);

/* The kernels of one w8a16 row of space.def (rows.h): k[m - 1], m = 1 ..
 * its rows_max; empty for rows of other families. */
struct kp_w8a16_set {
  kp_w8a16_fn k[kp_w8a16_max_rows];
};

template <int NR, int U, bool GATED, bool PDL, int M>
static void kp_w8a16_fill(kp_w8a16_fn (&k)[kp_w8a16_max_rows]) {
  k[M - 1] = kp_w8a16_kernel<M, NR, U, GATED, PDL>;
  if constexpr (M > 1) kp_w8a16_fill<NR, U, GATED, PDL, M - 1>(k);
}

template <int ID>
static kp_w8a16_set kp_w8a16_row() {
  constexpr kp_def r = kp_defs[ID];
  kp_w8a16_set s = {};
  if constexpr (r.family == KP_FAM_w8a16 && (!r.pdl() || kp_pdl_built)) {
    static_assert(r.rows_max >= 1 && r.rows_max <= kp_w8a16_max_rows, "w8a16: rows stop at 16 (one lane stores each)");
    static_assert(r.p0 >= 1 && r.p0 <= 8, "w8a16: R is 1..8 warps per block");
    static_assert(r.p1 == 1 || r.p1 == 2 || r.p1 == 4 || r.p1 == 8, "w8a16: U is 1, 2, 4 or 8 pieces in flight");
    static_assert(r.p2 == 1 || r.p2 == 2 || r.p2 == 4, "w8a16: N is 1, 2 or 4 output rows a warp");
    static_assert((r.op == KPICK_OP_GATED ? 2 : 1) * r.p2 <= 4, "w8a16: at most 4 weight rows a warp (registers)");
    kp_w8a16_fill<r.p2, r.p1, r.op == KPICK_OP_GATED, r.pdl(), r.rows_max>(s.k);
  }
  return s;
}

static const kp_w8a16_set kp_w8a16_sets[KP_NCAND] = {
#define CPU(...)
#define GPU(id, ...) kp_w8a16_row<KP_CAND_##id>(),
#include "../space.def"
};

int kp_w8a16_built(int32_t cand) { return kp_w8a16_sets[cand].k[0] != nullptr; }

int kp_w8a16_launch(const struct kp_call *c, int rows_per_block, int rows_per_warp) {
  const kp_w8a16_fn k = c->m >= 1 && c->m <= kp_w8a16_max_rows ? kp_w8a16_sets[c->cand].k[c->m - 1] : nullptr;
  if (!k || rows_per_block < 1 || rows_per_block > 8 || rows_per_warp < 1)
    return kp_fail(KPICK_E_UNSUPPORTED, "w8a16", "no kernel for m=%d, R=%d, pdl=%d", (int)c->m, rows_per_block, c->pdl);
  if (c->dtype != KPICK_FP8 || c->k % 16 != 0)
    return kp_fail(KPICK_E_UNSUPPORTED, "w8a16", "takes fp8 weights with K %% 16 == 0 (dtype %d, K %lld)", (int)c->dtype,
                   (long long)c->k);
  const int64_t per_block = (int64_t)rows_per_block * rows_per_warp;
  const dim3 grid((unsigned)((c->n + per_block - 1) / per_block)), block(rows_per_block * c->warp);
  KP_GPU(kp_launch(k, grid, block, c->stream, c->pdl != 0, (const uint16_t *)c->x, (const uint8_t *)c->w,
                   (uint16_t *)c->y, c->n, c->k, kp_w_rows(c->op, c->n)));
  return KPICK_OK;
}

/* ---- w8a16.mma: the tensor-core W8A16 tile ----
 * One block per R tiles of 16 weight rows (linear: outputs n0..n0+16R-1;
 * gated: tile r holds gate rows n0+8r..n0+8r+7 over their up rows, so a lane
 * holds g and u of the same output), W warps splitting K in 64-wide blocks
 * (warp w takes blocks w, w + W, ...), U blocks of weight loads a batch, each
 * batch's loads issued while the batch before it computes (two register
 * sets). In a 64-wide block lane l (group g = l / 4, quarter q = l % 4) loads
 * 16 codes of each of its tile rows g and g + 8 and the 16 bf16 x values of x
 * row g (and g + 8 past 8 rows) at k = 16 q: four m16n8k16 bf16 steps, step s
 * taking codes and x values 4s..4s+3 of the quarter. That is a permutation of
 * k applied alike to both operands, so the sums are the plain dot products.
 * The R tiles of a warp share each x load: R = 2 halves x's bytes from L2 a
 * weight byte (at rows 9-16, x's pieces a block are twice W's at R = 1).
 * Codes become bf16 exactly (fp8_core.h's kp_e4m3_bf16x2: every finite e4m3
 * value is a bf16), x goes in as loaded. The warps' fp32 tiles are
 * summed in warp order through shared memory: bits depend on W (one class
 * head per W), never on U or R. NVIDIA sm_89 and later (the e4m3
 * conversion); absent elsewhere. */
static constexpr int kp_w8a16_mma_max_warps = 8;

#if defined(KPICK_GPU_CUDA) && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890)
#define KP_W8A16_MMA 1
#endif

__device__ __forceinline__ void kp_mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(KP_W8A16_MMA)
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __builtin_trap();
#endif
}

/* T x-row tiles of 8 (M <= 8 T), R weight tiles of 16 rows a warp */
template <int T, int U, int R, bool GATED, bool PDL>
__global__ void __launch_bounds__(kp_w8a16_mma_max_warps * 32)
    kp_w8a16_mma_kernel(const uint16_t *__restrict__ x, const uint8_t *__restrict__ w, uint16_t *__restrict__ y, int32_t M,
                        int64_t N, int64_t K, int64_t w_rows) {
#if defined(KP_W8A16_MMA)
  __shared__ float red[kp_w8a16_mma_max_warps][32][4 * T * R];
  if (PDL) kp_pdl_trigger();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  const int g = lane / 4, q = lane % 4;
  /* each tile's two weight rows of this lane (clamped to the last real one: loaded, never stored) */
  const uint8_t *w0[R], *w1[R];
  int64_t n_out[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    int64_t r0, r1;
    if (GATED) {
      n_out[r] = ((int64_t)blockIdx.x * R + r) * 8 + g;
      const int64_t n = n_out[r] < N ? n_out[r] : N - 1;
      r0 = n;
      r1 = N + n;
    } else {
      n_out[r] = ((int64_t)blockIdx.x * R + r) * 16 + g;
      r0 = n_out[r] < N ? n_out[r] : N - 1;
      r1 = n_out[r] + 8 < N ? n_out[r] + 8 : N - 1;
    }
    w0[r] = w + r0 * K + q * 16;
    w1[r] = w + r1 * K + q * 16;
  }
  /* the lane's x rows g and g + 8 (zeros past M) */
  const uint16_t *xr[T];
  bool xv[T];
#pragma unroll
  for (int t = 0; t < T; ++t) {
    xv[t] = g + 8 * t < M;
    xr[t] = x + (int64_t)(xv[t] ? g + 8 * t : 0) * K + q * 16;
  }
  float acc[R][T][4];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[r][t][i] = 0.0f;
  const int64_t nblocks = (K + 63) / 64, step = (int64_t)nwarps * U;
  /* a batch: the U blocks b, b + W, ... of this warp; its loads are issued a
   * batch ahead (two register sets), so a warp always has one in flight */
  auto load = [&](int64_t b, kp_v16(&wa)[R][U], kp_v16(&wb)[R][U], bool(&in)[U]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t kb = b + (int64_t)u * nwarps;
      in[u] = kb < nblocks && kb * 64 + q * 16 < K; /* K % 16 == 0: a quarter is all in or all out */
#pragma unroll
      for (int r = 0; r < R; ++r) {
        wa[r][u] = in[u] ? kp_ld_stream(w0[r] + kb * 64) : kp_v16{0u, 0u, 0u, 0u};
        wb[r][u] = in[u] ? kp_ld_stream(w1[r] + kb * 64) : kp_v16{0u, 0u, 0u, 0u};
      }
    }
  };
  auto compute = [&](int64_t b, const kp_v16(&wa)[R][U], const kp_v16(&wb)[R][U], const bool(&in)[U]) {
    kp_v16 xa[U][T], xb[U][T];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int t = 0; t < T; ++t) {
        const int64_t kb = b + (int64_t)u * nwarps;
        const bool ok = in[u] && xv[t];
        xa[u][t] = ok ? kp_ld_act(xr[t] + kb * 64) : kp_v16{0u, 0u, 0u, 0u};
        xb[u][t] = ok ? kp_ld_act(xr[t] + kb * 64 + 8) : kp_v16{0u, 0u, 0u, 0u};
      }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const uint32_t ra[4] = {wa[r][u].x, wa[r][u].y, wa[r][u].z, wa[r][u].w};
        const uint32_t rb[4] = {wb[r][u].x, wb[r][u].y, wb[r][u].z, wb[r][u].w};
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          const uint32_t a[4] = {kp_e4m3_bf16x2<0>(ra[s]), kp_e4m3_bf16x2<0>(rb[s]), kp_e4m3_bf16x2<1>(ra[s]),
                                 kp_e4m3_bf16x2<1>(rb[s])};
#pragma unroll
          for (int t = 0; t < T; ++t) {
            const uint32_t xs[8] = {xa[u][t].x, xa[u][t].y, xa[u][t].z, xa[u][t].w,
                                    xb[u][t].x, xb[u][t].y, xb[u][t].z, xb[u][t].w};
            kp_mma_bf16_16816(acc[r][t], a, xs[2 * s], xs[2 * s + 1]);
          }
        }
      }
  };
  kp_v16 wa0[R][U], wb0[R][U], wa1[R][U], wb1[R][U];
  bool in0[U], in1[U];
  int64_t b = warp;
  if (b < nblocks) load(b, wa0, wb0, in0);
  kp_batch_fence(true); /* the first weights are in flight; x only after the wait (every warp) */
  /* unrolled by two so each register set keeps a fixed name (no local memory) */
#pragma unroll 1
  while (b < nblocks) {
    if (b + step < nblocks) load(b + step, wa1, wb1, in1);
    compute(b, wa0, wb0, in0);
    b += step;
    if (b >= nblocks) break;
    if (b + step < nblocks) load(b + step, wa0, wb0, in0);
    compute(b, wa1, wb1, in1);
    b += step;
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) red[warp][lane][4 * (r * T + t) + i] = acc[r][t][i];
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float v = red[0][lane][4 * (r * T + t) + i];
        for (int j = 1; j < nwarps; ++j) v += red[j][lane][4 * (r * T + t) + i];
        acc[r][t][i] = v;
      }
  const float *scales = reinterpret_cast<const float *>(w + KPICK_FP8_SCALES_AT(w_rows, K));
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int m = 8 * t + 2 * q + c;
        const int64_t n = n_out[r];
        if (m >= M) continue;
        if (GATED) {
          if (n < N)
            y[(int64_t)m * N + n] = kp_round<KP_DT_BF16>(
                kp_silu_mul(kp_bf16_round(acc[r][t][c] * scales[n]), kp_bf16_round(acc[r][t][2 + c] * scales[N + n])));
        } else {
          if (n < N) y[(int64_t)m * N + n] = kp_round<KP_DT_BF16>(acc[r][t][c] * scales[n]);
          if (n + 8 < N) y[(int64_t)m * N + n + 8] = kp_round<KP_DT_BF16>(acc[r][t][2 + c] * scales[n + 8]);
        }
      }
#else
  __builtin_trap();
#endif
}

typedef void (*kp_w8a16_mma_fn)(const uint16_t *, const uint8_t *, uint16_t *, int32_t, int64_t, int64_t, int64_t);

/* The kernels of one w8a16mma row (rows.h): k[0] for rows 1..8, k[1] for 9..16; r its weight tiles a warp */
struct kp_w8a16_mma_set {
  kp_w8a16_mma_fn k[2];
  int r;
};

template <int ID>
static kp_w8a16_mma_set kp_w8a16_mma_row() {
  constexpr kp_def r = kp_defs[ID];
  kp_w8a16_mma_set s = {};
  if constexpr (r.family == KP_FAM_w8a16mma && (!r.pdl() || kp_pdl_built)) {
    constexpr int R = r.p2;
    static_assert(r.rows_max >= 1 && r.rows_max <= 16, "w8a16.mma: rows stop at 16 (two tiles of 8)");
    static_assert(r.p0 >= 1 && r.p0 <= kp_w8a16_mma_max_warps, "w8a16.mma: W is 1..8 warps");
    static_assert(r.p1 == 1 || r.p1 == 2 || r.p1 == 4, "w8a16.mma: U is 1, 2 or 4 blocks in flight");
    static_assert(R == 1 || (R == 2 && r.p1 <= 2) || (R == 4 && r.p1 == 1), "w8a16.mma: R is 1, 2 with U <= 2, or 4 with U = 1 (registers)");
    constexpr bool gated = r.op == KPICK_OP_GATED;
    s.k[0] = kp_w8a16_mma_kernel<1, r.p1, R, gated, r.pdl()>;
    if constexpr (r.rows_max > 8) s.k[1] = kp_w8a16_mma_kernel<2, r.p1, R, gated, r.pdl()>;
    s.r = R;
  }
  return s;
}

static const kp_w8a16_mma_set kp_w8a16_mma_sets[KP_NCAND] = {
#define CPU(...)
#define GPU(id, ...) kp_w8a16_mma_row<KP_CAND_##id>(),
#include "../space.def"
};

int kp_w8a16_mma_built(int32_t cand) {
#if defined(KP_W8A16_MMA)
  return kp_w8a16_mma_sets[cand].k[0] != nullptr;
#else
  return 0;
#endif
}

int kp_w8a16_mma_launch(const struct kp_call *c, int warps) {
  const kp_w8a16_mma_set &set = kp_w8a16_mma_sets[c->cand];
  const kp_w8a16_mma_fn k = c->m >= 1 && c->m <= 8 ? set.k[0] : c->m <= 16 ? set.k[1] : nullptr;
  if (!k || warps < 1 || warps > kp_w8a16_mma_max_warps || c->warp != 32)
    return kp_fail(KPICK_E_UNSUPPORTED, "w8a16.mma", "no kernel for m=%d, W=%d, pdl=%d", (int)c->m, warps, c->pdl);
  if (c->dtype != KPICK_FP8 || c->k % 16 != 0)
    return kp_fail(KPICK_E_UNSUPPORTED, "w8a16.mma", "takes fp8 weights with K %% 16 == 0 (dtype %d, K %lld)", (int)c->dtype,
                   (long long)c->k);
  const bool gated = c->op == KPICK_OP_GATED;
  const int64_t per_block = (gated ? 8 : 16) * (int64_t)set.r, w_rows = gated ? 2 * c->n : c->n;
  const dim3 grid((unsigned)((c->n + per_block - 1) / per_block)), block(warps * 32);
  KP_GPU(kp_launch(k, grid, block, c->stream, c->pdl != 0, (const uint16_t *)c->x, (const uint8_t *)c->w, (uint16_t *)c->y,
                   c->m, c->n, c->k, w_rows));
  return KPICK_OK;
}

/* ---- w8a8: the activation quant and the unit-scale epilogue ---- */

static constexpr int kp_quant_threads = 256;

/* One block per row of x: amax, scale = amax / 448 (1 for a zero row), codes
 * of x / scale. K % 8 == 0: 16-byte pieces of 8 values. LET_NEXT: a PDL matmul
 * after it (w8a8.wgmma.*.pdl) may start streaming its weights at once; it still
 * waits for this grid's end before it reads the codes. */
template <bool LET_NEXT>
__global__ void __launch_bounds__(kp_quant_threads)
    kp_e4m3_quant_kernel(const uint16_t *__restrict__ x, uint8_t *__restrict__ xq, float *__restrict__ sx, int64_t K) {
  if (LET_NEXT) kp_pdl_trigger();
  __shared__ float part[kp_quant_threads / 32];
  const int64_t row = blockIdx.x;
  const uint16_t *xr = x + row * K;
  float amax = 0.0f;
  for (int64_t i = threadIdx.x; i < K / 8; i += blockDim.x) {
    float f[8];
    kp_unpack8<KP_DT_BF16>(kp_ld_act(xr + i * 8), f);
#pragma unroll
    for (int e = 0; e < 8; ++e) amax = fmaxf(amax, fabsf(f[e]));
  }
  amax = kp_block_max(amax, part);
  const float s = amax > 0.0f ? amax / 448.0f : 1.0f;
  if (threadIdx.x == 0) sx[row] = s;
  for (int64_t i = threadIdx.x; i < K / 8; i += blockDim.x) {
    float f[8];
    kp_unpack8<KP_DT_BF16>(kp_ld_act(xr + i * 8), f);
    uint32_t lo = 0, hi = 0;
#pragma unroll
    for (int e = 0; e < 4; ++e) lo |= (uint32_t)kp_e4m3_encode(f[e] / s) << (8 * e);
#pragma unroll
    for (int e = 0; e < 4; ++e) hi |= (uint32_t)kp_e4m3_encode(f[4 + e] / s) << (8 * e);
    reinterpret_cast<uint2 *>(xq + row * K)[i] = make_uint2(lo, hi);
  }
}

int kp_e4m3_quant_launch(const void *x, void *xq, float *sx, int32_t m, int64_t k, int let_next, hipStream_t stream) {
  if (k % 8 != 0) return kp_fail(KPICK_E_UNSUPPORTED, "w8a8", "the activation quant needs K %% 8 == 0, got %lld", (long long)k);
  const auto kernel = let_next && kp_pdl_built ? kp_e4m3_quant_kernel<true> : kp_e4m3_quant_kernel<false>;
  KP_GPU(kp_launch(kernel, dim3((unsigned)m), dim3(kp_quant_threads), stream, false, (const uint16_t *)x,
                   (uint8_t *)xq, sx, k));
  return KPICK_OK;
}

/* y[m, n] from the fp32 unit-scale sums d[m, rows] (rows = n, or 2n gated). */
template <bool GATED>
__global__ void kp_w8a8_epilogue_kernel(const float *__restrict__ d, const float *__restrict__ sx,
                                        const float *__restrict__ sw, uint16_t *__restrict__ y, int64_t n, int64_t total) {
  const int64_t rows = GATED ? 2 * n : n;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t m = i / n, j = i - m * n;
    const float s = sx[m];
    float v = d[m * rows + j] * (s * sw[j]);
    if (GATED) v = kp_silu_mul(kp_bf16_round(v), kp_bf16_round(d[m * rows + n + j] * (s * sw[n + j])));
    y[i] = kp_round<KP_DT_BF16>(v);
  }
}

int kp_w8a8_epilogue_launch(int32_t op, const float *d, const float *sx, const float *sw, void *y, int32_t m, int64_t n,
                            hipStream_t stream) {
  const int64_t total = (int64_t)m * n;
  int64_t blocks = (total + 255) / 256;
  if (blocks > 4096) blocks = 4096;
  const auto k = op == KPICK_OP_GATED ? kp_w8a8_epilogue_kernel<true> : kp_w8a8_epilogue_kernel<false>;
  KP_GPU(kp_launch(k, dim3((unsigned)blocks), dim3(256), stream, false, d, sx, sw, (uint16_t *)y, n, total));
  return KPICK_OK;
}
