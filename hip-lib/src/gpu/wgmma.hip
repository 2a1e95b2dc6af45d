/* wgmma.hip: wgmma.mB.tT.sS[.pdl] and gated.wgmma.* -- the Hopper skinny GEMM
 * (CUDA sm_90a only; wgmma_core.h has the instruction-level pieces).
 *
 * Swap-AB: a block owns a tile of BM = 64 * WG rows of W, the 64-row A operand
 * of wgmma m64nNk16, and multiplies it by the activations as the narrow B
 * operand (N = rows padded up to 8, 16, 32, 64 or 128; padded rows are zeros
 * from the copy engine and never stored). One producer warp streams W and x
 * by TMA through a ring of T shared-memory stages, guarded by a full and an
 * empty mbarrier; a stage holds KB boxes of 64 K elements (kp_wg_boxes: up to
 * 4 where one wave of the grid leaves at most two blocks per SM, else 1).
 * WG consumer warpgroups (one per 64 W rows) wait on full, issue four k16
 * wgmmas per box and free the previous stage once its wgmmas retire, so one
 * box's math overlaps the next one's wait. (A first try at multi-box stages,
 * f294847, lost to wgmmas serialised in divergent code; a block alone on its
 * SM, one box per stage, moved ~25 GB/s: h200-2026-12-01-wgmma-kb-b8d363c.)
 * K is split over the S blocks of a thread-block cluster (grid.y = S): each
 * block leaves its fp32 tile in its shared memory, and after a cluster barrier
 * block q sums the q-th slice of the outputs over the S tiles in rank order
 * (distributed shared memory) and stores y: no scratch, one node, and the bits
 * depend on S only (each block's K range and the fixed sum order), not on WG,
 * T or the boxes per stage: one class head per S.
 *   gated: the tile is BM/2 gate rows over the matching BM/2 up rows (two TMA
 *          boxes per K box); silu(g) * u in fp32 in the epilogue.
 *   .pdl:  the first T stages' W boxes are issued before griddepcontrol.wait,
 *          x only after it (by TMA, never the read-only path); y is written
 *          only after the wait too. (Prefetching more of W into L2 before the
 *          wait lost 0-15 %: h200-2026-12-02-producer-l2pf.)
 *   w8a8:  fp8 weights (the W8A8 class, as the cuBLASLt default): x is first
 *          quantized to e4m3 codes and row scales by the default's own quant
 *          node (fp8.hip), then the same tile runs wgmma e4m3 x e4m3 (k32,
 *          128 codes a box: the same 128-byte boxes, half the bytes per K) and
 *          the epilogue applies x's row scale and W's channel scale, as the
 *          default's does (gated: g and u rounded to bf16 before silu-mul, where
 *          the default stores its 2n-wide product). y is bf16. With .pdl the
 *          quant lets this kernel start at once: W streams while x is quantized.
 * The kernels are those of the wgmma rows of space.def (rows.h).
 * Absent (kp_wgmma_built() = 0, kernels trap) on HIP and on CUDA builds without
 * an sm_90a pass (gpu.mk builds this file for compute_90a when ARCH=sm_90). */
#include "../common/error.h"
#include "check.h"
#include "launch.h"
#include "moe_plan.h"
#include "rows.h"
#include "wgmma_core.h"

#if defined(KPICK_GPU_CUDA)
#include <cuda.h>
#include <cudaTypedefs.h>
#endif

enum { KP_WG_LINEAR = 0, KP_WG_GATED = 1 };

static constexpr int kp_wg_max_split = 8; /* a portable cluster */
static constexpr int kp_wg_pad = 4;        /* epilogue tile row = BN + 4 floats: rows stay 16-byte aligned */

struct kp_wgmma_args {
  uint16_t *y;
  const float *sx, *sw; /* fp8: x's row scales, W's channel scales (2n gated); else null */
  int32_t m;
  int64_t n;      /* output columns */
  int32_t nbox;   /* ceil(K / kp_wg_kbox) */
  int32_t stages; /* T */
  int32_t kb;     /* K boxes per stage (kp_wg_boxes) */
};

