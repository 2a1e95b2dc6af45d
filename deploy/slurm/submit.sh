#!/usr/bin/env bash
# submit.sh: a sharded kpick sweep on Slurm: an array of N sweep tasks (one
# GPU each), then one promote job that runs only when every task succeeded.
# Run from the repo root (on a shared filesystem):
#   deploy/slurm/submit.sh 4 /shared/stores/h200 /shared/tables --model Qwen3-8B --rows 1,2,4,8,16
#   arguments: shards, store folder, tables folder, then sweep.ts options
# Extra sbatch options (partition, account) go in $SBATCH_ARGS.
set -euo pipefail
if [ "$#" -lt 3 ]; then
  echo "usage: deploy/slurm/submit.sh SHARDS STORE TABLES_DIR [sweep.ts options]" >&2
  exit 2
fi
shards=$1 store=$2 tables=$3; shift 3
case $shards in ''|*[!0-9]*) echo "submit: SHARDS must be a positive integer, got '$shards'" >&2; exit 2 ;; esac
[ "$shards" -ge 1 ] || { echo "submit: SHARDS must be at least 1" >&2; exit 2; }
mkdir -p logs
# shellcheck disable=SC2086 # SBATCH_ARGS is a list of options
array=$(sbatch --parsable ${SBATCH_ARGS:-} --array=0-$((shards - 1)) deploy/slurm/sweep.sbatch "$@" --store "$store")
array=${array%%;*}
# shellcheck disable=SC2086
promote=$(sbatch --parsable ${SBATCH_ARGS:-} --dependency=afterok:"$array" deploy/slurm/promote.sbatch --store "$store" --tables-dir "$tables")
echo "submit: sweep array job $array ($shards shards), promote job ${promote%%;*} after it" >&2
