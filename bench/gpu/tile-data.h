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
