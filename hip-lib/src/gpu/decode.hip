/* decode.hip: the GPU backend's decode-step hooks (common/backend.h): device
 * memory, the step's own stream, graphs, and the non-linear ops of a decode
 * step. Arithmetic is fp32, rounding once to the dtype; every reduction runs
 * in a fixed order, so a step's output does not change from run to run.
 *   fill         kp_uniform values (common/model.h), as the CPU makes them
 *   add_rmsnorm  one block per row: residual += y, sum of squares, scale
 *   rope_append  one block per row: rotate-half rotary embedding of q and k in
 *                place; k and v into the cache at the row's position
 *   attention    one block per (head, row): thread groups read whole key and
 *                value rows, many in flight; block max and sum; head_dim 64,
 *                128 or 256
 *   argmax       one block per row: 16-byte pieces, lowest index on ties, then
 *                the position moves on
 *   embed        one block per row: residual = the token's row of the table
 * Warp width comes from arch.h (kp_warp); block sizes are multiples of 64. */
#include <math.h>
#include <stdlib.h>

#include "../common/backend.h"
#include "../common/error.h"
#include "../common/model.h"
#include "arch.h"
#include "dtype.h"

/* runtime names an older compat.h may not map */
#if defined(KPICK_GPU_CUDA)
#ifndef hipEventDestroy
#define hipEventDestroy cudaEventDestroy
#endif
#ifndef hipStreamDestroy
#define hipStreamDestroy cudaStreamDestroy
#endif
#endif

