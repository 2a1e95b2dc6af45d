#!/usr/bin/env bash
# profile-wgmma.sh: Nsight Compute over the wgmma family, the mma family,
# cuBLASLt and the read floor on a few decode shapes, each launch profiled
# alone with cold caches (ncu flushes them before each pass; clocks left
# alone: --clock-control none). On the GPU machine, from the repo root, after
# the CUDA build (bench/gpu/run.sh or pipeline.sh builds it):
#   bash bench/gpu/profile-wgmma.sh [PLAN]      PLAN: a file of lines "label op n k rows names [dtype]" (default: below)
#   (bench/gpu/profile-plan-fp8-moe.txt: the fp8 linears at rows 4-16, bf16 at rows 16-32, the experts bf16 and fp8;
#   bench/gpu/profile-plan-s19.txt: the fp8 qkv at rows 8 and the fp8 experts at rows 1 and 16, session 19)
# Writes, per plan line, $OUT/prof/<label>.ncu-rep, <label>.details.csv (the
# sections' tables), <label>.raw.csv (every metric, one row per kernel) and
# <label>.order.txt (which launch is which candidate); $OUT/prof.tar.xz packs them.
set -uo pipefail
out=${OUT:-build/gpu-profile}
mkdir -p "$out/prof"
ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$ncu_bin" ] || { echo "profile-wgmma: ncu not found" >&2; exit 3; }
# the CUDA build, as run.sh makes it (cuBLASLt's header wherever the image keeps it)
if [ ! -e build/libkpick-cuda.so ]; then
  . bench/gpu/nvcc-env.sh # sets nvcc_cmd
  make -j"$(nproc)" GPU=cuda NVCC="$nvcc_cmd" > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
fi
gcc -O2 -std=gnu11 -Wall -o build/profile bench/gpu/profile.c -Lbuild -lkpick-cuda -Wl,-rpath,"$PWD/build" -lm || exit 1

plan=${1:-}
if [ -z "$plan" ]; then
  plan=build/profile-plan.txt
  cat > "$plan" <<'EOF'
qkv 0 6144 4096 8,16,32,64,128 blaslt,mma.w4.u16,wgmma.m64.t4.s1,wgmma.m64.t8.s1,wgmma.m128.t4.s1
down 0 4096 14336 16,64,128 blaslt,mma.w8.u16,wgmma.m64.t4.s1,wgmma.m128.t4.s1
gate_up 1 14336 4096 16,128 gated.blaslt,gated.mma.w2.u8.pdl,gated.wgmma.m64.t4.s1,gated.wgmma.m256.t4.s1
lmhead06 0 151936 1024 128 blaslt,wgmma.m64.t4.s1,wgmma.m128.t4.s1
o17 0 2048 2048 16,128 blaslt,mma.w8.u16,wgmma.m64.t4.s1
EOF
fi

sections="--section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats"
metrics="dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum,lts__t_sector_hit_rate.pct,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg,gpc__cycles_elapsed.max,sm__warps_active.avg.pct_of_peak_sustained_active"
while read -r label op n k rows names dtype; do
  [ -z "$label" ] && continue
  s=$(date +%s)
  timeout ${PROFILE_LIMIT_S:-120} "$ncu_bin" --clock-control none --cache-control all $sections --metrics "$metrics" \
    -f -o "$out/prof/$label" build/profile "$op" "$n" "$k" "$rows" "$names" ${dtype:-bf16} > "$out/prof/$label.order.txt" 2> "$out/prof/$label.ncu.log"
  echo "profile $label: exit $? in $(( $(date +%s) - s )) s"
  "$ncu_bin" --import "$out/prof/$label.ncu-rep" --csv --page details > "$out/prof/$label.details.csv" 2>/dev/null
  "$ncu_bin" --import "$out/prof/$label.ncu-rep" --csv --page raw > "$out/prof/$label.raw.csv" 2>/dev/null
done < "$plan"
tar cJf "$out/prof.tar.xz" -C "$out" prof && rm -rf "$out/prof"
echo "packed $(du -h "$out/prof.tar.xz" | cut -f1)"
