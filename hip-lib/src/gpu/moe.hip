/* moe.hip: the moe op (kpick.h, KPICK_OP_MOE) on the GPU, and the routing the
 * decode step feeds it. Every call is graph-capturable: no host reads of ids.
 *
 *   plan            one block turns ids[m, topk] into the active experts
 *                   (ascending id), each expert's (row, slot) pairs (rows
 *                   ascending), their positions, and work items of at most C
 *                   pairs of one expert (the families here take one item per
 *                   expert). The first node of the gemv and mma families.
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
 *   moe.direct.rpbR.uU.cJ[.pdl]  the gemv family's two kernels at rows 1..8
 *                   without the plan: every warp or block routes itself from
 *                   ids, and down keeps the routing and gates in shared memory.
 *   moe.mma.wW.uU.tT grouped tensor-core tile (mma_core.h): a block multiplies
 *                   a 16-row tile of one active expert by the rows routed to
 *                   it, T x kp_mma_cols at a time (the tile's weights come
 *                   from L2 after the first pass); gate/up with silu*mul, down
 *                   into fp32 per pair, then a combine kernel sums each row's
 *                   pairs.
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
#include "check.h"
#include "dtype.h"
#include "launch.h"
#include "gemv_core.h"
#include "mma_core.h"

#if defined(KPICK_GPU_CUDA)
#include <dlfcn.h>
#endif

static constexpr int kp_moe_plan_threads = 1024; /* one per expert: KPICK_MAX_EXPERTS */
static_assert(KPICK_MAX_EXPERTS <= kp_moe_plan_threads, "the plan gives each expert a thread");
static_assert(KPICK_MAX_ROWS <= 128, "the plan keeps an expert's rows in 4 words");
static constexpr int kp_moe_max_pairs = KPICK_MAX_ROWS * KPICK_MAX_TOPK;
static constexpr int kp_moe_max_items = KPICK_MAX_EXPERTS + kp_moe_max_pairs;
static constexpr int kp_moe_gemv_rows = 8; /* rows a gemv warp holds: the gemv rows stop at 8 */

struct kp_moe_plan {
  int32_t nused, nitems, pad[2];
  int32_t used[KPICK_MAX_EXPERTS];      /* active experts, ascending */
  int32_t start[KPICK_MAX_EXPERTS + 1]; /* pairs of used[u]: order[start[u] .. start[u+1]) */
  int32_t order[kp_moe_max_pairs];      /* pair t * topk + j, grouped by expert, rows ascending */
  int32_t pos[kp_moe_max_pairs];        /* where pair i sits in order, -1 for an id outside 0..E-1 */
  int32_t item_u[kp_moe_max_items];     /* work item: expert u, its pairs from item_r0 on, at most C */
  int32_t item_r0[kp_moe_max_items];
};

static size_t kp_align(size_t v) { return (v + 255) / 256 * 256; }

/* the scratch layout of one call: plan, h [P, N], o fp32 [P, K], then the
 * default's gate/up product [P, 2N], its o [P, K] and its 6 pointer arrays */
struct kp_moe_layout {
  size_t plan, h, o, gu, ob, ptrs, total;
};
static kp_moe_layout kp_moe_layout_of(int32_t m, int32_t topk, int64_t n, int64_t k) {
  const size_t P = (size_t)m * (size_t)topk;
  kp_moe_layout l;
  l.plan = 0;
  l.h = kp_align(sizeof(kp_moe_plan));
  l.o = l.h + kp_align(P * (size_t)n * 2);
  l.gu = l.o + kp_align(P * (size_t)k * 4);
  l.ob = l.gu + kp_align(P * (size_t)n * 4);
  l.ptrs = l.ob + kp_align(P * (size_t)k * 2);
  l.total = l.ptrs + kp_align(6 * P * sizeof(void *));
  return l;
}

