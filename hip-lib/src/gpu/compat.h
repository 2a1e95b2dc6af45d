/* compat.h: the HIP names that the GPU sources use, mapped to CUDA when nvcc
 * builds them, so every kernel and hook is written once, in HIP style.
 *
 * The build defines exactly one of KPICK_GPU_CUDA (nvcc) or KPICK_GPU_HIP (hipcc).
 * The nvcc path never includes HIP headers: it maps each name to its CUDA twin.
 * Device helpers whose spelling differs between the vendors beyond a rename
 * (shuffles, 16-byte loads, PDL) are small kp_* inline functions here. */
#ifndef KPICK_GPU_COMPAT_H
#define KPICK_GPU_COMPAT_H

#include <stdint.h>

#if defined(KPICK_GPU_CUDA) == defined(KPICK_GPU_HIP)
#error "define exactly one of KPICK_GPU_CUDA or KPICK_GPU_HIP"
#endif

#if defined(KPICK_GPU_CUDA)
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define hipError_t cudaError_t
#define hipSuccess cudaSuccess
#define hipErrorNotSupported cudaErrorNotSupported
#define hipGetErrorString cudaGetErrorString
#define hipGetLastError cudaGetLastError
#define hipGetDeviceCount cudaGetDeviceCount
#define hipSetDevice cudaSetDevice
#define hipDeviceProp_t cudaDeviceProp
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipRuntimeGetVersion cudaRuntimeGetVersion
#define hipDriverGetVersion cudaDriverGetVersion
#define hipMemGetInfo cudaMemGetInfo
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipMemcpy cudaMemcpy
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipMemset cudaMemset
#define hipMemsetAsync cudaMemsetAsync
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipStream_t cudaStream_t
#define hipStreamCreateWithFlags cudaStreamCreateWithFlags
#define hipStreamNonBlocking cudaStreamNonBlocking
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipEvent_t cudaEvent_t
#define hipEventCreate cudaEventCreate
#define hipEventDestroy cudaEventDestroy
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime
#define hipGraph_t cudaGraph_t
#define hipGraphExec_t cudaGraphExec_t
#define hipGraphNode_t cudaGraphNode_t
#define hipStreamBeginCapture cudaStreamBeginCapture
#define hipStreamEndCapture cudaStreamEndCapture
#define hipStreamCaptureModeThreadLocal cudaStreamCaptureModeThreadLocal
#define hipStreamCaptureStatus cudaStreamCaptureStatus
#define hipStreamCaptureStatusNone cudaStreamCaptureStatusNone
#define hipStreamIsCapturing cudaStreamIsCapturing
#define hipGraphInstantiateWithFlags cudaGraphInstantiateWithFlags
#define hipGraphLaunch cudaGraphLaunch
#define hipGraphDestroy cudaGraphDestroy
#define hipGraphExecDestroy cudaGraphExecDestroy
#define hipGraphGetNodes cudaGraphGetNodes
#define hipPointerAttribute_t cudaPointerAttributes
#define hipPointerGetAttributes cudaPointerGetAttributes
#else
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
#endif

/* Memory the kernels may touch, by the runtime's pointer attributes: device or
 * managed. The field is `type` in CUDA and ROCm 6, `memoryType` before. */
static inline bool kp_device_attr(const hipPointerAttribute_t &a) {
#if defined(KPICK_GPU_CUDA)
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
#elif HIP_VERSION_MAJOR >= 6
  return a.type == hipMemoryTypeDevice || a.isManaged;
#else
  return a.memoryType == hipMemoryTypeDevice || a.isManaged;
#endif
}

/* One 16-byte piece: 8 bf16/fp16 values, two per word, low half first. */
struct __attribute__((aligned(16))) kp_v16 {
  uint32_t x, y, z, w;
};

/* Launch k on stream s; pdl asks for programmatic dependent launch, which only
 * CUDA has (the caller checks availability first; HIP answers NotSupported). */
template <class... P, class... A>
static inline hipError_t kp_launch(void (*k)(P...), dim3 grid, dim3 block, hipStream_t s, bool pdl,
                                   A... args) {
#if defined(KPICK_GPU_CUDA)
  if (pdl) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = 0;
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, k, args...);
  }
#else
  if (pdl) return hipErrorNotSupported;
#endif
  k<<<grid, block, 0, s>>>(args...);
  return hipGetLastError();
}

#if defined(__CUDACC__) || defined(__HIPCC__)
/* ---- device helpers ---- */

