#!/usr/bin/env bash
# carry-stores.sh: the stores of earlier device calls, for the next call to carry.
# A device machine given back between two calls (it goes after 30 s idle) takes
# its stores/ with it, and the next call starts bare: a re-sweep split over calls
# then loses the sweep it made first (session 18, call 2). Run on this machine
# with the pipeline.tar.xz of each earlier call, oldest first; their stores/ are
# merged into ./stores (stores are append-only: a later call's copy of a file
# holds all of an earlier one's), then pass carry ["stores", ".devcarry"].
#   bash bench/gpu/carry-stores.sh /work/.device/1/pipeline.tar.xz /work/.device/2/pipeline.tar.xz
set -euo pipefail
[ $# -ge 1 ] || { echo "carry-stores: give the pipeline.tar.xz of each earlier call, oldest first" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p stores
for pack in "$@"; do
  [ -f "$pack" ] || { echo "carry-stores: $pack is not a file" >&2; exit 2; }
  rm -rf "$tmp/x" && mkdir -p "$tmp/x"
  tar xJf "$pack" -C "$tmp/x" stores 2>/dev/null || { echo "carry-stores: $pack holds no stores/" >&2; exit 1; }
  # file by file, so a record file only an earlier call wrote stays
  (cd "$tmp/x" && find stores -type f -name '*.jsonl' -print0) | while IFS= read -r -d '' f; do
    mkdir -p "$(dirname "$f")"
    if [ -f "$f" ] && [ "$(wc -c < "$f")" -gt "$(wc -c < "$tmp/x/$f")" ]; then
      echo "carry-stores: $f is longer here than in $pack: kept" >&2
    else
      cp "$tmp/x/$f" "$f.tmp" && mv "$f.tmp" "$f"
    fi
  done
done
echo "carry-stores: $(find stores -name '*.jsonl' | wc -l) record files in ./stores ($(du -sh stores | cut -f1))" >&2
