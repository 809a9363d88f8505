#!/usr/bin/env bash
# End-to-end tests of `dllm serve` with real clients (openai npm, curl, headless Chromium via playwright-core).
# Builds nothing: give it the dllm binary.
#
#   tests/server/run.sh build/dllm [MODEL_DIR]
#
# MODEL_DIR defaults to the tiny LLaDA test model, served with the tokenizer fixture in fixtures/tiny_tokenizer
# (a model directory with its own tokenizer.json is served with it). Installs the node packages (npm ci) when
# node_modules is missing. Starts the server on a free port with an API key, runs the node tests against it, checks
# the server is still up, and stops it. Screenshots, the server log and throughput.json go to $DLLM_TEST_OUT
# (default tests/server/out).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 1 ] || [ ! -x "$1" ]; then
  echo "usage: $0 PATH/TO/dllm [MODEL_DIR]" >&2
  exit 2
fi
bin=$(realpath "$1")
model=$(realpath "${2:-$here/../data/oracle/models/llada_tiny_f32}")
export DLLM_TEST_OUT=${DLLM_TEST_OUT:-$here/out}
mkdir -p "$DLLM_TEST_OUT"

cd "$here"
if [ ! -d node_modules/openai ] || [ ! -d node_modules/playwright-core ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi

serve_args="-m $model --dtype f32 --gen-length 32 --max-tokens 512"
if [ ! -f "$model/tokenizer.json" ]; then
  serve_args="$serve_args --tokenizer $here/fixtures/tiny_tokenizer"
fi
export DLLM_BIN=$bin
export DLLM_SERVE_ARGS=$serve_args
export DLLM_API_KEY=test-key-$$

log=$DLLM_TEST_OUT/server.log
# shellcheck disable=SC2086
"$bin" serve $serve_args --port 0 --api-key "$DLLM_API_KEY" 2> "$log" &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
trap cleanup EXIT

url=""
for _ in $(seq 1 600); do
  url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$log" | head -n1)
  [ -n "$url" ] && break
  kill -0 "$pid" 2>/dev/null || { echo "dllm serve exited:"; cat "$log"; exit 1; }
  sleep 0.1
done
[ -n "$url" ] || { echo "dllm serve did not start:"; cat "$log"; exit 1; }
export DLLM_URL=$url
echo "== dllm serve at $url ($serve_args)"

status=0
node --test --test-concurrency=1 --test-reporter=spec ${DLLM_SERVER_TESTS:-./*.test.mjs} || status=$?

if ! kill -0 "$pid" 2>/dev/null; then
  echo "FAIL: the server died during the tests; its log:"
  cat "$log"
  exit 1
fi
curl -sf "$url/health" > /dev/null || { echo "FAIL: /health does not answer after the tests"; exit 1; }
echo "== server still up after the tests; output in $DLLM_TEST_OUT"
exit $status
