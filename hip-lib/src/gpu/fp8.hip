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
 * The gemv kernels are those of the w8a16 rows of space.def (rows.h). */
#include "../common/error.h"
#include "check.h"
#include "dtype.h"
#include "gemv_core.h"
#include "launch.h"

/* ---- e4m3 <-> fp32 ---- */

/* OCP E4M3FN, round to nearest even, saturating at +-448; NaN keeps its sign
 * (common/numeric.h kp_f32_to_e4m3, bit for bit). */
__device__ __forceinline__ uint8_t kp_e4m3_encode(float f) {
  const uint32_t u = __float_as_uint(f);
  const uint8_t sign = (uint8_t)((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint8_t)(sign | 0x7fu);
  if (a >= 0x43e00000u) return (uint8_t)(sign | 0x7eu);
  if (a < 0x3c800000u) return (uint8_t)(sign | (uint8_t)rintf(fabsf(f) * 512.0f));
  const uint32_t r = a + 0x7ffffu + ((a >> 20) & 1u);
  return (uint8_t)(sign | (((r >> 20) - ((127u - 7u) << 3)) & 0x7fu));
}

/* Codes 2i and 2i+1 of a word (i = 0: the low two bytes) as fp32, exactly. */
template <int I>
__device__ __forceinline__ void kp_e4m3_pair(uint32_t word, float &lo, float &hi) {
#if defined(KPICK_GPU_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  const unsigned short pair = (unsigned short)(word >> (16 * I));
  uint32_t h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(pair));
  lo = __half2float(__ushort_as_half((unsigned short)(h2 & 0xffffu)));
  hi = __half2float(__ushort_as_half((unsigned short)(h2 >> 16)));
#else
  const uint32_t b0 = (word >> (16 * I)) & 0xffu, b1 = (word >> (16 * I + 8)) & 0xffu;
  lo = __uint_as_float(((b0 & 0x80u) << 24) | ((b0 & 0x7fu) << 20)) * 0x1p120f;
  hi = __uint_as_float(((b1 & 0x80u) << 24) | ((b1 & 0x7fu) << 20)) * 0x1p120f;
#endif
}

/* the 8 weights of two words (8 codes), in memory order */
__device__ __forceinline__ void kp_e4m3_unpack8(uint32_t a, uint32_t b, float (&f)[8]) {
  kp_e4m3_pair<0>(a, f[0], f[1]);
  kp_e4m3_pair<1>(a, f[2], f[3]);
  kp_e4m3_pair<0>(b, f[4], f[5]);
  kp_e4m3_pair<1>(b, f[6], f[7]);
}

__device__ __forceinline__ float kp_bf16_round(float v) { return __uint_as_float((uint32_t)kp_round<KP_DT_BF16>(v) << 16); }

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
  const int64_t w_rows = c->op == KPICK_OP_GATED ? 2 * c->n : c->n;
  KP_GPU(kp_launch(k, grid, block, c->stream, c->pdl != 0, (const uint16_t *)c->x, (const uint8_t *)c->w,
                   (uint16_t *)c->y, c->n, c->k, w_rows));
  return KPICK_OK;
}

/* ---- w8a8: the activation quant and the unit-scale epilogue ---- */

static constexpr int kp_quant_threads = 256;

__device__ __forceinline__ float kp_block_max(float v, float *shared) {
  for (int o = kp_warp / 2; o > 0; o >>= 1) v = fmaxf(v, kp_shfl_xor(v, o));
  const int warp = threadIdx.x / kp_warp, lane = threadIdx.x % kp_warp, nwarps = blockDim.x / kp_warp;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float all = 0.0f;
  for (int i = 0; i < nwarps; ++i) all = fmaxf(all, shared[i]);
  return all;
}

/* One block per row of x: amax, scale = amax / 448 (1 for a zero row), codes
 * of x / scale. K % 8 == 0: 16-byte pieces of 8 values. */
__global__ void __launch_bounds__(kp_quant_threads)
    kp_e4m3_quant_kernel(const uint16_t *__restrict__ x, uint8_t *__restrict__ xq, float *__restrict__ sx, int64_t K) {
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

int kp_e4m3_quant_launch(const void *x, void *xq, float *sx, int32_t m, int64_t k, hipStream_t stream) {
  if (k % 8 != 0) return kp_fail(KPICK_E_UNSUPPORTED, "w8a8", "the activation quant needs K %% 8 == 0, got %lld", (long long)k);
  KP_GPU(kp_launch(kp_e4m3_quant_kernel, dim3((unsigned)m), dim3(kp_quant_threads), stream, false, (const uint16_t *)x,
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
