/* decode.hip: the GPU backend's decode-step hooks (common/backend.h): device
 * memory, the step's own stream, graphs, and the non-linear ops of a decode
 * step. Arithmetic is fp32, rounding once to the dtype; every reduction runs
 * in a fixed order, so a step's output does not change from run to run.
 *   fill         kp_uniform values (common/random.h), as the CPU makes them
 *   add_rmsnorm  one block per row, the row held in registers: residual += y,
 *                sum of squares, scale
 *   attention    rotary embedding of q and the new k, k and v into the cache
 *                at the row's position, and the attention itself, in one
 *                kernel: one block per (row, query heads of one kv head (up
 *                to 4), split): those heads share each key and value row
 *                read, one pass with a running softmax; short of blocks, a
 *                row's positions are split over several and the last to
 *                finish merges them (flash-decoding); head_dim 64, 128 or 256.
 *                Where the (row, kv head) blocks fill the multiprocessors,
 *                on CUDA sm_80+, a tensor-core kernel takes the whole group
 *                (mma.sync scores and outputs, keys and values through a
 *                cp.async ring a warp)
 *   argmax       several blocks per row, a slice each, the last to finish
 *                picks among them: lowest index on ties, then the position
 *                moves on
 *   embed        one block per row: residual = the token's row of the table
 * On CUDA sm_90 each op is launched with programmatic dependent launch (see
 * "chaining" below); no op's result depends on it.
 * Warp width comes from arch.h (kp_warp); block sizes are multiples of 64. */
#include <math.h>
#include <stdlib.h>

#include "../common/backend.h"
#include "../common/error.h"
#include "../common/random.h"
#include "arch.h"
#include "block_sum.h"
#include "check.h"
#include "dtype.h"

/* runtime names an older compat.h may not map */
#if defined(KPICK_GPU_CUDA)
#ifndef hipEventDestroy
#define hipEventDestroy cudaEventDestroy
#endif
#ifndef hipStreamDestroy
#define hipStreamDestroy cudaStreamDestroy
#endif
#ifndef hipGetDevice
#define hipGetDevice cudaGetDevice
#endif
#ifndef hipDeviceGetAttribute
#define hipDeviceGetAttribute cudaDeviceGetAttribute
#endif
#ifndef hipDeviceAttributeMultiprocessorCount
#define hipDeviceAttributeMultiprocessorCount cudaDevAttrMultiProcessorCount
#endif
#endif

static constexpr int kp_row_threads = 256;   /* embed */

/* ---- memory, streams, graphs ---- */

int be_dev_alloc(void **out, size_t bytes) {
  *out = NULL;
  KP_GPU(hipMalloc(out, bytes ? bytes : 256));
  return KPICK_OK;
}

void be_dev_free(void *ptr) {
  if (ptr) (void)hipFree(ptr);
}

/* A copy from pageable memory may return before its DMA lands, and the
 * model's stream does not wait for the default stream: wait for the device. */
int be_dev_upload(void *dst, const void *src, size_t bytes) {
  KP_GPU(hipMemcpy(dst, src, bytes, hipMemcpyHostToDevice));
  KP_GPU(hipDeviceSynchronize());
  return KPICK_OK;
}

int be_dev_download(void *dst, const void *src, size_t bytes) {
  KP_GPU(hipMemcpy(dst, src, bytes, hipMemcpyDeviceToHost));
  return KPICK_OK;
}

int be_stream_create(void **out) {
  hipStream_t s = NULL;
  KP_GPU(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
  *out = (void *)s;
  return KPICK_OK;
}

void be_stream_destroy(void *stream) {
  if (stream) (void)hipStreamDestroy((hipStream_t)stream);
}

int be_stream_sync(void *stream) {
  KP_GPU(hipStreamSynchronize((hipStream_t)stream));
  KP_GPU(hipGetLastError());
  return KPICK_OK;
}

int be_graph_capture(void *stream, int (*enqueue)(void *ctx), const void *ctx, size_t ctx_bytes, void **graph_out) {
  *graph_out = NULL;
  const hipStream_t s = (hipStream_t)stream;
  hipGraph_t graph = NULL;
  KP_GPU(hipStreamBeginCapture(s, hipStreamCaptureModeThreadLocal));
  const int st = enqueue(const_cast<void *>(ctx)); /* the work is recorded now: ctx is not kept */
  const hipError_t e = hipStreamEndCapture(s, &graph);
  if (st != KPICK_OK) {
    if (graph) (void)hipGraphDestroy(graph);
    return st;
  }
  if (e != hipSuccess) return KP_GPU_FAIL("hipStreamEndCapture", e);
  hipGraphExec_t exec = NULL;
  const hipError_t ei = hipGraphInstantiateWithFlags(&exec, graph, 0);
  (void)hipGraphDestroy(graph);
  if (ei != hipSuccess) return KP_GPU_FAIL("hipGraphInstantiateWithFlags", ei);
  *graph_out = (void *)exec;
  return KPICK_OK;
}

int be_graph_launch(void *graph, void *stream) {
  KP_GPU(hipGraphLaunch((hipGraphExec_t)graph, (hipStream_t)stream));
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
    if (e != hipSuccess) st = KP_GPU_FAIL("hipEventCreate", e);
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
  if (st == KPICK_OK && e != hipSuccess) st = KP_GPU_FAIL("hipGraphLaunch, hipEventRecord or hipEventElapsedTime", e);
  if (st != KPICK_OK) (void)hipStreamSynchronize(s);
  for (int32_t i = 0; i < made; i++) (void)hipEventDestroy(ev[i]);
  free(ev);
  return st;
}

void be_graph_free(void *graph) {
  if (graph) (void)hipGraphExecDestroy((hipGraphExec_t)graph);
}

/* ---- block maxima (the order of block_sum.h's sums) ---- */

__device__ __forceinline__ float kp_dec_warp_max(float v) {
#pragma unroll
  for (int o = kp_warp / 2; o > 0; o >>= 1) v = fmaxf(v, kp_shfl_xor(v, o));
  return v;
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
  const auto k = dtype == KP_DT_BF16 ? kp_fill_kernel<KP_DT_BF16> : kp_fill_kernel<KP_DT_FP16>;
  KP_GPU(kp_launch(k, dim3((unsigned)blocks), dim3(256), s, false, (uint16_t *)dst, count, seed, offset, scale));
  return KPICK_OK;
}

/* ---- chaining: programmatic dependent launch ----
 * On CUDA sm_90 every decode op is launched with PDL, as the table's .pdl
 * linears are: an op waits for the previous kernel's memory before it reads or
 * writes step data (kp_dec_wait), and then lets the next kernel of the step
 * launch. A linear after an op so loads its first weights while the op runs,
 * and no kernel runs more than one ahead of an op. Every block of every op
 * waits, so "the previous kernel is done" still means every earlier kernel is
 * done. Elsewhere both are nothing, and the launches are plain. What an earlier
 * kernel of the step wrote is never a const __restrict__ argument, and 16-byte
 * reads of it use kp_ld_act: the read-only path assumes data that no kernel
 * writes while this one runs, which PDL breaks. bench/gpu/decode-chain.sh
 * measures the modes below against each other. */

/* 0: plain launches; 1: PDL launches that wait, never release early;
 * 2: release at the start, before the wait; 3: release right after the wait
 * (KP_DEC_CHAIN: bench/gpu/step-variants.sh builds the others as variants) */
#ifndef KP_DEC_CHAIN
#define KP_DEC_CHAIN 3
#endif
static constexpr int kp_dec_chain = KP_DEC_CHAIN;

/* at the start of an op: mode 2 lets the next kernel launch now */
__device__ __forceinline__ void kp_dec_release() {
  if (kp_dec_chain != 2) return;
#if defined(KPICK_GPU_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* before an op's first read or write of step data: the previous kernel is
 * done; mode 3 then lets the next kernel launch */
__device__ __forceinline__ void kp_dec_wait() {
#if defined(KPICK_GPU_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (kp_dec_chain == 3) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* the current device's compute capability major on CUDA (0 if it cannot say, and on HIP) */
static int kp_dec_cc_major() {
#if defined(KPICK_GPU_CUDA)
  static int known = -1; /* a race here only computes the same answer twice */
  if (known < 0) {
    int dev = 0, major = 0;
    known = cudaGetDevice(&dev) == cudaSuccess &&
                    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess
                ? major
                : 0;
  }
  return known;
#else
  return 0;
#endif
}

/* whether this device takes PDL launches: CUDA, compute capability 9 or more */
static bool kp_dec_pdl() { return kp_dec_chain != 0 && kp_dec_cc_major() >= 9; }

/* ---- add + rmsnorm ----
 * One block per row; each thread keeps its C groups of 4 elements in
 * registers, so the row is read once, with every load in flight together. */

static constexpr int kp_norm_group = 4;     /* elements a thread loads at once */
static constexpr int kp_norm_max_chunks = 8; /* groups a thread keeps: hidden <= 8 * 4 * 1024 */

template <int DT, int C>
__global__ void __launch_bounds__(1024)
    kp_add_rmsnorm_kernel(float *__restrict__ resid, const uint16_t *y, const uint16_t *__restrict__ gamma,
                          uint16_t *__restrict__ out, int64_t H, float eps) {
  __shared__ float red[kp_max_warps];
  kp_dec_release();
  const int64_t row = blockIdx.x;
  const bool vec = H % kp_norm_group == 0; /* then rows of resid, y and out are 16-, 8- and 8-byte aligned */
  /* gamma is a weight no kernel of the step writes: load it before the wait */
  float gm[C][kp_norm_group];
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int64_t j = ((int64_t)c * blockDim.x + threadIdx.x) * kp_norm_group;
    if (vec && j < H) {
      const uint2 b = *reinterpret_cast<const uint2 *>(gamma + j);
      gm[c][0] = kp_lo<DT>(b.x), gm[c][1] = kp_hi<DT>(b.x), gm[c][2] = kp_lo<DT>(b.y), gm[c][3] = kp_hi<DT>(b.y);
    } else {
#pragma unroll
      for (int e = 0; e < kp_norm_group; ++e) gm[c][e] = j + e < H ? kp_load1<DT>(gamma + j + e) : 0.0f;
    }
  }
  kp_dec_wait();
  float *r = resid + row * H;
  const uint16_t *yr = y ? y + row * H : nullptr;
  float v[C][kp_norm_group];
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int64_t j = ((int64_t)c * blockDim.x + threadIdx.x) * kp_norm_group;
    if (vec && j < H) {
      const float4 a = *reinterpret_cast<const float4 *>(r + j);
      v[c][0] = a.x, v[c][1] = a.y, v[c][2] = a.z, v[c][3] = a.w;
      if (yr) {
        const uint2 b = *reinterpret_cast<const uint2 *>(yr + j);
        v[c][0] += kp_lo<DT>(b.x), v[c][1] += kp_hi<DT>(b.x), v[c][2] += kp_lo<DT>(b.y), v[c][3] += kp_hi<DT>(b.y);
      }
    } else {
#pragma unroll
      for (int e = 0; e < kp_norm_group; ++e)
        v[c][e] = j + e < H ? r[j + e] + (yr ? kp_load1<DT>(yr + j + e) : 0.0f) : 0.0f;
    }
  }
  float ss = 0.0f;
#pragma unroll
  for (int c = 0; c < C; ++c)
#pragma unroll
    for (int e = 0; e < kp_norm_group; ++e) ss = fmaf(v[c][e], v[c][e], ss);
  ss = kp_block_sum(ss, red);
  const float inv = 1.0f / sqrtf(ss / (float)H + eps);
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int64_t j = ((int64_t)c * blockDim.x + threadIdx.x) * kp_norm_group;
#pragma unroll
    for (int e = 0; e < kp_norm_group; ++e) {
      if (j + e < H) {
        if (yr) r[j + e] = v[c][e];
        out[row * H + j + e] = kp_round<DT>(v[c][e] * inv * gm[c][e]);
      }
    }
  }
}