#if defined(KP_WGMMA_DEVICE)
template <int DT, int BN, int WG, int MODE, bool PDL>
__global__ void __launch_bounds__(128 * WG + 32)
    kp_wgmma_kernel(const __grid_constant__ CUtensorMap wmap, const __grid_constant__ CUtensorMap xmap,
                    kp_wgmma_args p) {
  constexpr int BM = 64 * WG, consumers = 128 * WG, KBOX = kp_wg_kbox(DT);
  constexpr int YT = DT == KP_DT_FP8 ? KP_DT_BF16 : DT; /* y's storage type */
  constexpr uint32_t wbox = BM * 128, xbox = BN * 128, box_bytes = wbox + xbox;
  constexpr int LD = BN + kp_wg_pad; /* epilogue tile row stride, in floats */
  constexpr int OUT = MODE == KP_WG_GATED ? BM / 2 : BM;
  if (PDL) kp_pdl_trigger();

  extern __shared__ uint8_t kp_wg_raw[];
  __shared__ uint64_t full[kp_wg_max_stages], empty[kp_wg_max_stages];
  uint8_t *const ring = (uint8_t *)(((uintptr_t)kp_wg_raw + 1023) & ~(uintptr_t)1023);
  const int T = p.stages, KB = p.kb;
  const uint32_t stage_bytes = (uint32_t)KB * box_bytes;

  const int tid = threadIdx.x;
  if (tid == 0) {
    for (int s = 0; s < T; ++s) {
      kp_mbar_init(&full[s], 1);
      kp_mbar_init(&empty[s], consumers / 32);
    }
    kp_mbar_init_fence();
  }
  __syncthreads();

  const int S = gridDim.y, sp = blockIdx.y, tile = blockIdx.x;
  const int b0 = (int)((int64_t)sp * p.nbox / S), b1 = (int)((int64_t)(sp + 1) * p.nbox / S);
  const int nst = (b1 - b0 + KB - 1) / KB;                              /* stages */
  auto boxes = [&](int i) { return min(KB, b1 - b0 - i * KB); };       /* K boxes of stage i */
  const int64_t N = p.n;
  const int M = p.m;
  const int64_t n0 = (int64_t)tile * OUT;
  /* the warpgroup index, made visibly warp-uniform so that the wgmmas are not
   * treated as divergent code (which serialises them) */
  const int role = __shfl_sync(0xffffffffu, tid / 128, 0);

  if (role == WG) {
    /* ---- producer: one thread of the last warp ---- */
    if (tid == consumers) {
      kp_prefetch_tensormap(&wmap);
      kp_prefetch_tensormap(&xmap);
      const uint64_t pol_w = kp_policy_evict_first(), pol_x = kp_policy_evict_last();
      /* the W boxes of stage i back to back: one row's K chunks leave together */
      auto load_w = [&](int i, int s) {
        for (int j = 0; j < boxes(i); ++j) {
          uint8_t *dst = ring + (size_t)s * stage_bytes + (size_t)j * box_bytes;
          const int32_t k = (b0 + i * KB + j) * KBOX;
          if constexpr (MODE == KP_WG_GATED) {
            kp_tma_load(dst, &wmap, k, (int32_t)n0, &full[s], pol_w);
            kp_tma_load(dst + wbox / 2, &wmap, k, (int32_t)(N + n0), &full[s], pol_w);
          } else {
            kp_tma_load(dst, &wmap, k, (int32_t)n0, &full[s], pol_w);
          }
        }
      };
      /* PDL: the weights of the first stages stream while the previous kernel ends */
      const int pre = PDL ? (T < nst ? T : nst) : 0;
      for (int i = 0; i < pre; ++i) {
        kp_mbar_expect_tx(&full[i], (uint32_t)boxes(i) * box_bytes);
        load_w(i, i);
      }
      if (PDL) asm volatile("griddepcontrol.wait;" ::: "memory");
      for (int i = 0; i < nst; ++i) {
        const int s = i % T, round = i / T;
        if (i >= pre) {
          if (round > 0) kp_mbar_wait(&empty[s], (uint32_t)(round - 1) & 1u);
          kp_mbar_expect_tx(&full[s], (uint32_t)boxes(i) * box_bytes);
          load_w(i, s);
        }
        for (int j = 0; j < boxes(i); ++j)
          kp_tma_load(ring + (size_t)s * stage_bytes + (size_t)j * box_bytes + wbox, &xmap,
                      (b0 + i * KB + j) * KBOX, 0, &full[s], pol_x);
      }
    }
    __syncwarp();
    if (S > 1) { /* the cluster's two barriers of the epilogue */
      kp_cluster_sync();
      kp_cluster_sync();
    }
    return;
  }

  /* ---- consumers: warpgroup role multiplies W rows 64 role.. of the tile ---- */
  const int lane = tid % 32, warp = (tid % 128) / 32;
  float d[BN / 2];
  static_assert((LD * 4) % 16 == 0, "float4 rows");
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) d[i] = 0.0f;
  const uint32_t ring_addr = kp_smem_addr(ring);
  /* one K box per iteration, the loop of one box per stage, with the barriers
   * at a stage's first box only (b8d363c looped over a stage's boxes around the
   * wgmmas and ran N = 64 and 128 4-50 % slower than one box per stage did) */
  const int nbx = b1 - b0;
#pragma unroll 1
  for (int x = 0; x < nbx; ++x) {
    const int i = x / KB, j = x - i * KB, s = i % T;
    if (j == 0) kp_mbar_wait(&full[s], (uint32_t)(i / T) & 1u);
    const uint32_t box = ring_addr + (uint32_t)s * stage_bytes + (uint32_t)j * box_bytes;
    const uint32_t a = box + (uint32_t)role * 64 * 128, b = box + wbox;
    kp_wg_fence();
#pragma unroll
    for (int kk = 0; kk < kp_wg_slices; ++kk) kp_wgmma<DT, BN>(d, kp_wg_desc(a + kk * 32), kp_wg_desc(b + kk * 32));
    kp_wg_commit();
    /* the previous box's wgmmas have retired: at a stage's first box, the
     * previous stage's buffers may be refilled */
    kp_wg_wait<1>();
    if (j == 0 && i > 0 && lane == 0) kp_mbar_arrive(&empty[(i - 1) % T]);
  }
  kp_wg_wait<0>();
  if (PDL) asm volatile("griddepcontrol.wait;" ::: "memory"); /* before any global write */

  /* every consumer is past its last wgmma: the ring becomes the fp32 tile [BM][LD]
   * (columns past M hold the zeros of the padded rows) */
  kp_consumers_sync(consumers);
  float *t = reinterpret_cast<float *>(ring);
