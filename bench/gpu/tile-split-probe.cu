/* tile-split-probe.cu: R tiles a block with K split over S blocks, for the tensor-core tile at
 * rows 4-32. Every block of the library's 16-row tile (fp8.hip's w8a16.mma, mma_core.h) reads
 * all of x's K for its 16 weight rows: at fp8 rows 8 a block reads as many x bytes (from L2) as
 * W bytes (from DRAM), at bf16 rows 32 twice as many. R tiles a block share each x load R ways;
 * session 18's R = 4 rows saved those bytes where the grid was large (lm_head: 3-7 % faster than
 * R = 2 at rows 32) and lost 22-62 % below two blocks a unit (bench/results/
 * h200-2026-12-03-r4-fb1a9ed/NOTES.md: "a mid-shape R = 4 row would need K split over blocks
 * too"). Here: the split. Block (i, s) of the grid takes weight rows 16 R i .. 16 R (i + 1) and
 * the s-th of S equal runs of K's 64-wide blocks; its 8 warps take those blocks in turn (warp w:
 * the w-th, w + 8-th, ...), each holding two register sets of one block's W for its R tiles (the
 * next block's loads in flight while this one computes), x loaded once a block for the R tiles;
 * the warps' sums added in warp order through shared memory; S = 1 stores y, else each block
 * stores its fp32 partial and the last of a row group's S blocks to finish (a counter) adds the
 * S partials in split order and stores y.
 *   tile.lib    the library's loop as tile-math.h writes it (R = 1, two sets of two blocks: the
 *               w8a16-ring-probe.cu's regs.w8), the baseline
 *   rR.sS       the kernel above: r1.s1 (its one-block sets alone), r1.s2 (the split alone),
 *               r2.s1, r2.s2, r4.s1, r4.s2, r4.s4
 * Weights as w8a16-ring-probe.cu's (tile-data.h: fp8 at rows 4-16, bf16 at 8-32; fp8 row scales
 * applied at the store), Llama-3.1-8B's four shapes; every variant checked against an fp64
 * reference of every 4th column (error over the largest value at most 1e-2) before it is timed;
 * median us of a launch over batches of 20, W rotating over copies past the L2, launches back to
 * back; ptxas' spills are the build's to read (-Xptxas -v).
 *   nvcc -O3 -std=c++17 -arch=sm_90 -DKPICK_GPU_CUDA -o build/tile-split \
 *     bench/gpu/tile-split-probe.cu && build/tile-split        # exit 1: a check failed
 * Not part of the library or its space token. Run in session 22 at 111fb16: r1.s1 beats tile.lib
 * on qkv and gate_up (bench/results/h200-2026-12-05-probes-peer-111fb16/NOTES.md). */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include <vector>

#include "../../hip-lib/src/gpu/fp8_core.h"
#include "probe.h"
#include "tile-data.h"
#include "tile-math.h"

#define CK(x) KP_PROBE_CK("tile-split", x)

static constexpr int kWarps = 8;

