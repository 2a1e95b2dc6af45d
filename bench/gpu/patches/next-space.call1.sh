#!/usr/bin/env bash
# next-space.call1.sh: the first call for next-space.patch (applied to the working tree, .devcarry
# carried, bench/results moved aside). On an H200: the re-sweep's call 1 (new rows' parity and forced
# whole-step checks, every preset swept, promoted). On any other card: an A/B of the same new rows in
# the in-step sweep of the dense bf16 presets against cuBLASLt and every wgmma row, into stores/h100,
# then the selftest parity (odd shapes, rows 1..128) of the whole build (H100_PRESETS: other presets).
#   KPICK_COMMIT=<main>+next-space bash bench/gpu/patches/next-space.call1.sh
set -uo pipefail
t0=$(date +%s)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $gpu"
moe_force="Qwen3-30B-A3B:bf16:16:moe.wgmma.m64.t3.k1.pdl Qwen3-30B-A3B:bf16:48:moe.wgmma.m128.t2.k2.pdl Qwen3-30B-A3B:bf16:72:moe.wgmma.x128.m64.t3.k1.pdl"
pp_force="Llama-3.1-8B:bf16:32:wgmma.pp2.m64.t4.s2 Qwen3-0.6B:bf16:24:wgmma.pp2.m64.t4.s1.pdl Qwen3-0.6B:bf16:128:wgmma.pp2.m64.t4.s2 Qwen3-0.6B:bf16:64:wgmma.pp2.m64.t4.s2.pdl"
pp_parity="Llama-3.1-8B:bf16:wgmma.pp2.* Qwen3-0.6B:bf16:wgmma.pp2.*"
# split-wave's rows (wgmma.mB.t4.sS with S = 2, 3, 6 and A): parity on the 4B's few-tile shapes, one S = A
# and one S = 6 row forced through whole steps
sw_globs="wgmma.m*.t4.s2*,wgmma.m*.t4.s3*,wgmma.m*.t4.s6*,wgmma.m*.t4.sA*"
sw_force="Qwen3-4B:bf16:64:wgmma.m64.t4.sA.pdl Qwen3-0.6B:bf16:128:wgmma.m128.t4.s6.pdl"
if [[ "$gpu" == *H200* ]]; then
  # the sweep parity-checks every candidate itself: newrows is only the forced whole-step checks here,
  # one a new kind of row, so the build, the checks and every preset's sweep fit one call
  NEW_FORCE="$moe_force Llama-3.1-8B:bf16:32:wgmma.pp2.m64.t4.s2.pdl Qwen3-4B:bf16:64:wgmma.m64.t4.sA.pdl" \
    BUDGET_S=${BUDGET_S:-590} bash bench/gpu/pipeline.sh newrows sweep promote
else
  STORE=stores/h100 SWEEP_PRESETS="${H100_PRESETS:-Llama-3.1-8B Qwen3-8B Qwen3-4B}" SWEEP_FP8=0 \
    NEW_PARITY="$pp_parity Qwen3-4B:bf16:$sw_globs" NEW_FORCE="$pp_force $sw_force" BUDGET_S=${BUDGET_S:-470} bash bench/gpu/pipeline.sh newrows sweep
  . bench/gpu/nvcc-env.sh
  gcc -O2 -std=gnu11 -o build/selftest bench/gpu/selftest.c -Lbuild -lkpick-cuda -Wl,-rpath,"$PWD/build" -lm &&
    KPICK_BACKEND=cuda timeout $(( 590 - ($(date +%s) - t0) )) build/selftest parity > "$OUT/selftest.txt" 2>&1
  echo "[$(( $(date +%s) - t0 ))s] selftest parity: exit $? ($(grep -c ' PASS$' "$OUT/selftest.txt") PASS, $(grep -c ' FAIL$' "$OUT/selftest.txt") FAIL)"
  grep -E "FAIL|SUMMARY" "$OUT/selftest.txt" | head -20
  xz -9 "$OUT/selftest.txt"
fi
