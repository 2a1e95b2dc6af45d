#!/usr/bin/env bash
# step-variants.sh: kpick's decode step against a baseline checkout and against
# variants of its shared ops, in one device call. Run from the repo root on the
# GPU machine with .devcarry carried (node, node_modules), like pipeline.sh.
#   BASE_DIR=dir       a baseline checkout, built here beside this one and timed
#                      through its build/libkpick-cuda.so (optional)
#   VARIANTS="name:-DFLAG=v ...;name2:..."   hip-lib/src/gpu/decode.hip built with
#                      these overrides (its KP_ATTN_* and KP_DEC_CHAIN knobs), each linked with this
#                      build's other objects into build/var-<name>/libkpick-cuda.so
#   MODELS, CS         serve-bench of this build and of the baseline (interleaved per model; MODELS="" skips)
#   VARIANT_MODELS, VARIANT_CS   serve-bench of each variant
#   BUDGET_S           seconds the steps may take (default 400): a step that would pass it is skipped
#   PROFILE_C          Nsight Compute over a 2-layer Llama-3.1-8B serve-bench at these (each at most PROFILE_LIMIT_S, 60)
#                      concurrencies, baseline and this build ("" skips)
#   PROFILE_KERNEL     one kernel of this build's step (an ncu name regex) under Nsight Compute, every section
#                      (PROFILE_KERNEL_C, _MODEL, _SKIP: below), as profile-kernel.csv
#   TRACE_C, TRACE_MODELS   the timeline of this build's step (default Llama-3.1-8B): serve-bench at these
#                      concurrencies (8 steps, one run) under bench/gpu/kernel-trace.c, a CUPTI injection library that
#                      writes every graph kernel's start and end (Nsight Systems is not on the GPU machine); the
#                      traces as trace-<model>.txt, read by bench/gpu/step-trace.ts ("" skips); TRACE_VARIANTS=1 traces
#                      each variant too, as trace-var-<name>-<model>.txt
#   BOUND_VARIANTS="name ..."   variants that time a bound, their output wrong by design (-DKP_STEP_NO_NORMS=1):
#                      timed without their whole-step check
#   CHECKS=0           skips this build's whole-step checks (a call that only traces or times variants; each
#                      variant is still checked)
# This build goes through the whole-step fp64 check of both routes (Qwen3-0.6B,
# 2 layers, c=1, 5 and 16; Llama-3.1-8B, 1 layer, c=5: one, one, two and four
# query heads an attention block), each variant through the first. Each library is loaded through KPICK_LIB; the table is
# tables/ of the working directory (decode.hip is outside the table's space token).
# Logs under logs/step-variants/, packed as $OUT/step-variants.tar.xz; the summary
# lines on stdout and in logs/step-variants/summary.txt.
set -uo pipefail
dir=logs/step-variants
mkdir -p "$dir" "${OUT:-build}"
export KPICK_BACKEND=cuda NO_COLOR=1
t0=$(date +%s)
say() { echo "[$(($(date +%s) - t0))s] $*" | tee -a "$dir/summary.txt"; }
# whether the call's budget ($BUDGET_S, default 400 s) still has room for a step of $1 s
room() { [ $(($(date +%s) - t0 + $1)) -le "${BUDGET_S:-400}" ] || { say "skipped past the budget: ${2:-}"; return 1; }; }

# serve-bench TAG LIB MODEL CS [flags...]: logs serve-TAG-MODEL.{jsonl,log}, rows to the summary
bench() {
  local tag=$1 lib=$2 model=$3 cs=$4
  shift 4
  room 10 "serve-bench $tag $model" || return 0
  KPICK_LIB=$lib timeout 120 node --import tsx scripts/serve-bench.ts --model "$model" --c "$cs" --steps "${STEPS:-32}" \
    --runs 2 --identity-steps 0 --json "$@" > "$dir/serve-$tag-$model.jsonl" 2> "$dir/serve-$tag-$model.log"
  local rc=$?
  grep -E '^ +[0-9]+ ' "$dir/serve-$tag-$model.log" | sed "s/^/$tag $model: /" | tee -a "$dir/summary.txt"
  [ $rc -eq 0 ] || say "$tag $model: exit $rc: $(grep -iE 'error|fail' "$dir/serve-$tag-$model.log" | head -2)"
}

