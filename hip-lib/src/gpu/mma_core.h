/* mma_core.h: the tensor-core skinny GEMM that mma.hip, gated.hip and
 * splitk.hip instantiate (one engine, three epilogues).
 *
 * A block owns a 16-row tile of W (the matrix unit's A operand) and multiplies
 * it by the activations (B operand), kp_mma_cols activation rows per matrix
 * instruction, NT instructions per K step (M padded up to NT * kp_mma_cols;
 * padded rows re-read row M-1 and are never stored). A K step is 32 elements:
 * each lane loads one 16-byte piece per tile row it serves and feeds it to two
 * instructions. The A and B operands assign the same memory k to the same k
 * slots, so the permuted order inside a step is harmless (a dot product does
 * not care about the order of its terms, only the fp32 rounding does, and that
 * is fixed per configuration).
 *   NVIDIA mma.sync m16n8k16: lane (g = lane/4, q = lane%4) serves tile rows g
 *     and g+8 and activation column g, k offset q*8 in the step.
 *   AMD MFMA 16x16x16 (wave64): lane (r = lane%16, h = lane/16) serves tile row
 *     r and activation column r, k offset h*8 in the step.
 * The block's warps split the K steps into contiguous ranges (split-K over S
 * blocks adds an outer split); each warp keeps U steps of loads in flight. The
 * warps' partial tiles meet in shared memory and are summed in warp order, so a
 * configuration (W, and S for split-K) is deterministic and does not depend
 * on U. */
#ifndef KPICK_GPU_MMA_CORE_H
#define KPICK_GPU_MMA_CORE_H

#include "arch.h"
#include "dtype.h"
#include "fp8_core.h"
#include "rows.h"

enum { KP_MMA_LINEAR = 0, KP_MMA_GATED = 1, KP_MMA_SPLITK = 2 };

struct kp_mma_args {
  const uint16_t *x, *w;
  uint16_t *y;
  float *part;         /* split-K: [S][M][N] fp32 partials */
  uint32_t *counters;  /* split-K: one arrival counter per block column, zero at rest */
  int32_t m;
  int64_t n, k;
};

static constexpr int kp_mma_step = 32;             /* K elements per step */
static constexpr int kp_mma_max_warps = 8;
static constexpr int kp_mma_pad = 17;              /* shared tile row stride, in floats */

#if defined(KP_MMA_NV)
typedef float kp_frag[4];
/* element i of a lane's accumulator fragment: tile row, activation column */
__device__ __forceinline__ int kp_frag_row(int lane, int i) { return lane / 4 + (i >> 1) * 8; }
__device__ __forceinline__ int kp_frag_col(int lane, int i) { return 2 * (lane % 4) + (i & 1); }

template <int DT>
__device__ __forceinline__ void kp_mma16(kp_frag &c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  if constexpr (DT == KP_DT_BF16)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* the W rows a lane streams: tile rows g and g+8 */
static constexpr int kp_mma_wrows = 2;
__device__ __forceinline__ int kp_lane_tile_row(int lane, int j) { return lane / 4 + j * 8; }
__device__ __forceinline__ int kp_lane_koff(int lane) { return (lane % 4) * 8; }
__device__ __forceinline__ int kp_lane_col(int lane) { return lane / 4; }

/* one K step: piece a[j] of tile row (g + 8j), piece xv of activation column g */
template <int DT>
__device__ __forceinline__ void kp_mma_apply(kp_frag &acc, const kp_v16 (&a)[2], const kp_v16 &xv) {
  kp_mma16<DT>(acc, a[0].x, a[1].x, a[0].y, a[1].y, xv.x, xv.y);
  kp_mma16<DT>(acc, a[0].z, a[1].z, a[0].w, a[1].w, xv.z, xv.w);
}
#elif defined(KP_MMA_MFMA)
typedef float kp_frag __attribute__((ext_vector_type(4)));
typedef short kp_s16x4 __attribute__((ext_vector_type(4)));
typedef _Float16 kp_h16x4 __attribute__((ext_vector_type(4)));
typedef uint32_t kp_u32x2 __attribute__((ext_vector_type(2)));
__device__ __forceinline__ int kp_frag_row(int lane, int i) { return 4 * (lane / 16) + i; }
__device__ __forceinline__ int kp_frag_col(int lane, int i) { return lane % 16; }

template <int DT>
__device__ __forceinline__ void kp_mma16(kp_frag &c, uint32_t a0, uint32_t a1, uint32_t b0, uint32_t b1) {
  const kp_u32x2 a = {a0, a1}, b = {b0, b1};
  if constexpr (DT == KP_DT_BF16)
    c = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(__builtin_bit_cast(kp_s16x4, a), __builtin_bit_cast(kp_s16x4, b),
                                                  c, 0, 0, 0);
  else
    c = __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_bit_cast(kp_h16x4, a), __builtin_bit_cast(kp_h16x4, b), c,
                                              0, 0, 0);
}