template <int DT>
static hipError_t kp_add_rmsnorm_launch(int chunks, dim3 grid, dim3 block, hipStream_t s, float *resid, const void *y,
                                        const void *gamma, void *out, int64_t H, float eps) {
  const uint16_t *yy = (const uint16_t *)y, *gg = (const uint16_t *)gamma;
  uint16_t *oo = (uint16_t *)out;
  switch (chunks) {
    case 1: return kp_launch(kp_add_rmsnorm_kernel<DT, 1>, grid, block, s, kp_dec_pdl(), resid, yy, gg, oo, H, eps);
    case 2: return kp_launch(kp_add_rmsnorm_kernel<DT, 2>, grid, block, s, kp_dec_pdl(), resid, yy, gg, oo, H, eps);
    case 4: return kp_launch(kp_add_rmsnorm_kernel<DT, 4>, grid, block, s, kp_dec_pdl(), resid, yy, gg, oo, H, eps);
    default: return kp_launch(kp_add_rmsnorm_kernel<DT, 8>, grid, block, s, kp_dec_pdl(), resid, yy, gg, oo, H, eps);
  }
}

/* KP_STEP_NO_NORMS=1 (a step-variants build only, never a default): the captured step
 * leaves its norms out, so the step's time is what folding every norm into the linear
 * after it could save at most. Eager calls (the op self-checks, the warm-up step that
 * fills hbuf once) still run them; the graph's results are wrong, and its whole-step
 * check fails by design. */
#ifndef KP_STEP_NO_NORMS
#define KP_STEP_NO_NORMS 0
#endif

int be_add_rmsnorm(int32_t dtype, float *residual, const void *y, const void *gamma, void *out, int32_t m,
                   int64_t hidden, float eps, void *stream) {
  if (KP_STEP_NO_NORMS) {
    hipStreamCaptureStatus st = hipStreamCaptureStatusNone;
    KP_GPU(hipStreamIsCapturing((hipStream_t)stream, &st));
    if (st != hipStreamCaptureStatusNone) return KPICK_OK;
  }
  const int64_t groups = (hidden + kp_norm_group - 1) / kp_norm_group;
  int chunks = 1;
  while (chunks < kp_norm_max_chunks && groups > (int64_t)chunks * 1024) chunks *= 2;
  if (groups > (int64_t)chunks * 1024)
    return kp_fail(KPICK_E_UNSUPPORTED, "add_rmsnorm", "hidden %lld: the GPU kernel takes at most %d", (long long)hidden,
                   kp_norm_max_chunks * kp_norm_group * 1024);
  /* the fewest threads (whole 64-lane groups, so any warp width) that cover the row */
  int64_t threads = (groups + chunks - 1) / chunks;
  threads = (threads + 63) / 64 * 64;
  const dim3 grid((unsigned)m), block((unsigned)threads);
  const hipStream_t s = (hipStream_t)stream;
  KP_GPU(dtype == KP_DT_BF16 ? kp_add_rmsnorm_launch<KP_DT_BF16>(chunks, grid, block, s, residual, y, gamma, out, hidden, eps)
                             : kp_add_rmsnorm_launch<KP_DT_FP16>(chunks, grid, block, s, residual, y, gamma, out, hidden, eps));
  return KPICK_OK;
}

/* ---- attention with its rotary embedding and KV append ----
 * One block per (row, kv head, split): the block's qpb query heads (all of the
 * group, up to 4) share each key and value row it reads, so the cache is read
 * once per group, not once per query head. The block rotates its query heads
 * and the row's new key itself (rotate-half, rounded to the dtype, as a
 * separate rotary kernel would store them), and the new key and value go to
 * the cache at the row's position; the new position is attended from shared
 * memory, never read back. One op instead of two saves a launch and its wait
 * per layer, and qkv stays as the linear wrote it.
 * A key row is D/8 16-byte pieces; a group of P = D/8 threads reads one key
 * row and its value row, a thread per piece, so KP = threads / P positions are
 * read per pass, and every thread keeps U passes of loads in flight before it
 * uses the first. Each thread group keeps a running (online) softmax per query
 * head; the groups are then merged in group order.
 * The cache below the row's position was written by earlier steps, all done
 * before this kernel starts (chaining, above: every kernel before the one this
 * follows is done), so the first pass of it is loaded before the wait, under
 * the tail of the qkv linear; the new position, from qkv, only after it.
 * Flash-decoding: when (rows x kv heads) would leave multiprocessors idle,
 * each row's positions are split over S blocks (kp_attn_splits). Each writes
 * its unnormalised output, max and sum to scratch; the last block of a (row,
 * kv head) to finish, found by a counter it then puts back to 0, merges the S
 * partials in split order. The order of every sum is fixed, so a step's
 * output does not change from run to run. */

/* bench/gpu/step-variants.sh builds this file with these overridden (-D):
 * the passes of the loop a split holds at least, whether the first pass is
 * loaded before the wait, the most query heads of a block (1: always one),
 * how the block rotates its heads, and the blocks per multiprocessor that
 * the splits aim at */
#ifndef KP_ATTN_SPLIT_PASSES
#define KP_ATTN_SPLIT_PASSES 1
#endif
#ifndef KP_ATTN_PREFETCH
#define KP_ATTN_PREFETCH 1
#endif
#ifndef KP_ATTN_ROPE_REGS
/* 1: each thread rotates with its own angle, one barrier; 0: the angles in shared
 * memory first, two (1 is 17 us a step faster on Llama-3.1-8B at c=1 and 30 us at
 * c=64 on the H200: bench/results/h200-2026-12-01-step-profile-2d9850f) */
