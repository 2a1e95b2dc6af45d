#!/usr/bin/env bash
# wgmma-dev.sh: one device call for wgmma-family work, from the repo root with
# .devcarry carried: the CUDA build, A/B builds of wgmma.hip with its dev
# knobs (each linked with this build's other objects), the selftest's parity
# (every candidate on odd shapes, rows 1..128, bf16 and fp16), whole-step fp64
# checks with every linear or gated call forced onto one candidate, Nsight
# Compute over a plan (profile-wgmma.sh), then sweeps (in-step timing, parity
# before timing) into stores/dev, or stores/var-NAME for a variant's. Logs and
# stores come back in $OUT/dev.tar.xz; the summary in $OUT/summary.txt.
#   VARIANTS="name:-DKP_WG_X=v ...;name2:..."   wgmma.hip built with these overrides
#   VARIANT_SRC=cmma          the kernel file the variants rebuild (default wgmma)
#   CHECKS="lib:candidate:model:layers:c[:dtype];..."   serve-bench --check-step with
#                             KPICK_FORCE=candidate; lib is "this" or a variant name;
#                             dtype the weights' (default bf16; fp8 for the W8A8 rows)
#   PLAN=plan-file            Nsight Compute plan (lines as in profile-wgmma.sh)
#   SWEEPS="args;@name args;..."  sweeps in this order; "@name " first: variant name's library
#   TRACE_SWEEPS="args;@name args;..."  the same, after them, each under the CUPTI kernel
#                             tracer (tracer.sh): logs/trace-sweep-N.txt has every graph kernel
#   BENCHES="script args;@name script args;..."  after the sweeps, tsx scripts (bench/moe-routings.ts,
#                             scripts/parity.ts, ...) with this build's library or variant name's;
#                             stdout to logs/bench-N.jsonl, stderr to logs/bench-N.log
#   BUDGET_S                  seconds the steps may take (default 250): a step that
#                             would pass it is skipped, and the logs are packed
# All optional.
set -uo pipefail
out=${OUT:-build/gpu-dev}
# logs/ is this call's alone: a device may keep an earlier call's, which would be packed as this one's
rm -rf logs
mkdir -p "$out" build logs
t0=$(date +%s)
log() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$out/summary.txt"; }
room() { [ $(( $(date +%s) - t0 + $1 )) -le "${BUDGET_S:-250}" ] || { log "skipped past the budget: $2"; return 1; }; }
left() { echo $(( ${BUDGET_S:-250} - ($(date +%s) - t0) )); } # seconds of the budget left: a step's timeout

. bench/gpu/node-env.sh # node and node_modules from .devcarry
. bench/gpu/nvcc-env.sh # sets nvcc_cmd
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader >> "$out/summary.txt" 2>&1

