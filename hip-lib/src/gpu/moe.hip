/* moe.hip: the moe op (kpick.h, KPICK_OP_MOE) on the GPU, and the routing the
 * decode step feeds it. Every call is graph-capturable: no host reads of ids.
 *
 *   plan            one block turns ids[m, topk] into the active experts
 *                   (ascending id), each expert's (row, slot) pairs (rows
 *                   ascending), their positions, and work items of at most C
 *                   pairs of one expert (the families here take one item per
 *                   expert). The first node of the gemv and mma families
 *                   (not of moe.fused).
 *   moe.blas        the class default, what an engine without kpick runs: per
 *                   (row, expert) pair, the vendor BLAS's batched GEMM from
 *                   device pointer arrays (cublasGemmBatchedEx) for gate/up,
 *                   silu-mul, the batched GEMM for down, then the weighted sum.
 *                   It reads each routed expert once per pair routed to it.
 *   moe.gemv.rpbR.uU[.pdl]  grouped GEMV: gate/up over the active experts in
 *                   one launch (a warp per gate/up row pair, every row routed
 *                   to the expert at once, silu*mul fused), then down with the
 *                   per-row weighted sum fused: a warp per output column walks
 *                   the active experts in ascending id, so each expert's
 *                   weights are read once and no float atomics are needed.
 *   moe.mma.wW.uU.tT grouped tensor-core tile (mma_core.h): a block multiplies
 *                   a 16-row tile of one active expert by the rows routed to
 *                   it, up to T x kp_mma_cols at a time, fewer in a last pass
 *                   (the tile's weights come from L2 after the first pass);
 *                   gate/up with silu*mul, down
 *                   into fp32 per pair, then a combine kernel sums each row's
 *                   pairs.
 *   moe.fused.wW.uU.tT[.pdl]  the mma tile at rows 1..8 in two kernels: each
 *                   block routes itself from ids (no plan), and the last down
 *                   block of a tile of y sums its rows (no combine kernel).
 *                   The same sums in the same order: the bits of moe.mma's W.
 *   moe.w8a8.blas, moe.w8a16.gemv.rpbR.uU[.pdl]  fp8 experts (KPICK_FP8): the
 *                   W8A8 default over cuBLASLt's pointer-array fp8 batch, and
 *                   moe.gemv over e4m3 codes (the fp8 section below).
 * Every family sums a row's experts in ascending expert id, in fp32, rounding
 * once; h = silu(g)*u is rounded to the dtype between the two GEMMs. Bits of
 * the gemv family do not depend on R or U (a lane accumulates its pieces in
 * order, the warp reduces by a fixed butterfly); the mma family's depend on W
 * only (mma_core.h); moe.blas's on the BLAS.
 * Ids outside 0..E-1 contribute nothing; a row that repeats an expert gets an
 * undefined (but memory-safe) result: the CPU refuses both, the GPU cannot
 * without reading ids on the host. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../common/error.h"
#include "blaslt.h"
#include "check.h"
#include "dtype.h"
#include "fp8_core.h"
#include "launch.h"
#include "gemv_core.h"
#include "mma_core.h"
#include "moe_plan.h"

#if defined(KPICK_GPU_CUDA)
#include <dlfcn.h>
#endif

extern "C" {
#include "../common/fp8.h" /* C: where an fp8 buffer's row scales start (kp_fp8_scales) */
#include "../common/moe.h" /* C: the fp8 buffers' sizes (kp_moe_gate_up_bytes) */
}

static constexpr int kp_moe_plan_threads = 1024; /* one per expert: KPICK_MAX_EXPERTS */
static_assert(KPICK_MAX_EXPERTS <= kp_moe_plan_threads, "the plan gives each expert a thread");
static_assert(KPICK_MAX_ROWS <= 128, "the plan keeps an expert's rows in 4 words");
static constexpr int kp_moe_gemv_rows = 8; /* rows a gemv warp holds: the gemv rows stop at 8 */

static size_t kp_align(size_t v) { return (v + 255) / 256 * 256; }

/* the scratch layout of one call: plan, h [P, N] (bf16 for fp8 experts), o
 * fp32 [P, K], then the default's gate/up product [P, 2N] (the dtype; fp8:
 * fp32 unit-scale sums), its o [P, K] (the dtype; fp8 uses o above) and its 6
 * pointer arrays, then moe.wgmma's x rows gathered in plan order [P, K]
 * (not for fp8), then fp8's: x's codes [m, K] and row scales [m], h's codes
 * [P, N] and pair scales [P]. An unused part takes no room. */
struct kp_moe_layout {
  size_t plan, h, o, gu, ob, ptrs, xg, xq, sx, hq, sh, total;
};
static kp_moe_layout kp_moe_layout_of(int32_t dtype, int32_t m, int32_t topk, int64_t n, int64_t k) {
  const bool fp8 = dtype == KPICK_FP8;
  const size_t P = (size_t)m * (size_t)topk, M = (size_t)m, N = (size_t)n, K = (size_t)k;
  kp_moe_layout l;
  l.plan = 0;
  l.h = kp_align(sizeof(kp_moe_plan));
  l.o = l.h + kp_align(P * N * 2);
  l.gu = l.o + kp_align(P * K * 4);
  l.ob = l.gu + kp_align(P * 2 * N * (fp8 ? 4 : 2));
  l.ptrs = l.ob + kp_align(fp8 ? 0 : P * K * 2);
  l.xg = l.ptrs + kp_align(6 * P * sizeof(void *));
  l.xq = l.xg + kp_align(fp8 ? 0 : P * K * 2);
  l.sx = l.xq + kp_align(fp8 ? M * K : 0);
  l.hq = l.sx + kp_align(fp8 ? M * 4 : 0);
  l.sh = l.hq + kp_align(fp8 ? P * N : 0);
  l.total = l.sh + kp_align(fp8 ? P * 4 : 0);
  return l;
}

size_t kp_moe_scratch_bytes(int32_t dtype, int32_t m, int32_t topk, int64_t n, int64_t k) {
  return kp_moe_layout_of(dtype, m, topk, n, k).total;
}

/* ---- the plan ---- */
template <bool PDL>
__global__ void __launch_bounds__(kp_moe_plan_threads)
    kp_moe_plan_kernel(const int32_t *ids, int32_t m, int32_t topk, int32_t E, int32_t chunk, kp_moe_plan *pl) {
  __shared__ uint32_t mask[KPICK_MAX_EXPERTS][4]; /* bit t: row t routes to the expert */
  __shared__ int32_t off[KPICK_MAX_EXPERTS];
  __shared__ int32_t sc[3][kp_moe_plan_threads];
  if (PDL) kp_pdl_trigger();
  const int tid = threadIdx.x, nt = blockDim.x, P = m * topk;
  if (tid < E)
    for (int w = 0; w < 4; ++w) mask[tid][w] = 0u;
  kp_batch_fence(true); /* under PDL: ids are the previous kernel's output */
  __syncthreads();
  for (int i = tid; i < P; i += nt) {
    const int e = ids[i], t = i / topk;
    if (e >= 0 && e < E) atomicOr(&mask[e][t >> 5], 1u << (t & 31));
  }
  __syncthreads();
  int cnt = 0;
  if (tid < E)
    for (int w = 0; w < 4; ++w) cnt += __popc(mask[tid][w]);
  const int used = cnt > 0, nit = used ? (cnt + chunk - 1) / chunk : 0;
  sc[0][tid] = used, sc[1][tid] = cnt, sc[2][tid] = nit;
  __syncthreads();
  for (int d = 1; d < nt; d <<= 1) { /* inclusive scans */
    int a = 0, b = 0, c = 0;
    if (tid >= d) a = sc[0][tid - d], b = sc[1][tid - d], c = sc[2][tid - d];
    __syncthreads();
    sc[0][tid] += a, sc[1][tid] += b, sc[2][tid] += c;
    __syncthreads();
  }
  const int u = sc[0][tid] - used, at = sc[1][tid] - cnt, it = sc[2][tid] - nit;
  if (tid < E) off[tid] = at;
  if (used) {
    pl->used[u] = tid;
    pl->start[u] = at;
    for (int q = 0; q < nit; ++q) pl->item_u[it + q] = u, pl->item_r0[it + q] = q * chunk;
  }
  if (tid == nt - 1) {
    pl->nused = sc[0][tid];
    pl->nitems = sc[2][tid];
    pl->start[sc[0][tid]] = sc[1][tid];
  }
  for (int i = tid; i < P; i += nt) pl->order[i] = 0; /* a repeated id leaves a slot */
  __syncthreads();
  for (int i = tid; i < P; i += nt) {
    const int e = ids[i], t = i / topk;
    if (e < 0 || e >= E) {
      pl->pos[i] = -1;
      continue;
    }
    int rank = __popc(mask[e][t >> 5] & ((1u << (t & 31)) - 1u));
    for (int w = 0; w < (t >> 5); ++w) rank += __popc(mask[e][w]);
    pl->order[off[e] + rank] = i;
    pl->pos[i] = off[e] + rank;
  }
}

static int kp_moe_plan_launch(const int32_t *ids, int32_t m, int32_t topk, int32_t E, int32_t chunk, kp_moe_plan *pl,
                              hipStream_t s, bool pdl) {
  const auto k = pdl ? kp_moe_plan_kernel<kp_pdl_built> : kp_moe_plan_kernel<false>;
  /* a thread per expert or per pair, whichever are more (up to the block's limit): a
   * thread looping over pairs waits out one L2 round trip per pair (a block of E alone
   * took 8.7 us at 1024 pairs, h200-2026-12-02-moe-wgmma) */
  const int P = m * topk, want = E > P ? E : P < kp_moe_plan_threads ? P : kp_moe_plan_threads;
  const int threads = want < 32 ? 32 : (want + 31) / 32 * 32;
  KP_GPU(kp_launch(k, dim3(1), dim3((unsigned)threads), s, pdl, ids, m, topk, E, chunk, pl));
  return KPICK_OK;
}

/* ---- the gemv family ---- */

/* acc[r][i] += this lane's share of dot(w[r], xr[i]) over len, i < rows:
 * pieces of kp_warp * 8 elements in order, U loads of each weight row in
 * flight; pieces past len count as zeros. */
