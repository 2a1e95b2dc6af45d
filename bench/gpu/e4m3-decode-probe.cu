// e4m3-decode-probe.cu: is fp8_core.h's kp_e4m3_bf16x2 (the bf16 decode of the
// tensor-core fp8 rows) exact on this device? Every 16-bit pair of codes, in
// both halves of a word, against common/numeric.h's host decode: the bf16 of
// each finite code must be the upper half of its fp32 bit for bit (subnormal
// codes included). Prints the mismatch count and what the NaN codes read as;
// exit 1 on a finite mismatch. Build it twice to check both decode paths:
//   nvcc -O2 -arch=sm_90 -DKPICK_GPU_CUDA [-DKP_E4M3_BF16_BITS=0] -Ihip-lib/src \
//     -o /tmp/e4m3 bench/gpu/e4m3-decode-probe.cu && /tmp/e4m3
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/numeric.h"
#include "gpu/fp8_core.h"

__global__ void decode_all(uint32_t *out) {
  const uint32_t pair = blockIdx.x * blockDim.x + threadIdx.x; /* codes: low byte, high byte */
  if (pair >= 65536u) return;
  out[2 * pair] = kp_e4m3_bf16x2<0>(pair);
  out[2 * pair + 1] = kp_e4m3_bf16x2<1>(pair << 16);
}

static uint16_t host_bf16(uint8_t c) {
  const float f = kp_e4m3_to_f32(c);
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}

int main(void) {
  uint32_t *d, *h = (uint32_t *)malloc(2 * 65536 * 4);
  if (cudaMalloc(&d, 2 * 65536 * 4) != cudaSuccess) { fprintf(stderr, "e4m3-decode-probe: no device\n"); return 2; }
  decode_all<<<256, 256>>>(d);
  if (cudaMemcpy(h, d, 2 * 65536 * 4, cudaMemcpyDeviceToHost) != cudaSuccess) { fprintf(stderr, "e4m3-decode-probe: kernel failed\n"); return 2; }
  long finite = 0, bad = 0;
  for (uint32_t pair = 0; pair < 65536u; ++pair)
    for (int half = 0; half < 2; ++half)
      for (int side = 0; side < 2; ++side) {
        const uint8_t c = (uint8_t)(pair >> (8 * side));
        const uint16_t got = (uint16_t)(h[2 * pair + half] >> (16 * side));
        if ((c & 0x7f) == 0x7f) continue;
        ++finite;
        if (got != host_bf16(c)) {
          if (bad < 8) printf("mismatch: code 0x%02x (half %d, side %d): 0x%04x, want 0x%04x\n", c, half, side, got, host_bf16(c));
          ++bad;
        }
      }
  printf("KP_E4M3_BF16_BITS=%d: %ld finite decodes, %ld mismatches; NaN codes read 0x7f -> 0x%04x, 0xff -> 0x%04x\n",
         KP_E4M3_BF16_BITS, finite, bad, (unsigned)(h[2 * 0x7f7f] & 0xffff), (unsigned)(h[2 * 0xffff] & 0xffff));
  return bad ? 1 : 0;
}