#pragma unroll
  for (int j = 0; j < BN / 8; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = role * 64 + warp * 16 + lane / 4 + 8 * (i / 2), col = 8 * j + 2 * (lane % 4) + (i % 2);
      t[row * LD + col] = d[4 * j + i];
    }

  /* output groups of 4 rows [g0, g1) of this block: all of them, or with
   * split-K the sp-th slice, each summed over the S tiles of the cluster in
   * rank order (float4 loads, S of them in flight) */
  const int groups = OUT * ((M + 3) / 4); /* only groups holding real rows */
  int g0 = 0, g1 = groups;
  if (S > 1) {
    kp_cluster_sync(); /* every tile of the cluster is written */
    g0 = (int)((int64_t)sp * groups / S);
    g1 = (int)((int64_t)(sp + 1) * groups / S);
  } else {
    kp_consumers_sync(consumers);
  }
  const float4 *peer[kp_wg_max_split];
#pragma unroll
  for (int q = 0; q < kp_wg_max_split; ++q)
    peer[q] = q < S ? (S > 1 ? kp_cluster_ptr(reinterpret_cast<const float4 *>(t), (uint32_t)q)
                             : reinterpret_cast<const float4 *>(t))
                    : nullptr;
  auto sum = [&](int r, int m4) {
    const int at = (r * LD + m4) / 4;
    float4 v = peer[0][at];
#pragma unroll
    for (int q = 1; q < kp_wg_max_split; ++q)
      if (q < S) {
        const float4 w = peer[q][at];
        v.x += w.x;
        v.y += w.y;
        v.z += w.z;
        v.w += w.w;
      }
    return v;
  };
  /* fp8: the sums times x's row scale times W's channel scale, each factor as the default's epilogue forms it */
  auto scaled = [&](float4 v, int64_t wrow, int m4) {
    if constexpr (DT == KP_DT_FP8) {
      const float sw = p.sw[wrow];
      v.x *= p.sx[m4] * sw;
      if (m4 + 1 < M) v.y *= p.sx[m4 + 1] * sw;
      if (m4 + 2 < M) v.z *= p.sx[m4 + 2] * sw;
      if (m4 + 3 < M) v.w *= p.sx[m4 + 3] * sw;
      if constexpr (MODE == KP_WG_GATED)
        v = make_float4(kp_bf16_round(v.x), kp_bf16_round(v.y), kp_bf16_round(v.z), kp_bf16_round(v.w));
    }
    return v;
  };
  for (int g = g0 + tid; g < g1; g += consumers) {
    const int r = g % OUT, m4 = (g / OUT) * 4;
    if (n0 + r >= N) continue;
    float4 v = scaled(sum(r, m4), n0 + r, m4);
    if constexpr (MODE == KP_WG_GATED) {
      const float4 u = scaled(sum(r + OUT, m4), N + n0 + r, m4);
      v = make_float4(kp_silu_mul(v.x, u.x), kp_silu_mul(v.y, u.y), kp_silu_mul(v.z, u.z), kp_silu_mul(v.w, u.w));
    }
    uint16_t *y = p.y + (int64_t)m4 * N + n0 + r;
    y[0] = kp_round<YT>(v.x);
    if (m4 + 1 < M) y[N] = kp_round<YT>(v.y);
    if (m4 + 2 < M) y[2 * N] = kp_round<YT>(v.z);
    if (m4 + 3 < M) y[3 * N] = kp_round<YT>(v.w);
  }
  if (S > 1) kp_cluster_sync(); /* no block leaves while another still reads its tile */
}
#elif defined(KPICK_GPU_CUDA)
/* no sm_90a pass in this build: the host never launches these */
template <int DT, int BN, int WG, int MODE, bool PDL>
__global__ void kp_wgmma_kernel(const __grid_constant__ CUtensorMap wmap, const __grid_constant__ CUtensorMap xmap,
                                kp_wgmma_args p) {
  __builtin_trap();
}
#endif

/* ---- moe.wgmma: the tile over a moe plan's work items ----
 * A block per (W tile, work item of moe.hip's plan: up to `chunk` rows of one
 * active expert). The expert's weights are rows e * wexp.. of one map over all
 * experts (gate/up: E x 2N rows of K; down: E x K rows of N), so the W rows a
 * tile reads past its expert's are never stored. x is the item's rows of a
 * buffer in plan order (gate/up: x gathered by moe.hip; down: h), one TMA box
 * of BN rows, BN the narrowest of 16, 32, 64 (and 128 in a BNMAX = 128 kernel,
 * moe.wgmma.x128's) holding the item (the rows past it are multiplied, never
 * stored). A stage holds KB K boxes (the row's), one
 * row's K chunks requested back to back as in kp_wgmma_kernel. gate/up stores h = silu(g) * u rounded to the dtype, down o in fp32,
 * both at the item's places in plan order (moe.hip's combine sums each row's
 * pairs). An output is one warpgroup's chain of wgmmas over the K boxes in
 * order: the bits depend on nothing of WG or T. */