template <int DT, int NR, int U, int M>
__device__ __forceinline__ void kp_moe_dot(const uint16_t *const (&w)[NR], const uint16_t *const (&xr)[M],
                                           int64_t len, int lane, int rows, float (&acc)[NR][M]) {
  constexpr int64_t chunk = (int64_t)kp_warp * 8;
  const int64_t nq = (len + chunk - 1) / chunk;
  const kp_v16 zero = {0u, 0u, 0u, 0u};
#pragma unroll 1
  for (int64_t q0 = 0; q0 < nq; q0 += U) {
    kp_v16 wv[NR][U];
#pragma unroll
    for (int b = 0; b < U; ++b) {
      const int64_t off = (q0 + b) * chunk + lane * 8;
      const bool ok = q0 + b < nq && off < len;
#pragma unroll
      for (int r = 0; r < NR; ++r) wv[r][b] = ok ? kp_ld_stream(w[r] + off) : zero;
    }
    kp_batch_fence(false);
#pragma unroll
    for (int b = 0; b < U; ++b) {
      const int64_t off = (q0 + b) * chunk + lane * 8;
      if (q0 + b >= nq || off >= len) continue;
      float wf[NR][8];
#pragma unroll
      for (int r = 0; r < NR; ++r) kp_unpack8<DT>(wv[r][b], wf[r]);
#pragma unroll
      for (int i = 0; i < M; ++i) {
        if (i >= rows) continue;
        float xf[8];
        kp_unpack8<DT>(kp_ld_act(xr[i] + off), xf);
#pragma unroll
        for (int r = 0; r < NR; ++r) {
          float a = acc[r][i];
#pragma unroll
          for (int e = 0; e < 8; ++e) a = fmaf(wf[r][e], xf[e], a);
          acc[r][i] = a;
        }
      }
    }
  }
}

/* h[pair] = silu(x Wg^T) * (x Wu^T) for every pair of active expert blockIdx.y:
 * a warp per column n, the expert's rows 8 at a time. */
template <int DT, int M, int U, bool PDL>
__global__ void __launch_bounds__(8 * KP_WARP)
    kp_moe_gemv_up_kernel(const uint16_t *__restrict__ x, const uint16_t *__restrict__ wgu, const kp_moe_plan *pl,
                          uint16_t *__restrict__ h, int32_t topk, int64_t N, int64_t K) {
  if (PDL) kp_pdl_trigger();
  kp_batch_fence(true);
  const int u = blockIdx.y;
  if (u >= pl->nused) return;
  const int lane = threadIdx.x % kp_warp;
  const int64_t n = (int64_t)blockIdx.x * (blockDim.x / kp_warp) + threadIdx.x / kp_warp;
  if (n >= N) return;
  const int64_t e = pl->used[u];
  const int s = pl->start[u], cnt = pl->start[u + 1] - s;
  const uint16_t *w[2] = {wgu + (e * 2 * N + n) * K, wgu + (e * 2 * N + N + n) * K};
  for (int base = 0; base < cnt; base += M) {
    const int rows = cnt - base < M ? cnt - base : M;
    const uint16_t *xr[M];
#pragma unroll
    for (int i = 0; i < M; ++i)
      xr[i] = x + (int64_t)(pl->order[s + base + (i < rows ? i : rows - 1)] / topk) * K;
    float acc[2][M];
#pragma unroll
    for (int i = 0; i < M; ++i) acc[0][i] = acc[1][i] = 0.0f;
    kp_moe_dot<DT, 2, U, M>(w, xr, K, lane, rows, acc);
    float mine = 0.0f;
#pragma unroll
    for (int i = 0; i < M; ++i) {
      if (i >= rows) continue;
      const float g = kp_warp_sum<kp_warp>(acc[0][i]), up = kp_warp_sum<kp_warp>(acc[1][i]);
      if (lane == i) mine = kp_silu_mul(g, up);
    }
    if (lane < rows) h[(int64_t)(s + base + lane) * N + n] = kp_round<DT>(mine);
  }
}

/* y[t, c] = sum over t's experts, ascending id, of weight * dot(h[pair], Wd[e][c]):
 * a warp per output column c walks (expert, piece) in order with U pieces in
 * flight across experts; lane t keeps row t's sum; M = m <= 8 (an expert has at most m rows). */
template <int DT, int M, int U, bool PDL>
__global__ void __launch_bounds__(8 * KP_WARP)
    kp_moe_gemv_down_kernel(const uint16_t *__restrict__ h, const uint16_t *__restrict__ wd, const kp_moe_plan *pl,
                            const float *__restrict__ weights, uint16_t *__restrict__ y, int32_t m, int32_t topk,
                            int64_t N, int64_t K) {
  if (PDL) kp_pdl_trigger();
  kp_batch_fence(true);
  __shared__ int32_t s_used[KPICK_MAX_EXPERTS], s_start[KPICK_MAX_EXPERTS + 1];
  const int nused = pl->nused;
  for (int i = threadIdx.x; i <= nused; i += blockDim.x) {
    if (i < nused) s_used[i] = pl->used[i];
    s_start[i] = pl->start[i];
  }
  __syncthreads();
  const int lane = threadIdx.x % kp_warp;
  const int64_t c = (int64_t)blockIdx.x * (blockDim.x / kp_warp) + threadIdx.x / kp_warp;
  if (c >= K) return;
  constexpr int64_t chunk = (int64_t)kp_warp * 8;
  const int64_t nq = (N + chunk - 1) / chunk, total = (int64_t)nused * nq;
  const kp_v16 zero = {0u, 0u, 0u, 0u};
  float acc[M];
#pragma unroll
  for (int i = 0; i < M; ++i) acc[i] = 0.0f;
  float mine = 0.0f;
#pragma unroll 1
  for (int64_t i0 = 0; i0 < total; i0 += U) {
    kp_v16 wv[U];
#pragma unroll
    for (int b = 0; b < U; ++b) {
      const int64_t i = i0 + b, u = i / nq, off = (i - u * nq) * chunk + lane * 8;
      wv[b] = i < total && off < N ? kp_ld_stream(wd + ((int64_t)s_used[u] * K + c) * N + off) : zero;
    }
    kp_batch_fence(false);
#pragma unroll
    for (int b = 0; b < U; ++b) {
      const int64_t i = i0 + b, u = i / nq, q = i - u * nq, off = q * chunk + lane * 8;
      if (i >= total) continue;
      const int s = s_start[u], cnt = s_start[u + 1] - s;
      if (off < N) {
        float wf[8];
        kp_unpack8<DT>(wv[b], wf);
#pragma unroll
        for (int r = 0; r < M; ++r) {
          if (r >= cnt) continue;
          float xf[8];
          kp_unpack8<DT>(kp_ld_act(h + (int64_t)(s + r) * N + off), xf);
          float a = acc[r];
#pragma unroll
          for (int e = 0; e < 8; ++e) a = fmaf(wf[e], xf[e], a);
          acc[r] = a;
        }
      }
      if (q == nq - 1) { /* the expert's last piece: its rows' dots are complete */
#pragma unroll
        for (int r = 0; r < M; ++r) {
          if (r >= cnt) continue;
          const float d = kp_warp_sum<kp_warp>(acc[r]);
          const int pair = pl->order[s + r];
          if (lane == pair / topk) mine += weights[pair] * d;
          acc[r] = 0.0f;
        }
      }
    }
  }
  if (lane < m) y[(int64_t)lane * K + c] = kp_round<DT>(mine);
}

/* ---- the mma family, and moe.fused (its tile in two kernels) ---- */
struct kp_moe_mma_args {
  const uint16_t *x;   /* gate/up: x [m, K]; down: h [P, N] in plan order */
  const void *w;       /* gate/up: W_gate_up; down: W_down (bf16/fp16, or fp8 codes) */
  const float *sw;     /* fp8: w's row scales (all experts' rows); else unused */
  void *out;           /* gate/up: h (dtype; bf16 for fp8); down: o fp32 [P, K] in plan order */
  const kp_moe_plan *pl; /* moe.mma's plan; moe.fused routes itself from ids */
  int32_t topk;
  int64_t n, k;        /* the expert's N (intermediate) and K (hidden) */
  int32_t chunk;       /* the plan's rows per item */
  /* moe.fused only */
  const int32_t *ids;
  const float *weights;
  uint16_t *y;
  int32_t *arrived;    /* per 16 columns of y: down blocks done with them */
  int32_t m, E;
};

/* a row's weighted sum over its n pairs, in the order given (ascending expert
 * id): every combine forms it this way, so their bits agree */
template <class Gate, class Value>
__device__ __forceinline__ float kp_moe_row_sum(int n, Gate gate, Value value) {
  float sum = 0.0f;
#pragma unroll 4
  for (int i = 0; i < n; ++i) sum = fmaf(gate(i), value(i), sum);
  return sum;
}

static constexpr int kp_moe_fused_pairs = 64; /* m * topk a fused call takes: two ids a lane on NVIDIA */
static constexpr int kp_moe_fused_rows = 8;

/* what moe.fused's block knows of the call: its item (the plan's, when every
 * active expert is one item) and, for down's combine, each row's pairs */
struct kp_moe_route {
  int e, s, cnt, nused;                   /* expert (-1: none), first pair in plan order, its pairs, active experts */
  int32_t row[kp_moe_fused_pairs];        /* the expert's pairs' rows, ascending */
  int32_t ids[kp_moe_fused_pairs];        /* ids, -1 where outside 0..E-1 */
  uint32_t mask[KPICK_MAX_EXPERTS / 32];  /* bit e: expert e is active */
  int32_t where[kp_moe_fused_rows][KPICK_MAX_TOPK]; /* down: row t's pairs in plan order, ascending expert */
  float gate[kp_moe_fused_rows][KPICK_MAX_TOPK];
  int32_t n[kp_moe_fused_rows];
};

/* Warp 0: item `it` of ids[P] as the plan would make it (the it-th active
 * expert by id, its pairs by row, where they start in the plan's order). The
 * caller syncs the block after. */
__device__ void kp_moe_route_item(const int32_t *ids, int P, int topk, int E, int it, kp_moe_route &r) {
  constexpr int slots = (kp_moe_fused_pairs + kp_warp - 1) / kp_warp;
  const int lane = threadIdx.x % kp_warp, words = (E + 31) / 32;
  for (int w = lane; w < words; w += kp_warp) r.mask[w] = 0u;
  int v[slots];
#pragma unroll
  for (int q = 0; q < slots; ++q) {
    const int i = lane + q * kp_warp;
    v[q] = i < P ? kp_ld_coherent(ids + i) : -1; /* ids are another kernel's output */
    if (v[q] < 0 || v[q] >= E) v[q] = -1;
    if (i < P) r.ids[i] = v[q];
  }
  kp_syncwarp();
#pragma unroll
  for (int q = 0; q < slots; ++q)
    if (v[q] >= 0) atomicOr(&r.mask[v[q] >> 5], 1u << (v[q] & 31));
  kp_syncwarp();
  if (lane == 0) {
    int seen = 0, e = -1;
    for (int w = 0; w < words; ++w) {
      uint32_t b = r.mask[w];
      const int c = __popc(b);
      if (e < 0 && it < seen + c) {
        for (int j = it - seen; j > 0; --j) b &= b - 1u;
        e = w * 32 + __ffs(b) - 1;
      }
      seen += c;
    }
    r.e = e, r.nused = seen;
  }
  kp_syncwarp();
  const int e = r.e;
  int cnt = 0, less = 0;
#pragma unroll
  for (int q = 0; q < slots; ++q) {
    const bool mine = e >= 0 && v[q] == e;
    const uint64_t hit = kp_ballot(mine), lt = kp_ballot(v[q] >= 0 && v[q] < e);
    const int rank = cnt + __popcll(hit & (((uint64_t)1 << lane) - 1u));
    if (mine && rank < kp_moe_fused_pairs) r.row[rank] = (lane + q * kp_warp) / topk;
    cnt += __popcll(hit), less += __popcll(lt);
  }
  if (lane == 0) r.s = less, r.cnt = cnt;
}