static constexpr int kp_mma_wrows = 1;
__device__ __forceinline__ int kp_lane_tile_row(int lane, int j) { return lane % 16; }
__device__ __forceinline__ int kp_lane_koff(int lane) { return (lane / 16) * 8; }
__device__ __forceinline__ int kp_lane_col(int lane) { return lane % 16; }

template <int DT>
__device__ __forceinline__ void kp_mma_apply(kp_frag &acc, const kp_v16 (&a)[1], const kp_v16 &xv) {
  kp_mma16<DT>(acc, a[0].x, a[0].y, xv.x, xv.y);
  kp_mma16<DT>(acc, a[0].z, a[0].w, xv.z, xv.w);
}
#endif

#if defined(KP_MMA_NV) || defined(KP_MMA_MFMA)
/* W row of tile row tr: linear and split-K tiles are 16 consecutive rows; a
 * gated tile is 8 gate rows then the matching 8 up rows. Rows past N re-read
 * row N-1 and are never stored. */
template <int MODE>
__device__ __forceinline__ int64_t kp_tile_wrow(int64_t n0, int tr, int64_t N) {
  if constexpr (MODE == KP_MMA_GATED) {
    const int64_t n = n0 + (tr & 7) < N ? n0 + (tr & 7) : N - 1;
    return tr < 8 ? n : N + n;
  } else {
    return n0 + tr < N ? n0 + tr : N - 1;
  }
}

/* A lane's weight piece of one step, by the weight's element type: 16-bit
 * weights load 16 bytes (8 values) and feed them as they are; fp8 weights
 * (e4m3 codes, bf16 x) load 8 bytes (8 codes) and feed them as the 8 bf16
 * values kp_mma_apply takes (fp8_core.h's kp_e4m3_bf16x2: exact, every
 * finite e4m3 value is a bf16). */
template <class WT>
struct kp_wpiece;
template <>
struct kp_wpiece<uint16_t> {
  typedef kp_v16 raw;
  static __device__ __forceinline__ raw load(const uint16_t *p) { return kp_ld_stream(p); }
  static __device__ __forceinline__ kp_v16 values(const raw &r) { return r; }
};
template <>
struct kp_wpiece<uint8_t> {
  typedef uint2 raw;
  static __device__ __forceinline__ raw load(const uint8_t *p) { return kp_ld_stream8(p); }
  static __device__ __forceinline__ kp_v16 values(const raw &c) {
    return kp_v16{kp_e4m3_bf16x2<0>(c.x), kp_e4m3_bf16x2<1>(c.x), kp_e4m3_bf16x2<0>(c.y), kp_e4m3_bf16x2<1>(c.y)};
  }
};

/* B steps from k0, B in {1, 2, 4, 8, 16}, of R weight tiles (each lane: its
 * rows of every tile) against the same x pieces: all weight loads issued
 * first, then each x piece loaded once for the R tiles.
 * WT: uint16_t (DT's weights) or uint8_t (e4m3 codes; DT is then bf16). */