#define KP_ATTN_ROPE_REGS 1
#endif
#ifndef KP_ATTN_QPB_MAX
#define KP_ATTN_QPB_MAX 4 /* query heads a block takes at most: 4, 2 or 1 */
#endif
#ifndef KP_ATTN_SPLIT_WAVES
#define KP_ATTN_SPLIT_WAVES 1 /* splits aim at this many blocks per multiprocessor */
#endif
#ifndef KP_ATTN_MMA
/* the tensor-core kernel (below): 0 never; 1 where the (row, kv head) blocks
 * fill the multiprocessors; 2 at every rows */
#define KP_ATTN_MMA 1
#endif
#ifndef KP_ATTN_MMA_WARPS
#define KP_ATTN_MMA_WARPS 2 /* its warps a block, each with its own ring */
#endif
#ifndef KP_ATTN_MMA_STAGES
#define KP_ATTN_MMA_STAGES 2 /* tiles of 16 positions a warp's ring holds */
#endif

static constexpr int kp_attn_threads = 256;
static constexpr int kp_attn_u = 4;          /* passes of loads in flight */
static constexpr int kp_attn_max_splits = 32;

template <int D>
struct kp_attn_shape {
  static constexpr int P = D / 8;                 /* threads per position */
  static constexpr int KP = kp_attn_threads / P;  /* positions per pass */
  static_assert(P >= 1 && P <= 32 && (P & (P - 1)) == 0, "a position's threads are a power of two inside one warp");
  static_assert(kp_attn_threads % P == 0, "groups fill the block");
};

/* multiprocessors of the current device (132 if it cannot say) */
static int kp_dec_units() {
  static int units = 0; /* a race here only computes the same answer twice */
  if (units == 0) {
    int dev = 0, n = 0;
    units = hipGetDevice(&dev) == hipSuccess && hipDeviceGetAttribute(&n, hipDeviceAttributeMultiprocessorCount, dev) == hipSuccess && n > 0 ? n : 132;
  }
  return units;
}

/* the query heads of one block. While a block per (row, query head) leaves
 * multiprocessors free, one head: a pass then does a quarter of the four-head
 * block's arithmetic, which sets the time at few rows (the step is a chain of
 * latencies there), and the group's other heads read the same key rows from
 * L2. Beyond that, the largest of 4, 2, 1 that divides the group: each key
 * row read once for the group (H200, Llama-3.1-8B: one head 107 us a step
 * faster at c=1 and 76 us at c=4, bench/results/h200-2026-12-01-step-*). */
static bool kp_attn_use_mma(int m, int heads, int kv_heads, int head_dim);
static int kp_attn_qpb(int m, int heads, int kv_heads, int head_dim) {
  const int group = heads / kv_heads;
  if (kp_attn_use_mma(m, heads, kv_heads, head_dim)) return group;
  if ((int64_t)m * heads <= kp_dec_units()) return 1;
  return group % 4 == 0 && KP_ATTN_QPB_MAX >= 4 ? 4 : group % 2 == 0 && KP_ATTN_QPB_MAX >= 2 ? 2 : 1;
}

/* positions one pass of the kernel's loop reads: a split shorter than this
 * leaves loads idle */
static int kp_attn_pass(int head_dim) { return kp_attn_threads / (head_dim / 8) * kp_attn_u * KP_ATTN_SPLIT_PASSES; }

/* splits per (row, query-head block): enough blocks for one per
 * multiprocessor, no more (a block past the first wave doubles the time), and
 * no split shorter than one pass over the cap positions a row may hold */
static int kp_attn_splits(int m, int heads, int kv_heads, int head_dim, int cap) {
  const int64_t blocks = (int64_t)m * (heads / kp_attn_qpb(m, heads, kv_heads, head_dim));
  const int64_t want = ((int64_t)kp_dec_units() * KP_ATTN_SPLIT_WAVES + blocks - 1) / blocks;
  const int64_t span = kp_attn_pass(head_dim);
  const int64_t most = (cap + span - 1) / span;
  int64_t s = want < most ? want : most;
  if (s > kp_attn_max_splits) s = kp_attn_max_splits;
  return s < 1 ? 1 : (int)s;
}

/* scratch: a counter per (row, query-head block) for up to KPICK_MAX_ROWS
 * rows, then per (row, head, split) the partial output [D] and (max, sum) */
static size_t kp_attn_counter_bytes(int heads) { return ((size_t)KPICK_MAX_ROWS * heads * 4 + 255) / 256 * 256; }

int64_t be_attention_scratch(int32_t m, int32_t heads, int32_t kv_heads, int32_t head_dim, int32_t cap) {
  const int s = kp_attn_splits(m, heads, kv_heads, head_dim, cap);
  if (s == 1) return 0;
  return (int64_t)kp_attn_counter_bytes(heads) + (int64_t)m * heads * s * (head_dim + 2) * 4;
}

/* the split path's end, once a block has written its partials (part_o,
 * part_ml) for query heads h0 .. h0 + QPB - 1 of row: the last block of those
 * heads to arrive (counter) merges the S partials in split order and stores
 * the output; both attention kernels end with it */
template <int DT, int D, int QPB>
__device__ __forceinline__ void kp_attn_merge_last(int64_t row, int h0, int heads, int S, unsigned *counter,
                                                   const float *part_o, const float *part_ml, uint16_t *out,
                                                   float *cmax, float *csum, float *bden, int *last) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) *last = atomicAdd(counter, 1u) == (unsigned)S - 1;
  __syncthreads();
  if (!*last) return;
  __threadfence();
  /* the last split of (row, heads) merges the S partials in split order:
   * every split's (max, sum) loaded at once, each head's weights computed
   * once, then every output's S partials loaded in batches */
  for (int x = threadIdx.x; x < QPB * S; x += blockDim.x) {
    const int j = x / S, sp = x - j * S;
    const float *ml = part_ml + ((row * heads + h0 + j) * S + sp) * 2;
    cmax[x] = kp_ld_coherent(ml), csum[x] = kp_ld_coherent(ml + 1);
  }
  __syncthreads();
  if (threadIdx.x < QPB) {
    const int j = threadIdx.x;
    float m_all = -INFINITY;
    for (int sp = 0; sp < S; ++sp) m_all = fmaxf(m_all, cmax[j * S + sp]);
    float den = 0.0f;
    for (int sp = 0; sp < S; ++sp) {
      const float w = cmax[j * S + sp] == -INFINITY ? 0.0f : expf(cmax[j * S + sp] - m_all); /* 0: an empty split */
      cmax[j * S + sp] = w; /* the split's weight from here on */
      den = fmaf(csum[j * S + sp], w, den);
    }
    bden[j] = den;
  }
  __syncthreads();
  for (int x = threadIdx.x; x < QPB * D; x += blockDim.x) {
    const int j = x / D, d = x - j * D;
    const int64_t rh = row * heads + h0 + j;
    const float *po = part_o + rh * S * (int64_t)D + d;
    float a = 0.0f;
#pragma unroll 8
    for (int sp = 0; sp < S; ++sp) a = fmaf(kp_ld_coherent(po + (int64_t)sp * D), cmax[j * S + sp], a);
    out[rh * (int64_t)D + d] = kp_round<DT>(a / bden[j]);
  }
  if (threadIdx.x == 0) *counter = 0u; /* ready for the next launch */
}

/* the rotary embedding (rotate-half) both attention kernels apply: pair index e
 * of a head_dim-D head at position p, and the pair rotated, each half rounded
 * to the dtype as a separate rotary kernel would store it. The fused products
 * are written out: left to contraction, nvcc fused x1 cs + x0 sn one way in one
 * kernel and the other way in the other, so the two could store keys a bit apart. */
__device__ __forceinline__ void kp_rope_angle(int p, int e, int D, float theta, float *sn, float *cs) {
  sincosf((float)p * powf(theta, -2.0f * (float)e / (float)D), sn, cs);
}
template <int DT>
__device__ __forceinline__ void kp_rope_rotate(float x0, float x1, float cs, float sn, uint16_t &r0, uint16_t &r1) {
  r0 = kp_round<DT>(fmaf(x0, cs, -__fmul_rn(x1, sn)));
  r1 = kp_round<DT>(fmaf(x0, sn, __fmul_rn(x1, cs)));
}