/* After kp_moe_route_item and a block sync: for each row t < m, its valid
 * pairs' places in the plan's order, ascending expert id (the order the plan
 * gives them), with their gates. The caller syncs the block after. */
__device__ void kp_moe_route_rows(const float *weights, int m, int topk, kp_moe_route &r) {
  const int P = m * topk;
  for (int i = threadIdx.x; i < P; i += blockDim.x) {
    const int e = r.ids[i], t = i / topk;
    if (e < 0) continue;
    int pos = 0, rank = 0;
    for (int j = 0; j < P; ++j) { /* ties (a row that repeats an expert) by slot: every rank once */
      const int f = r.ids[j];
      const bool before = f >= 0 && (f < e || (f == e && j < i));
      pos += before;
      rank += before && j / topk == t;
    }
    r.where[t][rank] = pos;
    r.gate[t][rank] = kp_ld_coherent(weights + i);
  }
  for (int t = threadIdx.x; t < m; t += blockDim.x) {
    int n = 0;
    for (int j = 0; j < topk; ++j) n += r.ids[t * topk + j] >= 0;
    r.n[t] = n;
  }
}

#if defined(KP_MMA_NV) || defined(KP_MMA_MFMA)
/* One work item (blockIdx.y: up to a.chunk pairs of one expert, NT * kp_mma_cols at most a pass) by a
 * tile of its weights (blockIdx.x): gate/up (MODE gated, 8 gate rows over
 * their 8 up rows, len K) or down (MODE linear, 16 rows of W_down, len N).
 * The warps split the steps; partial tiles meet in shared memory in warp
 * order (mma_core.h's kernel, with gathered activation rows).
 * FUSED (moe.fused, rows 1..8): the item is routed here from ids, an item per
 * active expert; gate/up waits before it lets down launch, so down may read
 * ids and gates and route before its own wait (asking the L2 for its tile of
 * W_down there too made the call 5 us slower at rows 1); the last down block
 * to finish 16 columns of y sums their rows' pairs there, as the combine
 * kernel would. */
/* a pass's column tiles, as a type: the pass's arrays are sized by it */
template <int V>
struct kp_tiles {
  static constexpr int value = V;
};

template <int DT, int NT, int U, int MODE, bool PDL, bool FUSED, bool TILES, bool FP8>
__global__ void __launch_bounds__(kp_mma_max_warps * KP_WARP) kp_moe_mma_kernel(kp_moe_mma_args a) {
  static_assert(!(FUSED && TILES), "moe.fused splits K over its warps");
  static_assert(!FP8 || DT == KP_DT_BF16, "fp8 experts take bf16 x");
  const bool up = MODE == KP_MMA_GATED;
  const int lane = threadIdx.x % kp_warp, warp = threadIdx.x / kp_warp, nwarps = blockDim.x / kp_warp;
  const int it = blockIdx.y;
  const int64_t N = a.n, K = a.k;
  const int64_t rows = up ? N : K, len = up ? K : N; /* tile rows (per half for gate/up), reduction length */
  /* TILES: the block's warps take consecutive tiles, each all of K */
  const int64_t n0 = ((int64_t)blockIdx.x * (TILES ? nwarps : 1) + (TILES ? warp : 0)) * (up ? 8 : 16);
  __shared__ kp_moe_route route;
  int nitems, s_item, rows_item;
  int64_t e;
  if constexpr (FUSED) {
    if (up) kp_batch_fence(true); /* ids are the router's output: down may read them once up lets it launch */
    if (PDL) kp_pdl_trigger();
    if (warp == 0) kp_moe_route_item(a.ids, a.m * a.topk, a.topk, a.E, it, route);
    __syncthreads();
    if (!up && PDL) kp_moe_route_rows(a.weights, a.m, a.topk, route); /* before the wait: free */
    nitems = route.nused, e = route.e < 0 ? 0 : route.e, s_item = route.s, rows_item = route.cnt;
    if (up && it == 0 && blockIdx.x == 0) /* down's arrival counts, zeroed before down passes its wait */
      for (int64_t q = threadIdx.x; q < (K + 15) / 16; q += blockDim.x) a.arrived[q] = 0;
    __syncthreads();
    if (!up) kp_batch_fence(true); /* h is gate/up's output */
    if (it >= (nitems > 0 ? nitems : 1)) return; /* block-uniform; with no active expert block 0 still writes y */
  } else {
    if (PDL) kp_pdl_trigger();
    kp_batch_fence(true);
    const kp_moe_plan *pl = a.pl;
    nitems = pl->nitems;
    if (it >= nitems) return;
    const int u = pl->item_u[it];
    s_item = pl->start[u] + pl->item_r0[it];
    const int left = pl->start[u + 1] - s_item;
    rows_item = left < a.chunk ? left : a.chunk;
    e = pl->used[u];
    if (TILES && n0 >= rows) return; /* a warp past the last tile: TILES has no block barrier */
  }
  /* the expert's rows: its first row of all experts' rows, then its elements (fp8: codes, a byte each) */
  const int64_t e_row = up ? e * 2 * N : e * K;
  const uint16_t *w = (const uint16_t *)a.w + e_row * len;
  const uint8_t *w8 = (const uint8_t *)a.w + e_row * len;

  const int64_t nsteps = (len + kp_mma_step - 1) / kp_mma_step, full = len / kp_mma_step;
  const int64_t s0 = TILES ? 0 : warp * nsteps / nwarps, s1 = TILES ? nsteps : (warp + 1) * nsteps / nwarps;
  const int koff = kp_lane_koff(lane);
  const uint16_t *wr[kp_mma_wrows];
  const uint8_t *wr8[kp_mma_wrows];
#pragma unroll
  for (int j = 0; j < kp_mma_wrows; ++j) {
    const int64_t at = kp_tile_wrow<MODE>(n0, kp_lane_tile_row(lane, j), rows) * len + koff;
    wr[j] = w + at;
    wr8[j] = w8 + at;
  }
  /* fp8: y = bf16(sum * its row's scale) for g, u and each pair's o, as the W8A16 linear rounds them */
  auto scaled = [&](float v, int64_t row) { return FP8 ? kp_bf16_round(v * a.sw[e_row + row]) : v; };
  __shared__ float red[kp_mma_max_warps][kp_mma_cols][kp_mma_pad];
  /* one pass: the item's rows r0.. over P column tiles (P * kp_mma_cols rows);
   * returns the rows it covered */
  auto pass = [&](auto tiles, int r0) -> int {
    constexpr int P = decltype(tiles)::value;
    const int s = s_item + r0, cnt = rows_item - r0 < P * kp_mma_cols ? rows_item - r0 : P * kp_mma_cols;
    const uint16_t *xr[P];
#pragma unroll
    for (int t = 0; t < P; ++t) {
      const int col = t * kp_mma_cols + kp_lane_col(lane), p = r0 + (col < cnt ? col : cnt - 1);
      const int64_t xrow = !up ? s_item + p : FUSED ? route.row[p] : a.pl->order[s_item + p] / a.topk;
      xr[t] = a.x + xrow * (up ? K : N) + koff;
    }
    kp_frag acc[P];
#pragma unroll
    for (int t = 0; t < P; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][i] = 0.0f;
    const int64_t e1 = s1 < full ? s1 : full;
    int64_t st = s0;
    auto steps = [&](auto b) {
      constexpr int B = decltype(b)::value;
      if constexpr (FP8) kp_mma_steps<DT, P, B>(wr8, xr, st * kp_mma_step, acc, false);
      else kp_mma_steps<DT, P, B>(wr, xr, st * kp_mma_step, acc, false);
      st += B;
    };
#pragma unroll 1
    while (st + U <= e1) steps(kp_tiles<U>{});
    if constexpr (U > 8) if (st + 8 <= e1) steps(kp_tiles<8>{});
    if constexpr (U > 4) if (st + 4 <= e1) steps(kp_tiles<4>{});
    if (st + 2 <= e1) steps(kp_tiles<2>{});
    if (st + 1 <= e1) steps(kp_tiles<1>{});
    if (st < s1) {
      const bool inside = st * kp_mma_step + koff < len;
      if constexpr (FP8) kp_mma_step_masked<DT, P>(wr8, xr, st * kp_mma_step, inside, acc, false);
      else kp_mma_step_masked<DT, P>(wr, xr, st * kp_mma_step, inside, acc, false);
    }

    if constexpr (TILES) { /* the warp's own tile, through its own slice of red */
#pragma unroll
      for (int t = 0; t < P; ++t) {
        if (t * kp_mma_cols >= cnt) continue; /* warp-uniform */
#pragma unroll
        for (int i = 0; i < 4; ++i) red[warp][kp_frag_col(lane, i)][kp_frag_row(lane, i)] = acc[t][i];
        kp_syncwarp();
        for (int q = lane; q < (up ? 8 : 16) * kp_mma_cols; q += kp_warp) {
          const int row = up ? q % 8 : q % 16, col = up ? q / 8 : q / 16, p = t * kp_mma_cols + col;
          const int64_t n = n0 + row;
          if (p >= cnt || n >= rows) continue;
          if (up)
            ((uint16_t *)a.out)[(int64_t)(s + p) * N + n] =
                kp_round<DT>(kp_silu_mul(scaled(red[warp][col][row], n), scaled(red[warp][col][row + 8], N + n)));
          else
            ((float *)a.out)[(int64_t)(s + p) * K + n] = scaled(red[warp][col][row], n);
        }
        kp_syncwarp();
      }
    } else {
#pragma unroll
      for (int t = 0; t < P; ++t) {
        if (t * kp_mma_cols >= cnt) continue; /* block-uniform */
#pragma unroll
        for (int i = 0; i < 4; ++i) red[warp][kp_frag_col(lane, i)][kp_frag_row(lane, i)] = acc[t][i];
        __syncthreads();
        const int live = (up ? 8 : 16) * kp_mma_cols;
        for (int q = threadIdx.x; q < live; q += blockDim.x) {
          const int row = up ? q % 8 : q % 16, col = up ? q / 8 : q / 16, p = t * kp_mma_cols + col;
          const int64_t n = n0 + row;
          if (p >= cnt || n >= rows) continue;
          float v = red[0][col][row];
          for (int r = 1; r < nwarps; ++r) v += red[r][col][row];
          if (up) {
            float g = red[0][col][row + 8];
            for (int r = 1; r < nwarps; ++r) g += red[r][col][row + 8];
            ((uint16_t *)a.out)[(int64_t)(s + p) * N + n] = kp_round<DT>(kp_silu_mul(scaled(v, n), scaled(g, N + n)));
          } else {
            ((float *)a.out)[(int64_t)(s + p) * K + n] = scaled(v, n);
          }
        }
        __syncthreads();
      }
    }
    return P * kp_mma_cols;
  };
  /* the item's rows T tiles a pass, the last pass only as wide as the rows it
   * has left (a pass multiplies all its tiles; after the first pass the tile's
   * weights come from L2). The bits do not depend on the widths. */
  for (int r0 = 0; r0 < rows_item;) {
    const int left = rows_item - r0;
    if (NT >= 8 && left > 4 * kp_mma_cols) r0 += pass(kp_tiles<NT >= 8 ? 8 : 1>{}, r0);
    else if (NT >= 4 && left > 2 * kp_mma_cols) r0 += pass(kp_tiles<NT >= 4 ? 4 : 1>{}, r0);
    else if (NT >= 2 && left > kp_mma_cols) r0 += pass(kp_tiles<NT >= 2 ? 2 : 1>{}, r0);
    else r0 += pass(kp_tiles<1>{}, r0);
  }
  if constexpr (FUSED && MODE == KP_MMA_LINEAR) {
    /* the last block of these 16 columns sums them: every other block's o is in L2. One
     * release/acquire fence a block, by the thread that counts (the barrier orders the
     * block's writes before it). */
    __shared__ int last;
    __syncthreads();
    if (threadIdx.x == 0) {
      kp_fence_gpu();
      last = atomicAdd(a.arrived + blockIdx.x, 1) == (nitems > 0 ? nitems : 1) - 1;
      if (last) kp_fence_gpu();
    }
    __syncthreads();
    if (!last) return;
    if (!PDL) {
      kp_moe_route_rows(a.weights, a.m, a.topk, route);
      __syncthreads();
    }
    const int cols = (int)(K - n0 < 16 ? K - n0 : 16);
    for (int q = threadIdx.x; q < a.m * cols; q += blockDim.x) {
      const int t = q / cols;
      const int64_t c = n0 + q % cols;
      const float sum = kp_moe_row_sum(
          route.n[t], [&](int i) { return route.gate[t][i]; },
          [&](int i) { return kp_ld_coherent((const float *)a.out + (int64_t)route.where[t][i] * K + c); });
      a.y[(int64_t)t * K + c] = kp_round<DT>(sum);
    }
  }
}

