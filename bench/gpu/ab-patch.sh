#!/usr/bin/env bash
# ab-patch.sh: a patch A/B in one device call, for code that changes the space and so
# cannot land without a re-sweep: this tree ("main") and a copy with PATCH applied
# ("patch") are built side by side, then COMMAND runs in each tree in turns, main
# first, AB_RUNS times (default 2), so both sides see the same machine and warmth.
#   bash bench/gpu/ab-patch.sh PATCH COMMAND...
#   bash bench/gpu/ab-patch.sh bench/gpu/patches/NAME.patch \
#     node --import tsx bench/moe-routings.ts --rows 16,32,64,128 --candidates 'moe.wgmma.*'
# Each run's stdout and stderr go to <side>-<run>.out / .log, the builds' to
# build-<side>.log; all of them packed as $OUT/ab.tar.xz (the device returns few
# files), each run's exit status and last lines of stderr printed. AB_GPU picks the
# backend (default cuda; empty: the CPU build, for a check on a CPU machine).
# Exit: 2 usage, 1 when the patch does not apply or a build fails.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: ab-patch.sh PATCH COMMAND..." >&2; exit 2; }
[ -f "$1" ] || { echo "ab-patch: no patch at $1" >&2; exit 2; }
patch_arg=$1; patch_file=$(realpath "$1"); shift
out=$(realpath -m "${OUT:-build/ab}"); mkdir -p "$out/ab"
gpu=${AB_GPU-cuda}
runs=${AB_RUNS:-2}
root=$PWD
if [ -n "$gpu" ]; then
  . bench/gpu/node-env.sh # node and node_modules from .devcarry
  . bench/gpu/nvcc-env.sh # sets nvcc_cmd
  export KPICK_BACKEND=$gpu
fi
make_args=(GPU="$gpu"); [ -n "$gpu" ] && make_args+=(NVCC="$nvcc_cmd")

# the patched copy: the tree less what is built or carried (node_modules shared by a link)
side=${AB_DIR:-/tmp/ab-patch}
rm -rf "$side" && mkdir -p "$side"
tar cf - --exclude=./build --exclude=./.devcarry --exclude=./node_modules --exclude=./bench/results --exclude=./stores . |
  tar xf - -C "$side"
ln -s "$root/node_modules" "$side/node_modules"
(cd "$side" && patch -p1 --batch < "$patch_file") > "$out/ab/patch.log" 2>&1 ||
  { echo "ab-patch: $patch_arg does not apply (patch.log):" >&2; tail -5 "$out/ab/patch.log" >&2; exit 1; }

(cd "$side" && make -j8 "${make_args[@]}" > "$out/ab/build-patch.log" 2>&1) & patched=$!
make -j8 "${make_args[@]}" > "$out/ab/build-main.log" 2>&1; main_rc=$?
wait $patched; patch_rc=$?
echo "ab-patch: builds: main $main_rc, patch $patch_rc"
[ $main_rc -eq 0 ] && [ $patch_rc -eq 0 ] || { tar cJf "$out/ab.tar.xz" -C "$out" ab; exit 1; }

for r in $(seq 1 "$runs"); do
  for s in main patch; do
    dir=$root; [ $s = patch ] && dir=$side
    (cd "$dir" && "$@" > "$out/ab/$s-$r.out" 2> "$out/ab/$s-$r.log")
    echo "ab-patch: $s run $r: exit $?"
    tail -${AB_TAIL:-12} "$out/ab/$s-$r.log"
  done
done
tar cJf "$out/ab.tar.xz" -C "$out" ab && rm -rf "$out/ab"