template <int DT, int D, int QPB>
__global__ void __launch_bounds__(kp_attn_threads, 2)
    kp_attention_kernel(const uint16_t *qkv, const int32_t *pos, uint16_t *kc, uint16_t *vc,
                        uint16_t *__restrict__ out, unsigned *counters, float *part_o, float *part_ml,
                        int heads, int kv_heads, int cap, float scale, float theta) {
  constexpr int P = kp_attn_shape<D>::P, KP = kp_attn_shape<D>::KP, U = kp_attn_u, half = D / 2;
  __shared__ float part[KP * QPB * D];
  __shared__ __attribute__((aligned(16))) float qs[QPB * D];
  __shared__ __attribute__((aligned(16))) uint16_t knew[D], vnew[D]; /* the new position's key and value */
  __shared__ float rcos[half], rsin[half];
  __shared__ float gmax[KP * QPB], gsum[KP * QPB], gweight[KP * QPB];
  __shared__ float bden[QPB];
  __shared__ float cmax[kp_attn_max_splits * QPB], csum[kp_attn_max_splits * QPB]; /* the merge of splits */
  __shared__ int last;
  kp_dec_release();
  const int blocks_per_row = heads / QPB; /* query-head blocks of a row */
  const int hb = blockIdx.x;              /* this block's heads: hb * QPB .. + QPB - 1 */
  const int h0 = hb * QPB;
  const int64_t row = blockIdx.y;
  const int split = blockIdx.z, S = gridDim.z;
  const int group = heads / kv_heads, g = h0 / group;
  const int p = pos[row]; /* an earlier step's write: done */
  const int len = min(p + 1, cap);
  const int span = (len + S - 1) / S;
  const int t_begin = split * span, t_end = min(len, t_begin + span);
  const int t_cache = min(t_end, p); /* positions below it come from the cache */
  const bool holds_new = p < cap && t_begin <= p && p < t_end;
  const int piece = threadIdx.x % P, grp = threadIdx.x / P;
  const int64_t nqkv = (int64_t)(heads + 2 * kv_heads) * D;
  const size_t base = ((size_t)row * kv_heads + g) * (size_t)cap * D;
  const uint16_t *K = kc + base + (size_t)piece * 8, *V = vc + base + (size_t)piece * 8;

  kp_v16 kv[U], vv[U];
  auto load = [&](int t0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int t = t0 + u * KP + grp;
      const bool in = t < t_cache;
      kv[u] = in ? kp_ld_act(K + (size_t)t * D) : kp_v16{0u, 0u, 0u, 0u};
      vv[u] = in ? kp_ld_act(V + (size_t)t * D) : kp_v16{0u, 0u, 0u, 0u};
    }
  };
  if (KP_ATTN_PREFETCH) load(t_begin); /* the cache of earlier steps, before the wait */
  kp_dec_wait();

  /* the block's query heads and the new key rotated (rounded to the dtype),
   * the queries scaled into shared memory, where every pass reads them again
   * (volatile), so registers go to loads in flight rather than to q */
  const uint16_t *x = qkv + row * nqkv;
  if constexpr (KP_ATTN_ROPE_REGS) {
    /* each thread one pair index e of every head it takes: its loads first,
     * then its one angle while they fly, one barrier */
    constexpr int step = kp_attn_threads / half, iters = (QPB + 1 + step - 1) / step;
    static_assert(kp_attn_threads % half == 0, "a thread keeps one pair index");
    const int e = threadIdx.x % half, j0 = threadIdx.x / half;
    float x0[iters], x1[iters];
#pragma unroll
    for (int it = 0; it < iters; ++it) {
      const int j = j0 + it * step; /* QPB: the k head */
      const int64_t at = (int64_t)(j < QPB ? h0 + j : heads + g) * D + e;
      x0[it] = j <= QPB ? kp_load1<DT>(x + at) : 0.0f;
      x1[it] = j <= QPB ? kp_load1<DT>(x + at + half) : 0.0f;
    }
    const bool vt = threadIdx.x < D / 8;
    const kp_v16 vp = vt ? kp_ld_act(x + (int64_t)(heads + kv_heads + g) * D + threadIdx.x * 8) : kp_v16{0u, 0u, 0u, 0u};
    float sn, cs;
    kp_rope_angle(p, e, D, theta, &sn, &cs);
#pragma unroll
    for (int it = 0; it < iters; ++it) {
      const int j = j0 + it * step;
      if (j > QPB) continue;
      uint16_t r0, r1;
      kp_rope_rotate<DT>(x0[it], x1[it], cs, sn, r0, r1);
      if (j < QPB) {
        qs[j * D + e] = kp_lo<DT>(r0) * scale;
        qs[j * D + e + half] = kp_lo<DT>(r1) * scale;
      } else {
        knew[e] = r0, knew[e + half] = r1;
      }
    }
    if (vt) reinterpret_cast<kp_v16 *>(vnew)[threadIdx.x] = vp;
    __syncthreads();
  } else {
    /* the angles of the position once per block, then the pairs */
    for (int i = threadIdx.x; i < half; i += blockDim.x) kp_rope_angle(p, i, D, theta, &rsin[i], &rcos[i]);
    __syncthreads();
    for (int i = threadIdx.x; i < (QPB + 1) * half; i += blockDim.x) {
      const int j = i / half, e = i - j * half;
      const uint16_t *src = x + (int64_t)(j < QPB ? h0 + j : heads + g) * D;
      const float x0 = kp_load1<DT>(src + e), x1 = kp_load1<DT>(src + e + half);
      uint16_t r0, r1;
      kp_rope_rotate<DT>(x0, x1, rcos[e], rsin[e], r0, r1);
      if (j < QPB) {
        qs[j * D + e] = kp_lo<DT>(r0) * scale;
        qs[j * D + e + half] = kp_lo<DT>(r1) * scale;
      } else {
        knew[e] = r0, knew[e + half] = r1;
      }
    }
    for (int i = threadIdx.x; i < D; i += blockDim.x) vnew[i] = x[(int64_t)(heads + kv_heads + g) * D + i];
    __syncthreads();
  }
  /* the new key and value into the cache, by one block of the (row, kv head):
   * no block of this launch reads that slot */
  if (holds_new && hb % (group / QPB) == 0) {
    uint16_t *ks = kc + base + (size_t)p * D, *vs = vc + base + (size_t)p * D;
    for (int i = threadIdx.x; i < D; i += blockDim.x) ks[i] = knew[i], vs[i] = vnew[i];
  }
  const volatile float4 *qv = reinterpret_cast<const volatile float4 *>(qs);

  float mx[QPB], sum[QPB], acc[QPB][8];
#pragma unroll
  for (int j = 0; j < QPB; ++j) {
    mx[j] = -INFINITY, sum[j] = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[j][e] = 0.0f;
  }
  for (int t0 = t_begin; t0 < t_end; t0 += KP * U) {
    if (t0 != t_begin || !KP_ATTN_PREFETCH) load(t0);
    if (holds_new) {
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (t0 + u * KP + grp == p) {
          kv[u] = reinterpret_cast<const kp_v16 *>(knew)[piece];
          vv[u] = reinterpret_cast<const kp_v16 *>(vnew)[piece];
        }
    }
    /* the U scores of each head (every lane of the group ends with each) */
    float sc[QPB][U];
#pragma unroll
    for (int j = 0; j < QPB; ++j) {
      const float4 qa = const_cast<const float4 &>(qv[(j * D + piece * 8) / 4]);
      const float4 qb = const_cast<const float4 &>(qv[(j * D + piece * 8) / 4 + 1]);
      const float q[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
#pragma unroll
      for (int u = 0; u < U; ++u) {
        float f[8];
        kp_unpack8<DT>(kv[u], f);
        float a = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) a = fmaf(q[e], f[e], a);
#pragma unroll
        for (int o = P / 2; o > 0; o >>= 1) a += kp_shfl_xor(a, o);
        sc[j][u] = t0 + u * KP + grp < t_end ? a : -INFINITY;
      }
    }
    if (t0 + grp >= t_end) continue; /* this group has no position in this pass */
#pragma unroll
    for (int j = 0; j < QPB; ++j) {
      float bmx = mx[j];
#pragma unroll
      for (int u = 0; u < U; ++u) bmx = fmaxf(bmx, sc[j][u]);
      const float corr = expf(mx[j] - bmx); /* 0 on the group's first positions */
      sum[j] *= corr;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[j][e] *= corr;
      mx[j] = bmx;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float f[8];
      kp_unpack8<DT>(vv[u], f);
#pragma unroll
      for (int j = 0; j < QPB; ++j) {
        const float p = expf(sc[j][u] - mx[j]); /* 0 past the split's end */
        sum[j] += p;
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[j][e] = fmaf(p, f[e], acc[j][e]);
      }
    }
  }