template <int DT, int NT, int B, int R, class WT>
__device__ __forceinline__ void kp_mma_steps_tiles(const WT *const (&wr)[R][kp_mma_wrows], const uint16_t *const (&xr)[NT],
                                                   int64_t k0, kp_frag (&acc)[R][NT], bool first) {
  typename kp_wpiece<WT>::raw a[B][R][kp_mma_wrows];
#pragma unroll
  for (int b = 0; b < B; ++b)
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int j = 0; j < kp_mma_wrows; ++j) a[b][r][j] = kp_wpiece<WT>::load(wr[r][j] + k0 + b * kp_mma_step);
  kp_batch_fence(first);
#pragma unroll
  for (int b = 0; b < B; ++b) {
    kp_v16 v[R][kp_mma_wrows];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int j = 0; j < kp_mma_wrows; ++j) v[r][j] = kp_wpiece<WT>::values(a[b][r][j]);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const kp_v16 xv = kp_ld_act(xr[t] + k0 + b * kp_mma_step);
#pragma unroll
      for (int r = 0; r < R; ++r) kp_mma_apply<DT>(acc[r][t], v[r], xv);
    }
  }
}

/* the last step when K % 32 != 0, of R tiles: pieces past K count as zeros */
template <int DT, int NT, int R, class WT>
__device__ __forceinline__ void kp_mma_step_masked_tiles(const WT *const (&wr)[R][kp_mma_wrows],
                                                         const uint16_t *const (&xr)[NT], int64_t k0, bool inside,
                                                         kp_frag (&acc)[R][NT], bool first) {
  const kp_v16 zero = {0u, 0u, 0u, 0u};
  kp_v16 a[R][kp_mma_wrows];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int j = 0; j < kp_mma_wrows; ++j)
      a[r][j] = inside ? kp_wpiece<WT>::values(kp_wpiece<WT>::load(wr[r][j] + k0)) : zero;
  kp_batch_fence(first);
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const kp_v16 xv = inside ? kp_ld_act(xr[t] + k0) : zero;
#pragma unroll
    for (int r = 0; r < R; ++r) kp_mma_apply<DT>(acc[r][t], a[r], xv);
  }
}

/* one tile's steps (the moe kernels' tile): kp_mma_steps_tiles with R = 1 */
template <int DT, int NT, int B, class WT>
__device__ __forceinline__ void kp_mma_steps(const WT *const (&wr)[kp_mma_wrows], const uint16_t *const (&xr)[NT],
                                             int64_t k0, kp_frag (&acc)[NT], bool first) {
  kp_mma_steps_tiles<DT, NT, B, 1, WT>(reinterpret_cast<const WT *const (&)[1][kp_mma_wrows]>(wr), xr, k0,
                                       reinterpret_cast<kp_frag (&)[1][NT]>(acc), first);
}
template <int DT, int NT, class WT>
__device__ __forceinline__ void kp_mma_step_masked(const WT *const (&wr)[kp_mma_wrows], const uint16_t *const (&xr)[NT],
                                                   int64_t k0, bool inside, kp_frag (&acc)[NT], bool first) {
  kp_mma_step_masked_tiles<DT, NT, 1, WT>(reinterpret_cast<const WT *const (&)[1][kp_mma_wrows]>(wr), xr, k0, inside,
                                          reinterpret_cast<kp_frag (&)[1][NT]>(acc), first);
}

