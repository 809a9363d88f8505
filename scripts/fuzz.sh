#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan: -DDLLM_FUZZ=ON in build-fuzz/) and runs each for SECONDS
# (default 60), JOBS (default: the core count) at a time, starting from its seed corpus in tests/fuzz/corpus/<target>/. A crash, sanitizer report, leak or
# hang (-timeout, per input) fails the run; its input is left in build-fuzz/crashes/<target>/ (copy it into
# tests/fuzz/regressions/<target>/ once fixed: dllm_fuzz_tests replays those in every build). New corpus
# entries stay in build-fuzz/corpus/<target>/. The summary (executions, coverage, corpus) goes to
# build-fuzz/fuzz-summary.txt. FUZZ_SEED (default 1) seeds libFuzzer's mutations, so a run is repeatable up to
# how many inputs fit in the time; set another to explore differently.
#
#   scripts/fuzz.sh [SECONDS] [TARGET ...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=(safetensors gguf config tokenizer chat_template request); fi
JOBS=${JOBS:-$(nproc)}

CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLLM_FUZZ=ON \
  -DDLLM_BUILD_TESTS=OFF >/dev/null
cmake --build build-fuzz -j "$JOBS" --target "${targets[@]/#/dllm_fuzz_}"

summary=build-fuzz/fuzz-summary.txt
: >"$summary"

# One target: its log in build-fuzz/fuzz-TARGET.log, libFuzzer's exit status (non-zero: a finding) in
# build-fuzz/fuzz-TARGET.status.
fuzz_one() {
  local t=$1 corpus=build-fuzz/corpus/$1 crashes=build-fuzz/crashes/$1
  rm -rf "$crashes"  # this run's findings only
  mkdir -p "$corpus" "$crashes"
  # -rss_limit_mb: a parser asked for gigabytes by a length field must refuse, not allocate them.
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
    "build-fuzz/fuzz/dllm_fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -seed="${FUZZ_SEED:-1}" \
    -print_final_stats=1 -artifact_prefix="$crashes/" "$corpus" "tests/fuzz/corpus/$t" >"build-fuzz/fuzz-$t.log" 2>&1
  echo $? >"build-fuzz/fuzz-$t.status"
}

# JOBS targets at a time (each libFuzzer process is single-threaded), then the summary in target order.
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
  echo "== fuzzing $t for ${seconds}s"
  rm -f "build-fuzz/fuzz-$t.status"
  (set +e; fuzz_one "$t") &
done
wait
status=0
for t in "${targets[@]}"; do
  log=build-fuzz/fuzz-$t.log crashes=build-fuzz/crashes/$t
  if [ "$(cat "build-fuzz/fuzz-$t.status" 2>/dev/null)" != 0 ]; then
    echo "FAIL: $t (log: $log; inputs: $crashes/)"
    tail -n 40 "$log"
    status=1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  entries=$(find "build-fuzz/corpus/$t" -type f | wc -l)
  crashed=$(find "$crashes" -type f | wc -l)
  printf '%-14s %6ss  executions %-10s coverage (edges) %-6s features %-7s corpus %-5s crash inputs %s\n' \
    "$t" "$seconds" "${runs:-?}" "${cov:-?}" "${ft:-?}" "$entries" "$crashed" | tee -a "$summary"
done
exit $status
