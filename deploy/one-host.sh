#!/usr/bin/env bash
# one-host.sh: a sharded sweep over every visible GPU of this host: one sweep
# process per GPU, shard g of n on GPU g, each seeing only its own GPU; waits
# for all of them.
#   deploy/one-host.sh --model Qwen3-8B --rows 1,2,4,8,16 --store stores/h200 [more sweep.ts options]
#   then: npx tsx scripts/promote.ts --store stores/h200
# GPUs: $KPICK_GPUS (comma-separated device ids; a subset, or a test's fake
# list), else $CUDA_VISIBLE_DEVICES or $HIP_VISIBLE_DEVICES when set, else
# every GPU nvidia-smi (or rocm-smi) lists. A GPU named twice runs two shards.
# The variable set per process: $KPICK_GPU_VAR, default CUDA_VISIBLE_DEVICES
# (HIP_VISIBLE_DEVICES under KPICK_BACKEND=hip or when only rocm-smi is found).
# Logs: $KPICK_LOG_DIR/shard-<g>of<n>.log (default logs/).
# Exit 0 when every shard exits 0; 1 naming each shard that failed, with its
# GPU and exit code; 2 when no GPU is found.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# the sweep command; $KPICK_SWEEP (split on spaces) replaces it, for tests
if [ -n "${KPICK_SWEEP:-}" ]; then read -r -a sweep <<< "$KPICK_SWEEP"
else sweep=("$here/node_modules/.bin/tsx" "$here/scripts/sweep.ts")
fi
logs=${KPICK_LOG_DIR:-logs}

var=${KPICK_GPU_VAR:-}
if [ -n "${KPICK_GPUS:-}" ]; then gpus=$KPICK_GPUS
elif [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then gpus=$CUDA_VISIBLE_DEVICES
elif [ -n "${HIP_VISIBLE_DEVICES:-}" ]; then gpus=$HIP_VISIBLE_DEVICES; var=${var:-HIP_VISIBLE_DEVICES}
elif command -v nvidia-smi >/dev/null 2>&1; then gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | paste -sd, -)
elif command -v rocm-smi >/dev/null 2>&1; then gpus=$(rocm-smi --showid | sed -n 's/^GPU\[\([0-9]*\)\].*/\1/p' | sort -un | paste -sd, -); var=${var:-HIP_VISIBLE_DEVICES}
else gpus=''
fi
[ "${KPICK_BACKEND:-}" = hip ] && var=${var:-HIP_VISIBLE_DEVICES}
var=${var:-CUDA_VISIBLE_DEVICES}
IFS=, read -r -a list <<< "$gpus"
n=${#list[@]}
if [ "$n" -eq 0 ]; then
  echo "one-host: no GPU found (set KPICK_GPUS=0,1,... or CUDA_VISIBLE_DEVICES)" >&2
  exit 2
fi
mkdir -p "$logs"

pids=()
# stopped (Ctrl-C, a scheduler's time limit): stop the shards too
trap 'kill "${pids[@]}" 2>/dev/null; exit 130' INT TERM
for g in "${!list[@]}"; do
  env "$var=${list[$g]}" "${sweep[@]}" "$@" --shard "$g/$n" > "$logs/shard-${g}of$n.log" 2>&1 &
  pids+=($!)
  echo "one-host: shard $g/$n on $var=${list[$g]} (pid $!, log $logs/shard-${g}of$n.log)" >&2
done
failed=()
for g in "${!pids[@]}"; do
  wait "${pids[$g]}"; rc=$?
  [ "$rc" -ne 0 ] && failed+=("shard $g/$n ($var=${list[$g]}) exited $rc, see $logs/shard-${g}of$n.log")
done
if [ "${#failed[@]}" -gt 0 ]; then
  printf 'one-host: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "one-host: all $n shards done" >&2