/* One runtime call, checked: records the call, file and line on failure. */
#define KP_DEC_GPU(call)                                                                                  \
  do {                                                                                                    \
    hipError_t kp_e_ = (call);                                                                            \
    if (kp_e_ != hipSuccess)                                                                              \
      return kp_fail(KPICK_E_DEVICE, #call, "%s at %s:%d", hipGetErrorString(kp_e_), __FILE__, __LINE__); \
  } while (0)

/* A launch just enqueued: its configuration error, if any. */
#define KP_DEC_LAUNCHED(what)                                                      \
  do {                                                                             \
    hipError_t kp_e_ = hipGetLastError();                                          \
    if (kp_e_ != hipSuccess)                                                       \
      return kp_fail(KPICK_E_DEVICE, what " launch", "%s", hipGetErrorString(kp_e_)); \
  } while (0)

static constexpr int kp_row_threads = 256;   /* norm, rope, embed */
static constexpr int kp_attn_threads = 256;
static constexpr int kp_argmax_threads = 1024;
static constexpr int kp_max_warps = 1024 / 32; /* the most warps a block of this file has */

/* ---- memory, streams, graphs ---- */

int be_dev_alloc(void **out, size_t bytes) {
  *out = NULL;
  KP_DEC_GPU(hipMalloc(out, bytes ? bytes : 256));
  return KPICK_OK;
}

void be_dev_free(void *ptr) {
  if (ptr) (void)hipFree(ptr);
}

/* A copy from pageable memory may return before its DMA lands, and the
 * model's stream does not wait for the default stream: wait for the device. */
int be_dev_upload(void *dst, const void *src, size_t bytes) {
  KP_DEC_GPU(hipMemcpy(dst, src, bytes, hipMemcpyHostToDevice));
  KP_DEC_GPU(hipDeviceSynchronize());
  return KPICK_OK;
}

int be_dev_download(void *dst, const void *src, size_t bytes) {
  KP_DEC_GPU(hipMemcpy(dst, src, bytes, hipMemcpyDeviceToHost));
  return KPICK_OK;
}

int be_stream_create(void **out) {
  hipStream_t s = NULL;
  KP_DEC_GPU(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
  *out = (void *)s;
  return KPICK_OK;
}

void be_stream_destroy(void *stream) {
  if (stream) (void)hipStreamDestroy((hipStream_t)stream);
}

int be_stream_sync(void *stream) {
  KP_DEC_GPU(hipStreamSynchronize((hipStream_t)stream));
  KP_DEC_GPU(hipGetLastError());
  return KPICK_OK;
}

int be_graph_capture(void *stream, int (*enqueue)(void *ctx), const void *ctx, size_t ctx_bytes, void **graph_out) {
  *graph_out = NULL;
  const hipStream_t s = (hipStream_t)stream;
  hipGraph_t graph = NULL;
  KP_DEC_GPU(hipStreamBeginCapture(s, hipStreamCaptureModeThreadLocal));
  const int st = enqueue(const_cast<void *>(ctx)); /* the work is recorded now: ctx is not kept */
  const hipError_t e = hipStreamEndCapture(s, &graph);
  if (st != KPICK_OK) {
    if (graph) (void)hipGraphDestroy(graph);
    return st;
  }
  if (e != hipSuccess)
    return kp_fail(KPICK_E_DEVICE, "hipStreamEndCapture", "%s at %s:%d", hipGetErrorString(e), __FILE__, __LINE__);
  hipGraphExec_t exec = NULL;
  const hipError_t ei = hipGraphInstantiateWithFlags(&exec, graph, 0);
  (void)hipGraphDestroy(graph);
  if (ei != hipSuccess)
    return kp_fail(KPICK_E_DEVICE, "hipGraphInstantiateWithFlags", "%s at %s:%d", hipGetErrorString(ei), __FILE__, __LINE__);
  *graph_out = (void *)exec;
  return KPICK_OK;
}

int be_graph_launch(void *graph, void *stream) {
  KP_DEC_GPU(hipGraphLaunch((hipGraphExec_t)graph, (hipStream_t)stream));
  return KPICK_OK;
}

/* n launches back to back with an event between each two, so the host stays
 * ahead of the device and each launch's time is the device's own. */
int be_graph_time(void *graph, void *stream, int32_t n, double *us) {
  const hipStream_t s = (hipStream_t)stream;
  hipEvent_t *ev = (hipEvent_t *)calloc((size_t)n + 1, sizeof *ev);
  if (!ev) return kp_fail(KPICK_E_NOMEM, "graph_time", "host allocation failed");
  int st = KPICK_OK;
  int32_t made = 0;
  for (; made <= n && st == KPICK_OK; made++) {
    const hipError_t e = hipEventCreate(&ev[made]);
    if (e != hipSuccess) st = kp_fail(KPICK_E_DEVICE, "hipEventCreate", "%s", hipGetErrorString(e));
  }
  if (st != KPICK_OK) made--; /* the failed one holds no event */
  hipError_t e = hipSuccess;
  if (st == KPICK_OK) e = hipEventRecord(ev[0], s);
  for (int32_t i = 0; i < n && st == KPICK_OK && e == hipSuccess; i++) {
    e = hipGraphLaunch((hipGraphExec_t)graph, s);
    if (e == hipSuccess) e = hipEventRecord(ev[i + 1], s);
  }
  if (st == KPICK_OK && e == hipSuccess) e = hipEventSynchronize(ev[n]);
  for (int32_t i = 0; i < n && st == KPICK_OK && e == hipSuccess; i++) {
    float ms = 0.0f;
    e = hipEventElapsedTime(&ms, ev[i], ev[i + 1]);
    us[i] = (double)ms * 1000.0;
  }
  if (st == KPICK_OK && e != hipSuccess) st = kp_fail(KPICK_E_DEVICE, "graph_time", "%s", hipGetErrorString(e));
  if (st != KPICK_OK) (void)hipStreamSynchronize(s);
  for (int32_t i = 0; i < made; i++) (void)hipEventDestroy(ev[i]);
  free(ev);
  return st;
}

void be_graph_free(void *graph) {
  if (graph) (void)hipGraphExecDestroy((hipGraphExec_t)graph);
}

/* ---- block reductions (fixed order: lane butterfly, then warps in order) ---- */

__device__ __forceinline__ float kp_dec_warp_sum(float v) {
#pragma unroll
  for (int o = kp_warp / 2; o > 0; o >>= 1) v += kp_shfl_xor(v, o);
  return v;
}

__device__ __forceinline__ float kp_dec_warp_max(float v) {
#pragma unroll
  for (int o = kp_warp / 2; o > 0; o >>= 1) v = fmaxf(v, kp_shfl_xor(v, o));
  return v;
}

/* every thread gets the block's total; red holds kp_max_warps floats */
__device__ __forceinline__ float kp_dec_block_sum(float v, float *red) {
  v = kp_dec_warp_sum(v);
  const int warp = threadIdx.x / kp_warp, warps = blockDim.x / kp_warp;
  __syncthreads(); /* red may still be read by a previous reduction */
  if (threadIdx.x % kp_warp == 0) red[warp] = v;
  __syncthreads();
  float t = 0.0f;
  for (int i = 0; i < warps; ++i) t += red[i];
  return t;
}

__device__ __forceinline__ float kp_dec_block_max(float v, float *red) {
  v = kp_dec_warp_max(v);
  const int warp = threadIdx.x / kp_warp, warps = blockDim.x / kp_warp;
  __syncthreads();
  if (threadIdx.x % kp_warp == 0) red[warp] = v;
  __syncthreads();
  float t = -INFINITY;
  for (int i = 0; i < warps; ++i) t = fmaxf(t, red[i]);
  return t;
}

/* ---- fill ---- */

template <int DT>
__global__ void kp_fill_kernel(uint16_t *__restrict__ dst, int64_t count, uint64_t seed, float offset, float scale) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x)
    dst[i] = kp_round<DT>(fmaf(scale, kp_uniform(seed, (uint64_t)i), offset));
}