struct kp_wgmma_moe_args {
  void *out;
  const kp_moe_plan *pl;
  int64_t n;    /* output columns: gate/up N, down K */
  int64_t wexp; /* W rows an expert: gate/up 2N, down K */
  int32_t nbox; /* ceil(reduction length / 64) */
  int32_t stages, kb, chunk; /* T stages of KB K boxes */
};

#if defined(KP_WGMMA_DEVICE)
template <int DT, int BN, int WG, int MODE>
__device__ __forceinline__ void kp_wgmma_moe_tile(const CUtensorMap *wmap, const CUtensorMap *xmap,
                                                  const kp_wgmma_moe_args &p, uint8_t *ring, uint64_t *full,
                                                  uint64_t *empty, int64_t e, int s, int cnt) {
  constexpr int BM = 64 * WG, consumers = 128 * WG, KBOX = kp_wg_kbox(DT);
  constexpr uint32_t wbox = BM * 128, box_bytes = wbox + BN * 128;
  constexpr int LD = BN + kp_wg_pad, OUT = MODE == KP_WG_GATED ? BM / 2 : BM;
  const int T = p.stages, KB = p.kb, nbx = p.nbox, nst = (nbx + KB - 1) / KB, tid = threadIdx.x;
  const uint32_t stage_bytes = (uint32_t)KB * box_bytes;
  const int64_t N = p.n, n0 = (int64_t)blockIdx.x * OUT, wrow = e * p.wexp;
  const int role = __shfl_sync(0xffffffffu, tid / 128, 0); /* warp-uniform, as in kp_wgmma_kernel */

  if (role == WG) { /* producer: one thread of the last warp */
    if (tid == consumers) {
      kp_prefetch_tensormap(wmap);
      kp_prefetch_tensormap(xmap);
      const uint64_t pol_w = kp_policy_evict_first(), pol_x = kp_policy_evict_last();
      for (int i = 0; i < nst; ++i) {
        const int st = i % T, round = i / T, boxes = min(KB, nbx - i * KB);
        if (round > 0) kp_mbar_wait(&empty[st], (uint32_t)(round - 1) & 1u);
        kp_mbar_expect_tx(&full[st], (uint32_t)boxes * box_bytes);
        for (int j = 0; j < boxes; ++j) { /* the W boxes of the stage back to back */
          uint8_t *dst = ring + (size_t)st * stage_bytes + (size_t)j * box_bytes;
          const int32_t k = (i * KB + j) * KBOX;
          if constexpr (MODE == KP_WG_GATED) {
            kp_tma_load(dst, wmap, k, (int32_t)(wrow + n0), &full[st], pol_w);
            kp_tma_load(dst + wbox / 2, wmap, k, (int32_t)(wrow + N + n0), &full[st], pol_w);
          } else {
            kp_tma_load(dst, wmap, k, (int32_t)(wrow + n0), &full[st], pol_w);
          }
        }
        for (int j = 0; j < boxes; ++j)
          kp_tma_load(ring + (size_t)st * stage_bytes + (size_t)j * box_bytes + wbox, xmap, (i * KB + j) * KBOX, s,
                      &full[st], pol_x);
      }
    }
    return;
  }

  const int lane = tid % 32, warp = (tid % 128) / 32;
  float d[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) d[i] = 0.0f;
  const uint32_t ring_addr = kp_smem_addr(ring);
#pragma unroll 1
  for (int x = 0; x < nbx; ++x) {
    const int i = x / KB, j = x - i * KB, st = i % T;
    if (j == 0) kp_mbar_wait(&full[st], (uint32_t)(i / T) & 1u);
    const uint32_t box = ring_addr + (uint32_t)st * stage_bytes + (uint32_t)j * box_bytes;
    const uint32_t a = box + (uint32_t)role * 64 * 128, b = box + wbox;
    kp_wg_fence();
#pragma unroll
    for (int kk = 0; kk < kp_wg_slices; ++kk) kp_wgmma<DT, BN>(d, kp_wg_desc(a + kk * 32), kp_wg_desc(b + kk * 32));
    kp_wg_commit();
    /* the previous box's wgmmas have retired: at a stage's first box the previous stage may be refilled */
    kp_wg_wait<1>();
    if (j == 0 && i > 0 && lane == 0) kp_mbar_arrive(&empty[(i - 1) % T]);
  }
  kp_wg_wait<0>();

  /* every consumer is past its last wgmma and every box has landed: the ring
   * becomes the fp32 tile [BM][LD] */
  kp_consumers_sync(consumers);
  float *t = reinterpret_cast<float *>(ring);
#pragma unroll
  for (int j = 0; j < BN / 8; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = role * 64 + warp * 16 + lane / 4 + 8 * (i / 2), col = 8 * j + 2 * (lane % 4) + (i % 2);
      t[row * LD + col] = d[4 * j + i];
    }
  kp_consumers_sync(consumers);
  const int groups = OUT * ((cnt + 3) / 4);
  for (int g = tid; g < groups; g += consumers) {
    const int r = g % OUT, m4 = (g / OUT) * 4;
    if (n0 + r >= N) continue;
    float4 v = *reinterpret_cast<const float4 *>(t + r * LD + m4);
    if constexpr (MODE == KP_WG_GATED) {
      const float4 u = *reinterpret_cast<const float4 *>(t + (r + OUT) * LD + m4);
      v = make_float4(kp_silu_mul(v.x, u.x), kp_silu_mul(v.y, u.y), kp_silu_mul(v.z, u.z), kp_silu_mul(v.w, u.w));
    }
    const float vs[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (m4 + j >= cnt) break;
      const int64_t at = (int64_t)(s + m4 + j) * N + n0 + r;
      if constexpr (MODE == KP_WG_GATED) ((uint16_t *)p.out)[at] = kp_round<DT>(vs[j]);
      else ((float *)p.out)[at] = vs[j];
    }
  }
}