size_t kp_moe_scratch_bytes(int32_t m, int32_t topk, int64_t n, int64_t k) {
  return kp_moe_layout_of(m, topk, n, k).total;
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
  /* a thread per expert (a block of E, at least one warp): fewer threads, cheaper barriers */
  const int threads = E < 32 ? 32 : (E + 31) / 32 * 32;
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

/* ---- the direct family (rows 1..8): the gemv's math, routed in every block, no plan ----
 *   up    a block per (R x J gate/up columns, pair p); each warp reads ids
 *         itself (one round of loads), so its weight loads follow the PDL
 *         wait by one L2 round trip and no block barrier. The warps of an
 *         expert's first pair compute it for every row routed to it (each
 *         active expert once) and write h[pair] for each of its pairs; a warp
 *         takes J columns in turn. Under PDL it waits before it reads ids,
 *         then lets down launch.
 *   down  the gemv's down (a warp per output column walks the active experts
 *         ascending, lane t keeps row t's weighted sum), with the routing and
 *         the gates built in shared memory once per block from ids, so no
 *         global load waits between two experts. They are read before the
 *         PDL wait (final once up has passed its wait, and down launches only
 *         after that), and so is the first batch of W_down: it streams while
 *         up runs out.
 * Every sum is the gemv family's, in its order: the bits are moe.gemv's. */
static constexpr int kp_moe_direct_pairs = kp_moe_gemv_rows * KPICK_MAX_TOPK;

/* an id or gate another kernel wrote, read past L1 (this SM's L1 may hold an older step's) */
__device__ __forceinline__ int32_t kp_moe_ld_id(const int32_t *p) {
#if defined(KPICK_GPU_CUDA)
  return __ldcg(p);
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}
__device__ __forceinline__ float kp_moe_ld_gate(const float *p) { return kp_ld_coherent(p); }

/* bit l: lane l's pred (the warp's lanes, 32 or 64) */
__device__ __forceinline__ uint64_t kp_moe_ballot(bool pred) {
#if defined(KPICK_GPU_CUDA)
  return __ballot_sync(0xffffffffu, pred);
#else
  return __ballot(pred);
#endif
}

/* the warp's shared-memory writes seen by all its lanes */
__device__ __forceinline__ void kp_moe_syncwarp() {
#if defined(KPICK_GPU_CUDA)
  __syncwarp();
#else
  __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "wavefront");
  __builtin_amdgcn_wave_barrier();
#endif
}

template <int DT, int M, int U, bool PDL>
__global__ void __launch_bounds__(8 * KP_WARP)
    kp_moe_direct_up_kernel(const uint16_t *__restrict__ x, const uint16_t *__restrict__ wgu,
                            const int32_t *__restrict__ ids, uint16_t *__restrict__ h, int32_t m, int32_t topk,
                            int32_t E, int64_t N, int64_t K) {
  __shared__ int32_t s_pair[8][M]; /* per warp: its expert's pairs, rows ascending */
  kp_batch_fence(true);            /* ids and x are earlier kernels' outputs */
  if (PDL) kp_pdl_trigger();
  const int lane = threadIdx.x % kp_warp, warp = threadIdx.x / kp_warp, p = blockIdx.y, P = m * topk;
  const int e = kp_moe_ld_id(ids + p);
  if (e < 0 || e >= E) return; /* block-uniform */
  /* the expert's pairs, a warp's width of ids at a time: p must be the first */
  int cnt = 0;
  bool later = false;
  for (int b = 0; b < P; b += kp_warp) {
    const int i = b + lane;
    const bool hit = i < P && kp_moe_ld_id(ids + i) == e;
    const uint64_t mask = kp_moe_ballot(hit);
    if (hit && i < p) later = true;
    if (hit) {
      const int rank = cnt + __popcll(mask & (((uint64_t)1 << lane) - 1));
      if (rank < M) s_pair[warp][rank] = i; /* a row that repeats the expert could pass M: clamped */
    }
    cnt += __popcll(mask);
  }
  if (kp_moe_ballot(later) != 0) return; /* warp-uniform: another block owns the expert */
  kp_moe_syncwarp();
  const int rows = cnt < M ? cnt : M;
  const uint16_t *xr[M];
#pragma unroll
  for (int i = 0; i < M; ++i) xr[i] = x + (int64_t)(s_pair[warp][i < rows ? i : rows - 1] / topk) * K;
  const int64_t stride = (int64_t)gridDim.x * (blockDim.x / kp_warp);
  for (int64_t n = (int64_t)blockIdx.x * (blockDim.x / kp_warp) + warp; n < N; n += stride) {
    const uint16_t *w[2] = {wgu + ((int64_t)e * 2 * N + n) * K, wgu + ((int64_t)e * 2 * N + N + n) * K};
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
    if (lane < rows) h[(int64_t)s_pair[warp][lane] * N + n] = kp_round<DT>(mine);
  }
}