#else
template <int DT, int NT, int U, int MODE, bool PDL, bool FUSED, bool TILES, bool FP8>
__global__ void kp_moe_mma_kernel(kp_moe_mma_args a) {
  __builtin_trap();
}
#endif

/* where a combine finds each pair's o */
enum {
  KP_MOE_O_PLAN = 0, /* fp32 in plan order (the planned families) */
  KP_MOE_O_PAIR = 1, /* the dtype per pair (moe.blas) */
  KP_MOE_O_FP8 = 2,  /* fp32 unit-scale sums per pair (moe.w8a8.blas): o = bf16(sum * (sh[pair] * sw[e * K + c])) */
};

/* y[t, c] = sum over t's valid slots in ascending expert id of weight * o,
 * fp32, rounded once; SRC says what o is (sh, sw: KP_MOE_O_FP8's h scales per
 * pair and W_down's row scales, else unused). A block per (row, 256 columns). */
template <int DT, int SRC>
__global__ void __launch_bounds__(256)
    kp_moe_combine_kernel(const void *__restrict__ o, const kp_moe_plan *pl, const int32_t *__restrict__ ids,
                          const float *__restrict__ weights, const float *__restrict__ sh, const float *__restrict__ sw,
                          uint16_t *__restrict__ y, int32_t topk, int32_t E, int64_t K) {
  constexpr bool PAIR = SRC != KP_MOE_O_PLAN;
  __shared__ int32_t where[KPICK_MAX_TOPK], expert[KPICK_MAX_TOPK];
  __shared__ float gate[KPICK_MAX_TOPK];
  __shared__ int n;
  const int t = blockIdx.x;
  if (threadIdx.x < kp_warp) { /* warp 0: each valid slot's rank by (expert id, slot), all at once */
    const int j = threadIdx.x;
    const int e = j < topk ? ids[t * topk + j] : -1;
    const bool valid = e >= 0 && e < E;
    int rank = 0;
    for (int q = 0; q < topk; ++q) { /* the order of a stable sort by id */
      const int f = kp_shfl(e, q);
      rank += f >= 0 && f < E && (f < e || (f == e && q < j));
    }
    if (valid) {
      where[rank] = PAIR ? t * topk + j : pl->pos[t * topk + j];
      expert[rank] = e;
      gate[rank] = weights[t * topk + j];
    }
    const int k = __popcll(kp_ballot(valid));
    if (j == 0) n = k;
  }
  __syncthreads();
  const int64_t c = (int64_t)blockIdx.y * blockDim.x + threadIdx.x;
  if (c < K) {
    const float sum = kp_moe_row_sum(
        n, [&](int i) { return gate[i]; },
        [&](int i) {
          const int64_t at = (int64_t)where[i] * K + c;
          if constexpr (SRC == KP_MOE_O_FP8)
            return kp_bf16_round(((const float *)o)[at] * (sh[where[i]] * sw[(int64_t)expert[i] * K + c]));
          else if constexpr (SRC == KP_MOE_O_PAIR)
            return kp_load1<DT>((const uint16_t *)o + at);
          else
            return ((const float *)o)[at];
        });
    y[(int64_t)t * K + c] = kp_round<DT>(sum);
  }
}

/* ---- moe.blas and moe.w8a8.blas: pointer arrays for the vendor's batched GEMM ----
 * Per pair i: W_gate_up of its expert, its row of x, its gate/up product, W_down of
 * its expert, its h, its o. IN: bytes of a weight, x and h element (2, or 1: fp8
 * codes); OUT: of a product and o element (2, or 4: fp8's fp32 sums). */
template <int IN, int OUT>
__global__ void kp_moe_pointers_kernel(const char *x, const char *wgu, const char *wd, const int32_t *ids, int32_t E,
                                       int32_t P, int32_t topk, int64_t N, int64_t K, char *gu, char *hb, char *ob,
                                       const void **ptr) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= P) return;
  const int64_t e = ids[i] >= 0 && ids[i] < E ? ids[i] : 0; /* an invalid slot is computed, then skipped */
  ptr[i] = wgu + e * 2 * N * K * IN;
  ptr[P + i] = x + (int64_t)(i / topk) * K * IN;
  ptr[2 * P + i] = gu + (int64_t)i * 2 * N * OUT;
  ptr[3 * P + i] = wd + e * K * N * IN;
  ptr[4 * P + i] = hb + (int64_t)i * N * IN;
  ptr[5 * P + i] = ob + (int64_t)i * K * OUT;
}

#if defined(KPICK_GPU_CUDA)
/* cuBLAS is opened at run time beside the cuBLASLt the library links, so the
 * build needs no cuBLAS header or link (the enum values are cuBLAS's ABI). */
typedef int (*kp_cublas_create_fn)(void **);
typedef int (*kp_cublas_stream_fn)(void *, hipStream_t);
typedef int (*kp_cublas_ws_fn)(void *, void *, size_t);
typedef int (*kp_cublas_batched_fn)(void *, int, int, int, int, int, const void *, const void *const *, int, int,
                                    const void *const *, int, int, const void *, void *const *, int, int, int, int,
                                    int);
enum { KP_CUBLAS_OP_N = 0, KP_CUBLAS_OP_T = 1, KP_CUDA_R_16F = 2, KP_CUDA_R_16BF = 14, KP_CUBLAS_COMPUTE_32F = 68,
       KP_CUBLAS_GEMM_DEFAULT = -1 };
static struct {
  pthread_mutex_t lock;
  int tried, ok;
  void *handle;
  kp_cublas_stream_fn set_stream;
  kp_cublas_ws_fn set_ws;
  kp_cublas_batched_fn gemm;
} kp_cublas = {PTHREAD_MUTEX_INITIALIZER, 0, 0, NULL, NULL, NULL, NULL};

extern "C" size_t cublasLtGetVersion(void); /* linked (gpu.mk): its folder holds cuBLAS too */

static void kp_cublas_open(void) {
  const char *names[] = {"libcublas.so", "libcublas.so.13", "libcublas.so.12"};
  void *lib = NULL;
  Dl_info info;
  if (dladdr((void *)&cublasLtGetVersion, &info) && info.dli_fname) { /* first the linked cuBLASLt's folder */
    char path[1024];
    const char *slash = strrchr(info.dli_fname, '/');
    const int dir = slash ? (int)(slash - info.dli_fname) : 0;
    for (int i = 0; i < 3 && !lib && slash; ++i) {
      snprintf(path, sizeof path, "%.*s/%s", dir, info.dli_fname, names[i]);
      lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
  }
  for (int i = 0; i < 3 && !lib; ++i) lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!lib) return;
  kp_cublas_create_fn create = (kp_cublas_create_fn)dlsym(lib, "cublasCreate_v2");
  kp_cublas.set_stream = (kp_cublas_stream_fn)dlsym(lib, "cublasSetStream_v2");
  kp_cublas.set_ws = (kp_cublas_ws_fn)dlsym(lib, "cublasSetWorkspace_v2");
  kp_cublas.gemm = (kp_cublas_batched_fn)dlsym(lib, "cublasGemmBatchedEx");
  if (!create || !kp_cublas.set_stream || !kp_cublas.set_ws || !kp_cublas.gemm) return;
  kp_cublas.ok = create(&kp_cublas.handle) == 0;
}

int kp_moe_blas_available(void) {
  pthread_mutex_lock(&kp_cublas.lock);
  if (!kp_cublas.tried) {
    kp_cublas.tried = 1;
    kp_cublas_open();
  }
  const int ok = kp_cublas.ok;
  pthread_mutex_unlock(&kp_cublas.lock);
  return ok;
}