# the whole-step check: TAG LIB MODEL LAYERS C
check() {
  room 10 "check $1 $3 c=$5" || return 0
  KPICK_LIB=$2 timeout 120 node --import tsx scripts/serve-bench.ts --model "$3" --layers "$4" --c "$5" --steps 4 --runs 1 \
    --identity-steps 8 --check-step --json > "$dir/check-$1-$3-c$5.jsonl" 2> "$dir/check-$1-$3-c$5.log"
  local rc=$?
  grep -h "step check" "$dir/check-$1-$3-c$5.log" | sed "s/^/$1 $3 c=$5: /" | tee -a "$dir/summary.txt"
  [ $rc -eq 0 ] || say "$1 $3 c=$5 check: exit $rc: $(grep -iE 'error|fail' "$dir/check-$1-$3-c$5.log" | head -2)"
}

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader >> "$dir/summary.txt" 2>&1
. bench/gpu/node-env.sh # node and node_modules from .devcarry
# cuBLASLt's header: the toolkit's include folder, else wherever the image keeps it (as pipeline.sh)
. bench/gpu/nvcc-env.sh # sets nvcc_cmd
if [ -n "${BASE_DIR:-}" ]; then
  make -C "$BASE_DIR" -j8 GPU=cuda NVCC="$nvcc_cmd" > "$dir/build-base.log" 2>&1 &
  base_build=$!
fi
make -j8 GPU=cuda NVCC="$nvcc_cmd" > "$dir/build.log" 2>&1 || { say "build failed"; tail -20 "$dir/build.log"; }
say "built"

