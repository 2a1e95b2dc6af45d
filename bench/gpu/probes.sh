#!/usr/bin/env bash
# probes.sh: build the standalone CUDA probes of bench/gpu in parallel, then run each in turn on
# the GPU machine, one log each. Run from the repo root (no Node needed).
#   PROBES="tile-read tile-split norm-fold moe-prefetch"   which (bench/gpu/<name>-probe.cu), in run order
#   PROBE_LIMIT_S=180   seconds one probe may run
# Logs: logs/probes/<name>.log (run) and <name>.build.log (nvcc -Xptxas -v), packed as
# $OUT/probes.tar.xz when OUT is set; a summary line per probe on stdout. Exit 1 when a probe failed to build or run.
set -uo pipefail
dir=logs/probes
mkdir -p "$dir" build
probes=${PROBES:-tile-read tile-split norm-fold moe-prefetch}
for p in $probes; do
  [ -f "bench/gpu/$p-probe.cu" ] || { echo "probes: no bench/gpu/$p-probe.cu" >&2; exit 2; }
done
for p in $probes; do
  rm -f "build/$p"
  { nvcc -O3 -std=c++17 -arch=sm_90 -DKPICK_GPU_CUDA -DKPICK_BACKEND_GPU -Xptxas -v -o "build/$p" "bench/gpu/$p-probe.cu" \
      > "$dir/$p.build.log" 2>&1; echo $? > "$dir/$p.build.rc"; } &
done
wait
rc=0
for p in $probes; do
  if [ "$(cat "$dir/$p.build.rc")" != 0 ]; then
    echo "$p: build failed ($dir/$p.build.log)"
    rc=1
    continue
  fi
  t0=$(date +%s)
  timeout "${PROBE_LIMIT_S:-180}" "build/$p" > "$dir/$p.log" 2>&1
  prc=$?
  echo "$p: exit $prc in $(($(date +%s) - t0)) s; $(tail -1 "$dir/$p.log")"
  [ $prc -eq 0 ] || rc=1
done
[ -n "${OUT:-}" ] && tar cJf "$OUT/probes.tar.xz" -C logs probes
exit $rc
