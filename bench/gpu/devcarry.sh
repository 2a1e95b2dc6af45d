#!/usr/bin/env bash
# devcarry.sh: pack what the GPU machine lacks into .devcarry/ (git-ignored through
# .git/info/exclude), for the device calls of pipeline.sh, step-variants.sh and the others:
#   .devcarry/node.xz      this machine's node binary (the GPU machine has no Node)
#   .devcarry/nm.tar.xz    node_modules without what only the CPU machines use (typescript,
#                          @types: the type check), unpacked there when node_modules is absent
# Run from the repo root after npm install; carry [".devcarry"] on the call. Prints the sizes:
# the working tree, carried paths included, travels only up to 64 MiB.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
grep -qx '/.devcarry/' .git/info/exclude 2>/dev/null || echo '/.devcarry/' >> .git/info/exclude
[ -d node_modules ] || { echo "devcarry: no node_modules: run npm install first" >&2; exit 2; }
mkdir -p .devcarry
if [ ! -s .devcarry/node.xz ]; then
  xz -T0 -6 -c "$(command -v node)" > .devcarry/node.xz.tmp && mv .devcarry/node.xz.tmp .devcarry/node.xz
fi
tar cf - --exclude=node_modules/typescript --exclude=node_modules/@types node_modules | xz -T0 -6 > .devcarry/nm.tar.xz.tmp
mv .devcarry/nm.tar.xz.tmp .devcarry/nm.tar.xz
du -h .devcarry/node.xz .devcarry/nm.tar.xz
tree() { git ls-files -co --exclude-standard -z "$@" | du -ch --files0-from=- 2>/dev/null | tail -1 | cut -f1; }
echo "tracked and untracked-not-ignored files: $(tree); without bench/results (move it aside for a call): $(tree -- . ':!bench/results')"