__device__ __forceinline__ float kp_shfl_xor(float v, int lane_mask) {
#if defined(KPICK_GPU_CUDA)
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
#else
  return __shfl_xor(v, lane_mask);
#endif
}

/* lane src's v, the whole warp taking part */
__device__ __forceinline__ int kp_shfl(int v, int src) {
#if defined(KPICK_GPU_CUDA)
  return __shfl_sync(0xffffffffu, v, src);
#else
  return __shfl(v, src);
#endif
}

/* Weights are read once per call: keep them out of L1. */
__device__ __forceinline__ kp_v16 kp_ld_stream(const void *p) {
  kp_v16 r;
#if defined(KPICK_GPU_CUDA)
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
#else
  r = *reinterpret_cast<const kp_v16 *>(p);
#endif
  return r;
}

/* 8 bytes of weights (8 fp8 codes), read once per call as kp_ld_stream's */
__device__ __forceinline__ uint2 kp_ld_stream8(const void *p) {
  uint2 r;
#if defined(KPICK_GPU_CUDA)
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v2.u32 {%0,%1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
#else
  r = *reinterpret_cast<const uint2 *>(p);
#endif
  return r;
}

/* An activation: re-read by every warp, so L1 may keep it. It is the previous
 * kernel's output, and under PDL this kernel starts while that kernel still
 * writes it: so a plain load, kept after the PDL wait (asm volatile), never
 * the read-only path, which assumes the data fixed for the kernel's life. */
__device__ __forceinline__ kp_v16 kp_ld_act(const void *p) {
  kp_v16 r;
#if defined(KPICK_GPU_CUDA)
  asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p) : "memory");
#else
  r = *reinterpret_cast<const kp_v16 *>(p);
#endif
  return r;
}

/* A float written by another block of the same launch: read it past L1. */
__device__ __forceinline__ float kp_ld_coherent(const float *p) {
#if defined(KPICK_GPU_CUDA)
  return __ldcg(p);
#else
  return __uint_as_float(__atomic_load_n(reinterpret_cast<const uint32_t *>(p), __ATOMIC_RELAXED));
#endif
}
__device__ __forceinline__ int32_t kp_ld_coherent(const int32_t *p) {
#if defined(KPICK_GPU_CUDA)
  return __ldcg(p);
#else
  return __atomic_load_n(p, __ATOMIC_RELAXED);
#endif
}

/* Release this thread's writes (and, after a block barrier, its block's) to
 * the whole device, and acquire what others released: a counter's fence.
 * Not __threadfence on NVIDIA, which is fence.sc, far slower. */
__device__ __forceinline__ void kp_fence_gpu() {
#if defined(KPICK_GPU_CUDA)
  asm volatile("fence.acq_rel.gpu;" ::: "memory");
#else
  __threadfence();
#endif
}

/* bit l: lane l's pred (the warp's lanes, 32 or 64) */
__device__ __forceinline__ uint64_t kp_ballot(bool pred) {
#if defined(KPICK_GPU_CUDA)
  return __ballot_sync(0xffffffffu, pred);
#else
  return __ballot(pred);
#endif
}

/* the warp's shared-memory writes seen by all its lanes */
__device__ __forceinline__ void kp_syncwarp() {
#if defined(KPICK_GPU_CUDA)
  __syncwarp();
#else
  __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "wavefront");
  __builtin_amdgcn_wave_barrier();
#endif
}

/* Programmatic dependent launch (CUDA sm_90). kp_pdl_trigger lets the next
 * kernel of the stream start early; only PDL kernels call it, and none is ever
 * instantiated for HIP, where reaching it traps. */
__device__ __forceinline__ void kp_pdl_trigger() {
#if defined(KPICK_GPU_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#else
  __builtin_trap();
#endif
}

/* Every kernel calls this between its first batch of weight loads and its
 * first read of x or write of y (first = true), and after the loop. It does
 * two jobs: under a PDL launch it waits until the previous kernel's memory is
 * visible; and it keeps the compiler from sinking the batch's weight loads
 * below it, so that all of them are in flight before the math starts. On
 * NVIDIA both come from griddepcontrol.wait, which returns at once when the
 * launch has no programmatic dependency (sm_90; before that, nothing: no PDL
 * there). HIP has no PDL: a scheduling barrier at every batch does the second
 * job. */
__device__ __forceinline__ void kp_batch_fence(bool first) {
#if defined(KPICK_GPU_CUDA)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (first) asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
#else
  __builtin_amdgcn_sched_barrier(0);
#endif
}
#endif /* device compiler */

#endif
