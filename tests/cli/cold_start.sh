#!/usr/bin/env bash
# Cold start: plain weights multiplied from the mapped file at once and reordered in the background give the
# same tokens as weights reordered at load and as weights never reordered (the demo model as an F32 GGUF and as
# its safetensors directory); `dllm bench -m` reports the load, the first forward and load to first token, and
# waits for the background preparation before timing; an unknown --prepare value is an error.
#
#   tests/cli/cold_start.sh PATH/TO/dllm REPO_ROOT
set -euo pipefail
bin=$1
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin" convert -q -m "$root/models/demo" -o "$tmp/demo_f32.gguf" --type f32
ran=0
for model in "$tmp/demo_f32.gguf" "$root/models/demo"; do
  # Many steps: the background reorder swaps layouts while the forwards run.
  gen() { "$bin" generate --json --gen-length 64 --block-length 16 --steps 64 -p "def add(a, b):" -m "$model" \
    --prepare "$1" 2>"$tmp/stderr" | python3 -c 'import json,sys; print(json.load(sys.stdin)["outputs"])'; }
  want=$(gen load)
  [ -n "$want" ] || { echo "FAIL: no tokens from $model"; cat "$tmp/stderr"; exit 1; }
  for prepare in background never; do
    got=$(gen "$prepare")
    [ "$want" = "$got" ] || { echo "FAIL: --prepare $prepare differs from load on $model:"; echo "$want"; echo "$got"; exit 1; }
    ran=$((ran + 1))
  done
done

"$bin" bench -m "$tmp/demo_f32.gguf" --tokens 32 --repeat 1 --json >"$tmp/bench.json" 2>"$tmp/stderr"
python3 - "$tmp/bench.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))["cold_start"]
assert c["load_seconds"] > 0 and c["first_forward_seconds"] > 0, c
assert abs(c["load_to_first_token_seconds"] - c["load_seconds"] - c["first_forward_seconds"]) < 1e-9, c
assert c["weights_prepared_after_seconds"] >= c["load_to_first_token_seconds"] - 1e-9, c
assert c["first_forward_tokens"] == 64, c
print("cold start", c)
EOF

if "$bin" generate -m "$tmp/demo_f32.gguf" -p hi --prepare soon >/dev/null 2>"$tmp/stderr"; then
  echo "FAIL: an unknown --prepare value ran"; exit 1
fi
grep -q "soon" "$tmp/stderr" || { echo "FAIL: the --prepare error does not name the value:"; cat "$tmp/stderr"; exit 1; }
echo "ok: $ran layout comparisons ran"
