#!/usr/bin/env bash
# wgmma-pp.ab.sh: one device call for wgmma-pp.patch (KP_WG_PP = 2: two consumer warpgroups a
# 64-row group of W, taking alternate K boxes into sums of their own) against the same tree at
# KP_WG_PP = 1 (the loop of main, refactored): wgmma-dev.sh builds both, checks parity (selftest
# of the plain build; the variant's selftest after it), runs whole-step fp64 checks with the
# variant's rows forced, sweeps the wgmma rows of both builds in-step (bf16 Llama-3.1-8B and
# Qwen3-8B, fp8 Llama-3.1-8B; rows 16-128), and times moe.wgmma under both routings twice,
# in turns. Then tma-stream.cu (the wg8x mode: x boxes in the stage) if time is left.
# From the repo root with the patch applied to the working tree, .devcarry carried and
# bench/results moved aside:  KPICK_COMMIT=<main> bash bench/gpu/patches/wgmma-pp.ab.sh
set -uo pipefail
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
bf='blaslt,gated.blaslt,wgmma.*,gated.wgmma.*'
f8='w8a8.blaslt,gated.w8a8.blaslt,w8a8.wgmma.*,gated.w8a8.wgmma.*'
moe="bench/moe-routings.ts --rows 16,32,64,128 --candidates moe.wgmma.*"
VARIANTS='pp2:-DKP_WG_PP=2' \
CHECKS="pp2:wgmma.m64.t4.s1:Llama-3.1-8B:2:16;pp2:wgmma.m128.t4.s1.pdl:Qwen3-0.6B:2:64;pp2:gated.wgmma.m64.t4.s1:Qwen3-0.6B:2:32;pp2:gated.wgmma.m128.t4.s1:Qwen3-0.6B:2:128;pp2:w8a8.wgmma.m64.t4.s2:Llama-3.1-8B:2:32:fp8;pp2:moe.wgmma.m128.t2.k2:Qwen3-30B-A3B:2:48;pp2:moe.wgmma.x128.m64.t3.k1:Qwen3-30B-A3B:2:72" \
SWEEPS="--model Llama-3.1-8B,Qwen3-8B --rows 16,32,64,128 --candidates $bf;@pp2 --model Llama-3.1-8B,Qwen3-8B --rows 16,32,64,128 --candidates $bf;--model Llama-3.1-8B --dtype fp8 --rows 16,32,64,128 --candidates $f8;@pp2 --model Llama-3.1-8B --dtype fp8 --rows 16,32,64,128 --candidates $f8" \
BENCHES="@pp2 scripts/parity.ts --model Qwen3-30B-A3B --rows 16,32,64,128 --candidates moe.wgmma.*;$moe;@pp2 $moe;$moe;@pp2 $moe" \
BUDGET_S=${BUDGET_S:-420} bash bench/gpu/wgmma-dev.sh
echo "[$(( $(date +%s) - t0 ))s] wgmma-dev done"

# the variant's selftest parity (odd shapes, rows 1..128), against its own library
. bench/gpu/nvcc-env.sh
mkdir -p build/sel-pp2 && cp build/var-pp2/libkpick-cuda.so build/sel-pp2/ &&
  gcc -O2 -std=gnu11 -o build/selftest-pp2 bench/gpu/selftest.c -Lbuild/sel-pp2 -lkpick-cuda \
    -Wl,-rpath,"$PWD/build/sel-pp2" -lm &&
  KPICK_BACKEND=cuda timeout 60 build/selftest-pp2 parity > "$OUT/selftest-pp2.txt" 2>&1
echo "[$(( $(date +%s) - t0 ))s] pp2 selftest parity: exit $? ($(grep -c ' PASS$' "$OUT/selftest-pp2.txt") PASS, $(grep -c ' FAIL$' "$OUT/selftest-pp2.txt") FAIL)"
grep -E "FAIL|SUMMARY" "$OUT/selftest-pp2.txt" | head -20

if [ $(( $(date +%s) - t0 )) -lt 520 ]; then
  $nvcc_cmd -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -DKPICK_GPU_CUDA -o build/tma-stream \
    bench/gpu/tma-stream.cu -lcuda > "$OUT/tma-stream-build.txt" 2>&1 &&
    timeout $(( 580 - ($(date +%s) - t0) )) build/tma-stream > "$OUT/tma-stream.txt" 2>&1
  echo "[$(( $(date +%s) - t0 ))s] tma-stream: exit $?"
fi
xz -9 "$OUT/selftest-pp2.txt" 2>/dev/null
