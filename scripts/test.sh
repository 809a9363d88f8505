#!/usr/bin/env bash
# Builds and runs every test: a Release build with warnings as errors, then an ASan+UBSan build of the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}

echo "== Release build (warnings are errors)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDLLM_WERROR=ON
cmake --build build -j "$JOBS"
ctest --test-dir build --output-on-failure -j "$JOBS"

echo "== Server end-to-end tests (openai npm client, curl, headless Chromium)"
tests/server/run.sh build/dllm

echo "== ASan + UBSan build"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLLM_SANITIZE=ON
cmake --build build-asan -j "$JOBS"
ASAN_OPTIONS=detect_leaks=0 ctest --test-dir build-asan --output-on-failure -j "$JOBS"
echo "== all tests passed"