template <int DT, int WG, int MODE, int BNMAX>
__global__ void __launch_bounds__(128 * WG + 32)
    kp_wgmma_moe_kernel(const __grid_constant__ CUtensorMap wmap, const __grid_constant__ CUtensorMap x16,
                        const __grid_constant__ CUtensorMap x32, const __grid_constant__ CUtensorMap x64,
                        const __grid_constant__ CUtensorMap x128, kp_wgmma_moe_args p) {
  extern __shared__ uint8_t kp_wg_raw[];
  __shared__ uint64_t full[kp_wg_max_stages], empty[kp_wg_max_stages];
  uint8_t *const ring = (uint8_t *)(((uintptr_t)kp_wg_raw + 1023) & ~(uintptr_t)1023);
  const kp_moe_plan *pl = p.pl;
  const int it = blockIdx.y;
  if (it >= pl->nitems) return; /* block-uniform, before any barrier */
  const int u = pl->item_u[it], s = pl->start[u] + pl->item_r0[it], left = pl->start[u + 1] - s;
  /* visibly warp-uniform, so that the BN branch holds no divergent wgmma */
  const int cnt = __shfl_sync(0xffffffffu, left < p.chunk ? left : p.chunk, 0);
  const int64_t e = pl->used[u];
  if (threadIdx.x == 0) {
    for (int q = 0; q < p.stages; ++q) {
      kp_mbar_init(&full[q], 1);
      kp_mbar_init(&empty[q], 128 * WG / 32);
    }
    kp_mbar_init_fence();
  }
  __syncthreads();
  if (cnt <= 16) kp_wgmma_moe_tile<DT, 16, WG, MODE>(&wmap, &x16, p, ring, full, empty, e, s, cnt);
  else if (cnt <= 32) kp_wgmma_moe_tile<DT, 32, WG, MODE>(&wmap, &x32, p, ring, full, empty, e, s, cnt);
  else if (BNMAX == 64 || cnt <= 64) kp_wgmma_moe_tile<DT, 64, WG, MODE>(&wmap, &x64, p, ring, full, empty, e, s, cnt);
  else if constexpr (BNMAX == 128) kp_wgmma_moe_tile<DT, 128, WG, MODE>(&wmap, &x128, p, ring, full, empty, e, s, cnt);
}
#elif defined(KPICK_GPU_CUDA)
template <int DT, int WG, int MODE, int BNMAX>
__global__ void kp_wgmma_moe_kernel(const __grid_constant__ CUtensorMap wmap, const __grid_constant__ CUtensorMap x16,
                                    const __grid_constant__ CUtensorMap x32, const __grid_constant__ CUtensorMap x64,
                                    const __grid_constant__ CUtensorMap x128, kp_wgmma_moe_args p) {
  __builtin_trap();
}
#endif

/* ---- host ---- */

static constexpr int kp_wg_bn(int32_t m) { return m <= 8 ? 8 : m <= 16 ? 16 : m <= 32 ? 32 : m <= 64 ? 64 : 128; }

static constexpr size_t kp_wg_smem_cap = 227 * 1024; /* sm_90 opt-in limit per block */

static size_t kp_wg_smem(int wg, int stages, int kb, int32_t m) {
  const size_t bn = (size_t)kp_wg_bn(m), bm = 64 * (size_t)wg;
  /* the tile's stride must be the kernel's: a stale one under-allocated the
   * configurations whose tile outgrows the ring (h200-2026-12-01-wgmma-12adcac) */
  const size_t ring = (size_t)stages * kb * (bm + bn) * 128, tile = bm * (bn + kp_wg_pad) * 4;
  return (ring > tile ? ring : tile) + 1024; /* + the 1024-byte alignment of the ring */
}

int kp_wgmma_fits(int wg, int stages, int s, int32_t m) {
  return stages >= 2 && stages <= kp_wg_max_stages && s >= 1 && s <= kp_wg_max_split &&
         kp_wg_smem(wg, stages, 1, m) <= kp_wg_smem_cap;
}

#if defined(KPICK_GPU_CUDA) && defined(KPICK_WGMMA_BUILT)
typedef void (*kp_wgmma_fn)(const CUtensorMap, const CUtensorMap, kp_wgmma_args);

/* dev knobs of the stage size, for A/B builds (bench/gpu/wgmma-dev.sh VARIANTS) */
#ifndef KP_WG_KB_MAX
#define KP_WG_KB_MAX 4 /* most K boxes per stage */
#endif
#ifndef KP_WG_KB_SPREAD
#define KP_WG_KB_SPREAD 2 /* stages of several boxes only where one wave needs at most this many blocks per SM */
#endif
static constexpr size_t kp_wg_sm_smem = 228 * 1024; /* shared memory of one sm_90 SM, 1 KB of it reserved per block */

