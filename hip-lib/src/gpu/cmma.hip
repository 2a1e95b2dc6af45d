/* cmma.hip: cmma.bB.wW.sS[.pdl] and gated.cmma.* -- the mma.sync tile for
 * rows 8-128 on Hopper (CUDA sm_90: thread-block clusters; absent elsewhere).
 *
 * A block of W warps owns B rows of W (R = B / W = 16 or 32 rows a warp, R / 16
 * m16 tiles), the mma.sync m16n8k16 A operand, and multiplies them by the
 * activations as the B operand (rows padded to 8 * NT, NT = 1..16 n8 tiles).
 * The mma family re-reads x from L1/L2 in every warp for every 16 W rows; here
 * the block's x chunk [8 NT rows x 32 U] is copied once into shared memory
 * (cp.async, double-buffered) and every warp reads each 16-byte piece of it
 * once per chunk for all its R rows, while W goes from global memory straight
 * to registers (each byte read once) in two register sets of U K-steps, so
 * that chunk c + 1 streams while chunk c is multiplied. The lane's pieces
 * follow mma_core.h: the W piece of tile row g (and g + 8) at k offset 8q and
 * the x piece of row g at the same k, so the permuted k order inside a step is
 * the same on both sides.
 * K is split over a thread-block cluster of S blocks (grid.y = S), so that
 * small N still fills the SMs; each block leaves its fp32 tile in its shared
 * memory and block q sums the q-th slice of the outputs over the S tiles in
 * rank order (distributed shared memory, as wgmma.hip does): one node, no
 * scratch, and the bits depend on S only (each block's K range, its steps in
 * order, the fixed sum order), not on B, W or U: one class head per S and op.
 *   gated: the tile is B/2 gate rows over the matching B/2 up rows; silu(g) * u
 *          in fp32 in the epilogue (no row kept: space.def says why).
 *   .pdl:  the first chunk's W loads are issued before griddepcontrol.wait,
 *          x is copied (and y written) only after it.
 * The kernels are those of the cmma rows of space.def (rows.h). Absent
 * (kp_cmma_built() = 0, kernels trap) on HIP and on CUDA targets before sm_90. */
#include "../common/error.h"
#include "check.h"
#include "launch.h"
#include "mma_core.h"

enum { KP_CM_LINEAR = 0, KP_CM_GATED = 1 };

static constexpr int kp_cm_max_split = 8; /* a portable cluster */
static constexpr int kp_cm_xpad = 32;     /* x row = 32 U + 32 elements: rows 64 bytes apart mod 128, no bank conflict */
static constexpr int kp_cm_tpad = 4;      /* epilogue tile row = B + 4 floats: float4 rows */

/* K steps (of 32) per chunk: each of the two W register sets holds U steps,
 * 64 registers a lane where the accumulators leave room (R = 16 up to 64
 * rows), else 32 (ptxas -v: no spill) */
__host__ __device__ static constexpr int kp_cm_u(int r, int nt) { return r == 16 ? (nt <= 8 ? 8 : 4) : (nt <= 4 ? 4 : 2); }
static constexpr int kp_cm_nt(int32_t m) { return m <= 8 ? 1 : m <= 16 ? 2 : m <= 32 ? 4 : m <= 64 ? 8 : 16; }

struct kp_cmma_args {
  const uint16_t *x, *w;
  uint16_t *y;
  int32_t m;
  int64_t n, k;
};

#if defined(KPICK_GPU_CUDA) && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900)
#define KP_CMMA_DEVICE 1
#endif

