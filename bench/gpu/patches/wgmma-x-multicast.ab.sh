#!/usr/bin/env bash
# wgmma-x-multicast.ab.sh, one device call: A/B of main against main + wgmma-x-multicast.patch over the dense wgmma rows
# (Llama-3.1-8B sweep, rows 1-128, with blaslt as the common reference), then the patched tree's
# parity of every wgmma row and whole-step checks with a wgmma row forced (timeouts: a wrong
# barrier protocol hangs)
set -uo pipefail
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv | tee $OUT/gpu.txt
AB_RUNS=2 timeout 330 bash bench/gpu/ab-patch.sh bench/gpu/patches/wgmma-x-multicast.patch bash -c \
  'timeout 90 node --import tsx scripts/sweep.ts --model Llama-3.1-8B --rows 1,8,16,32,64,128 --candidates "wgmma.*,gated.wgmma.*,blaslt,gated.blaslt" --store "$(mktemp -d)" --json' 2>&1 | tail -60 > $OUT/ab-console.txt
echo "ab rc ${PIPESTATUS[0]}"; tail -12 $OUT/ab-console.txt
echo "[$(( $(date +%s) - t0 ))s] ab done"
cd /tmp/ab-patch || exit 1
export KPICK_BACKEND=cuda
timeout 100 node --import tsx scripts/parity.ts --model Llama-3.1-8B --rows 1,16,64,128 --candidates 'wgmma.*,gated.wgmma.*' > $OUT/parity.out 2> $OUT/parity.log
echo "parity rc $?"; tail -3 $OUT/parity.log
for cand in wgmma.m64.t4.s1 gated.wgmma.m64.t4.s1; do
  KPICK_FORCE=$cand timeout 60 node --import tsx scripts/serve-bench.ts --model Llama-3.1-8B --layers 2 --c 64 --steps 2 --runs 1 --identity-steps 2 --check-step --json > $OUT/check-$cand.out 2> $OUT/check-$cand.log
  echo "check $cand rc $?"; grep -h "step check" $OUT/check-$cand.log | tail -2
done
echo "[$(( $(date +%s) - t0 ))s] done"