#pragma unroll
  for (int j = 0; j < QPB; ++j) {
#pragma unroll
    for (int e = 0; e < 8; ++e) part[(grp * QPB + j) * D + piece * 8 + e] = acc[j][e];
    if (piece == 0) gmax[grp * QPB + j] = mx[j], gsum[grp * QPB + j] = sum[j];
  }
  __syncthreads();
  /* merge the groups in order: weight exp(group max - block max) per head */
  if (threadIdx.x < QPB) {
    const int j = threadIdx.x;
    float bm = -INFINITY;
    for (int i = 0; i < KP; ++i) bm = fmaxf(bm, gmax[i * QPB + j]);
    float den = 0.0f;
    for (int i = 0; i < KP; ++i) {
      const float w = gmax[i * QPB + j] == -INFINITY ? 0.0f : expf(gmax[i * QPB + j] - bm);
      gweight[i * QPB + j] = w;
      den = fmaf(gsum[i * QPB + j], w, den);
    }
    gmax[j] = bm; /* group 0's slot, read no more: the block's max */
    bden[j] = den;
  }
  __syncthreads();
  if (S == 1) { /* the whole row: normalise and store */
    for (int x = threadIdx.x; x < QPB * D; x += blockDim.x) {
      const int j = x / D, d = x - j * D;
      float a = 0.0f;
#pragma unroll 4
      for (int i = 0; i < KP; ++i) a = fmaf(part[(i * QPB + j) * D + d], gweight[i * QPB + j], a);
      out[(row * heads + h0 + j) * (int64_t)D + d] = kp_round<DT>(a / bden[j]);
    }
    return;
  }
  /* one split: its partial to scratch, unnormalised, relative to its own max */
  for (int x = threadIdx.x; x < QPB * D; x += blockDim.x) {
    const int j = x / D, d = x - j * D;
    float a = 0.0f;
#pragma unroll 4
    for (int i = 0; i < KP; ++i) a = fmaf(part[(i * QPB + j) * D + d], gweight[i * QPB + j], a);
    part_o[((row * heads + h0 + j) * S + split) * (int64_t)D + d] = a;
  }
  if (threadIdx.x < QPB) {
    const int j = threadIdx.x;
    float *ml = part_ml + ((row * heads + h0 + j) * S + split) * 2;
    ml[0] = gmax[j], ml[1] = bden[j]; /* an empty split: -inf and 0 */
  }
  kp_attn_merge_last<DT, D, QPB>(row, h0, heads, S, counters + row * blocks_per_row + hb, part_o, part_ml, out, cmax, csum,
                                 bden, &last);
}

/* ---- attention on the tensor cores ----
 * Where the (row, kv head) blocks fill the multiprocessors (KP_ATTN_MMA), the CUDA-core
 * loop above issues about 75 instructions a position (each score's 8 products
 * and 4 shuffles, per head, and the exponentials), which sets its time at
 * serving rows: Llama-3.1-8B at c=64 spends 34.5 us a layer in it, 2.3x the
 * read of its cache (bench/results/h200-2026-12-01-step-profile-2d9850f). Here
 * one block per (row, kv head, split) takes the group's heads (2, 4 or 8) as
 * the rows of mma.sync m16n8k16 tiles (rows past the group are zero):
 *   scores  S[head][pos] = q . K^T: A = q from registers, B = 8 key rows
 *           (ldmatrix from shared memory), 16 positions a tile
 *   output  O^T[d][head] += V^T . P^T: A = 16 value rows transposed
 *           (ldmatrix.trans), B = the tile's probabilities, which the score
 *           fragments already hold in B's layout (rounded to the dtype)
 * Each warp streams its own tiles (t = w, w + W, ...) through a ring of
 * KP_ATTN_MMA_STAGES tiles of keys and values in shared memory, filled by
 * cp.async (rows past the split's end zero-filled, the new position written
 * from the block's rotated key and value after its tile lands); the first
 * tiles are asked for before the PDL wait, as the loop above does. The warps'
 * running softmaxes are merged in warp order, the splits as above: a fixed
 * order, so a step's output does not change from run to run. Rotation and the
 * cache append round as the loop above does. CUDA sm_80 and later, head_dim
 * 64 or 128 (a tile's 16 rows of keys and values must fit the ring). */
#if defined(KPICK_GPU_CUDA)
#include "mma_core.h"
static constexpr int kp_am_tile = 16; /* positions a tile */

/* byte offset of 16-byte piece c of tile row r: pieces XOR-swizzled by the
 * row, so ldmatrix's eight rows of one piece column hit eight bank groups */
template <int D>
__device__ __forceinline__ uint32_t kp_am_off(int r, int c) {
  return (uint32_t)((r * (D / 8) + (c ^ (r & 7))) * 16);
}

__device__ __forceinline__ void kp_am_cp16(uint32_t dst, const void *src, bool in) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(in ? 16 : 0) : "memory");
}

template <bool TRANS>
__device__ __forceinline__ void kp_am_ldsm4(uint32_t addr, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3) {
  if constexpr (TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr) : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr) : "memory");
}

/* two values rounded to the dtype, packed low first */
template <int DT>
__device__ __forceinline__ uint32_t kp_am_pack(float lo, float hi) {
  return (uint32_t)kp_round<DT>(lo) | ((uint32_t)kp_round<DT>(hi) << 16);
}

/* the warps' rings, dynamic shared memory (past the 48 KB a block's static may hold) */
template <int D, int W>
__host__ __device__ constexpr int kp_am_ring_bytes() { return W * KP_ATTN_MMA_STAGES * 2 * kp_am_tile * D * 2; }

