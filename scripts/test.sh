#!/usr/bin/env bash
# Builds and runs every test: a Release build with warnings as errors (unit, CLI, server end-to-end, a short soak),
# an ASan+UBSan build of the tests, a ThreadSanitizer build of the server's tests, and each fuzz target for 60 s.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
# The Vulkan op tests must run, not skip: lavapipe (mesa-vulkan-drivers, scripts/install-deps.sh) is the device.
export DLLM_REQUIRE_VULKAN=1

echo "== Release build (warnings are errors)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDLLM_WERROR=ON
cmake --build build -j "$JOBS"
ctest --test-dir build --output-on-failure -j "$JOBS"

echo "== Server end-to-end tests (openai npm client, curl, headless Chromium)"
tests/server/run.sh build/dllm

echo "== Soak, short form (tests/soak: 8 clients, 30 s, disconnects and cancels; the 30-minute run is by hand)"
node tests/soak/soak.mjs --bin build/dllm --clients 8 --minutes 0.5 --out build/soak-short.json >/dev/null

echo "== ASan + UBSan build"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLLM_SANITIZE=ON
cmake --build build-asan -j "$JOBS"
# The family goldens rerun on Vulkan (label vulkan_goldens) are left to the Release build: their work is in
# Mesa's uninstrumented lavapipe, the backend's host code is covered by the Vulkan op tests here, and under
# ASan they took CI past its limit.
ASAN_OPTIONS=detect_leaks=0 ctest --test-dir build-asan --output-on-failure -j "$JOBS" -LE vulkan_goldens

echo "== ThreadSanitizer: the server's unit tests and end-to-end tests against a TSan dllm"
# One OpenMP thread: libgomp is not instrumented (its barriers would be reported); the server's own threads
# (HTTP pool, schedulers, lifecycle) are what this checks. halt_on_error: a report kills the server, which the
# end-to-end run reports as a failure. tests/tsan.supp drops reports from inside Debian's uninstrumented
# libcpp-httplib (why: in that file).
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLLM_TSAN=ON
cmake --build build-tsan -j "$JOBS" --target dllm_cli dllm_server_tests
export OMP_NUM_THREADS=1 TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp"
build-tsan/tests/dllm_server_tests
DLLM_TEST_OUT="$PWD/build-tsan/server-out" tests/server/run.sh build-tsan/dllm
unset OMP_NUM_THREADS TSAN_OPTIONS

echo "== Fuzzing: each parser's libFuzzer target for 60 s (scripts/fuzz.sh; clang, ASan + UBSan)"
scripts/fuzz.sh 60
echo "== all tests passed"