template <int DT, int M, int U, bool PDL>
__global__ void __launch_bounds__(8 * KP_WARP)
    kp_moe_direct_down_kernel(const uint16_t *__restrict__ h, const uint16_t *__restrict__ wd,
                              const int32_t *__restrict__ ids, const float *__restrict__ weights,
                              uint16_t *__restrict__ y, int32_t m, int32_t topk, int32_t E, int64_t N, int64_t K) {
  __shared__ int32_t s_ids[kp_moe_direct_pairs], s_at[kp_moe_direct_pairs], s_order[kp_moe_direct_pairs];
  __shared__ int32_t s_used[kp_moe_direct_pairs], s_start[kp_moe_direct_pairs + 1];
  __shared__ float s_gate[kp_moe_direct_pairs];
  __shared__ int s_nused, s_nvalid;
  if (PDL) kp_pdl_trigger();
  const int P = m * topk;
  if (threadIdx.x == 0) s_nused = 0, s_nvalid = 0;
  for (int i = threadIdx.x; i < P; i += blockDim.x) s_ids[i] = kp_moe_ld_id(ids + i), s_gate[i] = kp_moe_ld_gate(weights + i);
  __syncthreads();
  /* pairs grouped by expert ascending, rows ascending within one (the plan's order) */
  for (int i = threadIdx.x; i < P; i += blockDim.x) {
    const int e = s_ids[i];
    s_at[i] = -1;
    if (e < 0 || e >= E) continue;
    int less = 0, before = 0;
    for (int j = 0; j < P; ++j) {
      const int f = s_ids[j];
      less += f >= 0 && f < e;
      before += j < i && f == e;
    }
    s_order[less + before] = i;
    s_at[i] = before == 0 ? less : -1; /* the expert's first pair: where its pairs start */
    atomicAdd(&s_nvalid, 1);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < P; i += blockDim.x) {
    if (s_at[i] < 0) continue;
    int rank = 0;
    for (int j = 0; j < P; ++j) rank += s_at[j] >= 0 && s_ids[j] < s_ids[i];
    s_used[rank] = s_ids[i];
    s_start[rank] = s_at[i];
    atomicAdd(&s_nused, 1);
  }
  __syncthreads();
  const int nused = s_nused;
  if (threadIdx.x == 0) s_start[nused] = s_nvalid;
  __syncthreads();
  const int lane = threadIdx.x % kp_warp;
  const int64_t c = (int64_t)blockIdx.x * (blockDim.x / kp_warp) + threadIdx.x / kp_warp;
  if (c >= K) return; /* no barrier follows */
  constexpr int chunk = kp_warp * 8;
  const int nq = (int)((N + chunk - 1) / chunk), total = nused * nq;
  const kp_v16 zero = {0u, 0u, 0u, 0u};
  float acc[M];
#pragma unroll
  for (int i = 0; i < M; ++i) acc[i] = 0.0f;
  float mine = 0.0f;
  /* the next piece to load, (expert lu, piece lq), its row of W_down: counters, no division */
  int lu = 0, lq = 0;
  const uint16_t *lrow = nused > 0 ? wd + ((int64_t)s_used[0] * K + c) * N + lane * 8 : wd;
#pragma unroll 1
  for (int i0 = 0; i0 < total; i0 += U) {
    kp_v16 wv[U];
    int bu[U], bq[U];
#pragma unroll
    for (int b = 0; b < U; ++b) {
      bu[b] = lu, bq[b] = lq;
      const bool live = i0 + b < total && lq * chunk + lane * 8 < N;
      wv[b] = live ? kp_ld_stream(lrow + lq * chunk) : zero;
      if (++lq == nq) {
        lq = 0;
        if (++lu < nused) lrow = wd + ((int64_t)s_used[lu] * K + c) * N + lane * 8;
      }
    }
    kp_batch_fence(i0 == 0); /* under PDL: h is up's output */
#pragma unroll
    for (int b = 0; b < U; ++b) {
      if (i0 + b >= total) continue;
      const int u = bu[b], q = bq[b], s = s_start[u], cnt = s_start[u + 1] - s;
      const int off = q * chunk + lane * 8;
      if (off < N) {
        float wf[8];
        kp_unpack8<DT>(wv[b], wf);
#pragma unroll
        for (int r = 0; r < M; ++r) {
          if (r >= cnt) continue;
          float xf[8];
          kp_unpack8<DT>(kp_ld_act(h + (int64_t)s_order[s + r] * N + off), xf);
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
          const int pair = s_order[s + r];
          if (lane == pair / topk) mine += s_gate[pair] * d;
          acc[r] = 0.0f;
        }
      }
    }
  }
  kp_batch_fence(true); /* no active expert: the loop never waited */
  if (lane < m) y[(int64_t)lane * K + c] = kp_round<DT>(mine);
}