# variants: compiled in the background while the plain build is checked and timed
objs=$(ls build/cuda/*.o | grep -v '/decode\.o$')
IFS=';' read -ra vlist <<< "${VARIANTS:-}"
for v in "${vlist[@]}"; do
  name=${v%%:*} flags=${v#*:}
  mkdir -p "build/var-$name"
  # shellcheck disable=SC2086
  ($nvcc_cmd -O3 -std=c++17 -arch=sm_90 -Xcompiler -fPIC -DKPICK_GPU_CUDA -DKPICK_BACKEND_GPU -DKPICK_GPU_ARCHS='"sm_90"' $flags \
     -x cu -c hip-lib/src/gpu/decode.hip -o "build/var-$name/decode.o" &&
   $nvcc_cmd -shared -o "build/var-$name/libkpick-cuda.so" "build/var-$name/decode.o" $objs -cudart shared -lcublasLt) \
    > "$dir/build-var-$name.log" 2>&1 &
done

lib=$PWD/build/libkpick-cuda.so
if [ "${CHECKS:-1}" != 0 ]; then
  check this "$lib" Qwen3-0.6B 2 1
  check this "$lib" Qwen3-0.6B 2 5
  check this "$lib" Qwen3-0.6B 2 16
  check this "$lib" Llama-3.1-8B 1 5
fi

# the step's timeline: every graph kernel's start and end through CUPTI (kernel-trace.c, tracer.sh)
# trace TAG LIB: the trace of each of $TRACE_MODELS through LIB at $TRACE_C, as trace[-TAG]-<model>.txt
trace() {
  local tag=$1 tlib=$2 m f
  for m in ${TRACE_MODELS:-Llama-3.1-8B}; do
    [ -n "$tracer" ] || break
    room 20 "trace $tag $m" || continue
    f=trace-$m; [ "$tag" = this ] || f=trace-$tag-$m
    LD_LIBRARY_PATH="$trace_libs:${LD_LIBRARY_PATH:-}" CUDA_INJECTION64_PATH=$tracer KPTRACE_OUT=$dir/$f.txt KPICK_LIB=$tlib \
      timeout 120 node --import tsx scripts/serve-bench.ts --model "$m" --c "$TRACE_C" --steps 8 --runs 1 --identity-steps 0 --json \
      > "$dir/$f.jsonl" 2> "$dir/$f.log"
    say "trace $tag $m: exit $?, $(wc -l < "$dir/$f.txt" 2>/dev/null) kernels"
    grep -E '^ +[0-9]+ ' "$dir/$f.log" | sed "s/^/traced $tag $m: /" | tee -a "$dir/summary.txt"
  done
}
tracer=
if [ -n "${TRACE_C:-}" ]; then
  . bench/gpu/tracer.sh
  build_tracer "$dir"
  say "tracer: ${tracer:-none} ($(tail -1 "$dir/build-trace.log" 2>/dev/null))"
  trace this "$lib"
fi
base_lib=
if [ -n "${BASE_DIR:-}" ]; then
  wait "$base_build" && base_lib=$(cd "$BASE_DIR" && pwd)/build/libkpick-cuda.so || say "baseline build failed"
  say "baseline built"
fi
for m in ${MODELS-Llama-3.1-8B Qwen3-8B Qwen3-0.6B}; do
  [ -n "$base_lib" ] && bench base "$base_lib" "$m" "${CS:-1,4,16,64}"
  bench this "$lib" "$m" "${CS:-1,4,16,64}"
done
wait # the variants' builds
for v in "${vlist[@]}"; do
  name=${v%%:*}
  vlib=$PWD/build/var-$name/libkpick-cuda.so
  if [ ! -f "$vlib" ]; then say "variant $name: build failed: $(tail -3 "$dir/build-var-$name.log")"; continue; fi
  if [[ " ${BOUND_VARIANTS:-} " == *" $name "* ]]; then
    say "variant $name: a bound, its step's output wrong by design: no whole-step check"
  else
    check "var-$name" "$vlib" Qwen3-0.6B 2 1
  fi
  for m in ${VARIANT_MODELS:-Llama-3.1-8B Qwen3-0.6B}; do bench "var-$name" "$vlib" "$m" "${VARIANT_CS:-1,4,16}"; done
  [ "${TRACE_VARIANTS:-0}" = 1 ] && [ -n "${TRACE_C:-}" ] && trace "var-$name" "$vlib"
done

if [ -n "${PROFILE_C:-}" ]; then
  ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  for tag in base this; do
    [ "$tag" = base ] && plib=$base_lib || plib=$lib
    [ -n "$plib" ] || continue
    room 30 "profile $tag" || continue
    KPICK_LIB=$plib timeout "${PROFILE_LIMIT_S:-60}" "$ncu_bin" --clock-control none --target-processes all \
      --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size --csv \
      node --import tsx scripts/serve-bench.ts --model Llama-3.1-8B --layers 2 --c "$PROFILE_C" --steps 2 --runs 1 \
      --identity-steps 0 --json > "$dir/profile-$tag.csv" 2> "$dir/profile-$tag.log"
    say "profile $tag: exit $?"
  done
fi
# one kernel of this build's step under Nsight Compute, its sections in full: PROFILE_KERNEL (an ncu
# --kernel-name regex) at PROFILE_KERNEL_C (default 64) on PROFILE_KERNEL_MODEL (default Llama-3.1-8B, 2 layers),
# after PROFILE_KERNEL_SKIP launches of it (default 8: the tensor-core attention's launches in the op
# self-checks that serve-bench runs first on an H200, which would be profiled instead of the step's)
if [ -n "${PROFILE_KERNEL:-}" ] && room 60 "profile $PROFILE_KERNEL"; then
  ncu_bin=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  KPICK_LIB=$lib timeout 120 "$ncu_bin" --clock-control none --kernel-name "regex:$PROFILE_KERNEL" \
    --launch-skip "${PROFILE_KERNEL_SKIP:-8}" --launch-count 2 --section SpeedOfLight --section Occupancy \
    --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats --csv \
    node --import tsx scripts/serve-bench.ts --model "${PROFILE_KERNEL_MODEL:-Llama-3.1-8B}" --layers 2 \
    --c "${PROFILE_KERNEL_C:-64}" --steps 2 --runs 1 --identity-steps 0 --json > "$dir/profile-kernel.csv" 2> "$dir/profile-kernel.log"
  say "profile $PROFILE_KERNEL: exit $?, $(grep -c '"Duration"' "$dir/profile-kernel.csv") launches"
fi
say "done"
tar cJf "${OUT:-build}/step-variants.tar.xz" "$dir"
