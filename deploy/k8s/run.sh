#!/usr/bin/env bash
# run.sh: the sharded sweep on Kubernetes: apply the Indexed Job, wait until
# every index completed, then run the promote Job on the same shared volume.
#   deploy/k8s/run.sh [timeout, default 2h]
# Exit 1 (naming the Job) when the sweep or the promote does not complete.
set -euo pipefail
here=$(dirname "$0")
timeout=${1:-2h}
kubectl apply -f "$here/sweep.yaml"
if ! kubectl wait --for=condition=complete job/kpick-sweep --timeout="$timeout"; then
  echo "run: job/kpick-sweep did not complete; kubectl describe job/kpick-sweep names the failed indexes" >&2
  exit 1
fi
kubectl apply -f "$here/promote.yaml"
if ! kubectl wait --for=condition=complete job/kpick-promote --timeout=15m; then
  echo "run: job/kpick-promote did not complete; see kubectl logs job/kpick-promote" >&2
  exit 1
fi
kubectl logs job/kpick-promote
