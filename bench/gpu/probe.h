/* probe.h: what the standalone CUDA probes of bench/gpu share: a CUDA call checked (the
 * probe's name, the call, its error, exit 2); the device, named on the probe's first line;
 * a seeded xorshift for their data; and the time of one launch as the median over batches of
 * back-to-back launches, each launch given the index of the W copy to read (copies that
 * together outsize the L2, so every launch reads from DRAM); a grid-stride read floor; a launch
 * with or without PDL. */
#ifndef KPICK_PROBE_H
#define KPICK_PROBE_H
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <vector>

#include "../../hip-lib/src/gpu/compat.h" /* kp_v16, kp_ld_stream: build with -DKPICK_GPU_CUDA */

#define KP_PROBE_CK(probe, x)                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "%s: %s: %s (line %d)\n", probe, #x, cudaGetErrorString(e_), __LINE__); \
      exit(2);                                                                             \
    }                                                                                      \
  } while (0)

/* the device's properties, its name and units printed after "# PROBE on" with the probe's words */
static cudaDeviceProp kp_probe_device(const char *probe, const char *what) {
  int dev = 0;
  cudaDeviceProp prop;
  KP_PROBE_CK(probe, cudaGetDevice(&dev));
  KP_PROBE_CK(probe, cudaGetDeviceProperties(&prop, dev));
  printf("# %s on %s (%d units); %s\n", probe, prop.name, prop.multiProcessorCount, what);
  return prop;
}

/* xorshift64, seeded per probe: the same data every run */
struct kp_probe_rng {
  unsigned long long s;
  unsigned next_u32() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return (unsigned)(s >> 16);
  }
};

/* a read floor: every thread reads 16-byte pieces of the bytes, grid-stride (launch 2 blocks of
 * 512 a unit); the XOR keeps the loads. w8a16-ring-probe.cu's and tile-split-probe.cu's. */
__global__ void __launch_bounds__(512) kp_probe_floor_kernel(const kp_v16 *__restrict__ p, int64_t n, unsigned *sink) {
  unsigned acc = 0;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const kp_v16 v = kp_ld_stream(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;
}

/* k on `blocks` blocks of `threads` on stream s: compat.h's kp_launch (with pdl, a programmatic
 * dependent launch: it may start before the kernel ahead of it ends, as the decode step's kernels
 * do); a launch error exits as KP_PROBE_CK does */
template <class... Params, class... Args>
static void kp_probe_launch(void (*k)(Params...), int64_t blocks, int threads, bool pdl, cudaStream_t s, Args... args) {
  KP_PROBE_CK("probe", kp_launch(k, dim3((unsigned)blocks), dim3((unsigned)threads), s, pdl, args...));
}

/* median us of a launch over `batches` batches of `per_batch` launches, copies rotating; the
 * events on `stream`, the one the launches go to */
template <class Launch>
static float kp_probe_median_us(Launch launch, int copies, int batches = 15, int per_batch = 20, cudaStream_t stream = 0) {
  cudaEvent_t e0, e1;
  KP_PROBE_CK("probe", cudaEventCreate(&e0));
  KP_PROBE_CK("probe", cudaEventCreate(&e1));
  std::vector<float> per;
  for (int b = 0; b < batches; ++b) {
    KP_PROBE_CK("probe", cudaEventRecord(e0, stream));
    for (int i = 0; i < per_batch; ++i) launch((b * per_batch + i) % copies);
    KP_PROBE_CK("probe", cudaEventRecord(e1, stream));
    KP_PROBE_CK("probe", cudaEventSynchronize(e1));
    float ms = 0.0f;
    KP_PROBE_CK("probe", cudaEventElapsedTime(&ms, e0, e1));
    per.push_back(ms * 1000.0f / (float)per_batch);
  }
  KP_PROBE_CK("probe", cudaGetLastError());
  KP_PROBE_CK("probe", cudaEventDestroy(e0));
  KP_PROBE_CK("probe", cudaEventDestroy(e1));
  std::sort(per.begin(), per.end());
  return per[per.size() / 2];
}
#endif
