/* wgmma.hip: wgmma.mB.stT.sS[.pdl] and gated.wgmma.* -- the Hopper skinny GEMM
 * (CUDA sm_90a only; wgmma_core.h has the instruction-level pieces).
 *
 * Swap-AB: a block owns a tile of BM = 64 * WG rows of W, the 64-row A operand
 * of wgmma m64nNk16, and multiplies it by the activations as the narrow B
 * operand (N = rows padded up to 8, 16, 32, 64 or 128; padded rows are zeros
 * from the copy engine and never stored). One producer warp streams W and x
 * by TMA through a ring of T shared-memory stages of 64 K elements, each
 * guarded by a full and an empty mbarrier; WG consumer warpgroups (one per 64
 * W rows) wait on full, issue four k16 wgmmas, wait for them and free the
 * stage. K is split over S blocks (grid.y): with S = 1 the block stores y
 * directly; otherwise each block writes its fp32 partial tile and the last of
 * a tile's S blocks to arrive (an atomic counter) sums the S partials in split
 * order and stores y. The bits depend on S only (the K range of each block and
 * the fixed reduce order), not on WG or T: one class head per S.
 *   gated: the tile is BM/2 gate rows over the matching BM/2 up rows (two TMA
 *          boxes per stage); silu(g) * u in fp32 in the epilogue.
 *   .pdl:  the first T stages' W boxes are issued before griddepcontrol.wait,
 *          x only after it (by TMA, never the read-only path); stores, partials
 *          and counters are touched only after the wait too.
 * Absent (kp_wgmma_has() = 0, kernels trap) on HIP and on CUDA builds without
 * an sm_90a pass (gpu.mk builds this file for compute_90a when ARCH=sm_90). */
#include "../common/error.h"
#include "launch.h"
#include "wgmma_core.h"

#if defined(KPICK_GPU_CUDA)
#include <cuda.h>
#include <cudaTypedefs.h>
#endif

enum { KP_WG_LINEAR = 0, KP_WG_GATED = 1 };

struct kp_wgmma_args {
  uint16_t *y;
  float *part;        /* S > 1: [S][M][tiles * BM] fp32 partials */
  uint32_t *counters; /* S > 1: one arrival counter per tile, zero at rest */
  int32_t m;
  int64_t n;          /* output columns */
  int32_t ksteps;     /* ceil(K / 64) */
};