/* ---- the mma family ---- */
struct kp_moe_mma_args {
  const uint16_t *x;   /* gate/up: x [m, K]; down: h [P, N] in plan order */
  const uint16_t *w;   /* gate/up: W_gate_up; down: W_down */
  void *out;           /* gate/up: h (dtype); down: o fp32 [P, K] in plan order */
  const kp_moe_plan *pl;
  int32_t topk;
  int64_t n, k;        /* the expert's N (intermediate) and K (hidden) */
  int32_t chunk;       /* the plan's rows per item */
};

#if defined(KP_MMA_NV) || defined(KP_MMA_MFMA)
/* One work item (blockIdx.y: up to a.chunk pairs of one expert, NT * kp_mma_cols at a time) by a
 * tile of its weights (blockIdx.x): gate/up (MODE gated, 8 gate rows over
 * their 8 up rows, len K) or down (MODE linear, 16 rows of W_down, len N).
 * The warps split the steps; partial tiles meet in shared memory in warp
 * order (mma_core.h's kernel, with gathered activation rows). */
template <int DT, int NT, int U, int MODE, bool PDL>
__global__ void __launch_bounds__(kp_mma_max_warps * KP_WARP) kp_moe_mma_kernel(kp_moe_mma_args a) {
  if (PDL) kp_pdl_trigger();
  kp_batch_fence(true);
  const kp_moe_plan *pl = a.pl;
  const int it = blockIdx.y;
  if (it >= pl->nitems) return;
  const int lane = threadIdx.x % kp_warp, warp = threadIdx.x / kp_warp, nwarps = blockDim.x / kp_warp;
  const int u = pl->item_u[it], s_item = pl->start[u] + pl->item_r0[it], left = pl->start[u + 1] - s_item;
  const int rows_item = left < a.chunk ? left : a.chunk;
  const int64_t e = pl->used[u], N = a.n, K = a.k;
  const bool up = MODE == KP_MMA_GATED;
  const int64_t rows = up ? N : K, len = up ? K : N; /* tile rows (per half for gate/up), reduction length */
  const uint16_t *w = a.w + (up ? e * 2 * N * K : e * K * N);
  const int64_t n0 = (int64_t)blockIdx.x * (up ? 8 : 16);

  const int64_t nsteps = (len + kp_mma_step - 1) / kp_mma_step, full = len / kp_mma_step;
  const int64_t s0 = warp * nsteps / nwarps, s1 = (warp + 1) * nsteps / nwarps;
  const int koff = kp_lane_koff(lane);
  const uint16_t *wr[kp_mma_wrows];
#pragma unroll
  for (int j = 0; j < kp_mma_wrows; ++j) wr[j] = w + kp_tile_wrow<MODE>(n0, kp_lane_tile_row(lane, j), rows) * len + koff;
  /* the item's rows a tile at a time: after the first, the tile's weights come from L2 */
  for (int r0 = 0; r0 < rows_item; r0 += NT * kp_mma_cols) {
    const int s = s_item + r0, cnt = rows_item - r0 < NT * kp_mma_cols ? rows_item - r0 : NT * kp_mma_cols;
    const uint16_t *xr[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int col = t * kp_mma_cols + kp_lane_col(lane), at = s + (col < cnt ? col : cnt - 1);
      xr[t] = up ? a.x + (int64_t)(pl->order[at] / a.topk) * K + koff : a.x + (int64_t)at * N + koff;
    }
    kp_frag acc[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[t][i] = 0.0f;
    const int64_t e1 = s1 < full ? s1 : full;
    int64_t st = s0;
#pragma unroll 1
    for (; st + U <= e1; st += U) kp_mma_steps<DT, NT, U>(wr, xr, st * kp_mma_step, acc, false);
    if constexpr (U > 8) if (st + 8 <= e1) { kp_mma_steps<DT, NT, 8>(wr, xr, st * kp_mma_step, acc, false); st += 8; }
    if constexpr (U > 4) if (st + 4 <= e1) { kp_mma_steps<DT, NT, 4>(wr, xr, st * kp_mma_step, acc, false); st += 4; }
    if (st + 2 <= e1) { kp_mma_steps<DT, NT, 2>(wr, xr, st * kp_mma_step, acc, false); st += 2; }
    if (st + 1 <= e1) { kp_mma_steps<DT, NT, 1>(wr, xr, st * kp_mma_step, acc, false); st += 1; }
    if (st < s1) kp_mma_step_masked<DT, NT>(wr, xr, st * kp_mma_step, st * kp_mma_step + koff < len, acc, false);

    __shared__ float red[kp_mma_max_warps][kp_mma_cols][kp_mma_pad];
#pragma unroll
    for (int t = 0; t < NT; ++t) {
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
          ((uint16_t *)a.out)[(int64_t)(s + p) * N + n] = kp_round<DT>(kp_silu_mul(v, g));
        } else {
          ((float *)a.out)[(int64_t)(s + p) * K + n] = v;
        }
      }
      __syncthreads();
    }
  }
}
#else
template <int DT, int NT, int U, int MODE, bool PDL>
__global__ void kp_moe_mma_kernel(kp_moe_mma_args a) {
  __builtin_trap();
}
#endif

