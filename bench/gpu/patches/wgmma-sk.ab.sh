#!/usr/bin/env bash
# wgmma-sk.ab.sh: the wgmma.sk rows (the tile as a persistent stream-K grid, W and x in
# rings of their own) on any Hopper card, next-space.patch and then
# bench/results/h100-2026-12-07-sk-rows-6faa27d/wgmma-sk-on-next-space.patch applied to the working
# tree, .devcarry carried, bench/results moved aside: their parity and the whole-step fp64
# checks with one forced onto every linear call, the in-step sweep of the dense bf16
# presets (every candidate, rows 1-128) into stores/h100, then the selftest parity (odd
# shapes, rows 1..128) of the whole build. A/B: the sweep times every other candidate
# beside them, cuBLASLt's algos included.
#   KPICK_COMMIT=<main>+next-space+sk bash bench/gpu/patches/wgmma-sk.ab.sh
set -uo pipefail
t0=$(date +%s)
STORE=stores/h100 SWEEP_PRESETS="${AB_PRESETS:-Llama-3.1-8B Qwen3-8B Qwen3-0.6B}" SWEEP_FP8=0 \
  NEW_PARITY="Llama-3.1-8B:bf16:wgmma.sk.* Qwen3-0.6B:bf16:wgmma.sk.* Qwen3-0.6B:fp16:wgmma.sk.*" \
  NEW_FORCE="Llama-3.1-8B:bf16:32:wgmma.sk.m128.w8.x3.pdl Qwen3-0.6B:bf16:64:wgmma.sk.m64.w8.x4 Qwen3-0.6B:bf16:128:wgmma.sk.m256.w4.x3 Llama-3.1-8B:bf16:128:wgmma.sk.m64.w12.x4" \
  BUDGET_S=${BUDGET_S:-450} bash bench/gpu/pipeline.sh newrows sweep
. bench/gpu/nvcc-env.sh
left=$(( ${CALL_S:-580} - ($(date +%s) - t0) ))
gcc -O2 -std=gnu11 -o build/selftest bench/gpu/selftest.c -Lbuild -lkpick-cuda -Wl,-rpath,"$PWD/build" -lm &&
  KPICK_BACKEND=cuda timeout $(( left > 10 ? left : 10 )) build/selftest parity > "$OUT/selftest.txt" 2>&1
echo "[$(( $(date +%s) - t0 ))s] selftest parity: exit $? ($(grep -c ' PASS$' "$OUT/selftest.txt") PASS, $(grep -c ' FAIL$' "$OUT/selftest.txt") FAIL)"
grep -E "FAIL|SUMMARY" "$OUT/selftest.txt" | head -20
xz -9 "$OUT/selftest.txt"