#if defined(KP_CMMA_DEVICE)
__device__ __forceinline__ uint32_t kp_cm_smem(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
/* 16 bytes global -> shared, zeros where bytes = 0 */
__device__ __forceinline__ void kp_cm_copy(uint32_t dst, const void *src, uint32_t bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void kp_cm_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void kp_cm_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ kp_v16 kp_cm_lds(uint32_t a) {
  kp_v16 r;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "r"(a));
  return r;
}
__device__ __forceinline__ void kp_cm_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
template <class T>
__device__ __forceinline__ const T *kp_cm_peer(const T *p, uint32_t rank) {
  uint64_t r;
  asm volatile("mapa.u64 %0, %1, %2;" : "=l"(r) : "l"(reinterpret_cast<uint64_t>(p)), "r"(rank));
  return reinterpret_cast<const T *>(r);
}

template <int DT, int NT, int R, int NW, int MODE, bool PDL>
__global__ void __launch_bounds__(NW * 32) kp_cmma_kernel(kp_cmma_args p) {
  constexpr int MT = R / 16, B = R * NW, U = kp_cm_u(R, NT), KC = 32 * U, XLD = KC + kp_cm_xpad;
  constexpr int MP = 8 * NT, OUT = MODE == KP_CM_GATED ? B / 2 : B, LD = B + kp_cm_tpad, THREADS = NW * 32;
  static_assert(MT * NT <= 16, "at most 64 accumulators a lane");
  if (PDL) kp_pdl_trigger();
  extern __shared__ __align__(16) uint8_t kp_cm_raw[];
  uint16_t *const xs = reinterpret_cast<uint16_t *>(kp_cm_raw); /* [2][MP][XLD] */

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, q = lane % 4;
  const int S = gridDim.y, sp = blockIdx.y;
  const int64_t N = p.n, K = p.k;
  const int M = p.m;
  const int64_t n0 = (int64_t)blockIdx.x * OUT;
  const int64_t nsteps = (K + 31) / 32;
  const int64_t b0 = sp * nsteps / S, b1 = (sp + 1) * nsteps / S;
  const int nch = (int)((b1 - b0 + U - 1) / U);

  /* this lane's W rows: tile rows warp R + 16 mt + g + 8 j */
  const uint16_t *wr[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int r = warp * R + 16 * mt + g + 8 * j;
      int64_t row;
      if constexpr (MODE == KP_CM_GATED) {
        const int rr = r < OUT ? r : r - OUT;
        const int64_t n = n0 + rr < N ? n0 + rr : N - 1;
        row = r < OUT ? n : N + n;
      } else {
        row = n0 + r < N ? n0 + r : N - 1;
      }
      wr[mt][j] = p.w + row * K + 8 * q;
    }

  /* chunk c's W pieces into wa: two register sets, so that chunk c + 1
   * streams while chunk c is multiplied */
  typedef kp_v16 kp_cm_wset[U][MT][2];
  auto load_w = [&](int c, kp_cm_wset &wa) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t s = b0 + (int64_t)c * U + u, k = s * 32 + 8 * q;
      const bool in = s < b1 && k < K;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int j = 0; j < 2; ++j) wa[u][mt][j] = in ? kp_ld_stream(wr[mt][j] + s * 32) : kp_v16{0u, 0u, 0u, 0u};
    }
  };
  const uint32_t xs_addr = kp_cm_smem(xs);
  /* chunk c of x into buffer c % 2: rows < M (the padded rows stay zero) */
  auto load_x = [&](int c) {
    const int64_t kb = (b0 + (int64_t)c * U) * 32;
    const uint32_t base = xs_addr + (uint32_t)(c & 1) * MP * XLD * 2;
    for (int i = tid; i < M * (KC / 8); i += THREADS) {
      const int m = i / (KC / 8), pc = i % (KC / 8);
      const int64_t k = kb + 8 * pc;
      const bool in = k < b1 * 32 && k < K;
      kp_cm_copy(base + (uint32_t)(m * XLD + 8 * pc) * 2, in ? (const void *)(p.x + m * K + k) : (const void *)p.x,
                 in ? 16u : 0u);
    }
    kp_cm_commit();
  };

  float acc[MT][NT][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][t][i] = 0.0f;

  /* one chunk: x of c + 1 and W of c + 1 on their way, then c multiplied */
  auto chunk = [&](int c, const kp_cm_wset &cur, kp_cm_wset &nxt) {
    if (c + 1 < nch) {
      load_x(c + 1);
      load_w(c + 1, nxt);
    } else {
      kp_cm_commit(); /* an empty group: the wait below counts the same */
    }
    kp_cm_wait<1>(); /* chunk c has landed (this thread's copies) */
    __syncthreads(); /* ... and every thread's */
    const uint16_t *xb = xs + (c & 1) * MP * XLD + g * XLD + 8 * q;
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (b0 + (int64_t)c * U + u < b1) {
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          const uint4 v = *reinterpret_cast<const uint4 *>(xb + 8 * t * XLD + 32 * u);
          const kp_v16 xv = {v.x, v.y, v.z, v.w};
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) kp_mma_apply<DT>(acc[mt][t], cur[u][mt], xv);
        }
      }
    }
    __syncthreads(); /* buffer c % 2 is free for chunk c + 2 */
  };

  kp_cm_wset wa, wb;
  if (nch > 0) load_w(0, wa); /* under PDL, streaming while the producer ends */
  kp_batch_fence(true);       /* PDL: the producer's x is visible; the W loads stay above */
  if (M < MP) /* the padded rows of both buffers: zeros, never copied over */
    for (int i = tid; i < 2 * (MP - M) * (XLD / 8); i += THREADS) {
      const int b = i / ((MP - M) * (XLD / 8)), rest = i % ((MP - M) * (XLD / 8));
      const int m = M + rest / (XLD / 8), pc = rest % (XLD / 8);
      *reinterpret_cast<uint4 *>(xs + (b * MP + m) * XLD + 8 * pc) = make_uint4(0u, 0u, 0u, 0u);
    }
  if (nch > 0) load_x(0);

