#!/usr/bin/env bash
# wgmma-pp.memcheck.sh: one device call: wgmma-pp.patch at KP_WG_PP = 2 built with line info, then
# compute-sanitizer over moe parity of single moe.wgmma rows. The A/B saw two of them crash
# (bench/results/h100-2026-12-07-wgmma-pp-7fc246c/; its first run found the rows with one box a stage fail,
# bench/results/h200-2026-12-07-wgmma-pp-memcheck-0acdbd5/). Each row runs in its own process, so one crash
# does not poison the next. From the repo root of main, .devcarry carried:
#   bash bench/gpu/patches/wgmma-pp.memcheck.sh
set -uo pipefail
t0=$(date +%s)
git apply bench/gpu/patches/wgmma-pp.patch || { echo "patch does not apply"; exit 1; }
sed -i 's/^#define KP_WG_PP 1$/#define KP_WG_PP 2/' hip-lib/src/gpu/wgmma.hip
grep -n "^#define KP_WG_PP" hip-lib/src/gpu/wgmma.hip
. bench/gpu/node-env.sh
. bench/gpu/nvcc-env.sh
make -j16 GPU=cuda NVCC="$nvcc_cmd -lineinfo" > "$OUT/build.log" 2>&1 || { echo "build failed"; tail -20 "$OUT/build.log"; exit 1; }
echo "[$(( $(date +%s) - t0 ))s] built"
san=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
echo "sanitizer: ${san:-none}"
export KPICK_BACKEND=cuda NO_COLOR=1
# most telling first: the row that crashed first, under memcheck; then which rows crash at all
runs="moe.wgmma.m64.t3.k1:memcheck moe.wgmma.m64.t3.k1:plain moe.wgmma.m128.t4.k1:plain moe.wgmma.m64.t2.k1:plain
  moe.wgmma.x128.m64.t3.k1:plain moe.wgmma.m64.t3.k1:synccheck moe.wgmma.m64.t3.k1:racecheck"
for run in $runs; do
  cand=${run%%:*} tool=${run#*:}
  [ $(( $(date +%s) - t0 )) -lt "${LIMIT_S:-280}" ] || { echo "out of time before $cand $tool"; continue; }
  pre=(); [ $tool = plain ] || { [ -n "$san" ] || continue; pre=("$san" --tool "$tool" --print-limit 12); }
  timeout 90 "${pre[@]}" node --import tsx scripts/parity.ts --model Qwen3-30B-A3B --rows 16 \
    --candidates "$cand" > "$OUT/$cand-$tool.out" 2> "$OUT/$cand-$tool.log"
  echo "[$(( $(date +%s) - t0 ))s] $cand $tool: exit $?"
  grep -h -m8 -E "FAIL|pass|Invalid|Barrier|at .*wgmma|ERROR SUMMARY|unspecified|hazard" "$OUT/$cand-$tool.log" "$OUT/$cand-$tool.out" | cut -c1-300
done