#if defined(KP_WGMMA_DEVICE)
template <int DT, int BN, int WG, int MODE, bool PDL>
__global__ void __launch_bounds__(128 * WG + 32)
    kp_wgmma_kernel(const __grid_constant__ CUtensorMap wmap, const __grid_constant__ CUtensorMap xmap,
                    kp_wgmma_args p, int stages) {
  constexpr int BM = 64 * WG, consumers = 128 * WG;
  constexpr uint32_t w_bytes = BM * 128, x_bytes = BN * 128, stage_bytes = w_bytes + x_bytes;
  constexpr int LD = BN + 1; /* epilogue tile row stride, in floats: odd, no bank conflicts */
  if (PDL) kp_pdl_trigger();

  extern __shared__ uint8_t kp_wg_raw[];
  __shared__ uint64_t full[kp_wg_max_stages], empty[kp_wg_max_stages];
  __shared__ int last;
  uint8_t *const ring = (uint8_t *)(((uintptr_t)kp_wg_raw + 1023) & ~(uintptr_t)1023);

  const int tid = threadIdx.x;
  if (tid == 0) {
    for (int s = 0; s < stages; ++s) {
      kp_mbar_init(&full[s], 1);
      kp_mbar_init(&empty[s], consumers / 32);
    }
    kp_mbar_init_fence();
  }
  __syncthreads();

  const int S = gridDim.y, sp = blockIdx.y, tile = blockIdx.x;
  const int s0 = (int)((int64_t)sp * p.ksteps / S), s1 = (int)((int64_t)(sp + 1) * p.ksteps / S);
  const int nst = s1 - s0;
  const int64_t N = p.n;
  const int M = p.m;
  const int64_t n0 = (int64_t)tile * (MODE == KP_WG_GATED ? BM / 2 : BM);

  if (tid >= consumers) {
    /* ---- producer: one thread of the last warp ---- */
    if (tid != consumers) return;
    const uint64_t pol_w = kp_policy_evict_first(), pol_x = kp_policy_evict_last();
    auto load_w = [&](int i, int s) {
      uint8_t *dst = ring + (size_t)s * stage_bytes;
      const int32_t k = (s0 + i) * kp_wg_kstep;
      if constexpr (MODE == KP_WG_GATED) {
        kp_tma_load(dst, &wmap, k, (int32_t)n0, &full[s], pol_w);
        kp_tma_load(dst + w_bytes / 2, &wmap, k, (int32_t)(N + n0), &full[s], pol_w);
      } else {
        kp_tma_load(dst, &wmap, k, (int32_t)n0, &full[s], pol_w);
      }
    };
    auto load_x = [&](int i, int s) {
      kp_tma_load(ring + (size_t)s * stage_bytes + w_bytes, &xmap, (s0 + i) * kp_wg_kstep, 0, &full[s], pol_x);
    };
    /* PDL: the weights of the first stages stream while the previous kernel ends */
    const int pre = PDL ? (stages < nst ? stages : nst) : 0;
    for (int i = 0; i < pre; ++i) {
      kp_mbar_expect_tx(&full[i], stage_bytes);
      load_w(i, i);
    }
    if (PDL) asm volatile("griddepcontrol.wait;" ::: "memory");
    for (int i = 0; i < nst; ++i) {
      const int s = i % stages, round = i / stages;
      if (i >= pre) {
        if (round > 0) kp_mbar_wait(&empty[s], (uint32_t)(round - 1) & 1u);
        kp_mbar_expect_tx(&full[s], stage_bytes);
        load_w(i, s);
      }
      load_x(i, s);
    }
    return;
  }

  /* ---- consumers: warpgroup wg multiplies W rows 64wg.. of the tile ---- */
  const int wg = tid / 128, lane = tid % 32, warp = (tid % 128) / 32;
  float d[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) d[i] = 0.0f;
  const uint32_t ring_addr = kp_smem_addr(ring);
#pragma unroll 1
  for (int i = 0; i < nst; ++i) {
    const int s = i % stages;
    kp_mbar_wait(&full[s], (uint32_t)(i / stages) & 1u);
    const uint32_t a = ring_addr + (uint32_t)s * stage_bytes + (uint32_t)wg * 64 * 128;
    const uint32_t b = ring_addr + (uint32_t)s * stage_bytes + w_bytes;
    kp_wg_fence();
#pragma unroll
    for (int kk = 0; kk < kp_wg_kstep / 16; ++kk) kp_wgmma<DT, BN>(d, kp_wg_desc(a + kk * 32), kp_wg_desc(b + kk * 32));
    kp_wg_commit();
    kp_wg_wait<0>();
    if (lane == 0) kp_mbar_arrive(&empty[s]);
  }
  if (PDL) asm volatile("griddepcontrol.wait;" ::: "memory"); /* before any global write */

  /* every consumer is past its last wgmma: the ring becomes the fp32 tile [BM][LD] */
  kp_consumers_sync(consumers);
  float *t = reinterpret_cast<float *>(ring);
#pragma unroll
  for (int j = 0; j < BN / 8; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = wg * 64 + warp * 16 + lane / 4 + 8 * (i / 2), col = 8 * j + 2 * (lane % 4) + (i % 2);
      t[row * LD + col] = d[4 * j + i];
    }
  kp_consumers_sync(consumers);

  if (S > 1) {
    const int64_t ld = (int64_t)gridDim.x * BM;
    float *mine = p.part + (int64_t)sp * M * ld + (int64_t)tile * BM;
    for (int e = tid; e < BM * M; e += consumers) mine[(int64_t)(e / BM) * ld + e % BM] = t[(e % BM) * LD + e / BM];
    __threadfence();
    kp_consumers_sync(consumers);
    if (tid == 0) last = atomicAdd(&p.counters[tile], 1u) == (unsigned)(S - 1);
    kp_consumers_sync(consumers);
    if (!last) return;
    __threadfence();
    /* the S partials in split order: the same bits whichever block arrives last */
    for (int e = tid; e < BM * M; e += consumers) {
      const float *col = p.part + (int64_t)(e / BM) * ld + (int64_t)tile * BM + e % BM;
      float v = kp_ld_coherent(col);
      for (int q = 1; q < S; ++q) v += kp_ld_coherent(col + (int64_t)q * M * ld);
      t[(e % BM) * LD + e / BM] = v;
    }
    if (tid == 0) p.counters[tile] = 0u; /* ready for the next launch */
    kp_consumers_sync(consumers);
  }

  if constexpr (MODE == KP_WG_GATED) {
    constexpr int H = BM / 2;
    for (int e = tid; e < H * M; e += consumers) {
      const int r = e % H, m = e / H;
      if (n0 + r < N) p.y[(int64_t)m * N + n0 + r] = kp_round<DT>(kp_silu_mul(t[r * LD + m], t[(r + H) * LD + m]));
    }
  } else {
    for (int e = tid; e < BM * M; e += consumers) {
      const int r = e % BM, m = e / BM;
      if (n0 + r < N) p.y[(int64_t)m * N + n0 + r] = kp_round<DT>(t[r * LD + m]);
    }
  }
}
#elif defined(KPICK_GPU_CUDA)
/* no sm_90a pass in this build: the host never launches these */
template <int DT, int BN, int WG, int MODE, bool PDL>
__global__ void kp_wgmma_kernel(const __grid_constant__ CUtensorMap wmap, const __grid_constant__ CUtensorMap xmap,
                                kp_wgmma_args p, int stages) {
  __builtin_trap();
}
#endif