/* K boxes per stage. A block alone (or one of two) on its SM moved about one
 * 8 KB box per DRAM round trip whatever the ring depth, ~25 GB/s, where a
 * stage of 4 boxes, one row's K chunks requested back to back, streams the
 * mid shapes near the read floor at rows 8-32 (h200-2026-12-01-wgmma-kb-b8d363c);
 * a grid of many blocks per SM keeps one box per stage, so they stay resident
 * (multi-box stages there cost 10-50 %). The stage shrinks until one wave of
 * the grid fits the SMs' shared memory. The bits do not depend on it. */
static int kp_wg_boxes(int wg, int stages, int32_t m, int64_t blocks, int sms) {
  const int64_t per_sm = (blocks + sms - 1) / sms;
  if (per_sm > KP_WG_KB_SPREAD) return 1;
  size_t room = kp_wg_sm_smem / (size_t)per_sm - 2048; /* its reserved KB and the static barriers */
  if (room > kp_wg_smem_cap) room = kp_wg_smem_cap;
  int kb = KP_WG_KB_MAX;
  while (kb > 1 && kp_wg_smem(wg, stages, kb, m) > room) kb /= 2;
  return kb;
}

/* The kernels of one wgmma row of space.def (rows.h): k[slot][log2(BN / 8)]
 * for every BN its rows reach (kp_wg_bn), slot 0 bf16 and 1 fp16, or for a
 * W8A8 row slot 0 fp8 alone; empty for rows of other families. */
static constexpr int kp_wg_bn_slots = 5; /* BN = 8, 16, 32, 64, 128 */
struct kp_wgmma_set {
  kp_wgmma_fn k[2][kp_wg_bn_slots];
};

template <int DT, int WG, int MODE, bool PDL, int BN>
static void kp_wgmma_fill(kp_wgmma_fn (&k)[kp_wg_bn_slots]) {
  k[kp_log2(BN / 8)] = kp_wgmma_kernel<DT, BN, WG, MODE, PDL>;
  if constexpr (BN > 8) kp_wgmma_fill<DT, WG, MODE, PDL, BN / 2>(k);
}

template <int ID>
static kp_wgmma_set kp_wgmma_row() {
  constexpr kp_def r = kp_defs[ID];
  kp_wgmma_set s = {};
  if constexpr (r.family == KP_FAM_wgmma) {
    static_assert(r.p0 == 1 || r.p0 == 2 || r.p0 == 4, "wgmma: WG is 1, 2 or 4 consumer warpgroups");
    static_assert(r.p1 >= 2 && r.p1 <= kp_wg_max_stages, "wgmma: T is 2..kp_wg_max_stages stages");
    static_assert(r.p2 >= 1 && r.p2 <= kp_wg_max_split, "wgmma: S is 1..8 blocks of a portable cluster");
    static_assert(r.rows_max >= 1 && r.rows_max <= kp_rows_limit, "wgmma: rows stop at 128 (kp_wg_bn's widest N)");
    constexpr int mode = r.op == KPICK_OP_GATED ? KP_WG_GATED : KP_WG_LINEAR, bn = kp_wg_bn(r.rows_max);
    static_assert((r.flags & KF_W8A16) == 0, "wgmma: fp8 rows are W8A8 (x quantized to e4m3)");
    if constexpr ((r.flags & KF_W8A8) != 0) {
      kp_wgmma_fill<KP_DT_FP8, r.p0, mode, r.pdl(), bn>(s.k[0]);
    } else {
      kp_wgmma_fill<KP_DT_BF16, r.p0, mode, r.pdl(), bn>(s.k[0]);
      kp_wgmma_fill<KP_DT_FP16, r.p0, mode, r.pdl(), bn>(s.k[1]);
    }
  }
  return s;
}

static const kp_wgmma_set kp_wgmma_sets[KP_NCAND] = {
#define CPU(...)
#define GPU(id, ...) kp_wgmma_row<KP_CAND_##id>(),
#include "../space.def"
};

/* cuTensorMapEncodeTiled through the runtime, so the library needs no -lcuda */
static PFN_cuTensorMapEncodeTiled_v12000 kp_encode_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void *f = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      f = nullptr;
    return (PFN_cuTensorMapEncodeTiled_v12000)f;
  }();
  return fn;
}

/* rows x k elements (dtype: KP_DT_FP8 for e4m3 codes), row-major, boxes of
 * box_rows x 128 bytes with 128-byte swizzle; reads past either edge come back as zeros */
static int kp_wg_map(CUtensorMap *map, int32_t dtype, const void *base, int64_t rows, int64_t k, int box_rows) {
  const PFN_cuTensorMapEncodeTiled_v12000 enc = kp_encode_fn();
  if (!enc) return kp_fail(KPICK_E_STATE, "wgmma", "cuTensorMapEncodeTiled is not available from the driver");
  const int esize = dtype == KP_DT_FP8 ? 1 : 2;
  const cuuint64_t dims[2] = {(cuuint64_t)k, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)k * esize};
  const cuuint32_t box[2] = {(cuuint32_t)kp_wg_kbox(dtype), (cuuint32_t)box_rows}, unit[2] = {1, 1};
  const CUtensorMapDataType type = dtype == KP_DT_FP8    ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                   : dtype == KP_DT_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                         : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const CUresult r = enc(map, type,
                         2, const_cast<void *>(base), dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                         CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return kp_fail(KPICK_E_DEVICE, "wgmma", "cuTensorMapEncodeTiled failed (%d) for %lld x %lld, box %d", (int)r,
                   (long long)rows, (long long)k, box_rows);
  return KPICK_OK;
}