int be_fill_uniform(void *dst, int64_t count, int32_t dtype, uint64_t seed, float offset, float scale, void *stream) {
  if (count <= 0) return KPICK_OK;
  int64_t blocks = (count + 255) / 256;
  if (blocks > 16384) blocks = 16384;
  const hipStream_t s = (hipStream_t)stream;
  if (dtype == KP_DT_BF16)
    kp_fill_kernel<KP_DT_BF16><<<dim3((unsigned)blocks), dim3(256), 0, s>>>((uint16_t *)dst, count, seed, offset, scale);
  else
    kp_fill_kernel<KP_DT_FP16><<<dim3((unsigned)blocks), dim3(256), 0, s>>>((uint16_t *)dst, count, seed, offset, scale);
  KP_DEC_LAUNCHED("fill");
  return KPICK_OK;
}

/* ---- add + rmsnorm ---- */

template <int DT>
__global__ void __launch_bounds__(kp_row_threads)
    kp_add_rmsnorm_kernel(float *__restrict__ resid, const uint16_t *__restrict__ y, const uint16_t *__restrict__ gamma,
                          uint16_t *__restrict__ out, int64_t H, float eps) {
  __shared__ float red[kp_max_warps];
  const int64_t row = blockIdx.x;
  float *r = resid + row * H;
  float ss = 0.0f;
  /* unrolled so a thread's loads are in flight together: one block per row is latency-bound */
#pragma unroll 8
  for (int64_t j = threadIdx.x; j < H; j += blockDim.x) {
    float v = r[j];
    if (y) {
      v += kp_load1<DT>(y + row * H + j);
      r[j] = v;
    }
    ss = fmaf(v, v, ss);
  }
  ss = kp_dec_block_sum(ss, red);
  const float inv = 1.0f / sqrtf(ss / (float)H + eps);
#pragma unroll 8
  for (int64_t j = threadIdx.x; j < H; j += blockDim.x)
    out[row * H + j] = kp_round<DT>(r[j] * inv * kp_load1<DT>(gamma + j));
}

