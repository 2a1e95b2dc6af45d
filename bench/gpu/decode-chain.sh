#!/usr/bin/env bash
# decode-chain.sh: the decode step under each chaining mode of the GPU decode
# ops (kp_dec_chain in hip-lib/src/gpu/decode.hip: 0 plain launches, 1 PDL
# launches that wait, 2 that also release the next kernel at their start, 3
# right after their wait). For each: the whole-step fp64 check of both routes
# (Qwen3-0.6B, 2 layers) and the serve-bench ratios of $MODELS at $CS. Run on
# the GPU machine from the repo root with .devcarry carried, like pipeline.sh;
# logs packed as $OUT/decode-chain.tar.xz.
set -uo pipefail
out=logs/decode-chain
mkdir -p "$out" "${OUT:-build}"
bash bench/gpu/pipeline.sh build > "$out/build.txt" 2>&1
export KPICK_BACKEND=cuda NO_COLOR=1
for mode in ${MODES:-3 2 1 0}; do
  sed -i "s/kp_dec_chain = [0-9];/kp_dec_chain = $mode;/" hip-lib/src/gpu/decode.hip
  make -j"$(nproc)" GPU=cuda > "$out/make-$mode.log" 2>&1 || { echo "mode $mode: build failed"; continue; }
  timeout 60 node --import tsx scripts/serve-bench.ts --model Qwen3-0.6B --layers 2 --c 1,8 --steps 8 --runs 1 \
    --identity-steps 16 --check-step > "$out/check-$mode.jsonl" 2> "$out/check-$mode.log"
  grep -E "step check|^ +[18] " "$out/check-$mode.log" | sed "s/^/mode $mode: /"
  for m in ${MODELS:-Llama-3.1-8B Qwen3-8B}; do
    timeout 90 node --import tsx scripts/serve-bench.ts --model "$m" --c ${CS:-1,4,8,16} --steps 48 --runs 2 --identity-steps 0 \
      --json > "$out/serve-$mode-$m.jsonl" 2> "$out/serve-$mode-$m.log"
    grep -E "^ +[0-9]+ " "$out/serve-$mode-$m.log" | sed "s/^/mode $mode $m: /"
  done
done
tar cJf "${OUT:-build}/decode-chain.tar.xz" "$out"
