/* kernel-trace.c: a CUPTI injection library that writes one line per kernel a
 * CUDA graph ran, with the GPU's start and end timestamps (ns), so a decode
 * step's timeline (each op, the gaps and PDL overlaps between them) can be
 * read without Nsight Systems, which the GPU machine lacks. Any program runs
 * under it unchanged; the CUDA driver loads it at cuInit:
 *   CUDA_INJECTION64_PATH=$PWD/build/kernel-trace.so KPTRACE_OUT=trace.txt node ... serve-bench ...
 * Line: start end graph_id node_id stream grid_x grid_y grid_z block_x name
 * (the mangled name). Kernels launched outside a graph (weight fills, the
 * eager warm-up step) are left out. bench/gpu/step-variants.sh builds it
 * (TRACE_C) and lib/step-trace.ts reads its lines. */
#include <cupti.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static FILE *out;
static const size_t buffer_bytes = (size_t)8 << 20;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = (uint8_t *)aligned_alloc(8, buffer_bytes);
  *size = *buffer ? buffer_bytes : 0;
  *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
  (void)ctx, (void)stream, (void)size;
  CUpti_Activity *r = NULL;
  while (out && cuptiActivityGetNextRecord(buffer, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
    if (k->graphId == 0) continue;
    fprintf(out, "%llu %llu %u %llu %u %d %d %d %d %s\n", (unsigned long long)k->start, (unsigned long long)k->end,
            k->graphId, (unsigned long long)k->graphNodeId, k->streamId, k->gridX, k->gridY, k->gridZ, k->blockX,
            k->name ? k->name : "?");
  }
  free(buffer);
}

static void finish(void) {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (out) fclose(out), out = NULL;
}

/* the driver's entry point for an injection library; nonzero: loaded */
int InitializeInjection(void) {
  const char *path = getenv("KPTRACE_OUT");
  out = fopen(path && *path ? path : "kernel-trace.txt", "w");
  if (!out) return 0;
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
    fprintf(out, "# CUPTI refused the kernel activity\n");
    return 0;
  }
  atexit(finish);
  return 1;
}