/* ---- host ---- */

static int kp_wg_bn(int32_t m) { return m <= 8 ? 8 : m <= 16 ? 16 : m <= 32 ? 32 : m <= 64 ? 64 : 128; }

size_t kp_wgmma_smem_bytes(int wg, int stages, int32_t m) {
  const size_t bn = (size_t)kp_wg_bn(m), bm = 64 * (size_t)wg;
  const size_t ring = (size_t)stages * (bm + bn) * 128, tile = bm * (bn + 1) * 4;
  return (ring > tile ? ring : tile) + 1024; /* + the 1024-byte alignment of the ring */
}

static int64_t kp_wg_tiles(int wg, int gated, int64_t n) {
  const int64_t rows = gated ? 32 * wg : 64 * wg;
  return (n + rows - 1) / rows;
}

size_t kp_wgmma_temp_bytes(int wg, int s, int gated, int32_t m, int64_t n) {
  if (s <= 1) return 0;
  return (size_t)s * (size_t)m * (size_t)kp_wg_tiles(wg, gated, n) * 64 * (size_t)wg * sizeof(float);
}

size_t kp_wgmma_counters(int wg, int s, int gated, int64_t n) {
  return s <= 1 ? 0 : (size_t)kp_wg_tiles(wg, gated, n);
}

#if defined(KPICK_GPU_CUDA) && defined(KPICK_WGMMA_BUILT)
static constexpr int kp_wg_smem_cap = 227 * 1024; /* sm_90 opt-in limit per block */

typedef void (*kp_wgmma_fn)(const CUtensorMap, const CUtensorMap, kp_wgmma_args, int);

template <int DT, int WG, int MODE, bool PDL>
static kp_wgmma_fn pick_bn(int bn) {
  switch (bn) {
    case 8: return kp_wgmma_kernel<DT, 8, WG, MODE, PDL>;
    case 16: return kp_wgmma_kernel<DT, 16, WG, MODE, PDL>;
    case 32: return kp_wgmma_kernel<DT, 32, WG, MODE, PDL>;
    case 64: return kp_wgmma_kernel<DT, 64, WG, MODE, PDL>;
    case 128: return kp_wgmma_kernel<DT, 128, WG, MODE, PDL>;
    default: return nullptr;
  }
}

/* the (WG, mode, PDL) triples that space.def uses: .pdl rows are WG = 1 */
template <int DT>
static kp_wgmma_fn pick(int bn, int wg, int gated, int pdl) {
  if (pdl) {
    if (wg != 1) return nullptr;
    return gated ? pick_bn<DT, 1, KP_WG_GATED, true>(bn) : pick_bn<DT, 1, KP_WG_LINEAR, true>(bn);
  }
  if (wg == 1) return gated ? pick_bn<DT, 1, KP_WG_GATED, false>(bn) : pick_bn<DT, 1, KP_WG_LINEAR, false>(bn);
  if (wg == 2) return gated ? pick_bn<DT, 2, KP_WG_GATED, false>(bn) : pick_bn<DT, 2, KP_WG_LINEAR, false>(bn);
  return nullptr;
}

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

