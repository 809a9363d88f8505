#!/usr/bin/env bash
# Packs what bench/gpu/run.sh needs on a lent GPU machine (the `device` tool: a bare machine, no apt, no
# network) into build/gpu-bundle.tar.xz, under the 64 MiB the tool carries: dllm, the Vulkan op tests and every
# shared library they load from this machine (oneDNN, OpenBLAS, the Vulkan loader, ...) except the C library
# itself; xz because oneDNN and OpenBLAS alone are 75 MB uncompressed. The GPU's own Vulkan driver (its ICD) is
# the lent machine's.
#
#   bench/gpu/bundle.sh [BUILD_DIR=build]      then carry build/gpu-bundle.tar.xz (run's `carry`)
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/gpu-bundle/bin" "$stage/gpu-bundle/lib"
cp "$build/dllm" "$build/tests/dllm_vulkan_tests" "$stage/gpu-bundle/bin/"
for bin in "$build/dllm" "$build/tests/dllm_vulkan_tests"; do
  ldd "$bin" | awk '/=> \//{print $3}' | while read -r lib; do
    case $(basename "$lib") in libc.so.*|libm.so.*|ld-linux*|libpthread.so.*|libdl.so.*|librt.so.*) continue ;; esac
    cp -L "$lib" "$stage/gpu-bundle/lib/"
  done
done
tar -C "$stage" -cJf "$build/gpu-bundle.tar.xz" gpu-bundle
size=$(stat -c %s "$build/gpu-bundle.tar.xz")
echo "bundle: $build/gpu-bundle.tar.xz, $((size / 1048576)) MiB ($(ls "$stage/gpu-bundle/lib" | wc -l) libraries)"
[ "$size" -lt $((64 * 1048576)) ] || { echo "bundle: over the 64 MiB the device tool carries" >&2; exit 1; }
cd "$root"
