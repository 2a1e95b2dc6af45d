/* tile-read-probe.cu: is the 16-row tensor-core tile's way of reading W, without its math, as fast
 * as the read floor? Session 20 found a shared-memory ring 1.4-2.4x slower than the tile's register
 * loop and 16 warps a block slower than 8 (bench/results/h200-2026-12-04-ring-peer-facdb24/NOTES.md):
 * neither more bytes in flight nor shorter chains a warp helped, so the next question is whether the
 * read pattern itself caps the tile (rows 4-16 sit at 1.3-1.8x the floor). Each variant reads every
 * byte of W once and nothing else (no x, no math, no stores but one word a block):
 *   floor       grid-stride over the bytes as one array, 16 bytes a thread, two 512-thread blocks
 *               an SM: the probe's floor, as w8a16-ring-probe.cu's
 *   rows.wW     the tile's pattern (fp8.hip's w8a16.mma, mma_core.h): a block owns 16 rows; warp w
 *               takes the K blocks w, w + W, ...; lane l (g = l / 4, q = l % 4) reads P bytes of rows
 *               g and g + 8 at q P of a block (P = 16: 64 fp8 codes a block; P = 32: 64 bf16
 *               weights, two 16-byte loads); two sets of two blocks, the next set's loads issued
 *               before this set is used, as the library's loop
 *   rows.wW.u4  the same with two sets of four blocks (twice the bytes a warp in flight)
 *   rows.wW.rot the same as rows.wW, but block b's warps start their slices at the (b mod slice)-th block and
 *               wrap: at any moment the grid's blocks ask for different K offsets of their rows,
 *               where rows.wW has them all at the same ones (a pattern that may load a few DRAM
 *               channels and leave others idle)
 *   lin.wW      a block's 16 rows, a warp a row at a time: lane l reads 16 bytes at 16 l of each
 *               512-byte run of the row (one instruction covers 512 contiguous bytes), four runs in
 *               flight; the tile would need its fragments exchanged to use it (ldmatrix or shuffles)
 *   tile.*      the tile's parts on rows.w8's loop, at the rows the tile serves (fp8 4-16, bf16
 *               8-32): .x also loads the lane's x pieces a block as the tile does (from L2, every
 *               block), .m decodes and runs the four mma steps a block on constant x, .xm both,
 *               .xmr also sums the warps through shared memory and stores y (the whole tile, as
 *               w8a16-ring-probe.cu's regs.w8 less the fp8 row scales): which part adds what the
 *               session-21 run found, the tile at 1.45x this floor and its reads at 0.8-1.0x
 * Each run checks that the XOR of every 32-bit word it read equals the host's XOR of W (a piece
 * missed or read twice would change it) before it is timed. W rotates over copies that outsize the
 * L2; median us of a launch over batches of 20; launches back to back (probe.h).
 *   nvcc -O3 -std=c++17 -arch=sm_90 -DKPICK_GPU_CUDA -o build/tile-read bench/gpu/tile-read-probe.cu \
 *     && build/tile-read        # exit 1: a check failed
 * Not part of the library or its space token. Run in session 21 (before the tile.* parts, written
 * after the device time was spent: compiled, not run): the library's pattern at 0.79-1.01 of this
 * floor (bench/results/h200-2026-12-04-fusedtiles-tileread-ebec912/NOTES.md). */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <vector>

#include "../../hip-lib/src/common/numeric.h"
#include "../../hip-lib/src/gpu/fp8_core.h"
#include "probe.h"
#include "tile-math.h"

#define CK(x) KP_PROBE_CK("tile-read", x)

__device__ __forceinline__ unsigned fold(const kp_v16 &v) { return v.x ^ v.y ^ v.z ^ v.w; }

/* one word a block: the XOR of what its threads read */
__device__ __forceinline__ void block_xor(unsigned acc, unsigned *sum) {
  for (int o = 16; o > 0; o /= 2) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  if (threadIdx.x % 32 == 0) atomicXor(sum, acc);
}

__global__ void __launch_bounds__(512) floor_kernel(const kp_v16 *__restrict__ p, int64_t n, unsigned *sum) {
  unsigned acc = 0;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
    acc ^= fold(kp_ld_stream(p + i));
  block_xor(acc, sum);
}