/* y[t, c] = sum over t's valid slots in ascending expert id of weight * o,
 * fp32, rounded once; o is fp32 in plan order (PAIR = false) or the dtype
 * per pair (PAIR = true: moe.blas). A block per (row, 256 columns). */
template <int DT, bool PAIR>
__global__ void __launch_bounds__(256)
    kp_moe_combine_kernel(const void *__restrict__ o, const kp_moe_plan *pl, const int32_t *__restrict__ ids,
                          const float *__restrict__ weights, uint16_t *__restrict__ y, int32_t topk, int32_t E, int64_t K) {
  __shared__ int32_t ord[KPICK_MAX_TOPK], where[KPICK_MAX_TOPK];
  __shared__ int n;
  const int t = blockIdx.x;
  if (threadIdx.x == 0) {
    int k = 0;
    for (int j = 0; j < topk; ++j) { /* insertion sort of the valid slots by expert id */
      const int e = ids[t * topk + j];
      if (e < 0 || e >= E) continue;
      int i = k++;
      while (i > 0 && ids[t * topk + ord[i - 1]] > e) ord[i] = ord[i - 1], i--;
      ord[i] = j;
    }
    for (int i = 0; i < k; ++i) where[i] = PAIR ? t * topk + ord[i] : pl->pos[t * topk + ord[i]];
    n = k;
  }
  __syncthreads();
  const int64_t c = (int64_t)blockIdx.y * blockDim.x + threadIdx.x;
  if (c < K) {
    float sum = 0.0f;
#pragma unroll 4
    for (int i = 0; i < n; ++i) {
      const float v = PAIR ? kp_load1<DT>((const uint16_t *)o + (int64_t)where[i] * K + c)
                           : ((const float *)o)[(int64_t)where[i] * K + c];
      sum += weights[t * topk + ord[i]] * v;
    }
    y[(int64_t)t * K + c] = kp_round<DT>(sum);
  }
}

/* ---- moe.blas: pointer arrays for the vendor's batched GEMM ---- */
__global__ void kp_moe_pointers_kernel(const uint16_t *x, const uint16_t *wgu, const uint16_t *wd, const int32_t *ids,
                                       int32_t E, int32_t P, int32_t topk, int64_t N, int64_t K, uint16_t *gu,
                                       uint16_t *hb, uint16_t *ob, const void **ptr) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= P) return;
  const int64_t e = ids[i] >= 0 && ids[i] < E ? ids[i] : 0; /* an invalid slot is computed, then skipped */
  ptr[i] = wgu + e * 2 * N * K;
  ptr[P + i] = x + (int64_t)(i / topk) * K;
  ptr[2 * P + i] = gu + (int64_t)i * 2 * N;
  ptr[3 * P + i] = wd + e * K * N;
  ptr[4 * P + i] = hb + (int64_t)i * N;
  ptr[5 * P + i] = ob + (int64_t)i * K;
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
  const kp_moe_layout l = kp_moe_layout_of(c->m, mc->topk, c->n, c->k);
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
template <int DT>
static int kp_moe_combine(const struct kp_call *c, const void *o, const kp_moe_plan *pl, bool pair) {
  const struct kp_moe_call *mc = c->moe;
  const auto k = pair ? kp_moe_combine_kernel<DT, true> : kp_moe_combine_kernel<DT, false>;
  KP_GPU(kp_launch(k, dim3((unsigned)c->m, (unsigned)((c->k + 255) / 256)), dim3(256), c->stream, false, o, pl, mc->ids, mc->weights,
                   (uint16_t *)c->y, mc->topk, mc->experts, c->k));
  return KPICK_OK;
}

