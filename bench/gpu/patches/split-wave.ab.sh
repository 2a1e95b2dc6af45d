#!/usr/bin/env bash
# split-wave.ab.sh: one device call for split-wave.patch (applied to the working tree, .devcarry
# carried, bench/results moved aside):
#   KPICK_COMMIT=<main>+split-wave bash bench/gpu/patches/split-wave.ab.sh
# Prints how many clusters of 1-16 blocks one wave holds at the wgmma tile's block sizes
# (bench/gpu/cluster-waves.cu), sweeps the dense bf16 presets in step at rows 32-128 against every
# wgmma, cmma and cuBLASLt row (the new rows' S = A picks logged to $OUT/auto-s.txt), judges the
# store with bench/family-ab.ts (all new rows, S = A alone, fixed S alone), and with time left runs
# Nsight Compute over Qwen3-4B's and Qwen3-1.7B's down projections at rows 64-128.
set -uo pipefail
t0=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $gpu"
{ echo "commit: ${KPICK_COMMIT:-unknown}"; date -u +"date: %FT%TZ"; echo "card: $gpu"; nvidia-smi --query-gpu=driver_version,clocks.max.sm --format=csv,noheader; } > "$OUT/summary.txt"
. bench/gpu/node-env.sh; . bench/gpu/nvcc-env.sh
make -j"$(nproc)" GPU=cuda NVCC="$nvcc_cmd" > "$OUT/build.log" 2>&1 || { echo "build failed"; tail -30 "$OUT/build.log"; exit 1; }
echo "[$(( $(date +%s) - t0 ))s] built"
$nvcc_cmd -arch=sm_90 -o build/cluster-waves bench/gpu/cluster-waves.cu > "$OUT/cluster-waves.txt" 2>&1 &&
  build/cluster-waves >> "$OUT/cluster-waves.txt" 2>&1
head -4 "$OUT/cluster-waves.txt"
left() { echo $(( ${BUDGET_S:-560} - ($(date +%s) - t0) - ${1:-20} )); }
KP_WG_LOG=1 KPICK_BACKEND=cuda timeout $(left 30) node --import tsx scripts/sweep.ts \
  --model Qwen3-4B,Qwen3-1.7B,Qwen3-0.6B,Qwen3-30B-A3B,Llama-3.1-8B,Qwen3-8B --rows 32,64,128 \
  --candidates 'wgmma.*,blaslt*,cmma.*' --store stores/split > "$OUT/sweep-raw.log" 2>&1
echo "[$(( $(date +%s) - t0 ))s] sweep: exit $?"
grep "auto S" "$OUT/sweep-raw.log" | sort -u > "$OUT/auto-s.txt"
grep -v "auto S" "$OUT/sweep-raw.log" > "$OUT/sweep.log"; rm "$OUT/sweep-raw.log"; tail -2 "$OUT/sweep.log"
ab() { node --import tsx bench/family-ab.ts --store stores/split --family "$2" > "$OUT/family-ab-$1.txt" 2>&1; }
ab all '/^wgmma\.m(64|128|256)\.t4\.s[236A](\.pdl)?$/'
ab auto '/\.sA(\.pdl)?$/'
ab fixed '/^wgmma\.m(64|128)\.t4\.s[236](\.pdl)?$/'
tail -8 "$OUT/family-ab-all.txt"
tar cJf "$OUT/stores.tar.xz" stores
if [ "$(left 10)" -gt 90 ]; then
  cat > build/split-wave-plan.txt <<'PLAN'
down4b 0 2560 9728 64,128 blaslt,wgmma.m64.t4.s1,wgmma.m64.t4.s3.pdl,wgmma.m64.t4.sA.pdl,wgmma.m128.t4.sA.pdl,wgmma.m256.t4.sA.pdl
down17 0 2048 6144 128 blaslt,wgmma.m64.t4.sA.pdl,wgmma.m128.t4.sA.pdl,wgmma.m256.t4.sA.pdl
PLAN
  PROFILE_LIMIT_S=60 timeout $(left 10) bash bench/gpu/profile-wgmma.sh build/split-wave-plan.txt > "$OUT/profile.log" 2>&1
  echo "[$(( $(date +%s) - t0 ))s] profile: exit $?"; tail -3 "$OUT/profile.log"
fi
echo "[$(( $(date +%s) - t0 ))s] done"