template <int DT, int D, int QH, int W>
__global__ void __launch_bounds__(W * 32)
    kp_attention_mma_kernel(const uint16_t *qkv, const int32_t *pos, uint16_t *kc, uint16_t *vc,
                            uint16_t *__restrict__ out, unsigned *counters, float *part_o, float *part_ml,
                            int heads, int kv_heads, int cap, float scale, float theta) {
  constexpr int R = KP_ATTN_MMA_STAGES, T = kp_am_tile, half = D / 2, NT = W * 32, PC = D / 8;
  constexpr int tile_bytes = T * D * 2; /* keys, then values, of one tile */
  static_assert(QH == 2 || QH == 4 || QH == 8, "a group of 2, 4 or 8 query heads");
  static_assert(D == 64 || D == 128, "head_dim 64 or 128");
  static_assert(NT % half == 0, "each thread rotates one pair index");
  extern __shared__ __attribute__((aligned(128))) unsigned char ring[]; /* W rings of R tiles: kp_am_ring_bytes */
  __shared__ __attribute__((aligned(16))) uint16_t qh[QH * D], knew[D], vnew[D];
  __shared__ float wm[W * QH], wl[W * QH];
  __shared__ float bden[QH];
  __shared__ float cmax[kp_attn_max_splits * QH], csum[kp_attn_max_splits * QH];
  __shared__ int last;
#if defined(KP_MMA_NV)
  kp_dec_release();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t4 = lane % 4;
  const int kvh = blockIdx.x, h0 = kvh * QH;
  const int64_t row = blockIdx.y;
  const int split = blockIdx.z, S = gridDim.z;
  const int p = pos[row]; /* an earlier step's write: done */
  const int len = min(p + 1, cap);
  const int span = (len + S - 1) / S;
  const int t_begin = split * span, t_end = min(len, t_begin + span);
  const int t_cache = min(t_end, p); /* positions below it come from the cache */
  const bool holds_new = p < cap && t_begin <= p && p < t_end;
  const int ntiles = t_end > t_begin ? (t_end - t_begin + T - 1) / T : 0;
  const int mine = ntiles > warp ? (ntiles - warp + W - 1) / W : 0; /* tiles warp, warp + W, ... */
  const size_t base = ((size_t)row * kv_heads + kvh) * (size_t)cap * D;
  const uint16_t *K = kc + base, *V = vc + base;
  const uint32_t wring = (uint32_t)__cvta_generic_to_shared(ring) + (uint32_t)(warp * R * 2 * tile_bytes);

  /* this warp's i-th tile into its stage; a group committed even when empty,
   * so that "all but R - 1 groups done" always means tile i - R + 1 landed */
  auto issue = [&](int i) {
    if (i < mine) {
      const int t0 = t_begin + (warp + i * W) * T;
      const uint32_t st = wring + (uint32_t)((i % R) * 2 * tile_bytes);
#pragma unroll
      for (int x = lane; x < T * PC; x += 32) {
        const int r = x / PC, c = x - r * PC, t = t0 + r;
        const bool in = t < t_cache;
        const size_t at = (size_t)(in ? t : t_begin) * D + c * 8;
        kp_am_cp16(st + kp_am_off<D>(r, c), K + at, in);
        kp_am_cp16(st + tile_bytes + kp_am_off<D>(r, c), V + at, in);
      }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
#pragma unroll
  for (int i = 0; i < R - 1; ++i) issue(i); /* the cache of earlier steps, before the wait */
  kp_dec_wait();

  /* q and the new key rotated (rounded to the dtype, as the loop above), the
   * new value, into shared memory */
  const int64_t nqkv = (int64_t)(heads + 2 * kv_heads) * D;
  const uint16_t *x = qkv + row * nqkv;
  {
    const int e = threadIdx.x % half;
    float sn, cs;
    kp_rope_angle(p, e, D, theta, &sn, &cs);
    for (int j = threadIdx.x / half; j <= QH; j += NT / half) {
      const int64_t at = (int64_t)(j < QH ? h0 + j : heads + kvh) * D + e;
      uint16_t r0, r1;
      kp_rope_rotate<DT>(kp_load1<DT>(x + at), kp_load1<DT>(x + at + half), cs, sn, r0, r1);
      uint16_t *dst = j < QH ? qh + j * D : knew;
      dst[e] = r0, dst[e + half] = r1;
    }
    for (int i = threadIdx.x; i < PC; i += NT)
      reinterpret_cast<kp_v16 *>(vnew)[i] = kp_ld_act(x + (int64_t)(heads + kv_heads + kvh) * D + i * 8);
  }
  __syncthreads();
  if (holds_new) { /* the one block of (row, kv head) whose split holds the position */
    uint16_t *ks = kc + base + (size_t)p * D, *vs = vc + base + (size_t)p * D;
    for (int i = threadIdx.x; i < D; i += NT) ks[i] = knew[i], vs[i] = vnew[i];
  }
  /* A fragments of q: lane (g, t4) holds head g's k pairs 2 t4 and 2 t4 + 8 of each 16 dims */
  uint32_t qa[D / 16][2];
#pragma unroll
  for (int c = 0; c < D / 16; ++c) {
    qa[c][0] = g < QH ? *reinterpret_cast<const uint32_t *>(qh + g * D + c * 16 + 2 * t4) : 0u;
    qa[c][1] = g < QH ? *reinterpret_cast<const uint32_t *>(qh + g * D + c * 16 + 8 + 2 * t4) : 0u;
  }

  float mx = -INFINITY, lsum = 0.0f; /* head g's running max, and this lane's share of its sum */
  float o[D / 16][4];                /* O^T: dims 16 dt + g (+ 8), heads 2 t4 and 2 t4 + 1 */
#pragma unroll
  for (int dt = 0; dt < D / 16; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  const int mi = lane / 8, mr = lane % 8; /* the matrix and row whose address this lane gives ldmatrix */
  for (int i = 0; i < mine; ++i) {
    issue(i + R - 1);
    asm volatile("cp.async.wait_group %0;" ::"n"(R - 1) : "memory");
    __syncwarp();
    const int t0 = t_begin + (warp + i * W) * T;
    const uint32_t st = wring + (uint32_t)((i % R) * 2 * tile_bytes);
    if (holds_new && p >= t0 && p < t0 + T) { /* the new position, zero-filled by its copy */
      const int r = p - t0;
      for (int c = lane; c < 2 * PC; c += 32) {
        const int cc = c % PC;
        const kp_v16 v = reinterpret_cast<const kp_v16 *>(c < PC ? knew : vnew)[cc];
        const uint32_t a = st + (c < PC ? 0u : (uint32_t)tile_bytes) + kp_am_off<D>(r, cc);
        asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};" ::"r"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
      }
      __syncwarp();
    }
    /* scores of head g at positions t0 + 8 j + 2 t4 (+1), j = 0, 1 */
    float sc[2][4];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;
#pragma unroll
      for (int c = 0; c < D / 16; c += 2) {
        uint32_t b0, b1, b2, b3; /* dims 16 c .. 16 c + 15, then the next 16 */
        kp_am_ldsm4<false>(st + kp_am_off<D>(j * 8 + mr, 2 * c + mi), b0, b1, b2, b3);
        kp_mma16<DT>(sc[j], qa[c][0], 0u, qa[c][1], 0u, b0, b1);
        kp_mma16<DT>(sc[j], qa[c + 1][0], 0u, qa[c + 1][1], 0u, b2, b3);
      }
    }
    float s4[4], tmax = -INFINITY;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int t = t0 + (e >> 1) * 8 + 2 * t4 + (e & 1);
      s4[e] = t < t_end ? sc[e >> 1][e & 1] * scale : -INFINITY;
      tmax = fmaxf(tmax, s4[e]);
    }
    tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 1));
    tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, 2));
    const float mnew = fmaxf(mx, tmax); /* finite: a tile holds a position below t_end */
    const float corr = expf(mx - mnew);  /* 0 on the first tile */
    float pr[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) pr[e] = expf(s4[e] - mnew); /* 0 past the split's end */
    lsum = lsum * corr + ((pr[0] + pr[1]) + (pr[2] + pr[3]));
    mx = mnew;
    /* O^T's columns are heads 2 t4 and 2 t4 + 1: their lanes' factors */
    const float ca = __shfl_sync(0xffffffffu, corr, (2 * t4) * 4), cb = __shfl_sync(0xffffffffu, corr, (2 * t4 + 1) * 4);
    const uint32_t pb0 = kp_am_pack<DT>(pr[0], pr[1]), pb1 = kp_am_pack<DT>(pr[2], pr[3]);
#pragma unroll
    for (int dt = 0; dt < D / 16; ++dt) {
      o[dt][0] *= ca, o[dt][1] *= cb, o[dt][2] *= ca, o[dt][3] *= cb;
      uint32_t a0, a1, a2, a3; /* V^T: dims 16 dt .. + 15 by positions 0 .. 15 */
      kp_am_ldsm4<true>(st + tile_bytes + kp_am_off<D>((mi >> 1) * 8 + mr, 2 * dt + (mi & 1)), a0, a1, a2, a3);
      kp_mma16<DT>(o[dt], a0, a1, a2, a3, pb0, pb1);
    }
    __syncwarp(); /* every lane is done with the stage before it is filled again */
  }
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  lsum += __shfl_xor_sync(0xffffffffu, lsum, 1);
  lsum += __shfl_xor_sync(0xffffffffu, lsum, 2);
  __syncthreads(); /* every warp is done with the rings: they hold the warps' outputs from here */
  float *wo = reinterpret_cast<float *>(ring); /* [W][QH][D] */
  static_assert(W * QH * D * 4 <= kp_am_ring_bytes<D, W>(), "the warps' outputs fit the rings");
  if (t4 == 0 && g < QH) wm[warp * QH + g] = mx, wl[warp * QH + g] = lsum;
#pragma unroll
  for (int dt = 0; dt < D / 16; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = 2 * t4 + (e & 1), d = dt * 16 + g + (e >> 1) * 8;
      if (h < QH) wo[(warp * QH + h) * D + d] = o[dt][e];
    }
  __syncthreads();
  /* the warps merged in warp order: weight exp(warp max - block max) */
  for (int xi = threadIdx.x; xi < QH * D; xi += NT) {
    const int j = xi / D, d = xi - j * D;
    float bm = -INFINITY;
#pragma unroll
    for (int w = 0; w < W; ++w) bm = fmaxf(bm, wm[w * QH + j]);
    float den = 0.0f, a = 0.0f;
#pragma unroll
    for (int w = 0; w < W; ++w) {
      const float wt = wm[w * QH + j] == -INFINITY ? 0.0f : expf(wm[w * QH + j] - bm);
      den = fmaf(wl[w * QH + j], wt, den);
      a = fmaf(wo[(w * QH + j) * D + d], wt, a);
    }
    if (S == 1) {
      out[(row * heads + h0 + j) * (int64_t)D + d] = kp_round<DT>(a / den);
    } else {
      part_o[((row * heads + h0 + j) * S + split) * (int64_t)D + d] = a;
      if (d == 0) {
        float *ml = part_ml + ((row * heads + h0 + j) * S + split) * 2;
        ml[0] = bm, ml[1] = den; /* an empty split: -inf and 0 */
      }
    }
  }
  if (S == 1) return;
  kp_attn_merge_last<DT, D, QH>(row, h0, heads, S, counters + row * kv_heads + kvh, part_o, part_ml, out, cmax, csum,
                                bden, &last);
#else
  __trap(); /* the host launches it on sm_80 and later only */
#endif
}

/* one instantiation launched with its rings' dynamic shared memory (allowed
 * past 48 KB once per instantiation), PDL where the step chains with it */
template <int DT, int D, int QH, int W>
static hipError_t kp_attention_mma_go(dim3 grid, hipStream_t s, const uint16_t *q, const int32_t *pos, uint16_t *k,
                                      uint16_t *v, uint16_t *o, unsigned *counters, float *part_o, float *part_ml,
                                      int heads, int kv_heads, int cap, float scale, float theta) {
  constexpr int bytes = kp_am_ring_bytes<D, W>();
  static hipError_t allowed = cudaFuncSetAttribute(kp_attention_mma_kernel<DT, D, QH, W>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (allowed != cudaSuccess) return allowed;
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.gridDim = grid;
  cfg.blockDim = dim3(W * 32);
  cfg.dynamicSmemBytes = bytes;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = kp_dec_pdl() ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kp_attention_mma_kernel<DT, D, QH, W>, q, pos, k, v, o, counters, part_o, part_ml,
                            heads, kv_heads, cap, scale, theta);
}

