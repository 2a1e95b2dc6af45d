#!/usr/bin/env bash
# run.sh: on the GPU machine, from the repo root: build the CUDA backend, then
# check and time it with bench/gpu/selftest.c. Logs go to $OUT (the device
# tool's folder) or build/gpu-run; commit the raw ones under bench/results/.
#   bash bench/gpu/run.sh [selftest args: parity time quick]
# KPICK_COMMIT names the commit the tree was copied from (no .git travels).
set -euo pipefail
out=${OUT:-build/gpu-run}
mkdir -p "$out" build
{
  echo "commit: ${KPICK_COMMIT:-unknown}"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit \
    --format=csv || true
  nvcc --version | tail -2
} | tee "$out/env.txt"

# cuBLASLt's header: the toolkit's include folder, else wherever the image keeps it
nvcc_cmd=nvcc
if ! printf '#include <cublasLt.h>\n' | nvcc -x cu -E - >/dev/null 2>&1; then
  hdr=$(find /usr /opt -name cublasLt.h -path '*include*' 2>/dev/null | head -1)
  lib=$(find /usr /opt -name 'libcublasLt.so*' 2>/dev/null | head -1)
  [ -n "$hdr" ] && [ -n "$lib" ] || { echo "run.sh: cuBLASLt not found" >&2; exit 3; }
  nvcc_cmd="nvcc -I$(dirname "$hdr") -L$(dirname "$lib")"
  export LD_LIBRARY_PATH="$(dirname "$lib"):${LD_LIBRARY_PATH:-}"
  echo "cuBLASLt from $(dirname "$hdr"), $(dirname "$lib")" | tee -a "$out/env.txt"
fi

start=$(date +%s)
make -j"$(nproc)" GPU=cuda NVCC="$nvcc_cmd" 2>&1 | tee "$out/build.log"
echo "build: $(( $(date +%s) - start )) s" | tee -a "$out/env.txt"
gcc -O2 -std=gnu11 -Wall -o build/selftest bench/gpu/selftest.c -Lbuild -lkpick-cuda -Wl,-rpath,"$PWD/build" -lm
build/selftest "$@" 2>&1 | tee "$out/selftest.log"
