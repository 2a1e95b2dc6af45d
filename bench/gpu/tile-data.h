/* tile-data.h: the host side of the checked tile probes (w8a16-ring-probe.cu,
 * tile-split-probe.cu): weights as the library holds them, from uniform values drawn from
 * the probe's xorshift, the activations, and the fp64 reference of every 4th output column. */
#ifndef KPICK_TILE_DATA_H
#define KPICK_TILE_DATA_H
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "../../hip-lib/src/common/numeric.h"
#include "probe.h"

/* Llama-3.1-8B's linears (gate_up as one 28672-row linear), N x K; every N a multiple of 64 */
static const int kp_tile_shapes[4][2] = {{6144, 4096}, {4096, 4096}, {28672, 4096}, {4096, 14336}};
/* the weights and the rows the tile serves them at: fp8 (e4m3 codes and row scales, 1 byte) at
 * rows 4-16, bf16 (2 bytes) at rows 8-32 */
struct kp_tile_weight_kind {
  const char *name;
  int bytes;
  int rows[3];
};
static const kp_tile_weight_kind kp_tile_weight_kinds[2] = {{"fp8", 1, {4, 8, 16}}, {"bf16", 2, {8, 16, 32}}};

/* a value in [-1, 1) */
static inline float kp_tile_uniform(kp_probe_rng &rng) { return (float)(rng.next_u32() & 0xffffff) / 16777216.0f * 2.0f - 1.0f; }

/* W[N, K] of WB bytes a weight: fp8 (WB 1) the e4m3 codes of uniform weights over each row's
 * amax, as the library quantizes them, with the row scales; bf16 (WB 2) the weights themselves,
 * scales 1. dec: the values the reference multiplies (a code decoded, before its scale). */
struct kp_tile_weights {
  std::vector<uint8_t> bytes;
  std::vector<float> scales, dec;
};

static kp_tile_weights kp_tile_make_weights(kp_probe_rng &rng, int64_t N, int64_t K, int WB) {
  kp_tile_weights w;
  w.bytes.resize((size_t)(N * K * WB));
  w.scales.assign((size_t)N, 1.0f);
  w.dec.resize((size_t)(N * K));
  std::vector<float> row((size_t)K);
  for (int64_t n = 0; n < N; ++n) {
    float amax = 0.0f;
    for (int64_t k = 0; k < K; ++k) amax = fmaxf(amax, fabsf(row[(size_t)k] = kp_tile_uniform(rng) * 0.05f));
    for (int64_t k = 0; k < K; ++k) {
      const size_t i = (size_t)(n * K + k);
      if (WB == 1) {
        w.scales[(size_t)n] = amax > 0.0f ? amax / 448.0f : 1.0f;
        w.bytes[i] = kp_f32_to_e4m3(row[(size_t)k] / w.scales[(size_t)n]);
        w.dec[i] = kp_e4m3_to_f32(w.bytes[i]);
      } else {
        const uint16_t h = kp_f32_to_bf16(row[(size_t)k]);
        memcpy(&w.bytes[2 * i], &h, 2);
        w.dec[i] = kp_bf16_to_f32(h);
      }
    }
  }
  return w;
}

/* x[M, K] of uniform bf16 values, on the host and the device, and a device y[M, N] */
struct kp_tile_io {
  std::vector<uint16_t> x;
  uint16_t *dx = nullptr, *dy = nullptr;
};

static kp_tile_io kp_tile_inputs(kp_probe_rng &rng, int M, int64_t N, int64_t K) {
  kp_tile_io io;
  io.x.resize((size_t)(M * K));
  for (auto &e : io.x) e = kp_f32_to_bf16(kp_tile_uniform(rng));
  KP_PROBE_CK("tile-data", cudaMalloc(&io.dx, io.x.size() * 2));
  KP_PROBE_CK("tile-data", cudaMalloc(&io.dy, (size_t)M * N * 2));
  KP_PROBE_CK("tile-data", cudaMemcpy(io.dx, io.x.data(), io.x.size() * 2, cudaMemcpyHostToDevice));
  return io;
}

static void kp_tile_io_free(const kp_tile_io &io) {
  KP_PROBE_CK("tile-data", cudaFree(io.dx));
  KP_PROBE_CK("tile-data", cudaFree(io.dy));
}

/* the weights on the device: copies of W that together outsize the L2 four times (each launch
 * reads a cold copy), and the row scales */
struct kp_tile_device {
  uint8_t *w = nullptr;
  float *scales = nullptr;
  int copies = 0;
};

