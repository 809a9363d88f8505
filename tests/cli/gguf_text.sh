#!/usr/bin/env bash
# The dllm command end to end with a GGUF file alone: convert the demo model, then text in and text out through
# the tokenizer stored in the file must equal the Hugging Face directory's (same ids, same text), for generate,
# generate --tokenizer and infill; a GGUF without a usable vocabulary must fail with a message naming the file.
#
#   tests/cli/gguf_text.sh PATH/TO/dllm REPO_ROOT
set -euo pipefail
bin=$1
root=$2
demo=$root/models/demo
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$bin" convert -q -m "$demo" -o "$tmp/demo.gguf" --type f32

run() { "$bin" generate -q --json --dtype f32 --gen-length 16 --block-length 16 --steps 16 -p "def add(a, b):" "$@"; }
want=$(run -m "$demo")
got=$(run -m "$tmp/demo.gguf")
got_tok=$(run -m "$tmp/demo.gguf" --tokenizer "$demo")
strip() { sed 's/"seconds":[^,}]*//; s/"tokens_per_second":[^,}]*//' <<<"$1"; }
[ "$(strip "$want")" = "$(strip "$got")" ] || { echo "FAIL: GGUF generate differs:"; echo "$want"; echo "$got"; exit 1; }
[ "$(strip "$want")" = "$(strip "$got_tok")" ] || { echo "FAIL: GGUF --tokenizer differs"; exit 1; }
grep -q '"texts"' <<<"$got" || { echo "FAIL: no texts from the GGUF tokenizer: $got"; exit 1; }

infill() { "$bin" infill -q --json --dtype f32 --text 'def add(a, b):
    return <|mask:6|>
' "$@"; }
[ "$(strip "$(infill -m "$demo")")" = "$(strip "$(infill -m "$tmp/demo.gguf")")" ] || { echo "FAIL: GGUF infill differs"; exit 1; }

# The oracle GGUF has a placeholder vocabulary ("<i>" tokens): text must fail naming the file, not crash.
if err=$("$bin" generate -m "$root/tests/data/gguf/llada_tiny_f32.gguf" -p "hi" --gen-length 8 --block-length 8 \
  --steps 8 2>&1); then
  echo "FAIL: text with a placeholder vocabulary succeeded"; exit 1
fi
grep -q "llada_tiny_f32.gguf" <<<"$err" || { echo "FAIL: error does not name the file: $err"; exit 1; }
echo "gguf_text: ok"