/* T x-row tiles of 8, WB weight bytes, R tiles a block, S blocks over K (grid: N / (16 R) x S) */
template <int T, int WB, int R, int S>
__global__ void __launch_bounds__(kWarps * 32) split_kernel(const uint16_t *__restrict__ x, const uint8_t *__restrict__ w,
                                                            const float *__restrict__ scales, uint16_t *__restrict__ y,
                                                            float *part, unsigned *counters, int M, int64_t N, int64_t K) {
  constexpr int piece = 16 * WB;
  __shared__ float red[kWarps][32][4 * T];
  __shared__ int last;
  const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  const int split = blockIdx.y;
  const int64_t nb = K / 64, kb0 = nb * split / S, kb1 = nb * (split + 1) / S, rowb = K * WB;
  const int64_t nbase = (int64_t)blockIdx.x * 16 * R; /* N % (16 R) == 0: the host checks */
  const uint8_t *w0[R], *w1[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    w0[r] = w + (nbase + 16 * r + g) * rowb + q * piece;
    w1[r] = w0[r] + 8 * rowb;
  }
  const uint16_t *xr[T];
  bool xv[T];
  tile_x_rows<T>(x, M, K, xr, xv);
  float acc[R][T][4];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < T; ++t) acc[r][t][0] = acc[r][t][1] = acc[r][t][2] = acc[r][t][3] = 0.0f;

  tile_loop_rows<WB, R, 1>(w0, w1, kb0, kb1, [&](int64_t kb, const kp_v16(&wa)[R][WB], const kp_v16(&wb)[R][WB]) {
    kp_v16 xa[T], xb[T]; /* x once a K block, for the R tiles */
    load_x<T>(xr, xv, kb, xa, xb);
#pragma unroll
    for (int r = 0; r < R; ++r) block_math_x<T, WB>(wa[r], wb[r], xa, xb, acc[r]);
  });

  /* each tile's warp sums in warp order; warp 0 stores y (S = 1) or the block's partial */
#pragma unroll
  for (int r = 0; r < R; ++r) {
    if (tile_warp_sum<T>(red, acc[r])) {
      const int64_t n0 = nbase + 16 * r + g;
      tile_each_output<T>(acc[r], M, n0, true, true, WB == 1 ? scales[n0] : 1.0f, WB == 1 ? scales[n0 + 8] : 1.0f,
                          [&](int m, int64_t n, float v, float s) {
                            if (S == 1) y[(int64_t)m * N + n] = tile_bf16(v * s);
                            else part[((int64_t)split * M + m) * N + n] = v;
                          });
    }
    __syncthreads(); /* red is read by warp 0 before the next tile writes it */
  }
  if constexpr (S > 1) {
    /* the last of the row group's S blocks adds the partials in split order */
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&counters[blockIdx.x], 1u) == (unsigned)(S - 1);
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int i = threadIdx.x; i < 16 * R * M; i += blockDim.x) {
      const int m = i / (16 * R);
      const int64_t n = nbase + i % (16 * R);
      float v = 0.0f;
#pragma unroll
      for (int s = 0; s < S; ++s) v += __ldcg(part + ((int64_t)s * M + m) * N + n);
      y[(int64_t)m * N + n] = tile_bf16(v * (WB == 1 ? scales[n] : 1.0f));
    }
    if (threadIdx.x == 0) counters[blockIdx.x] = 0; /* for the next launch */
  }
}

/* the baseline: the library's tile (tile-math.h) */
template <int T, int WB>
__global__ void __launch_bounds__(kWarps * 32) lib_kernel(const uint16_t *__restrict__ x, const uint8_t *__restrict__ w,
                                                          const float *__restrict__ scales, uint16_t *__restrict__ y,
                                                          float *, unsigned *, int M, int64_t N, int64_t K) {
  __shared__ float red[kWarps][32][4 * T];
  tile_lib<T, WB>(red, x, w, scales, y, M, N, K);
}

typedef void (*tile_fn)(const uint16_t *, const uint8_t *, const float *, uint16_t *, float *, unsigned *, int, int64_t,
                        int64_t);

struct variant {
  const char *name;
  int r, s; /* r 0: tile.lib */
};
static const variant variants[] = {{"tile.lib", 0, 1}, {"r1.s1", 1, 1}, {"r1.s2", 1, 2}, {"r2.s1", 2, 1},
                                   {"r2.s2", 2, 2},    {"r4.s1", 4, 1}, {"r4.s2", 4, 2}, {"r4.s4", 4, 4}};

