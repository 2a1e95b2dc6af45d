#!/usr/bin/env bash
# wgmma-dev.sh: one device call for wgmma-family work, from the repo root with
# .devcarry carried: the CUDA build, the selftest's parity (every candidate on
# odd shapes, rows 1..128, bf16 and fp16), Nsight Compute over a plan
# (profile-wgmma.sh), then sweeps (every candidate, in-step timing, parity
# before timing) into stores/dev. Logs and stores come back in $OUT/dev.tar.xz.
#   PLAN=plan-file SWEEPS="sweep args;sweep args" bash bench/gpu/wgmma-dev.sh   (both optional; plan lines as in profile-wgmma.sh)
set -uo pipefail
out=${OUT:-build/gpu-dev}
mkdir -p "$out" build logs
t0=$(date +%s)
log() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$out/summary.txt"; }

xz -dc .devcarry/node.xz > /usr/local/bin/node && chmod +x /usr/local/bin/node
[ -d node_modules ] || tar xJf .devcarry/nm.tar.xz
. bench/gpu/nvcc-env.sh # sets nvcc_cmd
make -j"$(nproc)" GPU=cuda NVCC="$nvcc_cmd" > logs/build.log 2>&1 || { log "build failed"; tail -30 logs/build.log; }
log "built"
gcc -O2 -std=gnu11 -Wall -o build/selftest bench/gpu/selftest.c -Lbuild -lkpick-cuda -Wl,-rpath,"$PWD/build" -lm
timeout 90 build/selftest parity > logs/parity.log 2>&1
log "selftest parity: exit $? ($(grep -c ' PASS$' logs/parity.log) PASS, $(grep -c ' FAIL$' logs/parity.log) FAIL)"
grep -E "FAIL|AVAIL|SUMMARY" logs/parity.log | head -20 >> "$out/summary.txt"

if [ -n "${PLAN:-}" ]; then
  OUT=$PWD/logs PROFILE_LIMIT_S=40 bash bench/gpu/profile-wgmma.sh "$PLAN" > logs/profile.log 2>&1
  log "profile: $(tail -1 logs/profile.log)"
fi

export KPICK_BACKEND=cuda NO_COLOR=1
IFS=';' read -ra sweeps <<< "${SWEEPS:-}"
n=0
for args in "${sweeps[@]}"; do
  n=$((n + 1)); s=$(date +%s)
  timeout 150 node --import tsx scripts/sweep.ts $args --store stores/dev > "logs/sweep-$n.jsonl" 2> "logs/sweep-$n.log"
  log "sweep $n ($args): exit $? in $(( $(date +%s) - s )) s"
done
tar cJf "$out/dev.tar.xz" stores logs 2>/dev/null
log "packed $(du -h "$out/dev.tar.xz" | cut -f1)"