#define KP_CUBLAS(call)                                                                                   \
  do {                                                                                                    \
    const int kp_st_ = (call);                                                                            \
    if (kp_st_ != 0) return kp_fail(KPICK_E_DEVICE, "moe.blas", "%s: cuBLAS status %d", #call, kp_st_);   \
  } while (0)

static int kp_moe_blas_gemms(const struct kp_call *c, const void **ptr, int P) {
  const struct kp_moe_call *mc = c->moe;
  const int type = c->dtype == KP_DT_BF16 ? KP_CUDA_R_16BF : KP_CUDA_R_16F, N = (int)c->n, K = (int)c->k;
  const float one = 1.0f, zero = 0.0f;
  KP_CUBLAS(kp_cublas.set_stream(kp_cublas.handle, c->stream));
  KP_CUBLAS(kp_cublas.set_ws(kp_cublas.handle, mc->ws->blas, mc->ws->blas_bytes));
  /* column-major: gu[2N] = W_gu[e] (K x 2N, transposed) x[t]; o[K] = W_d[e] (N x K, transposed) h */
  KP_CUBLAS(kp_cublas.gemm(kp_cublas.handle, KP_CUBLAS_OP_T, KP_CUBLAS_OP_N, 2 * N, 1, K, &one, ptr, type, K, ptr + P,
                           type, K, &zero, (void *const *)(ptr + 2 * P), type, 2 * N, P, KP_CUBLAS_COMPUTE_32F,
                           KP_CUBLAS_GEMM_DEFAULT));
  const kp_moe_layout l = kp_moe_layout_of(c->dtype, c->m, mc->topk, c->n, c->k);
  char *base = (char *)mc->ws->temp;
  KP_TRY(kp_silu_mul_launch(c->dtype, base + l.gu, base + l.h, P, c->n, c->stream));
  KP_CUBLAS(kp_cublas.gemm(kp_cublas.handle, KP_CUBLAS_OP_T, KP_CUBLAS_OP_N, K, 1, N, &one, ptr + 3 * P, type, N,
                           ptr + 4 * P, type, N, &zero, (void *const *)(ptr + 5 * P), type, K, P,
                           KP_CUBLAS_COMPUTE_32F, KP_CUBLAS_GEMM_DEFAULT));
  return KPICK_OK;
}
#else
int kp_moe_blas_available(void) { return 0; } /* hipBLAS's batched GEMM is not wired: no moe default on HIP */
static int kp_moe_blas_gemms(const struct kp_call *c, const void **ptr, int P) {
  return kp_fail(KPICK_E_UNSUPPORTED, "moe.blas", "the batched BLAS default is wired for cuBLAS only");
}
#endif

/* ---- launchers ---- */
/* y from the per-pair outputs o (src: KP_MOE_O_*; sh, sw for KP_MOE_O_FP8), in c's
 * dtype (fp8 experts: bf16) */
static int kp_moe_combine(const struct kp_call *c, const void *o, const kp_moe_plan *pl, int src,
                          const float *sh = nullptr, const float *sw = nullptr) {
  const struct kp_moe_call *mc = c->moe;
  const bool fp16 = c->dtype == KP_DT_FP16;
  const auto k = src == KP_MOE_O_FP8  ? kp_moe_combine_kernel<KP_DT_BF16, KP_MOE_O_FP8>
                 : src == KP_MOE_O_PAIR ? (fp16 ? kp_moe_combine_kernel<KP_DT_FP16, KP_MOE_O_PAIR>
                                                : kp_moe_combine_kernel<KP_DT_BF16, KP_MOE_O_PAIR>)
                                        : (fp16 ? kp_moe_combine_kernel<KP_DT_FP16, KP_MOE_O_PLAN>
                                                : kp_moe_combine_kernel<KP_DT_BF16, KP_MOE_O_PLAN>);
  KP_GPU(kp_launch(k, dim3((unsigned)c->m, (unsigned)((c->k + 255) / 256)), dim3(256), c->stream, false, o, pl, mc->ids,
                   mc->weights, sh, sw, (uint16_t *)c->y, mc->topk, mc->experts, c->k));
  return KPICK_OK;
}

/* the most experts P pairs can reach */
static int kp_moe_max_used(int P, int experts) { return P < experts ? P : experts; }

/* the plan's most items for P pairs in chunks of `chunk` rows: one per active
 * expert and one more per chunk past its first (kp_moe_plan_launch) */
static int kp_moe_items_for(int P, int experts, int chunk) { return kp_moe_max_used(P, experts) + P / chunk; }

int kp_moe_blas_launch(const struct kp_call *c) {
  const struct kp_moe_call *mc = c->moe;
  if (!kp_moe_blas_available()) return kp_fail(KPICK_E_UNSUPPORTED, "moe.blas", "cuBLAS could not be loaded");
  const int P = c->m * mc->topk;
  const kp_moe_layout l = kp_moe_layout_of(c->dtype, c->m, mc->topk, c->n, c->k);
  char *base = (char *)mc->ws->temp;
  const void **ptr = (const void **)(base + l.ptrs);
  KP_GPU(kp_launch(kp_moe_pointers_kernel<2, 2>, dim3((unsigned)((P + 127) / 128)), dim3(128), c->stream, false,
                   (const char *)c->x, (const char *)c->w, (const char *)mc->w_down, mc->ids, mc->experts, P, mc->topk,
                   c->n, c->k, base + l.gu, base + l.h, base + l.ob, ptr));
  KP_TRY(kp_moe_blas_gemms(c, ptr, P));
  return kp_moe_combine(c, base + l.ob, nullptr, KP_MOE_O_PAIR);
}

typedef void (*kp_moe_up_fn)(const uint16_t *, const uint16_t *, const kp_moe_plan *, uint16_t *, int32_t, int64_t,
                             int64_t);
typedef void (*kp_moe_down_fn)(const uint16_t *, const uint16_t *, const kp_moe_plan *, const float *, uint16_t *,
                               int32_t, int32_t, int64_t, int64_t);
/* the kernels of one gemv row: [dtype][m - 1], m = 1 .. rows_max */
struct kp_moe_gemv_set {
  kp_moe_up_fn up[2][kp_moe_gemv_rows];
  kp_moe_down_fn down[2][kp_moe_gemv_rows];
};

template <int DT, int U, bool PDL, int M>
static void kp_moe_gemv_fill(kp_moe_gemv_set &s) {
  s.up[DT][M - 1] = kp_moe_gemv_up_kernel<DT, M, U, PDL>;
  s.down[DT][M - 1] = kp_moe_gemv_down_kernel<DT, M, U, PDL>;
  if constexpr (M > 1) kp_moe_gemv_fill<DT, U, PDL, M - 1>(s);
}

template <int ID>
static kp_moe_gemv_set kp_moe_gemv_row() {
  constexpr kp_def r = kp_defs[ID];
  if constexpr (r.family == KP_FAM_moe_gemv && (!r.pdl() || kp_pdl_built)) {
    static_assert(r.rows_max >= 1 && r.rows_max <= kp_moe_gemv_rows && r.rows_max <= 32,
                  "moe gemv: rows stop at 8 (lane t keeps row t)");
    static_assert(r.p0 >= 1 && r.p0 <= 8, "moe gemv: R is 1..8 warps per block");
    static_assert(r.p1 == 4 || r.p1 == 8 || r.p1 == 16, "moe gemv: U is 4, 8 or 16");
    kp_moe_gemv_set s = {};
    kp_moe_gemv_fill<KP_DT_BF16, r.p1, r.pdl(), r.rows_max>(s);
    kp_moe_gemv_fill<KP_DT_FP16, r.p1, r.pdl(), r.rows_max>(s);
    return s;
  } else {
    return kp_moe_gemv_set{};
  }
}

static const kp_moe_gemv_set kp_moe_gemv_sets[KP_NCAND] = {
#define CPU(...)
#define GPU(id, ...) kp_moe_gemv_row<KP_CAND_##id>(),
#include "../space.def"
};

int kp_moe_gemv_built(int32_t cand) { return kp_moe_gemv_sets[cand].up[0][0] != nullptr; }

int kp_moe_gemv_launch(const struct kp_call *c, int rows_per_block) {
  const struct kp_moe_call *mc = c->moe;
  const kp_moe_gemv_set &set = kp_moe_gemv_sets[c->cand];
  const int d = c->dtype == KP_DT_BF16 ? 0 : 1;
  const kp_moe_up_fn up = c->m >= 1 && c->m <= kp_moe_gemv_rows ? set.up[d][c->m - 1] : nullptr;
  const kp_moe_down_fn down = c->m >= 1 && c->m <= kp_moe_gemv_rows ? set.down[d][c->m - 1] : nullptr;
  if (!up || !down || rows_per_block < 1 || rows_per_block > 8)
    return kp_fail(KPICK_E_UNSUPPORTED, "moe.gemv", "no kernel for m=%d, R=%d, pdl=%d", (int)c->m, rows_per_block, c->pdl);
  const kp_moe_layout l = kp_moe_layout_of(c->dtype, c->m, mc->topk, c->n, c->k);
  char *base = (char *)mc->ws->temp;
  kp_moe_plan *pl = (kp_moe_plan *)(base + l.plan);
  uint16_t *h = (uint16_t *)(base + l.h);
  const int P = c->m * mc->topk, max_used = kp_moe_max_used(P, mc->experts);
  const bool pdl = c->pdl != 0;
  KP_TRY(kp_moe_plan_launch(mc->ids, c->m, mc->topk, mc->experts, 1 << 20, pl, c->stream, pdl));
  const dim3 block(rows_per_block * c->warp);
  KP_GPU(kp_launch(up, dim3((unsigned)((c->n + rows_per_block - 1) / rows_per_block), (unsigned)max_used), block,
                   c->stream, pdl, (const uint16_t *)c->x, (const uint16_t *)c->w, (const kp_moe_plan *)pl, h,
                   mc->topk, c->n, c->k));
  KP_GPU(kp_launch(down, dim3((unsigned)((c->k + rows_per_block - 1) / rows_per_block)), block, c->stream, pdl,
                   (const uint16_t *)h, (const uint16_t *)mc->w_down, (const kp_moe_plan *)pl, mc->weights,
                   (uint16_t *)c->y, c->m, mc->topk, c->n, c->k));
  return KPICK_OK;
}

typedef void (*kp_moe_mma_fn)(kp_moe_mma_args);
/* rows of one expert a block takes at most (4 tiles of 8 on NVIDIA) */
static constexpr int kp_moe_mma_chunk = 4 * kp_mma_cols;
struct kp_moe_mma_set {
  kp_moe_mma_fn up[2], down[2];
  int tiles;
  bool fused, wide; /* wide: moe.tiles, the warps over tiles (a block covers W tiles) */
  bool fp8;         /* the moe.w8a16 twins: e4m3 experts, bf16 x */
};

template <int ID>
static kp_moe_mma_set kp_moe_mma_row() {
  constexpr kp_def r = kp_defs[ID];
  constexpr bool fp8 = r.family == KP_FAM_moe_w8a16_fused || r.family == KP_FAM_moe_w8a16_tiles;
  constexpr bool fused = r.family == KP_FAM_moe_fused || r.family == KP_FAM_moe_w8a16_fused;
  constexpr bool wide = r.family == KP_FAM_moe_tiles || r.family == KP_FAM_moe_w8a16_tiles;
  if constexpr ((r.family == KP_FAM_moe_mma || fused || wide) && (!r.pdl() || kp_pdl_built)) {
    static_assert(r.p0 >= 1 && r.p0 <= kp_mma_max_warps, "moe mma: W is 1..8 warps");
    static_assert(r.p1 == 8 || r.p1 == 16, "moe mma: U is 8 or 16");
    static_assert(r.p2 == 1 || r.p2 == 2 || r.p2 == 4 || r.p2 == 8, "moe mma: T is 1, 2, 4 or 8 column tiles");
    static_assert(!fused || r.rows_max <= kp_moe_fused_rows, "moe fused: rows 1..8");
    constexpr int second = fp8 ? KP_DT_BF16 : KP_DT_FP16; /* the fp16 slot; fp8 experts take bf16 x in both */
    return kp_moe_mma_set{{kp_moe_mma_kernel<KP_DT_BF16, r.p2, r.p1, KP_MMA_GATED, r.pdl(), fused, wide, fp8>,
                           kp_moe_mma_kernel<second, r.p2, r.p1, KP_MMA_GATED, r.pdl(), fused, wide, fp8>},
                          {kp_moe_mma_kernel<KP_DT_BF16, r.p2, r.p1, KP_MMA_LINEAR, r.pdl(), fused, wide, fp8>,
                           kp_moe_mma_kernel<second, r.p2, r.p1, KP_MMA_LINEAR, r.pdl(), fused, wide, fp8>},
                          r.p2, fused, wide, fp8};
  } else {
    return kp_moe_mma_set{};
  }
}

static const kp_moe_mma_set kp_moe_mma_sets[KP_NCAND] = {
#define CPU(...)
#define GPU(id, ...) kp_moe_mma_row<KP_CAND_##id>(),
#include "../space.def"
};

int kp_moe_mma_built(int32_t cand) { return kp_moe_mma_sets[cand].up[0] != nullptr; }

int kp_moe_mma_launch(const struct kp_call *c, int warps) {
  const struct kp_moe_call *mc = c->moe;
  const kp_moe_mma_set &set = kp_moe_mma_sets[c->cand];
  const int d = c->dtype == KP_DT_BF16 ? 0 : 1;
  const int P = c->m * mc->topk;
  if (!set.up[0] || warps < 1 || warps > kp_mma_max_warps)
    return kp_fail(KPICK_E_UNSUPPORTED, "moe.mma", "no kernel for W=%d, pdl=%d", warps, c->pdl);
  if (set.fp8 != (c->dtype == KPICK_FP8) || (set.fp8 && (c->n % 16 != 0 || c->k % 16 != 0)))
    return kp_fail(KPICK_E_UNSUPPORTED, "moe.mma", "dtype %d: the moe.w8a16 rows take fp8 experts with N and K multiples "
                   "of 16 (N %lld, K %lld), the others 16-bit ones", (int)c->dtype, (long long)c->n, (long long)c->k);
  if (set.fused && (c->m > kp_moe_fused_rows || P > kp_moe_fused_pairs))
    return kp_fail(KPICK_E_UNSUPPORTED, "moe.fused", "rows %d x top-%d: it routes at most %d rows and %d pairs",
                   (int)c->m, (int)mc->topk, kp_moe_fused_rows, kp_moe_fused_pairs);
  if (set.fused && (c->k + 15) / 16 * (int64_t)sizeof(int32_t) > (int64_t)sizeof(kp_moe_plan))
    return kp_fail(KPICK_E_UNSUPPORTED, "moe.fused", "K %lld: more arrival counts than the plan's room",
                   (long long)c->k);
  const kp_moe_layout l = kp_moe_layout_of(c->dtype, c->m, mc->topk, c->n, c->k);
  char *base = (char *)mc->ws->temp;
  kp_moe_plan *pl = (kp_moe_plan *)(base + l.plan);
  /* an item per active expert and one more per kp_moe_mma_chunk rows past its first (the
   * kernel walks an item's rows a tile at a time): where rows share an expert (skewed
   * routing) its rows spread over blocks, while each item keeps its tile's weights in L2.
   * moe.fused has an item per active expert (rows 1..8 fit one). */
  const int tile = set.tiles * kp_mma_cols, chunk = tile > kp_moe_mma_chunk ? tile : kp_moe_mma_chunk;
  const int max_items = set.fused ? kp_moe_max_used(P, mc->experts) : kp_moe_items_for(P, mc->experts, chunk);
  const bool pdl = c->pdl != 0;
  if (!set.fused) KP_TRY(kp_moe_plan_launch(mc->ids, c->m, mc->topk, mc->experts, chunk, pl, c->stream, pdl));
  const dim3 block(warps * c->warp);
  /* moe.fused: the plan's room holds down's arrival counts (a word per 16 columns of y) */
  const int64_t E = mc->experts;
  kp_moe_mma_args up = {(const uint16_t *)c->x, c->w, set.fp8 ? kp_fp8_scales(c->w, E * 2 * c->n, c->k) : nullptr,
                        base + l.h, set.fused ? nullptr : pl,
                        mc->topk, c->n, c->k, chunk, mc->ids, mc->weights, (uint16_t *)c->y,
                        set.fused ? (int32_t *)(base + l.plan) : nullptr, c->m, mc->experts};
  /* tiles of W: gate/up 8 gate rows over their 8 up rows, down 16 rows; moe.tiles puts W of them in a block */
  const int64_t per_block = set.wide ? warps : 1, up_tiles = (c->n + 7) / 8, down_tiles = (c->k + 15) / 16;
  KP_GPU(kp_launch(set.up[d], dim3((unsigned)((up_tiles + per_block - 1) / per_block), (unsigned)max_items), block,
                   c->stream, pdl, up));
  kp_moe_mma_args down = up;
  down.x = (const uint16_t *)(base + l.h), down.w = mc->w_down, down.out = base + l.o;
  down.sw = set.fp8 ? kp_fp8_scales(mc->w_down, E * c->k, c->n) : nullptr;
  KP_GPU(kp_launch(set.down[d], dim3((unsigned)((down_tiles + per_block - 1) / per_block), (unsigned)max_items), block,
                   c->stream, pdl, down));
  if (set.fused) return KPICK_OK;
  return kp_moe_combine(c, base + l.o, pl, KP_MOE_O_PLAN);
}

/* moe.wgmma: the plan, x's rows gathered in plan order (the copy engine reads
 * whole boxes of rows), gate/up and down by the grouped wgmma tile (wgmma.hip),
 * the combine: 5 nodes. xg[q] = x[order[q] / topk], a block per valid pair
 * (K % 8 == 0: 16-byte pieces). */
__global__ void __launch_bounds__(256)
    kp_moe_gather_kernel(const uint16_t *__restrict__ x, const kp_moe_plan *pl, int32_t topk, int64_t k,
                         uint16_t *__restrict__ xg) {
  const int q = blockIdx.x;
  if (q >= pl->start[pl->nused]) return;
  const kp_v16 *src = (const kp_v16 *)(x + (int64_t)(pl->order[q] / topk) * k);
  kp_v16 *dst = (kp_v16 *)(xg + (int64_t)q * k);
  for (int64_t i = threadIdx.x; i < k / 8; i += blockDim.x) dst[i] = src[i];
}

/* rows of one expert an item takes: the row's widest x box (64; moe.wgmma.x128 128, so that an
 * expert of 65-128 rows is one item reading its weights once, not two) */
int kp_moe_wgmma_launch(const struct kp_call *c, int wg, int stages, int kb) {
  const struct kp_moe_call *mc = c->moe;
  const int chunk = kp_wgmma_moe_chunk(c->cand);
  if (c->k % 8 != 0 || c->n % 8 != 0 || !kp_wgmma_moe_fits(wg, stages, kb, chunk))
    return kp_fail(KPICK_E_UNSUPPORTED, "moe.wgmma", "N %lld and K %lld must be multiples of 8, WG=%d T=%d KB=%d must fit",
                   (long long)c->n, (long long)c->k, wg, stages, kb);
  const kp_moe_layout l = kp_moe_layout_of(c->dtype, c->m, mc->topk, c->n, c->k);
  char *base = (char *)mc->ws->temp;
  kp_moe_plan *pl = (kp_moe_plan *)(base + l.plan);
  uint16_t *xg = (uint16_t *)(base + l.xg), *h = (uint16_t *)(base + l.h);
  const int P = c->m * mc->topk, items = kp_moe_items_for(P, mc->experts, chunk);
  KP_TRY(kp_moe_plan_launch(mc->ids, c->m, mc->topk, mc->experts, chunk, pl, c->stream, false));
  KP_GPU(kp_launch(kp_moe_gather_kernel, dim3((unsigned)P), dim3(256), c->stream, false, (const uint16_t *)c->x,
                   (const kp_moe_plan *)pl, mc->topk, c->k, xg));
  const int64_t E = mc->experts;
  const kp_wgmma_moe_op up = {1, c->w, E * 2 * c->n, c->k, 2 * c->n, xg, P, h, c->n, pl, chunk, items};
  KP_TRY(kp_wgmma_moe_launch(c, wg, stages, kb, &up));
  const kp_wgmma_moe_op down = {0, mc->w_down, E * c->k, c->n, c->k, h, P, base + l.o, c->k, pl, chunk, items};
  KP_TRY(kp_wgmma_moe_launch(c, wg, stages, kb, &down));
  return kp_moe_combine(c, base + l.o, pl, KP_MOE_O_PLAN);
}

/* ---- fp8 experts (kpick.h KPICK_FP8: W_gate_up one buffer of E * 2N rows x K,
 * W_down one of E * K rows x N, each row its own scale; x and y bf16) ----
 * Every GEMM is computed as its numeric class computes a linear (fp8.hip), and
 * g, u, h and each pair's o are rounded to bf16, as the CPU's rows round them.
 *   moe.w8a16.gemv.rpbR.uU[.pdl]  moe.gemv's three nodes over the codes: a lane
 *        takes 16 codes a piece (one 16-byte load; the bf16 gemv's holds 8
 *        weights), decodes them exactly and multiplies them with bf16 x (two
 *        16-byte loads) in fp32 FMAs, piece after piece, in two halves of 8;
 *        the warp's fixed butterfly, then the row's scale once. So R and U
 *        change no bit: one class head.
 *   moe.w8a8.blas  the class default, shaped like moe.blas: x quantized per row
 *        (fp8.hip's quant node), the pointer arrays, cuBLASLt's pointer-array
 *        batch of e4m3 GEMVs for gate/up into fp32 (unit scales), a node that
 *        scales, rounds and silu-muls each pair's gate/up and quantizes its h as
 *        the quant node quantizes x, the batch for down, then the combine, which
 *        scales each pair's o before its weighted sum. 6 nodes. */


/* acc[r][i] += this lane's share of dot(w[r], xr[i]) over len (a multiple of
 * 16), w[r] e4m3 codes, xr[i] bf16: pieces of kp_warp * 16 elements in order,
 * U loads of each weight row in flight, rows i < rows only. */
template <int NR, int U, int M>
__device__ __forceinline__ void kp_moe_fp8_dot(const uint8_t *const (&w)[NR], const uint16_t *const (&xr)[M],
                                               int64_t len, int lane, int rows, float (&acc)[NR][M]) {
  constexpr int64_t chunk = (int64_t)kp_warp * 16;
  const int64_t nq = (len + chunk - 1) / chunk;
  const kp_v16 zero = {0u, 0u, 0u, 0u};
#pragma unroll 1
  for (int64_t q0 = 0; q0 < nq; q0 += U) {
    kp_v16 wv[NR][U];
#pragma unroll
    for (int b = 0; b < U; ++b) {
      const int64_t off = (q0 + b) * chunk + lane * 16;
      const bool ok = q0 + b < nq && off < len;
#pragma unroll
      for (int r = 0; r < NR; ++r) wv[r][b] = ok ? kp_ld_stream(w[r] + off) : zero;
    }
    kp_batch_fence(false);
#pragma unroll
    for (int b = 0; b < U; ++b) {
      const int64_t off = (q0 + b) * chunk + lane * 16;
      if (q0 + b >= nq || off >= len) continue;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        float wf[NR][8];
#pragma unroll
        for (int r = 0; r < NR; ++r)
          kp_e4m3_unpack8(half ? wv[r][b].z : wv[r][b].x, half ? wv[r][b].w : wv[r][b].y, wf[r]);
#pragma unroll
        for (int i = 0; i < M; ++i) {
          if (i >= rows) continue;
          float xf[8];
          kp_unpack8<KP_DT_BF16>(kp_ld_act(xr[i] + off + half * 8), xf);
#pragma unroll
          for (int r = 0; r < NR; ++r) {
            float a = acc[r][i];
#pragma unroll
            for (int e = 0; e < 8; ++e) a = fmaf(wf[r][e], xf[e], a);
            acc[r][i] = a;
          }
        }
      }
    }
  }
}

