#!/usr/bin/env bash
# --backend / --device end to end: the demo model's text and tokens are the same on the Vulkan backend (lavapipe
# in CI) as on the CPU, for the exact path and the dual cache; the load says which device runs it; a bad
# --backend, an out-of-range --device and --device without --backend vulkan are errors that name the value.
# A build without the Vulkan backend says so.
#
#   tests/cli/backend.sh PATH/TO/dllm REPO_ROOT
set -euo pipefail
bin=$1
root=$2
fail() { echo "FAIL: $*"; exit 1; }

expect_error() {  # expect_error PATTERN ARGS...
  local pattern=$1
  shift
  local out
  if out=$("$bin" "$@" 2>&1); then fail "succeeded: $*"; fi
  grep -q -- "$pattern" <<<"$out" || fail "'$*' did not say '$pattern': $out"
}
expect_error "--backend" generate -m "$root/models/demo" --prompt-ids 1,2,3 --gen-length 8 --backend cuda
expect_error "--backend vulkan" generate -m "$root/models/demo" --prompt-ids 1,2,3 --gen-length 8 --device 1

if ! "$bin" devices --json >/dev/null 2>&1; then
  expect_error "no Vulkan backend" generate -m "$root/models/demo" --prompt-ids 1,2,3 --gen-length 8 \
    --backend vulkan
  echo "backend: ok (no Vulkan backend in this build)"
  exit 0
fi
n=$("$bin" devices --json | python3 -c "import json, sys; print(len(json.load(sys.stdin)))")
if [ "$n" -lt 1 ]; then
  [ "${DLLM_REQUIRE_VULKAN:-0}" = 1 ] && fail "DLLM_REQUIRE_VULKAN=1 and no Vulkan device"
  echo "backend: skipped (no Vulkan device)"
  exit 0
fi
expect_error "device $n" generate -m "$root/models/demo" --prompt-ids 1,2,3 --gen-length 8 --backend vulkan \
  --device "$n"

prompt=$'def add(a, b):\n    return'
run() {  # run BACKEND EXTRA... -> the JSON's outputs and texts
  "$bin" generate -m "$root/models/demo" -p "$prompt" --gen-length 16 --block-length 8 --steps 8 --json \
    --backend "$@" | python3 -c "import json, sys; r = json.load(sys.stdin); print(r['outputs'], r['texts'])"
}
for extra in "" "--cache dual --threshold 0.9"; do
  # shellcheck disable=SC2086
  cpu=$(run cpu $extra)
  # shellcheck disable=SC2086
  gpu=$(run vulkan $extra)
  [ "$cpu" = "$gpu" ] || fail "vulkan ${extra:-exact}: $gpu, cpu: $cpu"
done
# The server on the device: the same answer as the server on the CPU (its steps take only the logits' stats back).
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
serve_text() {  # serve_text BACKEND -> the completion's text
  "$bin" serve -m "$root/models/demo" --port 0 --gen-length 16 --block-length 8 --steps 8 --backend "$1" \
    >"$tmp/serve_$1.log" 2>&1 &
  local pid=$! port=""
  for _ in $(seq 300); do
    port=$(grep -oE "http://127\.0\.0\.1:[0-9]+" "$tmp/serve_$1.log" | head -1 | sed 's/.*://') || true
    [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
    port=""
    sleep 0.2
  done
  [ -n "$port" ] || fail "serve --backend $1 did not come up: $(cat "$tmp/serve_$1.log")"
  curl -sf "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
    -d '{"prompt": "def add(a, b):\n    return", "max_tokens": 16, "temperature": 0}' |
    python3 -c "import json, sys; print(repr(json.load(sys.stdin)['choices'][0]['text']))"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}
cpu=$(serve_text cpu)
gpu=$(serve_text vulkan)
[ "$cpu" = "$gpu" ] || fail "serve --backend vulkan answered $gpu, on the cpu $cpu"
[ "$gpu" != "''" ] || fail "serve --backend vulkan answered an empty text"

load=$("$bin" generate -m "$root/models/demo" --prompt-ids 1,2,3 --gen-length 8 --steps 2 --backend vulkan 2>&1 >/dev/null)
grep -q "dllm: backend vulkan device 0: .* MB of weights on the device" <<<"$load" || fail "load line: $load"
echo "backend: ok (the demo model's tokens on vulkan = cpu, exact and dual cache; serve answers the same: $gpu)"