int be_add_rmsnorm(int32_t dtype, float *residual, const void *y, const void *gamma, void *out, int32_t m,
                   int64_t hidden, float eps, void *stream) {
  const hipStream_t s = (hipStream_t)stream;
  const dim3 grid((unsigned)m), block(kp_row_threads);
  if (dtype == KP_DT_BF16)
    kp_add_rmsnorm_kernel<KP_DT_BF16><<<grid, block, 0, s>>>(residual, (const uint16_t *)y, (const uint16_t *)gamma,
                                                              (uint16_t *)out, hidden, eps);
  else
    kp_add_rmsnorm_kernel<KP_DT_FP16><<<grid, block, 0, s>>>(residual, (const uint16_t *)y, (const uint16_t *)gamma,
                                                              (uint16_t *)out, hidden, eps);
  KP_DEC_LAUNCHED("add_rmsnorm");
  return KPICK_OK;
}

/* ---- rotary embedding + KV append ---- */

template <int DT>
__global__ void __launch_bounds__(kp_row_threads)
    kp_rope_append_kernel(uint16_t *__restrict__ qkv, const int32_t *__restrict__ pos, uint16_t *__restrict__ kc,
                          uint16_t *__restrict__ vc, int heads, int kv_heads, int D, int cap, float theta) {
  const int64_t row = blockIdx.x;
  const int half = D / 2;
  const int64_t nqkv = (int64_t)(heads + 2 * kv_heads) * D;
  uint16_t *x = qkv + row * nqkv;
  const int p = pos[row];
  const int rotated = (heads + kv_heads) * half;
  for (int idx = threadIdx.x; idx < rotated; idx += blockDim.x) {
    const int h = idx / half, i = idx - h * half;
    uint16_t *v = x + (int64_t)h * D;
    const float ang = (float)p * powf(theta, -2.0f * (float)i / (float)D);
    float sn, cs;
    sincosf(ang, &sn, &cs);
    const float x0 = kp_load1<DT>(v + i), x1 = kp_load1<DT>(v + i + half);
    const uint16_t r0 = kp_round<DT>(x0 * cs - x1 * sn), r1 = kp_round<DT>(x1 * cs + x0 * sn);
    v[i] = r0;
    v[i + half] = r1;
    if (h >= heads) { /* a k head: its rotated pair goes to the cache too */
      uint16_t *slot = kc + (((int64_t)row * kv_heads + (h - heads)) * cap + p) * D;
      slot[i] = r0;
      slot[i + half] = r1;
    }
  }
  for (int idx = threadIdx.x; idx < kv_heads * D; idx += blockDim.x) {
    const int g = idx / D, e = idx - g * D;
    vc[(((int64_t)row * kv_heads + g) * cap + p) * D + e] = x[(int64_t)(heads + kv_heads + g) * D + e];
  }
}

int be_rope_append(int32_t dtype, void *qkv, const int32_t *pos, void *kcache, void *vcache, int32_t m, int32_t heads,
                   int32_t kv_heads, int32_t head_dim, int32_t cap, float theta, void *stream) {
  const hipStream_t s = (hipStream_t)stream;
  const dim3 grid((unsigned)m), block(kp_row_threads);
  if (dtype == KP_DT_BF16)
    kp_rope_append_kernel<KP_DT_BF16><<<grid, block, 0, s>>>((uint16_t *)qkv, pos, (uint16_t *)kcache,
                                                              (uint16_t *)vcache, heads, kv_heads, head_dim, cap, theta);
  else
    kp_rope_append_kernel<KP_DT_FP16><<<grid, block, 0, s>>>((uint16_t *)qkv, pos, (uint16_t *)kcache,
                                                              (uint16_t *)vcache, heads, kv_heads, head_dim, cap, theta);
  KP_DEC_LAUNCHED("rope_append");
  return KPICK_OK;
}

/* ---- attention: one query per (row, head) over cache positions 0..pos ----
 * A key row is D/8 16-byte pieces; a group of P = D/8 threads reads one row,
 * a thread per piece, so KP = threads / P keys are read per pass and every
 * thread keeps U passes of loads in flight before it uses the first: a decode
 * step at one row has few blocks, so latency, not bandwidth, sets the time.
 * Scores: each thread dots its piece with its 8 values of q, the group sums
 * (a butterfly inside its P lanes) and one lane stores the score. Values: each
 * thread accumulates its 8 dims over its group's keys; the groups' partial
 * outputs are then summed in group order. */