template <int DT, int D>
static hipError_t kp_attention_mma_launch(int group, dim3 grid, hipStream_t s, const uint16_t *q, const int32_t *pos,
                                          uint16_t *k, uint16_t *v, uint16_t *o, unsigned *counters, float *part_o,
                                          float *part_ml, int heads, int kv_heads, int cap, float scale, float theta) {
  constexpr int W = KP_ATTN_MMA_WARPS;
  switch (group) {
    case 8: return kp_attention_mma_go<DT, D, 8, W>(grid, s, q, pos, k, v, o, counters, part_o, part_ml, heads, kv_heads, cap, scale, theta);
    case 4: return kp_attention_mma_go<DT, D, 4, W>(grid, s, q, pos, k, v, o, counters, part_o, part_ml, heads, kv_heads, cap, scale, theta);
    default: return kp_attention_mma_go<DT, D, 2, W>(grid, s, q, pos, k, v, o, counters, part_o, part_ml, heads, kv_heads, cap, scale, theta);
  }
}
#endif

static bool kp_attn_use_mma(int m, int heads, int kv_heads, int head_dim) {
  const int group = heads / kv_heads;
  if (KP_ATTN_MMA == 0 || kp_dec_cc_major() < 8) return false; /* mma.sync, cp.async, ldmatrix: sm_80 */
  if (group != 2 && group != 4 && group != 8) return false;
  if (head_dim != 64 && head_dim != 128) return false;
  /* where a block per (row, kv head) fills the multiprocessors: short of that the
   * splits leave each warp a tile or two, and the loop above is as fast alone and
   * faster in the step, where this kernel's small blocks let the next linear's
   * PDL blocks in beside it (H200: 2-5 % slower steps at c=8-16, 0-13 % faster at
   * c=24-64; bench/results/h200-2026-12-04-attn-mma-582175f) */
  return KP_ATTN_MMA == 2 || (int64_t)m * kv_heads >= kp_dec_units();
}

template <int DT, int D>
static hipError_t kp_attention_qpb(int qpb, dim3 grid, hipStream_t s, const uint16_t *q, const int32_t *pos, uint16_t *k,
                                   uint16_t *v, uint16_t *o, unsigned *counters, float *part_o, float *part_ml,
                                   int heads, int kv_heads, int cap, float scale, float theta) {
  const dim3 block(kp_attn_threads);
  switch (qpb) {
    case 4: return kp_launch(kp_attention_kernel<DT, D, 4>, grid, block, s, kp_dec_pdl(), q, pos, k, v, o, counters, part_o, part_ml, heads, kv_heads, cap, scale, theta);
    case 2: return kp_launch(kp_attention_kernel<DT, D, 2>, grid, block, s, kp_dec_pdl(), q, pos, k, v, o, counters, part_o, part_ml, heads, kv_heads, cap, scale, theta);
    default: return kp_launch(kp_attention_kernel<DT, D, 1>, grid, block, s, kp_dec_pdl(), q, pos, k, v, o, counters, part_o, part_ml, heads, kv_heads, cap, scale, theta);
  }
}

template <int DT>
static hipError_t kp_attention_dispatch(int head_dim, int qpb, dim3 grid, hipStream_t s, const void *qkv, const int32_t *pos,
                                        void *kcache, void *vcache, void *out, unsigned *counters, float *part_o,
                                        float *part_ml, int heads, int kv_heads, int cap, float scale, float theta) {
  const uint16_t *q = (const uint16_t *)qkv;
  uint16_t *k = (uint16_t *)kcache, *v = (uint16_t *)vcache, *o = (uint16_t *)out;
  switch (head_dim) {
    case 64: return kp_attention_qpb<DT, 64>(qpb, grid, s, q, pos, k, v, o, counters, part_o, part_ml, heads, kv_heads, cap, scale, theta);
    case 128: return kp_attention_qpb<DT, 128>(qpb, grid, s, q, pos, k, v, o, counters, part_o, part_ml, heads, kv_heads, cap, scale, theta);
    case 256: return kp_attention_qpb<DT, 256>(qpb, grid, s, q, pos, k, v, o, counters, part_o, part_ml, heads, kv_heads, cap, scale, theta);
    default: return hipErrorNotSupported; /* be_attention checks head_dim first */
  }
}

int be_attention(int32_t dtype, const void *qkv, const int32_t *pos, void *kcache, void *vcache, void *out, int32_t m,
                 int32_t heads, int32_t kv_heads, int32_t head_dim, int32_t cap, float theta, void *scratch, void *stream) {
  if (head_dim != 64 && head_dim != 128 && head_dim != 256)
    return kp_fail(KPICK_E_UNSUPPORTED, "attention", "head_dim %d: the GPU kernel is built for 64, 128 and 256", head_dim);
  const int qpb = kp_attn_qpb(m, heads, kv_heads, head_dim);
  const int splits = scratch ? kp_attn_splits(m, heads, kv_heads, head_dim, cap) : 1;
  unsigned *counters = (unsigned *)scratch;
  float *part_o = splits > 1 ? (float *)((char *)scratch + kp_attn_counter_bytes(heads)) : NULL;
  float *part_ml = splits > 1 ? part_o + (size_t)m * heads * splits * head_dim : NULL;
  const dim3 grid((unsigned)(heads / qpb), (unsigned)m, (unsigned)splits);
  const float scale = 1.0f / sqrtf((float)head_dim);
  const hipStream_t s = (hipStream_t)stream;
#if defined(KPICK_GPU_CUDA)
  if (kp_attn_use_mma(m, heads, kv_heads, head_dim)) { /* qpb is the group: a block per (row, kv head, split) */
    const uint16_t *q = (const uint16_t *)qkv;
    uint16_t *k = (uint16_t *)kcache, *v = (uint16_t *)vcache, *o = (uint16_t *)out;
    const bool d64 = head_dim == 64;
    hipError_t e;
    if (dtype == KP_DT_BF16)
      e = d64 ? kp_attention_mma_launch<KP_DT_BF16, 64>(qpb, grid, s, q, pos, k, v, o, counters, part_o, part_ml, heads, kv_heads, cap, scale, theta)
              : kp_attention_mma_launch<KP_DT_BF16, 128>(qpb, grid, s, q, pos, k, v, o, counters, part_o, part_ml, heads, kv_heads, cap, scale, theta);
    else
      e = d64 ? kp_attention_mma_launch<KP_DT_FP16, 64>(qpb, grid, s, q, pos, k, v, o, counters, part_o, part_ml, heads, kv_heads, cap, scale, theta)
              : kp_attention_mma_launch<KP_DT_FP16, 128>(qpb, grid, s, q, pos, k, v, o, counters, part_o, part_ml, heads, kv_heads, cap, scale, theta);
    KP_GPU(e);
    return KPICK_OK;
  }
#endif
  KP_GPU(dtype == KP_DT_BF16 ? kp_attention_dispatch<KP_DT_BF16>(head_dim, qpb, grid, s, qkv, pos, kcache, vcache, out, counters, part_o, part_ml, heads, kv_heads, cap, scale, theta)
                             : kp_attention_dispatch<KP_DT_FP16>(head_dim, qpb, grid, s, qkv, pos, kcache, vcache, out, counters, part_o, part_ml, heads, kv_heads, cap, scale, theta));
  return KPICK_OK;
}

/* ---- argmax + advance ----
 * Each row's logits are split over several blocks (kp_argmax_blocks), a
 * contiguous slice each: batches of 16-byte pieces, lowest index on ties. With
 * scratch, each block writes its (value, index) and the last block of the row
 * to finish, found by a counter it then puts back to 0, picks among them,
 * writes the token and moves the position on. Without scratch, one block per
 * row does it all. */

static constexpr int kp_argmax_threads = 256;
static constexpr int kp_argmax_u = 4; /* 16-byte pieces a thread loads at once */
static constexpr int kp_argmax_max_blocks = 64;
static constexpr int kp_argmax_min_slice = 256; /* logits a block reads, at least */

/* the elements each block of a row covers: a multiple of 8, so every slice of
 * an aligned row starts 16-byte aligned */
static int64_t kp_argmax_slice(int32_t m, int64_t vocab) {
  int64_t blocks = (2 * (int64_t)kp_dec_units() + m - 1) / m;
  const int64_t most = (vocab + kp_argmax_min_slice - 1) / kp_argmax_min_slice;
  if (blocks > most) blocks = most;
  if (blocks > kp_argmax_max_blocks) blocks = kp_argmax_max_blocks;
  if (blocks < 1) blocks = 1;
  return ((vocab + blocks - 1) / blocks + 7) / 8 * 8;
}

