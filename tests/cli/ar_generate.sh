#!/usr/bin/env bash
# `dllm generate` on autoregressive models end to end: text in, streamed text out (plain output equals --json's
# texts), the HF directory and the llama.cpp GGUF give the same ids, --stop cuts the text before the stop
# string, and diffusion-only flags are errors that name the flag.
#
#   tests/cli/ar_generate.sh PATH/TO/dllm REPO_ROOT
set -euo pipefail
bin=$1
root=$2
ar=$root/tests/data/oracle/ar
checked=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
strip() { sed 's/"seconds":[^,}]*//; s/"tokens_per_second":[^,}]*//; s/"precision":{[^}]*}//' <<<"$1"; }

for m in qwen2 qwen3 llama3; do
  hf=$ar/models/${m}_tiny
  gguf=$ar/gguf/${m}_tiny_f32.gguf
  json_hf=$("$bin" generate -q --json -m "$hf" -p "the cat sat" --max-tokens 12)
  json_gguf=$("$bin" generate -q --json -m "$gguf" -p "the cat sat" --max-tokens 12)
  [ "$(strip "$json_hf")" = "$(strip "$json_gguf")" ] || { echo "FAIL $m: HF and GGUF differ: $json_hf / $json_gguf"; exit 1; }
  grep -q '"outputs":\[\[[0-9]' <<<"$json_hf" || { echo "FAIL $m: no outputs: $json_hf"; exit 1; }
  # The streamed plain text is the JSON's text.
  plain=$("$bin" generate -q -m "$hf" -p "the cat sat" --max-tokens 12)
  want=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["texts"][0])' "$json_hf")
  [ "$plain" = "$want" ] || { echo "FAIL $m: streamed text '$plain' != JSON text '$want'"; exit 1; }
  # --stop: the answer ends before the first occurrence of a character it contains.
  if [ ${#want} -ge 3 ]; then
    stop=${want:2:1}
    cut=$("$bin" generate -q -m "$hf" -p "the cat sat" --max-tokens 12 --stop "$stop")
    expect=${want%%"$stop"*}
    [ "$cut" = "$expect" ] || { echo "FAIL $m: --stop '$stop' gave '$cut', want '$expect'"; exit 1; }
  fi
  checked=$((checked + 1))
done

if "$bin" generate -q -m "$ar/models/qwen2_tiny" -p hi --steps 4 2>"$tmp/err.txt" >/dev/null; then
  echo "FAIL: --steps on an autoregressive model was accepted"; exit 1
fi
err=$(cat "$tmp/err.txt")
grep -q "steps (--steps) applies to diffusion models only" <<<"$err" || { echo "FAIL: unclear error: $err"; exit 1; }
# --draft: a diffusion drafter with the same tokenizer (Dream is Qwen2's layout; the tiny Dream with
# qwen2_tiny's tokenizer.json) leaves greedy ids unchanged and reports its rounds; another vocabulary is refused.
mkdir "$tmp/drafter"
cp "$root"/tests/data/oracle/models/dream_tiny_gqa_f32/* "$tmp/drafter/"
cp "$ar/models/qwen2_tiny/tokenizer.json" "$tmp/drafter/"
alone=$("$bin" generate -q --json -m "$ar/models/qwen2_tiny" -p "the cat sat" --max-tokens 20)
spec=$("$bin" generate -q --json -m "$ar/models/qwen2_tiny" -p "the cat sat" --max-tokens 20 --draft "$tmp/drafter" \
  --draft-tokens 4 --draft-steps 2)
python3 - "$alone" "$spec" <<'PY' || exit 1
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert a["outputs"] == b["outputs"], (a["outputs"], b["outputs"])
s = b["speculative"]
assert s["rounds"] > 0 and s["draft_forwards"] <= 2 * s["rounds"] and s["drafted"] <= 4 * s["rounds"], s
PY
if "$bin" generate -q -m "$ar/models/qwen2_tiny" -p hi --draft "$root/models/demo" 2>"$tmp/err.txt" >/dev/null; then
  echo "FAIL: a drafter with another tokenizer was accepted"; exit 1
fi
grep -q "does not share the tokenizer" "$tmp/err.txt" || { echo "FAIL: unclear --draft error: $(cat "$tmp/err.txt")"; exit 1; }

[ $checked -eq 3 ] || { echo "FAIL: $checked models checked"; exit 1; }
echo "ar_generate: $checked models"
