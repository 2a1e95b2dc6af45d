# nvcc-env.sh: sourced by the GPU machine's scripts (pipeline.sh, wgmma-dev.sh,
# profile-wgmma.sh, step-variants.sh). Sets nvcc_cmd, the nvcc line that finds
# cuBLASLt: the toolkit's include folder, else wherever the image keeps the
# header and library (then also on LD_LIBRARY_PATH, for the programs that load it).
nvcc_cmd=nvcc
if ! printf '#include <cublasLt.h>\n' | nvcc -x cu -E - >/dev/null 2>&1; then
  kp_hdr=$(find /usr /opt -name cublasLt.h -path '*include*' 2>/dev/null | head -1)
  kp_blas=$(find /usr /opt -name 'libcublasLt.so*' 2>/dev/null | head -1)
  nvcc_cmd="nvcc -I$(dirname "$kp_hdr") -L$(dirname "$kp_blas")"
  export LD_LIBRARY_PATH="$(dirname "$kp_blas"):${LD_LIBRARY_PATH:-}"
fi