/* h[pair] = bf16(silu(g) * u), g = bf16(gate sum * its row's scale), u alike,
 * for every pair of active expert blockIdx.y: a warp per column n, the
 * expert's rows M at a time (kp_moe_gemv_up_kernel over codes). */
template <int M, int U, bool PDL>
__global__ void __launch_bounds__(8 * KP_WARP)
    kp_moe_w8a16_up_kernel(const uint16_t *__restrict__ x, const uint8_t *__restrict__ wgu, const float *__restrict__ sgu,
                           const kp_moe_plan *pl, uint16_t *__restrict__ h, int32_t topk, int64_t N, int64_t K) {
  if (PDL) kp_pdl_trigger();
  kp_batch_fence(true);
  const int u = blockIdx.y;
  if (u >= pl->nused) return;
  const int lane = threadIdx.x % kp_warp;
  const int64_t n = (int64_t)blockIdx.x * (blockDim.x / kp_warp) + threadIdx.x / kp_warp;
  if (n >= N) return;
  const int64_t e = pl->used[u], gr = e * 2 * N + n, ur = gr + N; /* the buffer's rows: expert e's gate row n, up row n */
  const int s = pl->start[u], cnt = pl->start[u + 1] - s;
  const uint8_t *w[2] = {wgu + gr * K, wgu + ur * K};
  const float sg = sgu[gr], su = sgu[ur];
  for (int base = 0; base < cnt; base += M) {
    const int rows = cnt - base < M ? cnt - base : M;
    const uint16_t *xr[M];
#pragma unroll
    for (int i = 0; i < M; ++i)
      xr[i] = x + (int64_t)(pl->order[s + base + (i < rows ? i : rows - 1)] / topk) * K;
    float acc[2][M];
#pragma unroll
    for (int i = 0; i < M; ++i) acc[0][i] = acc[1][i] = 0.0f;
    kp_moe_fp8_dot<2, U, M>(w, xr, K, lane, rows, acc);
    float mine = 0.0f;
#pragma unroll
    for (int i = 0; i < M; ++i) {
      if (i >= rows) continue;
      const float g = kp_warp_sum<kp_warp>(acc[0][i]), up = kp_warp_sum<kp_warp>(acc[1][i]);
      if (lane == i) mine = kp_silu_mul(kp_bf16_round(g * sg), kp_bf16_round(up * su));
    }
    if (lane < rows) h[(int64_t)(s + base + lane) * N + n] = kp_round<KP_DT_BF16>(mine);
  }
}