/* the tile's pattern; P bytes a lane a row a block (16 or 32), U blocks a set, ROT: slices rotated by block */
template <int P, int U, bool ROT>
__global__ void __launch_bounds__(U == 4 ? 256 : 512) rows_kernel( /* u4 runs 8 warps: registers for both sets */const uint8_t *__restrict__ w, int64_t N, int64_t row_bytes,
                                                   unsigned *sum) {
  constexpr int L = P / 16, B = 4 * P; /* loads a lane a row a block; bytes of a row a block */
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  const int g = lane / 4, q = lane % 4;
  const int64_t n0 = (int64_t)blockIdx.x * 16 + g;
  const uint8_t *r0 = w + n0 * row_bytes + q * P, *r1 = w + (n0 + 8) * row_bytes + q * P; /* N % 16 == 0 */
  const int64_t nblocks = row_bytes / B, mine = nblocks > warp ? (nblocks - warp + nwarps - 1) / nwarps : 0;
  const int64_t j0 = ROT && mine > 0 ? blockIdx.x % mine : 0;
  /* the j-th block; the plain pattern pays no modulo, as the library's loop */
  auto at = [&](int64_t j) { return (int64_t)warp + (int64_t)nwarps * (ROT ? (j + j0) % mine : j); };
  unsigned acc = 0;
  kp_v16 a[U][2][L], b[U][2][L]; /* two sets of U blocks: [block][row][piece] */
  auto load = [&](int64_t j, kp_v16(&s)[U][2][L]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const bool in = j + u < mine;
      const int64_t off = in ? at(j + u) * B : 0;
#pragma unroll
      for (int p = 0; p < L; ++p) {
        s[u][0][p] = in ? kp_ld_stream(r0 + off + 16 * p) : kp_v16{0u, 0u, 0u, 0u};
        s[u][1][p] = in ? kp_ld_stream(r1 + off + 16 * p) : kp_v16{0u, 0u, 0u, 0u};
      }
    }
  };
  auto use = [&](const kp_v16(&s)[U][2][L]) {
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int p = 0; p < L; ++p) acc ^= fold(s[u][r][p]);
  };
  int64_t j = 0;
  if (j < mine) load(j, a);
#pragma unroll 1
  while (j < mine) {
    if (j + U < mine) load(j + U, b);
    use(a);
    j += U;
    if (j >= mine) break;
    if (j + U < mine) load(j + U, a);
    use(b);
    j += U;
  }
  block_xor(acc, sum);
}

/* a block's 16 rows, a warp a row at a time, each instruction 512 contiguous bytes of a row */
__global__ void __launch_bounds__(512) lin_kernel(const uint8_t *__restrict__ w, int64_t row_bytes, unsigned *sum) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  const int64_t runs = row_bytes / 512;
  unsigned acc = 0;
  for (int r = warp; r < 16; r += nwarps) {
    const uint8_t *row = w + ((int64_t)blockIdx.x * 16 + r) * row_bytes + lane * 16;
    int64_t i = 0;
#pragma unroll 1
    for (; i + 4 <= runs; i += 4) {
      kp_v16 v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) v[u] = kp_ld_stream(row + (i + u) * 512);
#pragma unroll
      for (int u = 0; u < 4; ++u) acc ^= fold(v[u]);
    }
    for (; i < runs; ++i) acc ^= fold(kp_ld_stream(row + i * 512));
  }
  block_xor(acc, sum);
}

/* the tile's parts, on the library's loop (8 warps, two register sets of two blocks): W read
 * as rows.w8 (its XOR checked), and per block, X: the lane's x pieces of x rows g (+ 8 t) loaded
 * as the tile loads them (from L2, every block); MATH: the codes decoded and the four mma steps
 * (on constant x without X); RED: the warps' sums added through shared memory and y stored, as
 * the tile ends. All three: the whole tile (w8a16-ring-probe.cu's regs.w8). What a part leaves
 * unused goes to a sink no run reaches, so the compiler keeps it. */
