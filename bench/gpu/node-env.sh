# node-env.sh: sourced by the GPU machine's scripts (pipeline.sh, step-variants.sh,
# wgmma-dev.sh, ab-patch.sh), from the repo root. That machine has no Node: unpack
# the binary and node_modules that bench/gpu/devcarry.sh packed into .devcarry/.
xz -dc .devcarry/node.xz > /usr/local/bin/node && chmod +x /usr/local/bin/node
[ -d node_modules ] || tar xJf .devcarry/nm.tar.xz