static constexpr int kp_attn_u = 8; /* passes of loads in flight */

template <int D>
struct kp_attn_shape {
  static constexpr int P = D / 8;                 /* threads per key */
  static constexpr int KP = kp_attn_threads / P;  /* keys per pass */
  static_assert(P >= 1 && P <= 32 && (P & (P - 1)) == 0, "a key's threads are a power of two inside one warp");
};

/* dynamic shared memory: the scores of every position */
static size_t attention_smem(int cap) { return sizeof(float) * (size_t)cap; }

template <int DT, int D>
__global__ void __launch_bounds__(kp_attn_threads)
    kp_attention_kernel(const uint16_t *__restrict__ qkv, const uint16_t *__restrict__ kc,
                        const uint16_t *__restrict__ vc, const int32_t *__restrict__ pos, uint16_t *__restrict__ out,
                        int heads, int kv_heads, int cap, float scale) {
  constexpr int P = kp_attn_shape<D>::P, KP = kp_attn_shape<D>::KP, U = kp_attn_u;
  extern __shared__ float kp_attn_scores[];
  __shared__ float part[KP * D];
  __shared__ float red[kp_max_warps];
  const int h = blockIdx.x;
  const int64_t row = blockIdx.y;
  const int g = h / (heads / kv_heads);
  const int len = min(pos[row] + 1, cap);
  const int piece = threadIdx.x % P, grp = threadIdx.x / P;
  const bool active = grp < KP; /* threads past KP * P (none when P divides the block) idle */
  const int64_t nqkv = (int64_t)(heads + 2 * kv_heads) * D;
  const size_t base = ((size_t)row * kv_heads + g) * (size_t)cap * D + (size_t)piece * 8;
  const uint16_t *K = kc + base, *V = vc + base;
  float *sc = kp_attn_scores;

  float q[8];
  kp_unpack8<DT>(*reinterpret_cast<const kp_v16 *>(qkv + row * nqkv + (int64_t)h * D + piece * 8), q);
#pragma unroll
  for (int e = 0; e < 8; ++e) q[e] *= scale;

  /* scores; every lane runs every pass (the butterfly needs the whole warp) */
  float mx = -INFINITY;
  for (int t0 = 0; t0 < len; t0 += KP * U) {
    kp_v16 kv[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int t = t0 + u * KP + grp;
      kv[u] = active && t < len ? kp_ld_cached(K + (size_t)t * D) : kp_v16{0u, 0u, 0u, 0u};
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int t = t0 + u * KP + grp;
      float f[8];
      kp_unpack8<DT>(kv[u], f);
      float a = 0.0f;
#pragma unroll
      for (int e = 0; e < 8; ++e) a = fmaf(q[e], f[e], a);
#pragma unroll
      for (int o = P / 2; o > 0; o >>= 1) a += kp_shfl_xor(a, o);
      if (active && t < len) {
        if (piece == 0) sc[t] = a;
        mx = fmaxf(mx, a);
      }
    }
  }
  mx = kp_dec_block_max(mx, red); /* its barriers also publish sc[] */
  float sum = 0.0f;
  for (int t = threadIdx.x; t < len; t += blockDim.x) {
    const float p = expf(sc[t] - mx);
    sc[t] = p;
    sum += p;
  }
  sum = kp_dec_block_sum(sum, red);

  /* values: each thread its 8 dims over its group's keys */
  float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  if (active) {
    for (int t0 = 0; t0 < len; t0 += KP * U) {
      kp_v16 vv[U];
      float pw[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int t = t0 + u * KP + grp;
        const bool in = t < len;
        vv[u] = in ? kp_ld_cached(V + (size_t)t * D) : kp_v16{0u, 0u, 0u, 0u};
        pw[u] = in ? sc[t] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        float f[8];
        kp_unpack8<DT>(vv[u], f);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[e] = fmaf(pw[u], f[e], acc[e]);
      }
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) part[grp * D + piece * 8 + e] = acc[e];
  }
  __syncthreads();
  const float inv = 1.0f / sum;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float a = 0.0f;
#pragma unroll 4
    for (int i = 0; i < KP; ++i) a += part[i * D + d];
    out[(row * heads + h) * (int64_t)D + d] = kp_round<DT>(a * inv);
  }
}