template <int WB, int T, bool X, bool MATH, bool RED>
__global__ void __launch_bounds__(256) parts_kernel(const uint8_t *__restrict__ w, const uint16_t *__restrict__ x,
                                                    uint16_t *__restrict__ y, int M, int64_t N, int64_t K, unsigned *sum,
                                                    unsigned *sink) {
  constexpr int piece = 16 * WB;
  __shared__ float red[8][32][4 * T];
  const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  const int64_t n0 = (int64_t)blockIdx.x * 16 + g, rowb = K * WB, nblocks = K / 64;
  const uint8_t *w0 = w + n0 * rowb + q * piece, *w1 = w + (n0 + 8) * rowb + q * piece; /* N % 16 == 0 */
  const uint16_t *xr[T];
  bool xv[T];
  tile_x_rows<T>(x, M, K, xr, xv);
  kp_v16 xa[T], xb[T];
#pragma unroll
  for (int t = 0; t < T; ++t) {
    const uint32_t c = 0x3f803f80u ^ (uint32_t)(lane * 0x00010001u); /* constant x: bf16 values near 1 */
    xa[t] = kp_v16{c, c ^ 1u, c ^ 2u, c ^ 3u}, xb[t] = kp_v16{c ^ 4u, c ^ 5u, c ^ 6u, c ^ 7u};
  }
  float acc[T][4];
#pragma unroll
  for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0.0f;
  unsigned wx = 0, xx = 0;
  tile_loop<WB>(w0, w1, nblocks, [&](int64_t kb, const kp_v16(&wa)[WB], const kp_v16(&wb)[WB]) {
#pragma unroll
    for (int p = 0; p < WB; ++p) wx ^= fold(wa[p]) ^ fold(wb[p]);
    if constexpr (X) load_x<T>(xr, xv, kb, xa, xb);
    if constexpr (MATH) {
      block_math_x<T, WB>(wa, wb, xa, xb, acc);
    } else if constexpr (X) {
#pragma unroll
      for (int t = 0; t < T; ++t) xx ^= fold(xa[t]) ^ fold(xb[t]);
    }
  });
  block_xor(wx, sum);
  if constexpr (RED) {
    tile_sum_store<T>(red, acc, M, N, n0, true, true, 1.0f, 1.0f, y);
  } else {
    float f = 0.0f;
#pragma unroll
    for (int t = 0; t < T; ++t) f += acc[t][0] + acc[t][1] + acc[t][2] + acc[t][3];
    if (f == 1.25e-38f || xx == 0x9e3779b9u) atomicAdd(sink, 1u);
  }
}

typedef void (*parts_fn)(const uint8_t *, const uint16_t *, uint16_t *, int, int64_t, int64_t, unsigned *, unsigned *);
/* parts: bit 0 X, bit 1 MATH, bit 2 RED (RED only with both) */
template <int WB, int T>
static parts_fn parts_for(int parts) {
  switch (parts) {
    case 1: return parts_kernel<WB, T, true, false, false>;
    case 2: return parts_kernel<WB, T, false, true, false>;
    case 3: return parts_kernel<WB, T, true, true, false>;
    default: return parts_kernel<WB, T, true, true, true>;
  }
}
static parts_fn pick_parts(int wb, int T, int parts) {
  if (wb == 1) return T == 1 ? parts_for<1, 1>(parts) : T == 2 ? parts_for<1, 2>(parts) : parts_for<1, 4>(parts);
  return T == 1 ? parts_for<2, 1>(parts) : T == 2 ? parts_for<2, 2>(parts) : parts_for<2, 4>(parts);
}

struct variant {
  const char *name;
  int kind, warps, u; /* kind: 0 floor, 1 rows, 2 rows.rot, 3 lin, 4 the tile's parts; u: blocks a set (rows), parts (4) */
};
static const variant variants[] = {
    {"floor", 0, 16, 0},      {"rows.w8", 1, 8, 2},     {"rows.w4", 1, 4, 2},    {"rows.w16", 1, 16, 2},
    {"rows.w8.u4", 1, 8, 4},  {"rows.w8.rot", 2, 8, 2}, {"rows.w4.rot", 2, 4, 2}, {"lin.w8", 3, 8, 0},
    {"lin.w16", 3, 16, 0},    {"tile.x", 4, 8, 1},      {"tile.m", 4, 8, 2},     {"tile.xm", 4, 8, 3},
    {"tile.xmr", 4, 8, 7},
};
/* the activation rows the parts run at: fp8 weights 4-16, bf16 8-32 (as w8a16-ring-probe.cu) */
static const int parts_rows[2][3] = {{4, 8, 16}, {8, 16, 32}};
/* Llama-3.1-8B's linears (gate_up as one 28672-row linear); K in weights */
static const int shapes[][2] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}};

static kp_probe_rng rng{0x2545f4914f6cdd1dull};