#pragma unroll 1
  for (int c = 0; c < nch; c += 2) {
    chunk(c, wa, wb);
    if (c + 1 < nch) chunk(c + 1, wb, wa);
  }
  kp_cm_wait<0>();

  /* the block's fp32 tile [MP][LD] over the x buffers (every warp is past its
   * last read: the loop's last barrier, or no loop) */
  __syncthreads();
  float *tile = reinterpret_cast<float *>(kp_cm_raw);
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        tile[(8 * t + 2 * q + (i & 1)) * LD + warp * R + 16 * mt + g + 8 * (i >> 1)] = acc[mt][t][i];

  /* output groups of 4 W rows: all of them, or with split-K the sp-th slice,
   * each summed over the S tiles in rank order */
  const int groups = M * (OUT / 4);
  int g0 = 0, g1 = groups;
  if (S > 1) {
    kp_cm_cluster_sync(); /* every tile of the cluster is written */
    g0 = (int)((int64_t)sp * groups / S);
    g1 = (int)((int64_t)(sp + 1) * groups / S);
  } else {
    __syncthreads();
  }
  const float4 *peer[kp_cm_max_split];
#pragma unroll
  for (int r = 0; r < kp_cm_max_split; ++r)
    peer[r] = r < S ? (S > 1 ? kp_cm_peer(reinterpret_cast<const float4 *>(tile), (uint32_t)r)
                             : reinterpret_cast<const float4 *>(tile))
                    : nullptr;
  auto sum = [&](int at) {
    float4 v = peer[0][at];
#pragma unroll
    for (int r = 1; r < kp_cm_max_split; ++r)
      if (r < S) {
        const float4 w = peer[r][at];
        v.x += w.x;
        v.y += w.y;
        v.z += w.z;
        v.w += w.w;
      }
    return v;
  };
  for (int e = g0 + tid; e < g1; e += THREADS) {
    const int m = e / (OUT / 4), r = 4 * (e % (OUT / 4));
    if (n0 + r >= N) continue;
    float4 v = sum((m * LD + r) / 4);
    if constexpr (MODE == KP_CM_GATED) {
      const float4 u = sum((m * LD + r + OUT) / 4);
      v = make_float4(kp_silu_mul(v.x, u.x), kp_silu_mul(v.y, u.y), kp_silu_mul(v.z, u.z), kp_silu_mul(v.w, u.w));
    }
    uint16_t *y = p.y + (int64_t)m * N + n0 + r;
    y[0] = kp_round<DT>(v.x);
    if (n0 + r + 1 < N) y[1] = kp_round<DT>(v.y);
    if (n0 + r + 2 < N) y[2] = kp_round<DT>(v.z);
    if (n0 + r + 3 < N) y[3] = kp_round<DT>(v.w);
  }
  if (S > 1) kp_cm_cluster_sync(); /* no block leaves while another still reads its tile */
}
#else
/* HIP, or a CUDA pass before sm_90: the host never launches these */
template <int DT, int NT, int R, int NW, int MODE, bool PDL>
__global__ void __launch_bounds__(NW * 32) kp_cmma_kernel(kp_cmma_args p) {
#if defined(KPICK_GPU_CUDA)
  asm volatile("trap;");
#else
  __builtin_trap();
#endif
}
#endif

/* ---- host ---- */

static constexpr size_t kp_cm_smem_cap = 227 * 1024; /* sm_90 opt-in limit per block */

static constexpr size_t kp_cm_smem(int b, int w, int32_t m) {
  const int nt = kp_cm_nt(m), r = b / w, xld = 32 * kp_cm_u(r, nt) + kp_cm_xpad;
  const size_t x = (size_t)2 * 8 * nt * xld * 2, tile = (size_t)8 * nt * (b + kp_cm_tpad) * 4;
  return x > tile ? x : tile;
}