/* y[t, c] = sum over t's experts, ascending id, of weight * bf16(dot(h[pair],
 * Wd[e][c]) * its row's scale): kp_moe_gemv_down_kernel over codes, M = m <= 8. */
template <int M, int U, bool PDL>
__global__ void __launch_bounds__(8 * KP_WARP)
    kp_moe_w8a16_down_kernel(const uint16_t *__restrict__ h, const uint8_t *__restrict__ wd, const float *__restrict__ sd,
                             const kp_moe_plan *pl, const float *__restrict__ weights, uint16_t *__restrict__ y,
                             int32_t m, int32_t topk, int64_t N, int64_t K) {
  if (PDL) kp_pdl_trigger();
  kp_batch_fence(true);
  __shared__ int32_t s_used[KPICK_MAX_EXPERTS], s_start[KPICK_MAX_EXPERTS + 1];
  const int nused = pl->nused;
  for (int i = threadIdx.x; i <= nused; i += blockDim.x) {
    if (i < nused) s_used[i] = pl->used[i];
    s_start[i] = pl->start[i];
  }
  __syncthreads();
  const int lane = threadIdx.x % kp_warp;
  const int64_t c = (int64_t)blockIdx.x * (blockDim.x / kp_warp) + threadIdx.x / kp_warp;
  if (c >= K) return;
  constexpr int64_t chunk = (int64_t)kp_warp * 16;
  const int64_t nq = (N + chunk - 1) / chunk, total = (int64_t)nused * nq;
  const kp_v16 zero = {0u, 0u, 0u, 0u};
  float acc[M];
#pragma unroll
  for (int i = 0; i < M; ++i) acc[i] = 0.0f;
  float mine = 0.0f;
#pragma unroll 1
  for (int64_t i0 = 0; i0 < total; i0 += U) {
    kp_v16 wv[U];
#pragma unroll
    for (int b = 0; b < U; ++b) {
      const int64_t i = i0 + b, u = i / nq, off = (i - u * nq) * chunk + lane * 16;
      wv[b] = i < total && off < N ? kp_ld_stream(wd + ((int64_t)s_used[u] * K + c) * N + off) : zero;
    }
    kp_batch_fence(false);
#pragma unroll
    for (int b = 0; b < U; ++b) {
      const int64_t i = i0 + b, u = i / nq, q = i - u * nq, off = q * chunk + lane * 16;
      if (i >= total) continue;
      const int s = s_start[u], cnt = s_start[u + 1] - s;
      if (off < N) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          float wf[8];
          kp_e4m3_unpack8(half ? wv[b].z : wv[b].x, half ? wv[b].w : wv[b].y, wf);
#pragma unroll
          for (int r = 0; r < M; ++r) {
            if (r >= cnt) continue;
            float xf[8];
            kp_unpack8<KP_DT_BF16>(kp_ld_act(h + (int64_t)(s + r) * N + off + half * 8), xf);
            float a = acc[r];
#pragma unroll
            for (int e = 0; e < 8; ++e) a = fmaf(wf[e], xf[e], a);
            acc[r] = a;
          }
        }
      }
      if (q == nq - 1) { /* the expert's last piece: its rows' dots are complete */
        const float sc = sd[(int64_t)s_used[u] * K + c];
#pragma unroll
        for (int r = 0; r < M; ++r) {
          if (r >= cnt) continue;
          const float o = kp_bf16_round(kp_warp_sum<kp_warp>(acc[r]) * sc);
          const int pair = pl->order[s + r];
          if (lane == pair / topk) mine = fmaf(weights[pair], o, mine); /* as kp_moe_row_sum */
          acc[r] = 0.0f;
        }
      }
    }
  }
  if (lane < m) y[(int64_t)lane * K + c] = kp_round<KP_DT_BF16>(mine);
}

typedef void (*kp_moe_w8a16_up_fn)(const uint16_t *, const uint8_t *, const float *, const kp_moe_plan *, uint16_t *,
                                   int32_t, int64_t, int64_t);
typedef void (*kp_moe_w8a16_down_fn)(const uint16_t *, const uint8_t *, const float *, const kp_moe_plan *,
                                     const float *, uint16_t *, int32_t, int32_t, int64_t, int64_t);
/* the kernels of one moe.w8a16.gemv row: [m - 1], m = 1 .. rows_max */
struct kp_moe_w8a16_set {
  kp_moe_w8a16_up_fn up[kp_moe_gemv_rows];
  kp_moe_w8a16_down_fn down[kp_moe_gemv_rows];
};

template <int U, bool PDL, int M>
static void kp_moe_w8a16_fill(kp_moe_w8a16_set &s) {
  s.up[M - 1] = kp_moe_w8a16_up_kernel<M, U, PDL>;
  s.down[M - 1] = kp_moe_w8a16_down_kernel<M, U, PDL>;
  if constexpr (M > 1) kp_moe_w8a16_fill<U, PDL, M - 1>(s);
}

template <int ID>
static kp_moe_w8a16_set kp_moe_w8a16_row() {
  constexpr kp_def r = kp_defs[ID];
  kp_moe_w8a16_set s = {};
  if constexpr (r.family == KP_FAM_moe_w8a16 && (!r.pdl() || kp_pdl_built)) {
    static_assert(r.rows_max >= 1 && r.rows_max <= kp_moe_gemv_rows, "moe w8a16: rows stop at 8 (lane t keeps row t)");
    static_assert(r.p0 >= 1 && r.p0 <= 8, "moe w8a16: R is 1..8 warps per block");
    static_assert(r.p1 == 2 || r.p1 == 4 || r.p1 == 8, "moe w8a16: U is 2, 4 or 8 pieces of 16 codes in flight");
    kp_moe_w8a16_fill<r.p1, r.pdl(), r.rows_max>(s);
  }
  return s;
}

static const kp_moe_w8a16_set kp_moe_w8a16_sets[KP_NCAND] = {
#define CPU(...)
#define GPU(id, ...) kp_moe_w8a16_row<KP_CAND_##id>(),
#include "../space.def"
};

int kp_moe_w8a16_built(int32_t cand) { return kp_moe_w8a16_sets[cand].up[0] != nullptr; }