# the variants' object of VARIANT_SRC, compiled beside the plain build
vsrc=${VARIANT_SRC:-wgmma}
IFS=';' read -ra vlist <<< "${VARIANTS:-}"
vpids=()
for v in "${vlist[@]}"; do
  name=${v%%:*} flags=${v#*:}
  mkdir -p "build/var-$name"
  # shellcheck disable=SC2086
  $nvcc_cmd -O3 -std=c++17 -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a -DKPICK_WGMMA_BUILT -DKPICK_GPU_CUDA \
    -DKPICK_BACKEND_GPU -DKPICK_GPU_ARCHS='"sm_90"' $flags -x cu -c "hip-lib/src/gpu/$vsrc.hip" -o "build/var-$name/$vsrc.o" \
    > "logs/build-var-$name.log" 2>&1 &
  vpids+=($!)
done
make -j"$(nproc)" GPU=cuda NVCC="$nvcc_cmd" > logs/build.log 2>&1 || { log "build failed"; tail -30 logs/build.log; }
log "built"
for p in "${vpids[@]}"; do wait "$p"; done
objs=$(ls build/cuda/*.o | grep -v "/$vsrc\\.o\$")
for v in "${vlist[@]}"; do
  name=${v%%:*}
  # shellcheck disable=SC2086
  $nvcc_cmd -shared -o "build/var-$name/libkpick-cuda.so" "build/var-$name/$vsrc.o" $objs -cudart shared -lcublasLt \
    >> "logs/build-var-$name.log" 2>&1 || log "variant $name: build failed: $(tail -3 "logs/build-var-$name.log")"
done
log "variants linked: ${#vlist[@]}"

gcc -O2 -std=gnu11 -Wall -o build/selftest bench/gpu/selftest.c -Lbuild -lkpick-cuda -Wl,-rpath,"$PWD/build" -lm
timeout "$(left)" build/selftest parity > logs/parity.log 2>&1
log "selftest parity: exit $? ($(grep -c ' PASS$' logs/parity.log) PASS, $(grep -c ' FAIL$' logs/parity.log) FAIL)"
grep -E "FAIL|AVAIL|SUMMARY" logs/parity.log | head -20 >> "$out/summary.txt"

export KPICK_BACKEND=cuda NO_COLOR=1
IFS=';' read -ra checks <<< "${CHECKS:-}"
for c in "${checks[@]}"; do
  IFS=':' read -r which cand model layers conc dtype <<< "$c"
  clib=$PWD/build/libkpick-cuda.so
  [ "$which" = this ] || clib=$PWD/build/var-$which/libkpick-cuda.so
  tag="$which-$cand-$model-c$conc${dtype:+-$dtype}"
  room 8 "check $tag" || continue
  KPICK_LIB=$clib KPICK_FORCE=$cand timeout "$(left)" node --import tsx scripts/serve-bench.ts --model "$model" --layers "$layers" \
    --dtype "${dtype:-bf16}" --c "$conc" --steps 4 --runs 1 --identity-steps 8 --check-step --json > "logs/check-$tag.jsonl" 2> "logs/check-$tag.log"
  rc=$?
  log "check $tag: exit $rc; $(grep -h 'step check' "logs/check-$tag.log" | tr '\n' ' ' | cut -c1-400)"
done

if [ -n "${PLAN:-}" ]; then
  OUT=$PWD/logs PROFILE_LIMIT_S=40 bash bench/gpu/profile-wgmma.sh "$PLAN" > logs/profile.log 2>&1
  log "profile: $(tail -1 logs/profile.log)"
fi

# sweep TAG LIB STORE ARGS... (under the tracer when $trace_to names a file)
sweep() {
  local tag=$1 lib=$2 store=$3
  shift 3
  room 12 "sweep $tag" || return 0
  local s=$(date +%s) trace=()
  [ -z "${trace_to:-}" ] || trace=(LD_LIBRARY_PATH="$trace_libs:${LD_LIBRARY_PATH:-}" CUDA_INJECTION64_PATH="$tracer" KPTRACE_OUT="$trace_to")
  env "${trace[@]}" KPICK_LIB="$lib" timeout "$(left)" node --import tsx scripts/sweep.ts "$@" --store "$store" \
    > "logs/sweep-$tag.jsonl" 2> "logs/sweep-$tag.log"
  log "sweep $tag ($*): exit $? in $(( $(date +%s) - s )) s; $(grep -o '[0-9]* failed parity' "logs/sweep-$tag.log" | tail -1)"
}
# run_sweeps PREFIX "args;@name args;..."
run_sweeps() {
  local prefix=$1 n=0 args name
  IFS=';' read -ra sweeps <<< "$2"
  for args in "${sweeps[@]}"; do
    n=$((n + 1))
    [ -z "$prefix" ] || trace_to=$PWD/logs/$prefix-$n.txt
    if [[ $args == @* ]]; then
      name=${args%% *} name=${name#@} args=${args#* }
      [ -f "build/var-$name/libkpick-cuda.so" ] || { log "sweep $n: no library for variant $name"; continue; }
      # shellcheck disable=SC2086
      sweep "$prefix$n-var-$name" "$PWD/build/var-$name/libkpick-cuda.so" "stores/${prefix:+$prefix-}var-$name" $args
    else
      # shellcheck disable=SC2086
      sweep "$prefix$n" "$PWD/build/libkpick-cuda.so" "stores/${prefix:-dev}" $args
    fi
  done
  trace_to=
}
run_sweeps "" "${SWEEPS:-}"
if [ -n "${TRACE_SWEEPS:-}" ]; then
  . bench/gpu/tracer.sh
  build_tracer logs
  log "tracer: ${tracer:-none} ($(tail -1 logs/build-trace.log))"
  [ -z "$tracer" ] || run_sweeps trace-sweep "$TRACE_SWEEPS"
fi

IFS=';' read -ra benches <<< "${BENCHES:-}"
n=0
for b in "${benches[@]}"; do
  n=$((n + 1)) blib=$PWD/build/libkpick-cuda.so
  if [[ $b == @* ]]; then
    name=${b%% *} name=${name#@} b=${b#* } blib=$PWD/build/var-$name/libkpick-cuda.so
  fi
  room 10 "bench $n" || continue
  s=$(date +%s)
  # shellcheck disable=SC2086
  KPICK_LIB=$blib timeout "$(left)" node --import tsx $b > "logs/bench-$n.jsonl" 2> "logs/bench-$n.log"
  log "bench $n ($b, $(basename "$(dirname "$blib")")): exit $? in $(( $(date +%s) - s )) s"
done

tar cJf "$out/dev.tar.xz" stores logs 2>/dev/null
log "packed $(du -h "$out/dev.tar.xz" | cut -f1)"