typedef void (*kp_cmma_fn)(kp_cmma_args);
static constexpr int kp_cm_nt_slots = 5; /* NT = 1, 2, 4, 8, 16 */
struct kp_cmma_set {
  kp_cmma_fn k[2][kp_cm_nt_slots];
};

template <int DT, int R, int NW, int MODE, bool PDL, int NT>
static void kp_cmma_fill(kp_cmma_fn (&k)[kp_cm_nt_slots]) {
  k[kp_log2(NT)] = kp_cmma_kernel<DT, NT, R, NW, MODE, PDL>;
  if constexpr (NT > 1) kp_cmma_fill<DT, R, NW, MODE, PDL, NT / 2>(k);
}

/* a row's kernels: every NT its rows reach, both dtypes; empty for rows of
 * other families and on HIP */
template <int ID>
static kp_cmma_set kp_cmma_row() {
  constexpr kp_def r = kp_defs[ID];
  kp_cmma_set s = {};
#if defined(KPICK_GPU_CUDA)
  if constexpr (r.family == KP_FAM_cmma) {
    static_assert(r.p2 == 4 || r.p2 == 8, "cmma: W is 4 or 8 warps");
    static_assert(r.p0 == 16 * r.p2 || r.p0 == 32 * r.p2, "cmma: B is 16 or 32 W rows a warp");
    static_assert(r.p1 >= 1 && r.p1 <= kp_cm_max_split, "cmma: S is 1..8 blocks of a portable cluster");
    static_assert(r.rows_max >= 1 && r.rows_max <= kp_rows_limit, "cmma: rows stop at 128");
    static_assert(r.p0 == 16 * r.p2 || r.rows_max <= 64, "cmma: 32 W rows a warp: rows stop at 64 (registers)");
    constexpr int mode = r.op == KPICK_OP_GATED ? KP_CM_GATED : KP_CM_LINEAR, nt = kp_cm_nt(r.rows_max);
    kp_cmma_fill<KP_DT_BF16, r.p0 / r.p2, r.p2, mode, r.pdl(), nt>(s.k[0]);
    kp_cmma_fill<KP_DT_FP16, r.p0 / r.p2, r.p2, mode, r.pdl(), nt>(s.k[1]);
  }
#endif
  return s;
}

static const kp_cmma_set kp_cmma_sets[KP_NCAND] = {
#define CPU(...)
#define GPU(id, ...) kp_cmma_row<KP_CAND_##id>(),
#include "../space.def"
};

int kp_cmma_built(int32_t cand) { return kp_cmma_sets[cand].k[0][0] != nullptr; }

int kp_cmma_fits(int b, int s, int w, int32_t m) {
  return (w == 4 || w == 8) && (b == 16 * w || b == 32 * w) && s >= 1 && s <= kp_cm_max_split && m >= 1 &&
         m <= kp_rows_limit && kp_cm_smem(b, w, m) <= kp_cm_smem_cap;
}

#if defined(KPICK_GPU_CUDA)
int kp_cmma_launch(const struct kp_call *c, int b, int s, int w) {
  const int nt = kp_cm_nt(c->m);
  const kp_cmma_fn k = c->m >= 1 && c->m <= kp_rows_limit ? kp_cmma_sets[c->cand].k[c->dtype == KP_DT_BF16 ? 0 : 1][kp_log2(nt)] : nullptr;
  if (!k || b != kp_defs[c->cand].p0 || w != kp_defs[c->cand].p2 || !kp_cmma_fits(b, s, w, c->m))
    return kp_fail(KPICK_E_UNSUPPORTED, "cmma", "no kernel for m=%d, B=%d, S=%d, W=%d, pdl=%d", (int)c->m, b, s, w,
                   c->pdl);
  const int gated = c->op == KPICK_OP_GATED;
  const int64_t out = gated ? b / 2 : b, tiles = (c->n + out - 1) / out;
  const size_t smem = kp_cm_smem(b, w, c->m);
  kp_cmma_args a = {(const uint16_t *)c->x, (const uint16_t *)c->w, (uint16_t *)c->y, c->m, c->n, c->k};
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
  cfg.blockDim = dim3((unsigned)w * 32);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = c->stream;
  cfg.attrs = attr;
  cfg.numAttrs = (unsigned)na;
  KP_GPU(cudaLaunchKernelEx(&cfg, k, a));
  return KPICK_OK;
}
#else
int kp_cmma_launch(const struct kp_call *c, int b, int s, int w) {
  return kp_fail(KPICK_E_UNSUPPORTED, "cmma", "this build has no sm_90 cluster kernels");
}
#endif