static int kp_argmax_blocks(int32_t m, int64_t vocab) {
  const int64_t slice = kp_argmax_slice(m, vocab);
  return (int)((vocab + slice - 1) / slice);
}

/* scratch: a counter per row for up to KPICK_MAX_ROWS rows, then per
 * (row, block) a value and an index */
static constexpr size_t kp_argmax_counter_bytes = ((size_t)KPICK_MAX_ROWS * 4 + 255) / 256 * 256;

int64_t be_argmax_scratch(int32_t m, int64_t vocab) {
  const int blocks = kp_argmax_blocks(m, vocab);
  return blocks == 1 ? 0 : (int64_t)kp_argmax_counter_bytes + (int64_t)m * blocks * 8;
}

/* (value, index) a beats b: larger, or equal and earlier; NaN never beats */
__device__ __forceinline__ bool kp_beats(float va, int32_t ia, float vb, int32_t ib) {
  return va > vb || (va == vb && ia < ib);
}

/* the block's best (value, index), in thread 0; red_v/red_i hold kp_max_warps */
__device__ __forceinline__ void kp_block_best(float &bv, int32_t &bi, float *red_v, int32_t *red_i) {
#pragma unroll
  for (int o = kp_warp / 2; o > 0; o >>= 1) {
    const float ov = kp_shfl_xor(bv, o);
    const int32_t oi = (int32_t)kp_shfl_xor((float)bi, o); /* exact: indices <= 2^24 */
    if (kp_beats(ov, oi, bv, bi)) bv = ov, bi = oi;
  }
  const int warp = threadIdx.x / kp_warp;
  __syncthreads(); /* red may still be read by a previous reduction */
  if (threadIdx.x % kp_warp == 0) red_v[warp] = bv, red_i[warp] = bi;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int i = 1; i < (int)(blockDim.x / kp_warp); ++i)
      if (kp_beats(red_v[i], red_i[i], bv, bi)) bv = red_v[i], bi = red_i[i];
}

template <int DT>
__global__ void __launch_bounds__(kp_argmax_threads)
    kp_argmax_kernel(const uint16_t *logits, int64_t V, int64_t slice, int32_t *__restrict__ tokens,
                     int32_t *__restrict__ pos, unsigned *counters, float *part_v, int32_t *part_i) {
  __shared__ float red_v[kp_max_warps];
  __shared__ int32_t red_i[kp_max_warps];
  __shared__ int last;
  kp_dec_release();
  kp_dec_wait();
  const int64_t row = blockIdx.y;
  const int b = blockIdx.x, nb = gridDim.x;
  const uint16_t *x = logits + row * V;
  const int64_t lo = (int64_t)b * slice, hi = min(V, lo + slice);
  float bv = -INFINITY;
  int32_t bi = (int32_t)V; /* past the end: loses every tie */
  /* 16-byte pieces while the row start is aligned (then so is lo, a multiple
   * of 8), the tail one by one; within a thread indices only grow, so a strict
   * > keeps the earliest maximum */
  const int64_t vec = ((uintptr_t)x & 15) == 0 ? (hi - lo) / 8 : 0;
  const uint16_t *xs = x + lo;
  for (int64_t c0 = threadIdx.x; c0 < vec; c0 += (int64_t)blockDim.x * kp_argmax_u) {
    kp_v16 piece[kp_argmax_u]; /* every load of the batch in flight before the first compare */
#pragma unroll
    for (int u = 0; u < kp_argmax_u; ++u) {
      const int64_t c = c0 + (int64_t)u * blockDim.x;
      piece[u] = c < vec ? kp_ld_act(xs + c * 8) : kp_v16{0u, 0u, 0u, 0u};
    }
#pragma unroll
    for (int u = 0; u < kp_argmax_u; ++u) {
      const int64_t c = c0 + (int64_t)u * blockDim.x;
      if (c < vec) {
        float f[8];
        kp_unpack8<DT>(piece[u], f);
#pragma unroll
        for (int e = 0; e < 8; ++e)
          if (kp_beats(f[e], (int32_t)(lo + c * 8 + e), bv, bi)) bv = f[e], bi = (int32_t)(lo + c * 8 + e);
      }
    }
  }
  for (int64_t j = lo + vec * 8 + threadIdx.x; j < hi; j += blockDim.x) {
    const float f = kp_load1<DT>(x + j);
    if (kp_beats(f, (int32_t)j, bv, bi)) bv = f, bi = (int32_t)j;
  }
  kp_block_best(bv, bi, red_v, red_i);
  if (nb > 1) {
    if (threadIdx.x == 0) {
      part_v[row * nb + b] = bv, part_i[row * nb + b] = bi;
      __threadfence();
      last = atomicAdd(counters + row, 1u) == (unsigned)nb - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    /* the last block of the row picks among the nb slices' bests */
    bv = -INFINITY, bi = (int32_t)V;
    for (int i = threadIdx.x; i < nb; i += blockDim.x) {
      const float v = kp_ld_coherent(part_v + row * nb + i);
      const int32_t k = __float_as_int(kp_ld_coherent(reinterpret_cast<const float *>(part_i + row * nb + i)));
      if (kp_beats(v, k, bv, bi)) bv = v, bi = k;
    }
    kp_block_best(bv, bi, red_v, red_i);
  }
  if (threadIdx.x == 0) {
    tokens[row] = bi < V ? bi : 0; /* an all-NaN row: token 0 */
    pos[row] += 1;
    if (nb > 1) counters[row] = 0u; /* ready for the next launch */
  }
}

int be_argmax_advance(int32_t dtype, const void *logits, int32_t m, int64_t vocab, int32_t *tokens, int32_t *pos,
                      void *scratch, void *stream) {
  const hipStream_t s = (hipStream_t)stream;
  const int nb = scratch ? kp_argmax_blocks(m, vocab) : 1;
  const int64_t slice = nb > 1 ? kp_argmax_slice(m, vocab) : vocab;
  unsigned *counters = (unsigned *)scratch;
  float *part_v = nb > 1 ? (float *)((char *)scratch + kp_argmax_counter_bytes) : NULL;
  int32_t *part_i = nb > 1 ? (int32_t *)(part_v + (size_t)m * nb) : NULL;
  const dim3 grid((unsigned)nb, (unsigned)m), block(kp_argmax_threads);
  const uint16_t *l = (const uint16_t *)logits;
  const auto k = dtype == KP_DT_BF16 ? kp_argmax_kernel<KP_DT_BF16> : kp_argmax_kernel<KP_DT_FP16>;
  KP_GPU(kp_launch(k, grid, block, s, kp_dec_pdl(), l, (int64_t)vocab, slice, tokens, pos, counters, part_v, part_i));
  return KPICK_OK;
}

/* ---- embedding ---- */

template <int DT>
__global__ void __launch_bounds__(kp_row_threads)
    kp_embed_kernel(const uint16_t *__restrict__ table, const int32_t *tokens, float *__restrict__ resid,
                    int64_t H, int64_t V) {
  kp_dec_release();
  kp_dec_wait();
  const int64_t row = blockIdx.x;
  const int64_t t = tokens[row] >= 0 && tokens[row] < V ? tokens[row] : 0;
  const uint16_t *src = table + t * H;
  float *dst = resid + row * H;
  if (H % 8 == 0) { /* then the table row is 16-byte aligned and the residual row 32-byte */
#pragma unroll 4
    for (int64_t c = threadIdx.x; c < H / 8; c += blockDim.x) {
      float f[8];
      kp_unpack8<DT>(*reinterpret_cast<const kp_v16 *>(src + c * 8), f);
      reinterpret_cast<float4 *>(dst + c * 8)[0] = make_float4(f[0], f[1], f[2], f[3]);
      reinterpret_cast<float4 *>(dst + c * 8)[1] = make_float4(f[4], f[5], f[6], f[7]);
    }
  } else {
    for (int64_t j = threadIdx.x; j < H; j += blockDim.x) dst[j] = kp_load1<DT>(src + j);
  }
}

int be_embed(int32_t dtype, const void *table, const int32_t *tokens, float *residual, int32_t m, int64_t hidden,
             int64_t vocab, void *stream) {
  const hipStream_t s = (hipStream_t)stream;
  const dim3 grid((unsigned)m), block(kp_row_threads);
  const uint16_t *t = (const uint16_t *)table;
  const auto k = dtype == KP_DT_BF16 ? kp_embed_kernel<KP_DT_BF16> : kp_embed_kernel<KP_DT_FP16>;
  KP_GPU(kp_launch(k, grid, block, s, kp_dec_pdl(), t, tokens, residual, (int64_t)hidden, (int64_t)vocab));
  return KPICK_OK;
}
