// cluster-waves.cu: how many thread-block clusters of S = 1..16 blocks one wave of this GPU holds
// (cudaOccupancyMaxActiveClusters), at the wgmma tile's block sizes (160 threads: m64; 288: m128
// or pp2) and a range of dynamic shared memory, for picking splits that fit one wave
// (split-wave.patch). Build: nvcc -arch=sm_90 -o build/cluster-waves bench/gpu/cluster-waves.cu
#include <cstdio>
#include <cuda_runtime.h>

__global__ void probe(int *p) {
  extern __shared__ int s[];
  if (p) p[0] = s[0];
}

int main() {
  const int threads[] = {160, 288};
  const int smem_kb[] = {50, 74, 98, 112, 146, 194, 226};
  if (cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, 226 * 1024) != cudaSuccess ||
      cudaFuncSetAttribute(probe, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) {
    fprintf(stderr, "cluster-waves: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 1;
  }
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  printf("SMs %d\n", sms);
  for (int t : threads)
    for (int kb : smem_kb) {
      printf("threads %d smem %3d KB:", t, kb);
      for (int s = 1; s <= 16; ++s) {
        cudaLaunchAttribute a[1];
        a[0].id = cudaLaunchAttributeClusterDimension;
        a[0].val.clusterDim.x = 1;
        a[0].val.clusterDim.y = s;
        a[0].val.clusterDim.z = 1;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(1, s);
        cfg.blockDim = dim3(t);
        cfg.dynamicSmemBytes = kb * 1024;
        cfg.attrs = a;
        cfg.numAttrs = 1;
        int n = -1;
        printf(" S%d=%d", s, cudaOccupancyMaxActiveClusters(&n, probe, &cfg) == cudaSuccess ? n : -1);
      }
      printf("\n");
    }
  return 0;
}