int kp_moe_w8a16_launch(const struct kp_call *c, int rows_per_block) {
  const struct kp_moe_call *mc = c->moe;
  const kp_moe_w8a16_set &set = kp_moe_w8a16_sets[c->cand];
  const bool fits = c->m >= 1 && c->m <= kp_moe_gemv_rows;
  const kp_moe_w8a16_up_fn up = fits ? set.up[c->m - 1] : nullptr;
  const kp_moe_w8a16_down_fn down = fits ? set.down[c->m - 1] : nullptr;
  if (!up || !down || rows_per_block < 1 || rows_per_block > 8)
    return kp_fail(KPICK_E_UNSUPPORTED, "moe.w8a16.gemv", "no kernel for m=%d, R=%d, pdl=%d", (int)c->m, rows_per_block,
                   c->pdl);
  if (c->dtype != KPICK_FP8 || c->n % 16 != 0 || c->k % 16 != 0)
    return kp_fail(KPICK_E_UNSUPPORTED, "moe.w8a16.gemv", "takes fp8 experts with N and K multiples of 16 (dtype %d, N %lld, K %lld)",
                   (int)c->dtype, (long long)c->n, (long long)c->k);
  const kp_moe_layout l = kp_moe_layout_of(c->dtype, c->m, mc->topk, c->n, c->k);
  char *base = (char *)mc->ws->temp;
  kp_moe_plan *pl = (kp_moe_plan *)(base + l.plan);
  uint16_t *h = (uint16_t *)(base + l.h);
  const int P = c->m * mc->topk, max_used = kp_moe_max_used(P, mc->experts);
  const int64_t E = mc->experts;
  const float *sgu = kp_fp8_scales(c->w, E * 2 * c->n, c->k), *sd = kp_fp8_scales(mc->w_down, E * c->k, c->n);
  const bool pdl = c->pdl != 0;
  KP_TRY(kp_moe_plan_launch(mc->ids, c->m, mc->topk, mc->experts, 1 << 20, pl, c->stream, pdl));
  const dim3 block(rows_per_block * c->warp);
  KP_GPU(kp_launch(up, dim3((unsigned)((c->n + rows_per_block - 1) / rows_per_block), (unsigned)max_used), block,
                   c->stream, pdl, (const uint16_t *)c->x, (const uint8_t *)c->w, sgu, (const kp_moe_plan *)pl, h,
                   mc->topk, c->n, c->k));
  KP_GPU(kp_launch(down, dim3((unsigned)((c->k + rows_per_block - 1) / rows_per_block)), block, c->stream, pdl,
                   (const uint16_t *)h, (const uint8_t *)mc->w_down, sd, (const kp_moe_plan *)pl, mc->weights,
                   (uint16_t *)c->y, c->m, mc->topk, c->n, c->k));
  return KPICK_OK;
}

/* moe.w8a8.blas's middle node, a block per pair i (expert e, row t): g and u =
 * bf16(sum * (sx[t] * row scale)) from the batch's unit-scale sums, h =
 * bf16(silu(g) * u), then h's row quantized as fp8.hip's quant node quantizes
 * a row of x (scale amax / 448, 1 for a zero row; the same division and
 * encoding), so h's codes are those the CPU's default forms. hb keeps h in
 * bf16 between the two passes, each thread rereading only what it wrote. */
static constexpr int kp_moe_act_threads = 256;
__global__ void __launch_bounds__(kp_moe_act_threads)
    kp_moe_w8a8_act_kernel(const float *__restrict__ d, const float *__restrict__ sx, const float *__restrict__ sgu,
                           const int32_t *__restrict__ ids, int32_t E, int32_t topk, int64_t N, uint16_t *__restrict__ hb,
                           uint8_t *__restrict__ hq, float *__restrict__ sh) {
  __shared__ float part[kp_moe_act_threads / 32];
  const int i = blockIdx.x;
  const int64_t e = ids[i] >= 0 && ids[i] < E ? ids[i] : 0; /* as the pointers: computed, then skipped */
  const float s = sx[i / topk];
  const float *di = d + (int64_t)i * 2 * N, *sw = sgu + e * 2 * N;
  uint16_t *hi = hb + (int64_t)i * N;
  float amax = 0.0f;
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x) {
    const float g = kp_bf16_round(di[n] * (s * sw[n])), u = kp_bf16_round(di[N + n] * (s * sw[N + n]));
    const uint16_t v = kp_round<KP_DT_BF16>(kp_silu_mul(g, u));
    hi[n] = v;
    amax = fmaxf(amax, fabsf(__uint_as_float((uint32_t)v << 16)));
  }
  amax = kp_block_max(amax, part);
  const float scale = amax > 0.0f ? amax / 448.0f : 1.0f;
  if (threadIdx.x == 0) sh[i] = scale;
  for (int64_t n = threadIdx.x; n < N; n += blockDim.x)
    hq[(int64_t)i * N + n] = kp_e4m3_encode(__uint_as_float((uint32_t)hi[n] << 16) / scale);
}

int kp_moe_w8a8_blas_launch(const struct kp_call *c) {
  const struct kp_moe_call *mc = c->moe;
  if (c->dtype != KPICK_FP8 || c->n % 16 != 0 || c->k % 16 != 0)
    return kp_fail(KPICK_E_UNSUPPORTED, "moe.w8a8.blas", "takes fp8 experts with N and K multiples of 16 (dtype %d, N %lld, K %lld)",
                   (int)c->dtype, (long long)c->n, (long long)c->k);
  const int P = c->m * mc->topk;
  const int64_t N = c->n, K = c->k, E = mc->experts;
  int count_gu = 0, count_dn = 0;
  KP_TRY(kp_blas_fp8_batch_plan(P, 2 * N, K, &count_gu));
  KP_TRY(kp_blas_fp8_batch_plan(P, K, N, &count_dn));
  if (count_gu < 1 || count_dn < 1)
    return kp_fail(KPICK_E_UNSUPPORTED, "moe.w8a8.blas", "no fp8 batch algo for %d pairs, N %lld, K %lld", P,
                   (long long)N, (long long)K);
  const kp_moe_layout l = kp_moe_layout_of(c->dtype, c->m, mc->topk, N, K);
  char *base = (char *)mc->ws->temp;
  const void **ptr = (const void **)(base + l.ptrs);
  uint8_t *xq = (uint8_t *)(base + l.xq), *hq = (uint8_t *)(base + l.hq);
  float *sx = (float *)(base + l.sx), *sh = (float *)(base + l.sh), *dgu = (float *)(base + l.gu),
        *dd = (float *)(base + l.o);
  KP_TRY(kp_e4m3_quant_launch(c->x, xq, sx, c->m, K, 0, c->stream));
  KP_GPU(kp_launch(kp_moe_pointers_kernel<1, 4>, dim3((unsigned)((P + 127) / 128)), dim3(128), c->stream, false,
                   (const char *)xq, (const char *)c->w, (const char *)mc->w_down, mc->ids, mc->experts, P, mc->topk, N, K,
                   (char *)dgu, (char *)hq, (char *)dd, ptr));
  /* gate/up: dgu[i] = W_gate_up[e] (2N x K) . xq[t]; down: dd[i] = W_down[e] (K x N) . hq[i] */
  KP_TRY(kp_blas_fp8_batch(0, ptr, ptr + P, (void *const *)(ptr + 2 * P), P, 2 * N, K, mc->ws->blas, c->stream));
  KP_GPU(kp_launch(kp_moe_w8a8_act_kernel, dim3((unsigned)P), dim3(kp_moe_act_threads), c->stream, false,
                   (const float *)dgu, (const float *)sx, kp_fp8_scales(c->w, E * 2 * N, K), mc->ids, mc->experts,
                   mc->topk, N, (uint16_t *)(base + l.h), hq, sh));
  KP_TRY(kp_blas_fp8_batch(0, ptr + 3 * P, ptr + 4 * P, (void *const *)(ptr + 5 * P), P, K, N, mc->ws->blas, c->stream));
  return kp_moe_combine(c, dd, nullptr, KP_MOE_O_FP8, sh, kp_fp8_scales(mc->w_down, E * K, N));
}

/* ---- routing: softmax over E, top-k, renormalised (the CPU's be_moe_route) ---- */
/* A warp per row: topk rounds of a warp argmax (lower id on ties, NaN never),
 * lane q-th bit of `taken` marking expert lane + q * warp. */
template <int DT>
__global__ void __launch_bounds__(4 * KP_WARP)
    kp_moe_route_kernel(const uint16_t *__restrict__ logits, int32_t m, int32_t E, int32_t topk, int32_t *ids,
                        float *weights) {
  const int lane = threadIdx.x % kp_warp;
  const int row = blockIdx.x * (blockDim.x / kp_warp) + threadIdx.x / kp_warp;
  if (row >= m) return;
  const uint16_t *lr = logits + (int64_t)row * E;
  uint32_t taken = 0u;
  for (int j = 0; j < topk; ++j) {
    int best = -1;
    float bv = 0.0f;
    for (int q = 0; lane + q * kp_warp < E; ++q) {
      const int e = lane + q * kp_warp;
      const float v = kp_load1<DT>(lr + e);
      if (v != v || ((taken >> q) & 1u)) continue;
      if (best < 0 || v > bv) best = e, bv = v;
    }
#pragma unroll
    for (int o = kp_warp / 2; o > 0; o >>= 1) {
      const float ov = kp_shfl_xor(bv, o);
      const int ob = __float_as_int(kp_shfl_xor(__int_as_float(best), o));
      if (ob >= 0 && (best < 0 || ov > bv || (ov == bv && ob < best))) best = ob, bv = ov;
    }
    if (best >= 0 && best % kp_warp == lane) taken |= 1u << (best / kp_warp);
    if (lane == 0) {
      ids[row * topk + j] = best < 0 ? j : best;
      weights[row * topk + j] = bv;
    }
  }
  if (lane == 0) {
    float *w = weights + row * topk;
    const float top = w[0];
    float sum = 0.0f;
    for (int j = 0; j < topk; ++j) sum += w[j] = expf(w[j] - top);
    for (int j = 0; j < topk; ++j) w[j] /= sum;
  }
}

int kp_moe_route_launch(int32_t dtype, const void *logits, int32_t m, int32_t experts, int32_t topk, int32_t *ids,
                        float *weights, hipStream_t stream, int warp) {
  const auto k = dtype == KP_DT_BF16 ? kp_moe_route_kernel<KP_DT_BF16> : kp_moe_route_kernel<KP_DT_FP16>;
  KP_GPU(kp_launch(k, dim3((unsigned)((m + 3) / 4)), dim3(4 * warp), stream, false, (const uint16_t *)logits, m,
                   experts, topk, ids, weights));
  return KPICK_OK;
}