int main(void) {
  const cudaDeviceProp prop =
      kp_probe_device("tile-read-probe", "median us a launch over batches of 20, W rotating over copies past the L2");
  const int units = prop.multiProcessorCount;
  printf("%-5s %-12s %4s %-12s %9s %8s %9s %s\n", "w", "shape", "rows", "variant", "us", "GB/s", "x floor", "check");
  unsigned *sum, *sink;
  CK(cudaMalloc(&sum, sizeof(unsigned)));
  CK(cudaMalloc(&sink, sizeof(unsigned)));
  /* x: 32 rows of the longest K, bf16 values in [-1, 1); y: 32 rows of the widest N */
  const int64_t xmax = 32 * 14336, ymax = 32 * 28672;
  std::vector<uint16_t> xh((size_t)xmax);
  for (auto &v : xh) v = (uint16_t)((rng.next_u32() & 0x807fu) | 0x3f00u);
  uint16_t *dx, *dy;
  CK(cudaMalloc(&dx, sizeof(uint16_t) * xmax));
  CK(cudaMalloc(&dy, sizeof(uint16_t) * ymax));
  CK(cudaMemcpy(dx, xh.data(), sizeof(uint16_t) * xmax, cudaMemcpyHostToDevice));
  int failed = 0;
  for (int wb : {1, 2})
    for (const auto &sh : shapes) {
      const int64_t N = sh[0], row_bytes = (int64_t)sh[1] * wb, bytes = N * row_bytes;
      std::vector<uint32_t> host((size_t)(bytes / 4));
      uint32_t want = 0;
      for (auto &x : host) want ^= (x = rng.next_u32());
      const int copies = (int)std::max<int64_t>(2, (int64_t)(4 * prop.l2CacheSize) / bytes + 1);
      uint8_t *dw;
      CK(cudaMalloc(&dw, (size_t)bytes * copies));
      for (int c = 0; c < copies; ++c) CK(cudaMemcpy(dw + (size_t)c * bytes, host.data(), (size_t)bytes, cudaMemcpyHostToDevice));
      char shape[32];
      snprintf(shape, sizeof shape, "%lldx%d", (long long)N, sh[1]);
      float floor_us = 0.0f;
      for (const variant &v : variants)
        for (int ri = 0; ri < (v.kind == 4 ? 3 : 1); ++ri) {
        const int M = v.kind == 4 ? parts_rows[wb - 1][ri] : 0;
        char rows[8];
        snprintf(rows, sizeof rows, "%s", "-");
        if (M) snprintf(rows, sizeof rows, "%d", M);
        auto launch = [&](int c) {
          const uint8_t *p = dw + (size_t)c * bytes;
          const dim3 tiles((unsigned)(N / 16)), block(v.warps * 32);
          if (v.kind == 0) floor_kernel<<<2 * units, 512>>>(reinterpret_cast<const kp_v16 *>(p), bytes / 16, sum);
          else if (v.kind == 4) pick_parts(wb, (M + 7) / 8, v.u)<<<tiles, block>>>(p, dx, dy, M, N, (int64_t)sh[1], sum, sink);
          else if (v.kind == 3) lin_kernel<<<tiles, block>>>(p, row_bytes, sum);
          else if (wb == 1)
            (v.kind == 2 ? rows_kernel<16, 2, true> : v.u == 4 ? rows_kernel<16, 4, false> : rows_kernel<16, 2, false>)<<<tiles, block>>>(
                p, N, row_bytes, sum);
          else
            (v.kind == 2 ? rows_kernel<32, 2, true> : v.u == 4 ? rows_kernel<32, 4, false> : rows_kernel<32, 2, false>)<<<tiles, block>>>(
                p, N, row_bytes, sum);
        };
        CK(cudaMemset(sum, 0, sizeof(unsigned)));
        launch(0);
        CK(cudaGetLastError());
        unsigned got = 0;
        CK(cudaMemcpy(&got, sum, sizeof(unsigned), cudaMemcpyDeviceToHost));
        if (got != want) {
          ++failed;
          printf("%-5s %-12s %4s %-12s %9s %8s %9s FAIL (xor %08x, want %08x)\n", wb == 1 ? "fp8" : "bf16", shape, rows, v.name, "-", "-",
                 "-", got, want);
          continue;
        }
        const float us = kp_probe_median_us(launch, copies);
        if (v.kind == 0) floor_us = us;
        printf("%-5s %-12s %4s %-12s %9.2f %8.0f %9.3f ok\n", wb == 1 ? "fp8" : "bf16", shape, rows, v.name, us, bytes / (us * 1e3),
               us / floor_us);
        }
      CK(cudaFree(dw));
    }
  printf("# %d variant runs failed their checks\n", failed);
  return failed ? 1 : 0;
}