int kp_moe_blas_launch(const struct kp_call *c) {
  const struct kp_moe_call *mc = c->moe;
  if (!kp_moe_blas_available()) return kp_fail(KPICK_E_UNSUPPORTED, "moe.blas", "cuBLAS could not be loaded");
  const int P = c->m * mc->topk;
  const kp_moe_layout l = kp_moe_layout_of(c->m, mc->topk, c->n, c->k);
  char *base = (char *)mc->ws->temp;
  const void **ptr = (const void **)(base + l.ptrs);
  KP_GPU(kp_launch(kp_moe_pointers_kernel, dim3((unsigned)((P + 127) / 128)), dim3(128), c->stream, false,
                   (const uint16_t *)c->x, (const uint16_t *)c->w, (const uint16_t *)mc->w_down, mc->ids, mc->experts,
                   P, mc->topk, c->n, c->k, (uint16_t *)(base + l.gu), (uint16_t *)(base + l.h),
                   (uint16_t *)(base + l.ob), ptr));
  KP_TRY(kp_moe_blas_gemms(c, ptr, P));
  return c->dtype == KP_DT_BF16 ? kp_moe_combine<KP_DT_BF16>(c, base + l.ob, nullptr, true)
                                : kp_moe_combine<KP_DT_FP16>(c, base + l.ob, nullptr, true);
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
  const kp_moe_layout l = kp_moe_layout_of(c->m, mc->topk, c->n, c->k);
  char *base = (char *)mc->ws->temp;
  kp_moe_plan *pl = (kp_moe_plan *)(base + l.plan);
  uint16_t *h = (uint16_t *)(base + l.h);
  const int P = c->m * mc->topk, max_used = P < mc->experts ? P : mc->experts;
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

typedef void (*kp_moe_direct_up_fn)(const uint16_t *, const uint16_t *, const int32_t *, uint16_t *, int32_t, int32_t,
                                     int32_t, int64_t, int64_t);
typedef void (*kp_moe_direct_down_fn)(const uint16_t *, const uint16_t *, const int32_t *, const float *, uint16_t *,
                                      int32_t, int32_t, int32_t, int64_t, int64_t);
/* the kernels of one direct row: [dtype][m - 1], m = 1 .. rows_max */
struct kp_moe_direct_set {
  kp_moe_direct_up_fn up[2][kp_moe_gemv_rows];
  kp_moe_direct_down_fn down[2][kp_moe_gemv_rows];
};

template <int DT, int U, bool PDL, int M>
static void kp_moe_direct_fill(kp_moe_direct_set &s) {
  s.up[DT][M - 1] = kp_moe_direct_up_kernel<DT, M, U, PDL>;
  s.down[DT][M - 1] = kp_moe_direct_down_kernel<DT, M, U, PDL>;
  if constexpr (M > 1) kp_moe_direct_fill<DT, U, PDL, M - 1>(s);
}

template <int ID>
static kp_moe_direct_set kp_moe_direct_row() {
  constexpr kp_def r = kp_defs[ID];
  if constexpr (r.family == KP_FAM_moe_direct && (!r.pdl() || kp_pdl_built)) {
    static_assert(r.rows_max >= 1 && r.rows_max <= kp_moe_gemv_rows && r.rows_max <= 32,
                  "moe direct: rows stop at 8 (lane t keeps row t)");
    static_assert(r.p0 >= 1 && r.p0 <= 8, "moe direct: R is 1..8 warps per block");
    static_assert(r.p1 == 4 || r.p1 == 8 || r.p1 == 16, "moe direct: U is 4, 8 or 16");
    static_assert(r.p2 >= 1, "moe direct: J is at least one column per warp");
    kp_moe_direct_set s = {};
    kp_moe_direct_fill<KP_DT_BF16, r.p1, r.pdl(), r.rows_max>(s);
    kp_moe_direct_fill<KP_DT_FP16, r.p1, r.pdl(), r.rows_max>(s);
    return s;
  } else {
    return kp_moe_direct_set{};
  }
}

static const kp_moe_direct_set kp_moe_direct_sets[KP_NCAND] = {
#define CPU(...)
#define GPU(id, ...) kp_moe_direct_row<KP_CAND_##id>(),
#include "../space.def"
};

int kp_moe_direct_built(int32_t cand) { return kp_moe_direct_sets[cand].up[0][0] != nullptr; }

int kp_moe_direct_launch(const struct kp_call *c, int warps, int columns_per_warp) {
  const struct kp_moe_call *mc = c->moe;
  const kp_moe_direct_set &set = kp_moe_direct_sets[c->cand];
  const int d = c->dtype == KP_DT_BF16 ? 0 : 1;
  const kp_moe_direct_up_fn up = c->m >= 1 && c->m <= kp_moe_gemv_rows ? set.up[d][c->m - 1] : nullptr;
  const kp_moe_direct_down_fn down = c->m >= 1 && c->m <= kp_moe_gemv_rows ? set.down[d][c->m - 1] : nullptr;
  if (!up || !down || warps < 1 || warps > 8 || columns_per_warp < 1)
    return kp_fail(KPICK_E_UNSUPPORTED, "moe.direct", "no kernel for m=%d, R=%d, J=%d, pdl=%d", (int)c->m, warps,
                   columns_per_warp, c->pdl);
  const kp_moe_layout l = kp_moe_layout_of(c->m, mc->topk, c->n, c->k);
  uint16_t *h = (uint16_t *)((char *)mc->ws->temp + l.h); /* h [P, N] by pair */
  const int P = c->m * mc->topk;
  const int64_t per_block = (int64_t)warps * columns_per_warp;
  const bool pdl = c->pdl != 0;
  const dim3 block(warps * c->warp);
  KP_GPU(kp_launch(up, dim3((unsigned)((c->n + per_block - 1) / per_block), (unsigned)P), block, c->stream, pdl,
                   (const uint16_t *)c->x, (const uint16_t *)c->w, mc->ids, h, c->m, mc->topk, mc->experts, c->n,
                   c->k));
  KP_GPU(kp_launch(down, dim3((unsigned)((c->k + warps - 1) / warps)), block, c->stream, pdl, (const uint16_t *)h,
                   (const uint16_t *)mc->w_down, mc->ids, mc->weights, (uint16_t *)c->y, c->m, mc->topk, mc->experts,
                   c->n, c->k));
  return KPICK_OK;
}

typedef void (*kp_moe_mma_fn)(kp_moe_mma_args);
/* rows of one expert a block takes at most (4 tiles of 8 on NVIDIA) */
static constexpr int kp_moe_mma_chunk = 4 * kp_mma_cols;
struct kp_moe_mma_set {
  kp_moe_mma_fn up[2], down[2];
  int tiles;
};

template <int ID>
static kp_moe_mma_set kp_moe_mma_row() {
  constexpr kp_def r = kp_defs[ID];
  if constexpr (r.family == KP_FAM_moe_mma && (!r.pdl() || kp_pdl_built)) {
    static_assert(r.p0 >= 1 && r.p0 <= kp_mma_max_warps, "moe mma: W is 1..8 warps");
    static_assert(r.p1 == 8 || r.p1 == 16, "moe mma: U is 8 or 16");
    static_assert(r.p2 == 1 || r.p2 == 2 || r.p2 == 4 || r.p2 == 8, "moe mma: T is 1, 2, 4 or 8 column tiles");
    return kp_moe_mma_set{{kp_moe_mma_kernel<KP_DT_BF16, r.p2, r.p1, KP_MMA_GATED, r.pdl()>,
                           kp_moe_mma_kernel<KP_DT_FP16, r.p2, r.p1, KP_MMA_GATED, r.pdl()>},
                          {kp_moe_mma_kernel<KP_DT_BF16, r.p2, r.p1, KP_MMA_LINEAR, r.pdl()>,
                           kp_moe_mma_kernel<KP_DT_FP16, r.p2, r.p1, KP_MMA_LINEAR, r.pdl()>},
                          r.p2};
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
  if (!set.up[0] || warps < 1 || warps > kp_mma_max_warps)
    return kp_fail(KPICK_E_UNSUPPORTED, "moe.mma", "no kernel for W=%d, pdl=%d", warps, c->pdl);
  const kp_moe_layout l = kp_moe_layout_of(c->m, mc->topk, c->n, c->k);
  char *base = (char *)mc->ws->temp;
  kp_moe_plan *pl = (kp_moe_plan *)(base + l.plan);
  /* an item per active expert and one more per kp_moe_mma_chunk rows past its first (the
   * kernel walks an item's rows a tile at a time): where rows share an expert (skewed
   * routing) its rows spread over blocks, while each item keeps its tile's weights in L2 */
  const int tile = set.tiles * kp_mma_cols, chunk = tile > kp_moe_mma_chunk ? tile : kp_moe_mma_chunk;
  const int P = c->m * mc->topk, max_items = (P < mc->experts ? P : mc->experts) + P / chunk;
  const bool pdl = c->pdl != 0;
  KP_TRY(kp_moe_plan_launch(mc->ids, c->m, mc->topk, mc->experts, chunk, pl, c->stream, pdl));
  const dim3 block(warps * c->warp);
  kp_moe_mma_args up = {(const uint16_t *)c->x, (const uint16_t *)c->w, base + l.h, pl, mc->topk, c->n, c->k, chunk};
  KP_GPU(kp_launch(set.up[d], dim3((unsigned)((c->n + 7) / 8), (unsigned)max_items), block, c->stream, pdl, up));
  kp_moe_mma_args down = {(const uint16_t *)(base + l.h), (const uint16_t *)mc->w_down, base + l.o, pl, mc->topk,
                          c->n, c->k, chunk};
  KP_GPU(kp_launch(set.down[d], dim3((unsigned)((c->k + 15) / 16), (unsigned)max_items), block, c->stream, pdl, down));
  return c->dtype == KP_DT_BF16 ? kp_moe_combine<KP_DT_BF16>(c, base + l.o, pl, false)
                                : kp_moe_combine<KP_DT_FP16>(c, base + l.o, pl, false);
}

/* ---- the read floor over the experts a call reads ---- */
static constexpr int kp_moe_read_threads = 512, kp_moe_read_u = 8;

/* blockIdx.y: region 2u (W_gate_up of used[u]) or 2u + 1 (its W_down) */
template <bool PDL>
__global__ void __launch_bounds__(kp_moe_read_threads)
    kp_moe_read_kernel(const char *w, const int32_t *used, int64_t gu_bytes, int64_t dn_bytes, int64_t E, float *sink) {
  if (PDL) kp_pdl_trigger();
  const int64_t e = used[blockIdx.y >> 1];
  const bool gu = (blockIdx.y & 1) == 0;
  const kp_v16 *p = (const kp_v16 *)(gu ? w + e * gu_bytes : w + E * gu_bytes + e * dn_bytes);
  const size_t n16 = (size_t)(gu ? gu_bytes : dn_bytes) / 16;
  const size_t base = (size_t)blockIdx.x * kp_moe_read_threads * kp_moe_read_u + threadIdx.x;
  kp_v16 v[kp_moe_read_u];
#pragma unroll
  for (int q = 0; q < kp_moe_read_u; ++q) {
    const size_t i = base + (size_t)q * kp_moe_read_threads;
    v[q] = i < n16 ? kp_ld_stream(p + i) : kp_v16{0u, 0u, 0u, 0u};
  }
  kp_batch_fence(true);
  float a = 0.0f;
#pragma unroll
  for (int q = 0; q < kp_moe_read_u; ++q) a += __uint_as_float(v[q].x ^ v[q].y ^ v[q].z ^ v[q].w);
  if (a == 1.5e-30f) *sink = a;
}

int kp_moe_floor_launch(const void *w, const int32_t *used, int32_t nused, int32_t experts, int64_t n, int64_t k,
                        float *sink, hipStream_t stream, int pdl) {
  const int64_t gu = 2 * n * k * 2, dn = k * n * 2, per_block = (int64_t)kp_moe_read_threads * kp_moe_read_u * 16;
  const dim3 grid((unsigned)((gu + per_block - 1) / per_block), (unsigned)(2 * nused)), block(kp_moe_read_threads);
#if defined(KPICK_GPU_CUDA)
  if (pdl) {
    KP_GPU(kp_launch(kp_moe_read_kernel<true>, grid, block, stream, true, (const char *)w, used, gu, dn,
                     (int64_t)experts, sink));
    return KPICK_OK;
  }
#else
  if (pdl) return kp_fail(KPICK_E_UNSUPPORTED, "floor", "no PDL on this target");
#endif
  KP_GPU(kp_launch(kp_moe_read_kernel<false>, grid, block, stream, false, (const char *)w, used, gu, dn,
                   (int64_t)experts, sink));
  return KPICK_OK;
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
