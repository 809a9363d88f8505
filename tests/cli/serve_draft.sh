#!/usr/bin/env bash
# `dllm serve --draft`: an autoregressive model served with a diffusion drafter (speculative decoding) answers
# greedy completions with the same text as without one, /v1/models shows the drafter, and mismatched drafters are
# refused before any socket is bound.
#
#   tests/cli/serve_draft.sh PATH/TO/dllm REPO_ROOT
set -euo pipefail
bin=$1
root=$2
ar=$root/tests/data/oracle/ar/models/qwen2_tiny
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
# The drafter: the tiny Dream (Qwen2 layout) with qwen2_tiny's tokenizer, so the vocabularies agree.
mkdir "$tmp/drafter"
cp "$root"/tests/data/oracle/models/dream_tiny_gqa_f32/* "$tmp/drafter/"
cp "$ar/tokenizer.json" "$tmp/drafter/"

# start NAME ARGS...: a server on a free port; its port in $tmp/NAME.port.
start() {
  local name=$1
  shift
  "$bin" serve -q --port 0 "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  pids+=($!)
  for _ in $(seq 100); do
    port=$(grep -o 'listening on [^ ]*:[0-9]*' "$tmp/$name.out" "$tmp/$name.err" 2>/dev/null | grep -o '[0-9]*$' | head -1 || true)
    [ -n "$port" ] && { echo "$port" >"$tmp/$name.port"; return; }
    sleep 0.2
  done
  echo "FAIL: server $name did not start"; cat "$tmp/$name.err"; exit 1
}
complete() {
  curl -s "http://127.0.0.1:$(cat "$tmp/$1.port")/v1/completions" -H 'Content-Type: application/json' \
    -d '{"model": "qwen2_tiny", "prompt": "the cat sat", "max_tokens": 24, "temperature": 0}'
}
start plain --model "$ar"
start spec --model "$ar" --draft "$tmp/drafter" --draft-tokens 4
a=$(complete plain)
b=$(complete spec)
text() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])["choices"][0]["text"])' "$1"; }
[ "$(text "$a")" = "$(text "$b")" ] || { echo "FAIL: speculative answer differs: $a / $b"; exit 1; }
models=$(curl -s "http://127.0.0.1:$(cat "$tmp/spec.port")/v1/models")
grep -q '"draft"' <<<"$models" || { echo "FAIL: /v1/models does not show the drafter: $models"; exit 1; }
metrics=$(curl -s "http://127.0.0.1:$(cat "$tmp/spec.port")/metrics")
drafted=$(grep '^dllm_draft_tokens_total' <<<"$metrics" | awk '{print $2}')
[ -n "$drafted" ] && [ "${drafted%.*}" -gt 0 ] || { echo "FAIL: no drafted tokens in /metrics: $drafted"; exit 1; }
grep -q '^dllm_draft_accepted_tokens_total' <<<"$metrics" || { echo "FAIL: no accepted-token counter"; exit 1; }

if timeout 60 "$bin" serve -q --port 0 --model "$ar" --draft "$root/models/demo" 2>"$tmp/err.txt" >/dev/null; then
  echo "FAIL: a drafter with another tokenizer was accepted"; exit 1
fi
grep -q "does not share the tokenizer" "$tmp/err.txt" || { echo "FAIL: unclear error: $(cat "$tmp/err.txt")"; exit 1; }
if timeout 60 "$bin" serve -q --port 0 --model "$root/models/demo" --draft "$tmp/drafter" 2>"$tmp/err.txt" >/dev/null; then
  echo "FAIL: --draft without an autoregressive model was accepted"; exit 1
fi
grep -q "no autoregressive model is served" "$tmp/err.txt" || { echo "FAIL: unclear error: $(cat "$tmp/err.txt")"; exit 1; }
echo "serve_draft: ok"
