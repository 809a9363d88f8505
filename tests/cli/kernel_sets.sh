#!/usr/bin/env bash
# The integer kernel sets end to end: the demo model converted to Q4_K and Q8_0 GGUF generates the same tokens
# under every set this CPU runs (DLLM_GGML_KERNEL=avx2 | avx_vnni | avx512_vnni | amx; the sets give the same integers,
# so the same bits), the load line names the set that runs, a set the CPU lacks is refused with what it needs,
# and an unknown name is an error, never a silent fallback.
#
#   tests/cli/kernel_sets.sh PATH/TO/dllm REPO_ROOT
set -euo pipefail
bin=$1
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() {  # run MODEL: prints the generated text; the load line goes to $tmp/stderr
  "$bin" generate --gen-length 32 --block-length 16 --steps 32 -p "def add(a, b):" -m "$1" 2>"$tmp/stderr"
}

ran=0
for type in q4_k q8_0; do
  "$bin" convert -q -m "$root/models/demo" -o "$tmp/demo_$type.gguf" --type "$type"
  want=$(DLLM_GGML_KERNEL=avx2 run "$tmp/demo_$type.gguf")
  [ -n "$want" ] || { echo "FAIL: no text from $type"; exit 1; }
  grep -q "AVX2" "$tmp/stderr" || { echo "FAIL: the load line does not name AVX2:"; cat "$tmp/stderr"; exit 1; }
  for set in avx_vnni avx512_vnni amx; do
    name=$(tr a-z A-Z <<<"$set")
    [ "$set" = amx ] && name=AMX_INT8
    if got=$(DLLM_GGML_KERNEL=$set run "$tmp/demo_$type.gguf"); then
      grep -q "$name" "$tmp/stderr" || { echo "FAIL: the load line does not name $name:"; cat "$tmp/stderr"; exit 1; }
      [ "$want" = "$got" ] || { echo "FAIL: $type $set differs from avx2:"; echo "$want"; echo "$got"; exit 1; }
      ran=$((ran + 1))
    else
      grep -q "DLLM_GGML_KERNEL=$set: this CPU cannot run the $name kernels (they need" "$tmp/stderr" ||
        { echo "FAIL: $set refused without saying why:"; cat "$tmp/stderr"; exit 1; }
      echo "note: this CPU cannot run $set; only its refusal was checked"
    fi
  done
done

if DLLM_GGML_KERNEL=avx3 run "$tmp/demo_q4_k.gguf" >/dev/null; then echo "FAIL: an unknown kernel set ran"; exit 1; fi
grep -q "DLLM_GGML_KERNEL=avx3: unknown kernel set (avx2, avx_vnni, avx512_vnni or amx)" "$tmp/stderr" ||
  { echo "FAIL: unknown set message:"; cat "$tmp/stderr"; exit 1; }
echo "ok: $ran set comparisons ran"