/* R tiles a block: MODE's tile rows (16; gated 8 gate over 8 up) R times over */
template <int DT, int NT, int U, int MODE, bool PDL, int R>
__global__ void __launch_bounds__(kp_mma_max_warps * KP_WARP) kp_mma_kernel(kp_mma_args p) {
  static_assert(U == 2 || U == 4 || U == 8 || U == 16, "U is 2, 4, 8 or 16");
  static_assert(R == 1 || ((R == 2 || R == 4) && MODE != KP_MMA_SPLITK), "R is 1, or 2 or 4 outside split-K");
  if (PDL) kp_pdl_trigger();
  const int lane = threadIdx.x % kp_warp, warp = threadIdx.x / kp_warp, nwarps = blockDim.x / kp_warp;
  const int64_t N = p.n, K = p.k;
  const int M = p.m;
  constexpr int tile_cols = MODE == KP_MMA_GATED ? 8 : 16; /* outputs a tile yields */
  const int64_t n0 = (int64_t)blockIdx.x * tile_cols * R;

  /* this warp's K steps: split sp of S * nwarps, contiguous */
  const int64_t nsteps = (K + kp_mma_step - 1) / kp_mma_step, full = K / kp_mma_step;
  const int64_t nsp = (int64_t)gridDim.y * nwarps, sp = (int64_t)blockIdx.y * nwarps + warp;
  const int64_t s0 = sp * nsteps / nsp, s1 = (sp + 1) * nsteps / nsp;

  const int koff = kp_lane_koff(lane);
  const uint16_t *wr[R][kp_mma_wrows];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int j = 0; j < kp_mma_wrows; ++j)
      wr[r][j] = p.w + kp_tile_wrow<MODE>(n0 + r * tile_cols, kp_lane_tile_row(lane, j), N) * K + koff;
  const uint16_t *xr[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const int m = t * kp_mma_cols + kp_lane_col(lane);
    xr[t] = p.x + (int64_t)(m < M ? m : M - 1) * K + koff;
  }
  kp_frag acc[R][NT];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[r][t][i] = 0.0f;

  const int64_t e1 = s1 < full ? s1 : full; /* steps with no piece past K */
  int64_t s = s0;
  bool first = true;
#pragma unroll 1
  for (; s + U <= e1; s += U, first = false) kp_mma_steps_tiles<DT, NT, U, R>(wr, xr, s * kp_mma_step, acc, first);
  if constexpr (U > 8) if (s + 8 <= e1) { kp_mma_steps_tiles<DT, NT, 8, R>(wr, xr, s * kp_mma_step, acc, first); s += 8; first = false; }
  if constexpr (U > 4) if (s + 4 <= e1) { kp_mma_steps_tiles<DT, NT, 4, R>(wr, xr, s * kp_mma_step, acc, first); s += 4; first = false; }
  if (s + 2 <= e1) { kp_mma_steps_tiles<DT, NT, 2, R>(wr, xr, s * kp_mma_step, acc, first); s += 2; first = false; }
  if (s + 1 <= e1) { kp_mma_steps_tiles<DT, NT, 1, R>(wr, xr, s * kp_mma_step, acc, first); s += 1; first = false; }
  if (s < s1) /* the partial last step of K */
    kp_mma_step_masked_tiles<DT, NT, R>(wr, xr, s * kp_mma_step, s * kp_mma_step + koff < K, acc, first);
  kp_batch_fence(true); /* warps with no steps still wait before any store */

  /* partial tiles meet in shared memory, summed in warp order, tile after tile */
  __shared__ float red[kp_mma_max_warps][kp_mma_cols][kp_mma_pad];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t nr = n0 + r * tile_cols;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