/* the row's kernels, and the driver's tensor-map encoder they need */
int kp_wgmma_built(int32_t cand) { return kp_wgmma_sets[cand].k[0][0] != nullptr && kp_encode_fn() != nullptr; }

int kp_wgmma_launch(const struct kp_call *c, int wg, int stages, int s, const void *xq, const float *sx,
                    const float *sw) {
  const int gated = c->op == KPICK_OP_GATED, bn = kp_wg_bn(c->m), fp8 = c->dtype == KP_DT_FP8;
  const kp_wgmma_fn k = c->m >= 1 && c->m <= kp_rows_limit ? kp_wgmma_sets[c->cand].k[c->dtype == KP_DT_FP16 ? 1 : 0][kp_log2(bn / 8)] : nullptr;
  const int w8a8 = (kp_defs[c->cand].flags & KF_W8A8) != 0;
  if (w8a8 != fp8 || (fp8 && (!xq || !sx)))
    return kp_fail(KPICK_E_UNSUPPORTED, "wgmma", "a W8A8 row takes fp8 weights and x's codes and scales, the others bf16 or fp16");
  if (!k || wg != kp_defs[c->cand].p0 || !kp_wgmma_fits(wg, stages, s, c->m))
    return kp_fail(KPICK_E_UNSUPPORTED, "wgmma", "no kernel for m=%d, WG=%d, T=%d, S=%d, pdl=%d", (int)c->m, wg,
                   stages, s, c->pdl);
  static const int sms = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      n = 0;
    return n > 0 ? n : 132;
  }();
  /* built per launch: encoding is host work only (no device call) */
  CUtensorMap wmap, xmap;
  KP_TRY(kp_wg_map(&wmap, c->dtype, c->w, gated ? 2 * c->n : c->n, c->k, gated ? 32 * wg : 64 * wg));
  KP_TRY(kp_wg_map(&xmap, c->dtype, fp8 ? xq : c->x, c->m, c->k, bn));
  const int64_t rows = gated ? 32 * wg : 64 * wg, tiles = (c->n + rows - 1) / rows;
  const int kb = kp_wg_boxes(wg, stages, c->m, tiles * s, sms);
  const size_t smem = kp_wg_smem(wg, stages, kb, c->m);
  const int kbox = kp_wg_kbox(c->dtype);
  kp_wgmma_args a = {(uint16_t *)c->y, fp8 ? sx : nullptr, fp8 ? sw : nullptr, c->m, c->n, (int32_t)((c->k + kbox - 1) / kbox), stages, kb};
  KP_GPU(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[2];
  int na = 0;
  if (s > 1) { /* the S blocks of a tile form one cluster */
    attr[na].id = cudaLaunchAttributeClusterDimension;
    attr[na].val.clusterDim.x = 1;
    attr[na].val.clusterDim.y = (unsigned)s;
    attr[na].val.clusterDim.z = 1;
    ++na;
  }
  if (c->pdl) {
    attr[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[na].val.programmaticStreamSerializationAllowed = 1;
    ++na;
  }
  cfg.gridDim = dim3((unsigned)tiles, (unsigned)s);
  cfg.blockDim = dim3(128 * wg + 32);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = c->stream;
  cfg.attrs = attr;
  cfg.numAttrs = (unsigned)na;
  KP_GPU(cudaLaunchKernelEx(&cfg, k, wmap, xmap, a));
  return KPICK_OK;
}

/* ---- moe.wgmma's host side ---- */
/* an item's most rows, by family: moe.wgmma 64, moe.wgmma.x128 128 */
static constexpr int kp_wgmma_moe_family_bn(int family) { return family == KP_FAM_moe_wgmma_x128 ? 128 : 64; }
typedef void (*kp_wgmma_moe_fn)(const CUtensorMap, const CUtensorMap, const CUtensorMap, const CUtensorMap,
                                const CUtensorMap, kp_wgmma_moe_args);
/* the kernels of one moe.wgmma row: k[dtype slot: bf16, fp16][linear, gated],
 * and the widest x box they take (an item's most rows: 64, moe.wgmma.x128 128) */
struct kp_wgmma_moe_set {
  kp_wgmma_moe_fn k[2][2];
  int bn_max;
};

template <int ID>
static kp_wgmma_moe_set kp_wgmma_moe_row() {
  constexpr kp_def r = kp_defs[ID];
  kp_wgmma_moe_set s = {};
  if constexpr (r.family == KP_FAM_moe_wgmma || r.family == KP_FAM_moe_wgmma_x128) {
    static_assert(r.p0 == 1 || r.p0 == 2, "moe.wgmma: WG is 1 or 2 consumer warpgroups");
    static_assert(r.p1 >= 2 && r.p1 <= kp_wg_max_stages, "moe.wgmma: T is 2..kp_wg_max_stages stages");
    static_assert(r.p2 == 1 || r.p2 == 2 || r.p2 == 4, "moe.wgmma: KB is 1, 2 or 4 K boxes a stage");
    static_assert(!r.pdl(), "moe.wgmma: no .pdl rows");
    constexpr int bn = kp_wgmma_moe_family_bn(r.family);
    s.k[0][0] = kp_wgmma_moe_kernel<KP_DT_BF16, r.p0, KP_WG_LINEAR, bn>;
    s.k[0][1] = kp_wgmma_moe_kernel<KP_DT_BF16, r.p0, KP_WG_GATED, bn>;
    s.k[1][0] = kp_wgmma_moe_kernel<KP_DT_FP16, r.p0, KP_WG_LINEAR, bn>;
    s.k[1][1] = kp_wgmma_moe_kernel<KP_DT_FP16, r.p0, KP_WG_GATED, bn>;
    s.bn_max = bn;
  }
  return s;
}

static const kp_wgmma_moe_set kp_wgmma_moe_sets[KP_NCAND] = {
#define CPU(...)
#define GPU(id, ...) kp_wgmma_moe_row<KP_CAND_##id>(),
#include "../space.def"
};

int kp_wgmma_moe_built(int32_t cand) { return kp_wgmma_moe_sets[cand].k[0][0] != nullptr && kp_encode_fn() != nullptr; }

int kp_wgmma_moe_chunk(int32_t cand) { return kp_wgmma_moe_sets[cand].bn_max; }

int kp_wgmma_moe_fits(int wg, int stages, int kb, int chunk) {
  return kb >= 1 && kb <= 4 && (chunk == 64 || chunk == 128) && kp_wgmma_fits(wg, stages, 1, chunk) &&
         kp_wg_smem(wg, stages, kb, chunk) <= kp_wg_smem_cap;
}

int kp_wgmma_moe_launch(const struct kp_call *c, int wg, int stages, int kb, const struct kp_wgmma_moe_op *op) {
  const int slot = c->dtype == KP_DT_FP16 ? 1 : 0;
  const kp_wgmma_moe_fn k = c->dtype == KP_DT_BF16 || c->dtype == KP_DT_FP16 ? kp_wgmma_moe_sets[c->cand].k[slot][op->gated ? 1 : 0] : nullptr;
  if (!k || wg != kp_defs[c->cand].p0 || op->chunk != kp_wgmma_moe_sets[c->cand].bn_max ||
      !kp_wgmma_moe_fits(wg, stages, kb, op->chunk))
    return kp_fail(KPICK_E_UNSUPPORTED, "moe.wgmma", "no kernel for dtype %d, WG=%d, T=%d, KB=%d, chunk %d",
                   (int)c->dtype, wg, stages, kb, op->chunk);
  if (op->items < 1) return KPICK_OK;
  const int bm = op->gated ? 32 * wg : 64 * wg;
  CUtensorMap wmap, x16, x32, x64, x128;
  KP_TRY(kp_wg_map(&wmap, c->dtype, op->w, op->wrows, op->len, bm));
  KP_TRY(kp_wg_map(&x16, c->dtype, op->x, op->xrows, op->len, 16));
  KP_TRY(kp_wg_map(&x32, c->dtype, op->x, op->xrows, op->len, 32));
  KP_TRY(kp_wg_map(&x64, c->dtype, op->x, op->xrows, op->len, 64));
  /* the 64-row kernels never read x128: the 64-row map again, no second encoding */
  if (op->chunk == 128) KP_TRY(kp_wg_map(&x128, c->dtype, op->x, op->xrows, op->len, 128));
  else x128 = x64;
  const size_t smem = kp_wg_smem(wg, stages, kb, op->chunk);
  const int kbox = kp_wg_kbox(c->dtype);
  kp_wgmma_moe_args a = {op->out, (const kp_moe_plan *)op->plan, op->ncols, op->wexp,
                         (int32_t)((op->len + kbox - 1) / kbox), stages, kb, op->chunk};
  KP_GPU(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  const int64_t tiles = (op->ncols + bm - 1) / bm;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)tiles, (unsigned)op->items);
  cfg.blockDim = dim3(128 * wg + 32);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = c->stream;
  KP_GPU(cudaLaunchKernelEx(&cfg, k, wmap, x16, x32, x64, x128, a));
  return KPICK_OK;
}
#else
/* HIP, or a CUDA build without an sm_90a pass: the family is absent */
int kp_wgmma_built(int32_t cand) { return 0; }

int kp_wgmma_launch(const struct kp_call *c, int wg, int stages, int s, const void *xq, const float *sx,
                    const float *sw) {
  return kp_fail(KPICK_E_UNSUPPORTED, "wgmma", "this build has no sm_90a kernels");
}
int kp_wgmma_moe_built(int32_t cand) { return 0; }
int kp_wgmma_moe_chunk(int32_t cand) { return 64; }
int kp_wgmma_moe_fits(int wg, int stages, int kb, int chunk) { return 0; }
int kp_wgmma_moe_launch(const struct kp_call *c, int wg, int stages, int kb, const struct kp_wgmma_moe_op *op) {
  return kp_fail(KPICK_E_UNSUPPORTED, "moe.wgmma", "this build has no sm_90a kernels");
}
#endif