static kp_tile_device kp_tile_upload(const kp_tile_weights &wt, int64_t l2_bytes) {
  kp_tile_device d;
  const int64_t wbytes = (int64_t)wt.bytes.size();
  d.copies = (int)std::max<int64_t>(2, 4 * l2_bytes / wbytes + 1);
  KP_PROBE_CK("tile-data", cudaMalloc(&d.w, (size_t)wbytes * d.copies));
  for (int c = 0; c < d.copies; ++c)
    KP_PROBE_CK("tile-data", cudaMemcpy(d.w + (size_t)c * wbytes, wt.bytes.data(), (size_t)wbytes, cudaMemcpyHostToDevice));
  KP_PROBE_CK("tile-data", cudaMalloc(&d.scales, sizeof(float) * wt.scales.size()));
  KP_PROBE_CK("tile-data", cudaMemcpy(d.scales, wt.scales.data(), sizeof(float) * wt.scales.size(), cudaMemcpyHostToDevice));
  return d;
}

static void kp_tile_device_free(const kp_tile_device &d) {
  KP_PROBE_CK("tile-data", cudaFree(d.w));
  KP_PROBE_CK("tile-data", cudaFree(d.scales));
}

/* body(kind, N, K, weights, device) for every weight kind and shape, in that order, the weights
 * drawn from rng and on the device for the body's time */
template <class Body>
static void kp_tile_each_weights(kp_probe_rng &rng, int64_t l2_bytes, Body body) {
  for (const kp_tile_weight_kind &wk : kp_tile_weight_kinds)
    for (const auto &sh : kp_tile_shapes) {
      const kp_tile_weights wt = kp_tile_make_weights(rng, sh[0], sh[1], wk.bytes);
      const kp_tile_device dev = kp_tile_upload(wt, l2_bytes);
      body(wk, (int64_t)sh[0], (int64_t)sh[1], wt, dev);
      kp_tile_device_free(dev);
    }
}

/* a checked tile probe's first lines: the device (kp_probe_device) and the table's columns */
static cudaDeviceProp kp_tile_probe_start(const char *probe) {
  const cudaDeviceProp prop =
      kp_probe_device(probe, "median us a launch over batches of 20, W rotating over copies past the L2");
  printf("%-5s %-12s %5s %-9s %7s %9s %8s %9s %10s\n", "w", "shape", "rows", "variant", "blocks", "us", "GB/s", "x floor",
         "rel_err");
  return prop;
}

/* the read floor of one copy of W's wbytes (kp_probe_floor_kernel on 2 blocks a unit), us a launch,
 * printed as the shape's first line; shape gets the shape's name */
static float kp_tile_floor_line(const char *kind, int64_t N, int64_t K, const kp_tile_device &dev, int64_t wbytes, int units,
                                unsigned *sink, char (&shape)[32]) {
  snprintf(shape, sizeof shape, "%lldx%lld", (long long)N, (long long)K);
  const float us = kp_probe_median_us(
      [&](int c) {
        kp_probe_floor_kernel<<<2 * units, 512>>>(reinterpret_cast<const kp_v16 *>(dev.w + (size_t)c * wbytes), wbytes / 16,
                                                  sink);
      },
      dev.copies);
  KP_PROBE_CK("tile-data", cudaGetLastError());
  printf("%-5s %-12s %5s %-9s %7d %9.2f %8.0f %9s %10s\n", kind, shape, "-", "floor", 2 * units, us, wbytes / (us * 1e3),
         "1.000", "-");
  return us;
}

/* y[m, n] = scale[n] * W[n] . x[m] in fp64 for every 4th n (the rest stay 0); rmax: the largest |y| */
static std::vector<double> kp_tile_reference(const kp_tile_weights &w, const std::vector<uint16_t> &x, int M, int64_t N,
                                             int64_t K, double *rmax) {
  std::vector<double> ref((size_t)(M * N), 0.0);
  *rmax = 0.0;
  for (int m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; n += 4) {
      double sum = 0.0;
      const float *wr = w.dec.data() + (size_t)(n * K);
      for (int64_t k = 0; k < K; ++k) sum += (double)wr[k] * kp_bf16_to_f32(x[(size_t)(m * K + k)]);
      ref[(size_t)(m * N + n)] = sum * w.scales[(size_t)n];
      *rmax = std::max(*rmax, fabs(ref[(size_t)(m * N + n)]));
    }
  return ref;
}

/* the largest error of y against the reference's columns, over its largest value; NaN when
 * some checked y is NaN (an output left unwritten over the 0xff poison) */
static double kp_tile_error(const std::vector<uint16_t> &y, const std::vector<double> &ref, int M, int64_t N, double rmax) {
  double err = 0.0;
  for (int m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; n += 4) {
      const size_t i = (size_t)(m * N + n);
      const double e = fabs(kp_bf16_to_f32(y[i]) - ref[i]);
      if (!(e <= err)) err = e; /* std::max would keep err over a NaN */
    }
  return rmax > 0.0 ? err / rmax : err;
}
#endif
