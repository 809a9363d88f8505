#!/usr/bin/env bash
# The dllm command end to end with a GGUF file alone: convert the demo model, then text in and text out through
# the tokenizer stored in the file must equal the Hugging Face directory's (same ids, same text), for generate,
# generate --tokenizer and infill; a GGUF without a usable vocabulary runs on token ids with one warning, and
# text fails with the same message, naming the file and the key.
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
strip() { sed 's/"seconds":[^,}]*//; s/"tokens_per_second":[^,}]*//; s/"precision":{[^}]*}//' <<<"$1"; }
[ "$(strip "$want")" = "$(strip "$got")" ] || { echo "FAIL: GGUF generate differs:"; echo "$want"; echo "$got"; exit 1; }
[ "$(strip "$want")" = "$(strip "$got_tok")" ] || { echo "FAIL: GGUF --tokenizer differs"; exit 1; }
grep -q '"texts"' <<<"$got" || { echo "FAIL: no texts from the GGUF tokenizer: $got"; exit 1; }

infill() { "$bin" infill -q --json --dtype f32 --text 'def add(a, b):
    return <|mask:6|>
' "$@"; }
[ "$(strip "$(infill -m "$demo")")" = "$(strip "$(infill -m "$tmp/demo.gguf")")" ] || { echo "FAIL: GGUF infill differs"; exit 1; }

# The tokenizer only where text is: a GGUF whose tokenizer cannot be built runs on --prompt-ids with ONE warning
# naming the file and the key; a text prompt (generate, infill) then fails with that same message.
#   no_text MODEL KEY: checks both for MODEL, whose warning must name KEY.
no_text() {
  local model=$1 key=$2 name out warn msg err
  name=$(basename "$model")
  out=$("$bin" generate -m "$model" --prompt-ids 1,2,3 --json --dtype f32 --gen-length 8 --block-length 8 \
    --steps 8 2>"$tmp/stderr") || { echo "FAIL: --prompt-ids with $name:"; cat "$tmp/stderr"; exit 1; }
  grep -q '"outputs"' <<<"$out" || { echo "FAIL: no outputs from $name: $out"; exit 1; }
  ! grep -q '"texts"' <<<"$out" || { echo "FAIL: texts without a tokenizer from $name: $out"; exit 1; }
  warn=$(grep -i "warning" "$tmp/stderr" || true)
  [ "$(grep -ci "warning" "$tmp/stderr")" = 1 ] || { echo "FAIL: not one warning for $name:"; cat "$tmp/stderr"; exit 1; }
  grep -q "$name" <<<"$warn" || { echo "FAIL: the warning does not name the file: $warn"; exit 1; }
  grep -q "$key" <<<"$warn" || { echo "FAIL: the warning does not name $key: $warn"; exit 1; }
  msg=$(sed 's/^dllm: warning: //; s/; only token ids (--prompt-ids) can be used$//' <<<"$warn")
  for cmd in "generate -p hi --gen-length 8 --block-length 8 --steps 8" "infill --text a<|mask:4|>b"; do
    # shellcheck disable=SC2086
    if err=$("$bin" $cmd -m "$model" --dtype f32 2>&1); then
      echo "FAIL: text with $name succeeded ($cmd)"; exit 1
    fi
    [ "$err" = "dllm: error: $msg" ] || { echo "FAIL: $cmd on $name: want 'dllm: error: $msg', got '$err'"; exit 1; }
  done
}
# The oracle GGUF has a placeholder vocabulary ("<i>" tokens, a merge of tokens it does not have).
no_text "$root/tests/data/gguf/llada_tiny_f32.gguf" "tokenizer.ggml"
# The demo model's GGUF with a tokenizer.ggml.pre dllm.cpp does not know (same length, so the file stays valid).
python3 - "$tmp/demo.gguf" "$tmp/demo_unknown_pre.gguf" <<'PY'
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
key = b"tokenizer.ggml.pre"
at = data.index(struct.pack("<Q", len(key)) + key) + 8 + len(key)
assert struct.unpack_from("<I", data, at)[0] == 8, "tokenizer.ggml.pre is not a string"
n = struct.unpack_from("<Q", data, at + 4)[0]
data[at + 12:at + 12 + n] = b"z" * n
open(sys.argv[2], "wb").write(data)
PY
no_text "$tmp/demo_unknown_pre.gguf" "tokenizer.ggml.pre"

# An F16 file runs in f16 under --dtype auto, in bf16 under --dtype bf16, and both say so per stored type in the
# load line and in the --json of generate and bench.
"$bin" convert -q -m "$demo" -o "$tmp/demo_f16.gguf" --type f16
f16_json=$("$bin" generate -m "$tmp/demo_f16.gguf" --json --gen-length 16 --block-length 16 --steps 16 \
  -p "def add(a, b):" 2>"$tmp/gen.err") || { echo "FAIL: generate on the F16 file:"; cat "$tmp/gen.err"; exit 1; }
"$bin" generate -m "$tmp/demo_f16.gguf" --gen-length 16 --block-length 16 --steps 16 -p "def add(a, b):" \
  >/dev/null 2>"$tmp/load.txt" || { echo "FAIL: generate on the F16 file (text):"; cat "$tmp/load.txt"; exit 1; }
grep -q '"precision":{"F16":"f16"}' <<<"$f16_json" || { echo "FAIL: F16 generate --json precision: $f16_json"; exit 1; }
grep -q '^dllm: precision f16: .*per stored type: F16 -> f16$' "$tmp/load.txt" ||
  { echo "FAIL: F16 load line:"; cat "$tmp/load.txt"; exit 1; }
bf16_json=$("$bin" generate -m "$tmp/demo_f16.gguf" --dtype bf16 --json --gen-length 16 --block-length 16 --steps 16 \
  -p "def add(a, b):" 2>"$tmp/gen.err") || { echo "FAIL: generate --dtype bf16:"; cat "$tmp/gen.err"; exit 1; }
grep -q '"precision":{"F16":"bf16' <<<"$bf16_json" || { echo "FAIL: --dtype bf16 precision: $bf16_json"; exit 1; }
bench_json=$("$bin" bench -m "$tmp/demo_f16.gguf" --tokens 16 --repeat 1 --first-tokens 16 --json 2>"$tmp/bench.err") ||
  { echo "FAIL: bench --json on the F16 file:"; cat "$tmp/bench.err"; exit 1; }
python3 -c "import json,sys; j=json.loads(sys.argv[1]); assert j['precision'] == {'F16': 'f16'} and j['compute'] == 'f16', j" \
  "$bench_json" || { echo "FAIL: bench --json precision"; exit 1; }

# convert names its fallbacks (rows of 128 / 384 are not whole Q4_K blocks) and the real mix, even with -q.
tiny=$root/tests/data/oracle/models/llada_tiny_f32
log=$("$bin" convert -m "$tiny" -o "$tmp/tiny_q4k.gguf" --type q4_k 2>&1 >/dev/null | tr '\r' '\n')
grep -q '^dllm: blk.0.attn_q.weight: rows of 128 are not a multiple of Q4_K.s 256-element blocks: written as Q4_0$' \
  <<<"$log" || { echo "FAIL: convert did not name the fallback of blk.0.attn_q.weight:"; echo "$log" | tail -5; exit 1; }
grep -q 'requested type q4_k): 23 Q4_0, ' <<<"$log" || { echo "FAIL: convert's summary lacks the real mix:"; echo "$log" | tail -3; exit 1; }
quiet=$("$bin" convert -q -m "$tiny" -o "$tmp/tiny_q4k.gguf" --type q4_k 2>&1 >/dev/null)
grep -q '^dllm: warning: 23 weight matrices are not q4_k' <<<"$quiet" || { echo "FAIL: -q hid the fallback warning: $quiet"; exit 1; }
echo "gguf_text: ok"