template <int T, int WB>
static tile_fn pick_t(int r, int s) {
  if (r == 0) return lib_kernel<T, WB>;
  if (r == 1) return s == 1 ? split_kernel<T, WB, 1, 1> : split_kernel<T, WB, 1, 2>;
  if (r == 2) return s == 1 ? split_kernel<T, WB, 2, 1> : split_kernel<T, WB, 2, 2>;
  return s == 1 ? split_kernel<T, WB, 4, 1> : s == 2 ? split_kernel<T, WB, 4, 2> : split_kernel<T, WB, 4, 4>;
}
static tile_fn pick(int T, int WB, int r, int s) {
  if (WB == 1) return T == 1 ? pick_t<1, 1>(r, s) : T == 2 ? pick_t<2, 1>(r, s) : pick_t<4, 1>(r, s);
  return T == 1 ? pick_t<1, 2>(r, s) : T == 2 ? pick_t<2, 2>(r, s) : pick_t<4, 2>(r, s);
}

static kp_probe_rng rng{0x6a09e667f3bcc909ull};

int main(void) {
  const cudaDeviceProp prop = kp_tile_probe_start("tile-split-probe");
  const int units = prop.multiProcessorCount;
  unsigned *sink, *counters;
  float *part;
  const int64_t max_rows = 32, max_n = 28672, max_s = 4;
  CK(cudaMalloc(&sink, sizeof(unsigned)));
  CK(cudaMalloc(&counters, sizeof(unsigned) * max_n / 16));
  CK(cudaMemset(counters, 0, sizeof(unsigned) * max_n / 16));
  CK(cudaMalloc(&part, sizeof(float) * max_s * max_rows * max_n));
  int failed = 0;
  kp_tile_each_weights(rng, prop.l2CacheSize, [&](const kp_tile_weight_kind &wk, int64_t N, int64_t K,
                                                 const kp_tile_weights &wt, const kp_tile_device &dev) {
      const int WB = wk.bytes;
      const int64_t wbytes = N * K * WB;
      char shape[32];
      const float floor_us = kp_tile_floor_line(wk.name, N, K, dev, wbytes, units, sink, shape);
      for (int M : wk.rows) {
        const kp_tile_io io = kp_tile_inputs(rng, M, N, K);
        const std::vector<uint16_t> &xh = io.x;
        uint16_t *dx = io.dx, *dy = io.dy;
        double rmax = 0.0;
        const std::vector<double> ref = kp_tile_reference(wt, xh, M, N, K, &rmax);
        const int T = M > 16 ? 4 : M > 8 ? 2 : 1;
        for (const variant &v : variants) {
          const tile_fn k = pick(T, WB, v.r, v.s);
          const int rows_a_block = 16 * (v.r == 0 ? 1 : v.r);
          if (N % rows_a_block != 0) continue;
          const dim3 grid((unsigned)(N / rows_a_block), (unsigned)v.s), block(kWarps * 32);
          CK(cudaMemset(dy, 0xff, (size_t)M * N * 2));
          k<<<grid, block>>>(dx, dev.w, dev.scales, dy, part, counters, M, N, K);
          CK(cudaGetLastError());
          CK(cudaDeviceSynchronize());
          std::vector<uint16_t> yh((size_t)(M * N));
          CK(cudaMemcpy(yh.data(), dy, yh.size() * 2, cudaMemcpyDeviceToHost));
          const double err = kp_tile_error(yh, ref, M, N, rmax);
          if (!(err <= 1.0e-2)) {
            ++failed;
            printf("%-5s %-12s %5d %-9s %7u %9s %8s %9s %10.2e FAIL\n", wk.name, shape, M, v.name, grid.x * grid.y, "-", "-",
                   "-", err);
            continue;
          }
          const float us = kp_probe_median_us(
              [&](int c) { k<<<grid, block>>>(dx, dev.w + (size_t)c * wbytes, dev.scales, dy, part, counters, M, N, K); }, dev.copies);
          CK(cudaGetLastError());
          printf("%-5s %-12s %5d %-9s %7u %9.2f %8.0f %9.3f %10.2e\n", wk.name, shape, M, v.name, grid.x * grid.y, us,
                 wbytes / (us * 1e3), us / floor_us, err);
        }
        kp_tile_io_free(io);
      }
    });
  printf("# %d variant runs failed their checks\n", failed);
  return failed ? 1 : 0;
}