#pragma unroll
      for (int i = 0; i < 4; ++i) red[warp][kp_frag_col(lane, i)][kp_frag_row(lane, i)] = acc[r][t][i];
      __syncthreads();
      const int live = MODE == KP_MMA_GATED ? 8 * kp_mma_cols : 16 * kp_mma_cols;
      for (int e = threadIdx.x; e < live; e += blockDim.x) {
        const int row = MODE == KP_MMA_GATED ? e % 8 : e % 16, col = MODE == KP_MMA_GATED ? e / 8 : e / 16;
        const int m = t * kp_mma_cols + col;
        const int64_t n = nr + row;
        if (m >= M || n >= N) continue;
        float v = red[0][col][row];
        for (int q = 1; q < nwarps; ++q) v += red[q][col][row];
        if constexpr (MODE == KP_MMA_LINEAR) {
          p.y[m * N + n] = kp_round<DT>(v);
        } else if constexpr (MODE == KP_MMA_GATED) {
          float u = red[0][col][row + 8];
          for (int q = 1; q < nwarps; ++q) u += red[q][col][row + 8];
          p.y[m * N + n] = kp_round<DT>(kp_silu_mul(v, u));
        } else {
          p.part[((int64_t)blockIdx.y * M + m) * N + n] = v;
        }
      }
      __syncthreads();
    }
  }

  if constexpr (MODE == KP_MMA_SPLITK) {
    /* the last block of this column to arrive sums the S partials in order */
    __shared__ int last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&p.counters[blockIdx.x], 1u) == gridDim.y - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int e = threadIdx.x; e < 16 * M; e += blockDim.x) {
      const int64_t n = n0 + e % 16;
      const int m = e / 16;
      if (n >= N) continue;
      float v = kp_ld_coherent(p.part + (int64_t)m * N + n);
      for (unsigned q = 1; q < gridDim.y; ++q) v += kp_ld_coherent(p.part + ((int64_t)q * M + m) * N + n);
      p.y[m * N + n] = kp_round<DT>(v);
    }
    if (threadIdx.x == 0) p.counters[blockIdx.x] = 0u; /* ready for the next launch */
  }
}
#else
/* no matrix instruction on this target: the host never launches these */
template <int DT, int NT, int U, int MODE, bool PDL, int R>
__global__ void kp_mma_kernel(kp_mma_args p) {
  __builtin_trap();
}
#endif

/* NT for m rows: the power of two of instructions per step that covers m */
static constexpr int kp_mma_tiles(int m) {
  const int need = (m + kp_mma_cols - 1) / kp_mma_cols;
  int nt = 1;
  while (nt < need) nt *= 2;
  return nt;
}

/* The kernels of one space.def row of a family built on this tile (mma,
 * gated mma, splitk): k[dtype][log2 NT] for NT = 1 .. the NT of its rows_max
 * (rows.h), and its tiles a block r; null elsewhere and for rows of other
 * families. */
typedef void (*kp_mma_fn)(kp_mma_args);
static constexpr int kp_mma_nt_slots = kp_log2(kp_mma_tiles(kp_rows_limit)) + 1;
struct kp_mma_set {
  kp_mma_fn k[2][kp_mma_nt_slots];
  int r;
};

template <int DT, int U, int MODE, bool PDL, int R, int NT>
static void kp_mma_fill(kp_mma_fn (&k)[kp_mma_nt_slots]) {
  k[kp_log2(NT)] = kp_mma_kernel<DT, NT, U, MODE, PDL, R>;
  if constexpr (NT > 1) kp_mma_fill<DT, U, MODE, PDL, R, NT / 2>(k);
}

/* a row's set: every NT its rows reach, both dtypes; R tiles a block */
template <int U, int MODE, bool PDL, int NT, int R = 1>
static kp_mma_set kp_mma_make() {
  static_assert(NT >= 1 && kp_log2(NT) < kp_mma_nt_slots, "rows_max past kp_rows_limit");
  static_assert(U <= 8 || NT <= 8, "U = 16 would spill past 8 tiles: such a row's rows_max stops at 64 (CUDA)");
  static_assert(R == 1 || (R * U <= 8 && NT <= 4),
                "R tiles hold R times the weight loads and tiles: R * U <= 8, rows <= 32 (registers)");
  kp_mma_set s = {};
  kp_mma_fill<KP_DT_BF16, U, MODE, PDL, R, NT>(s.k[0]);
  kp_mma_fill<KP_DT_FP16, U, MODE, PDL, R, NT>(s.k[1]);
  s.r = R;
  return s;
}

/* the set's kernel for a call of m rows, or null */
static inline kp_mma_fn kp_mma_pick(const kp_mma_set &s, int32_t dtype, int32_t m) {
  const int slot = kp_log2(kp_mma_tiles(m));
  return m >= 1 && slot < kp_mma_nt_slots ? s.k[dtype == KP_DT_BF16 ? 0 : 1][slot] : nullptr;
}

#endif