template <int DT, int D>
static void kp_attention_launch(dim3 grid, size_t smem, hipStream_t s, const void *qkv, const void *kcache,
                                const void *vcache, const int32_t *pos, void *out, int heads, int kv_heads, int cap,
                                float scale) {
  kp_attention_kernel<DT, D><<<grid, dim3(kp_attn_threads), smem, s>>>(
      (const uint16_t *)qkv, (const uint16_t *)kcache, (const uint16_t *)vcache, pos, (uint16_t *)out, heads,
      kv_heads, cap, scale);
}

template <int DT>
static int kp_attention_dispatch(int head_dim, dim3 grid, size_t smem, hipStream_t s, const void *qkv,
                                 const void *kcache, const void *vcache, const int32_t *pos, void *out, int heads,
                                 int kv_heads, int cap, float scale) {
  switch (head_dim) {
    case 64: kp_attention_launch<DT, 64>(grid, smem, s, qkv, kcache, vcache, pos, out, heads, kv_heads, cap, scale); break;
    case 128: kp_attention_launch<DT, 128>(grid, smem, s, qkv, kcache, vcache, pos, out, heads, kv_heads, cap, scale); break;
    case 256: kp_attention_launch<DT, 256>(grid, smem, s, qkv, kcache, vcache, pos, out, heads, kv_heads, cap, scale); break;
    default:
      return kp_fail(KPICK_E_UNSUPPORTED, "attention", "head_dim %d: the GPU kernel is built for 64, 128 and 256", head_dim);
  }
  return KPICK_OK;
}

int be_attention(int32_t dtype, const void *qkv, const void *kcache, const void *vcache, const int32_t *pos, void *out,
                 int32_t m, int32_t heads, int32_t kv_heads, int32_t head_dim, int32_t cap, void *stream) {
  /* the scores (cap floats, model.c bounds cap by KP_MODEL_MAX_POSITIONS), the
   * partial outputs (8 floats a thread) and the reduction slots stay under the
   * 48 KiB every target gives without opt-in */
  const size_t smem = attention_smem(cap);
  if (smem + sizeof(float) * (kp_attn_threads * 8 + kp_max_warps) > 48 * 1024)
    return kp_fail(KPICK_E_UNSUPPORTED, "attention", "%d positions need %zu bytes of shared memory", (int)cap, smem);
  const dim3 grid((unsigned)heads, (unsigned)m);
  const float scale = 1.0f / sqrtf((float)head_dim);
  const hipStream_t s = (hipStream_t)stream;
  KP_TRY(dtype == KP_DT_BF16 ? kp_attention_dispatch<KP_DT_BF16>(head_dim, grid, smem, s, qkv, kcache, vcache, pos, out, heads, kv_heads, cap, scale)
                             : kp_attention_dispatch<KP_DT_FP16>(head_dim, grid, smem, s, qkv, kcache, vcache, pos, out, heads, kv_heads, cap, scale));
  KP_DEC_LAUNCHED("attention");
  return KPICK_OK;
}

/* ---- argmax + advance ---- */

/* (value, index) a beats b: larger, or equal and earlier; NaN never beats */
__device__ __forceinline__ bool kp_beats(float va, int32_t ia, float vb, int32_t ib) {
  return va > vb || (va == vb && ia < ib);
}