/* rows x k elements, row-major, boxes of box_rows x 64 with 128-byte swizzle;
 * reads past either edge come back as zeros */
static int kp_wg_map(CUtensorMap *map, int32_t dtype, const void *base, int64_t rows, int64_t k, int box_rows) {
  const PFN_cuTensorMapEncodeTiled_v12000 enc = kp_encode_fn();
  if (!enc) return kp_fail(KPICK_E_STATE, "wgmma", "cuTensorMapEncodeTiled is not available from the driver");
  const cuuint64_t dims[2] = {(cuuint64_t)k, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)k * 2};
  const cuuint32_t box[2] = {(cuuint32_t)kp_wg_kstep, (cuuint32_t)box_rows}, unit[2] = {1, 1};
  const CUresult r = enc(map, dtype == KP_DT_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                         2, const_cast<void *>(base), dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                         CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return kp_fail(KPICK_E_DEVICE, "wgmma", "cuTensorMapEncodeTiled failed (%d) for %lld x %lld, box %d", (int)r,
                   (long long)rows, (long long)k, box_rows);
  return KPICK_OK;
}

int kp_wgmma_has(int pdl) { return kp_encode_fn() != nullptr; }

int kp_wgmma_launch(const struct kp_call *c, int wg, int stages, int s, const struct kp_scratch *ws) {
  const int gated = c->op == KPICK_OP_GATED, bn = kp_wg_bn(c->m);
  const kp_wgmma_fn k = c->dtype == KP_DT_BF16 ? pick<KP_DT_BF16>(bn, wg, gated, c->pdl)
                                               : pick<KP_DT_FP16>(bn, wg, gated, c->pdl);
  const size_t smem = kp_wgmma_smem_bytes(wg, stages, c->m);
  if (!k || stages < 2 || stages > kp_wg_max_stages || s < 1 || s > 64 || smem > (size_t)kp_wg_smem_cap)
    return kp_fail(KPICK_E_UNSUPPORTED, "wgmma", "no kernel for m=%d, WG=%d, T=%d, S=%d, pdl=%d", (int)c->m, wg,
                   stages, s, c->pdl);
  if (s > 1 && (ws->temp_bytes < kp_wgmma_temp_bytes(wg, s, gated, c->m, c->n) ||
                ws->counters_len < kp_wgmma_counters(wg, s, gated, c->n)))
    return kp_fail(KPICK_E_STATE, "wgmma", "scratch too small for S=%d, m=%d, n=%lld", s, (int)c->m,
                   (long long)c->n);
  /* built per launch: encoding is a few hundred host nanoseconds, no device work */
  CUtensorMap wmap, xmap;
  KP_TRY(kp_wg_map(&wmap, c->dtype, c->w, gated ? 2 * c->n : c->n, c->k, gated ? 32 * wg : 64 * wg));
  KP_TRY(kp_wg_map(&xmap, c->dtype, c->x, c->m, c->k, bn));
  const int64_t tiles = kp_wg_tiles(wg, gated, c->n);
  kp_wgmma_args a = {(uint16_t *)c->y, (float *)ws->temp, ws->counters, c->m, c->n,
                     (int32_t)((c->k + kp_wg_kstep - 1) / kp_wg_kstep)};
  cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
  if (e != cudaSuccess) return kp_fail(KPICK_E_DEVICE, "wgmma", "shared memory limit: %s", cudaGetErrorString(e));
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.gridDim = dim3((unsigned)tiles, (unsigned)s);
  cfg.blockDim = dim3(128 * wg + 32);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = c->stream;
  cfg.attrs = attr;
  cfg.numAttrs = c->pdl ? 1 : 0;
  e = cudaLaunchKernelEx(&cfg, k, wmap, xmap, a, stages);
  if (e != cudaSuccess) return kp_fail(KPICK_E_DEVICE, "wgmma launch", "%s", cudaGetErrorString(e));
  return KPICK_OK;
}
#else
/* HIP, or a CUDA build without an sm_90a pass: the family is absent */
int kp_wgmma_has(int pdl) { return 0; }

int kp_wgmma_launch(const struct kp_call *c, int wg, int stages, int s, const struct kp_scratch *ws) {
  return kp_fail(KPICK_E_UNSUPPORTED, "wgmma", "this build has no sm_90a kernels");
}
#endif