template <int DT>
__global__ void __launch_bounds__(kp_argmax_threads)
    kp_argmax_kernel(const uint16_t *__restrict__ logits, int64_t V, int32_t *__restrict__ tokens,
                     int32_t *__restrict__ pos) {
  __shared__ float best_v[kp_max_warps];
  __shared__ int32_t best_i[kp_max_warps];
  const int64_t row = blockIdx.x;
  const uint16_t *x = logits + row * V;
  float bv = -INFINITY;
  int32_t bi = (int32_t)V; /* past the end: loses every tie */
  /* 16-byte pieces while the row start is aligned, the tail one by one; within
   * a thread indices only grow, so a strict > keeps the earliest maximum */
  const int64_t vec = ((uintptr_t)x & 15) == 0 ? V / 8 : 0;
  for (int64_t c = threadIdx.x; c < vec; c += blockDim.x) {
    float f[8];
    kp_unpack8<DT>(*reinterpret_cast<const kp_v16 *>(x + c * 8), f);
#pragma unroll
    for (int e = 0; e < 8; ++e)
      if (kp_beats(f[e], (int32_t)(c * 8 + e), bv, bi)) bv = f[e], bi = (int32_t)(c * 8 + e);
  }
  for (int64_t j = vec * 8 + threadIdx.x; j < V; j += blockDim.x) {
    const float f = kp_load1<DT>(x + j);
    if (kp_beats(f, (int32_t)j, bv, bi)) bv = f, bi = (int32_t)j;
  }
#pragma unroll
  for (int o = kp_warp / 2; o > 0; o >>= 1) {
    const float ov = kp_shfl_xor(bv, o);
    const int32_t oi = (int32_t)kp_shfl_xor((float)bi, o); /* exact: indices <= 2^24 */
    if (kp_beats(ov, oi, bv, bi)) bv = ov, bi = oi;
  }
  const int warp = threadIdx.x / kp_warp;
  if (threadIdx.x % kp_warp == 0) best_v[warp] = bv, best_i[warp] = bi;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 1; i < (int)(blockDim.x / kp_warp); ++i)
      if (kp_beats(best_v[i], best_i[i], bv, bi)) bv = best_v[i], bi = best_i[i];
    tokens[row] = bi < V ? bi : 0; /* an all-NaN row: token 0 */
    pos[row] += 1;
  }
}

int be_argmax_advance(int32_t dtype, const void *logits, int32_t m, int64_t vocab, int32_t *tokens, int32_t *pos,
                      void *stream) {
  const hipStream_t s = (hipStream_t)stream;
  const dim3 grid((unsigned)m), block(kp_argmax_threads);
  if (dtype == KP_DT_BF16)
    kp_argmax_kernel<KP_DT_BF16><<<grid, block, 0, s>>>((const uint16_t *)logits, vocab, tokens, pos);
  else
    kp_argmax_kernel<KP_DT_FP16><<<grid, block, 0, s>>>((const uint16_t *)logits, vocab, tokens, pos);
  KP_DEC_LAUNCHED("argmax");
  return KPICK_OK;
}

/* ---- embedding ---- */

template <int DT>
__global__ void __launch_bounds__(kp_row_threads)
    kp_embed_kernel(const uint16_t *__restrict__ table, const int32_t *__restrict__ tokens, float *__restrict__ resid,
                    int64_t H, int64_t V) {
  const int64_t row = blockIdx.x;
  const int64_t t = tokens[row] >= 0 && tokens[row] < V ? tokens[row] : 0;
  for (int64_t j = threadIdx.x; j < H; j += blockDim.x) resid[row * H + j] = kp_load1<DT>(table + t * H + j);
}

int be_embed(int32_t dtype, const void *table, const int32_t *tokens, float *residual, int32_t m, int64_t hidden,
             int64_t vocab, void *stream) {
  const hipStream_t s = (hipStream_t)stream;
  const dim3 grid((unsigned)m), block(kp_row_threads);
  if (dtype == KP_DT_BF16)
    kp_embed_kernel<KP_DT_BF16><<<grid, block, 0, s>>>((const uint16_t *)table, tokens, residual, hidden, vocab);
  else
    kp_embed_kernel<KP_DT_FP16><<<grid, block, 0, s>>>((const uint16_t *)table, tokens, residual, hidden, vocab);
  KP_DEC_LAUNCHED("embed");
  return KPICK_OK;
}
