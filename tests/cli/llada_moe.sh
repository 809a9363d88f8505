#!/usr/bin/env bash
# LLaDA-MoE through the dllm command: llama.cpp's GGUF and the Hugging Face directory (neither has a usable
# tokenizer: ids in, ids out) reproduce llama-diffusion-cli (`--schedule llama_cli`) and the official LLaDA
# generate() loop (the family's default) token for token, with the golden number of forwards
# (tests/data/oracle/ar/golden/llada_moe_tiny).
#
#   tests/cli/llada_moe.sh PATH/TO/dllm REPO_ROOT
set -euo pipefail
bin=$1
ar=$2/tests/data/oracle/ar
golden=$ar/golden/llada_moe_tiny

# check GOLDEN_FILE CASE_ID JSON_OUTPUT: outputs[0] and forwards equal the case's.
check() {
  python3 - "$@" <<'PY'
import json, sys
path, case_id, out = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
case = next(c for c in json.load(open(path))["cases"] if c["id"] == case_id)
want = case.get("output") if "ub" in case else case["generated"]
if out["outputs"][0] != want or out["forwards"] != case["num_model_calls"]:
    sys.exit(f"FAIL: {case_id}: got {out['outputs'][0]} in {out['forwards']} forwards, "
             f"want {want} in {case['num_model_calls']}")
PY
}
prompt=237,391,427,335,51,118,356,89,425,173
n=0
for model in "$ar/gguf/llada_moe_tiny_f32.gguf" "$ar/models/llada_moe_tiny"; do
  # llama-diffusion-cli -ub 64 --diffusion-block-length 8 --diffusion-steps 64 (an empty trailing block).
  out=$("$bin" generate -q --json --dtype f32 -m "$model" --prompt-ids $prompt --schedule llama_cli \
    --gen-length 54 --block-length 8 --steps 64 2>/dev/null)
  check "$golden/diffusion_cli.json" cli_p0_ub64_b8_s64 "$out"
  # ... --diffusion-eps 0.01 -ub 32 --diffusion-steps 8 (the timestep schedule).
  out=$("$bin" generate -q --json --dtype f32 -m "$model" --prompt-ids $prompt --schedule llama_cli \
    --gen-length 22 --eps 0.01 --steps 8 2>/dev/null)
  check "$golden/diffusion_cli.json" cli_p0_ub32_eps0.01_s8 "$out"
  # LLaDA's generate(): no strategy flag at all.
  out=$("$bin" generate -q --json --dtype f32 -m "$model" --prompt-ids $prompt --gen-length 64 --block-length 16 \
    --steps 32 2>/dev/null)
  check "$golden/llada_generate.json" lowconf_p0_g64_b16_s32 "$out"
  n=$((n + 3))
done
[ "$n" = 6 ] || { echo "FAIL: ran $n checks"; exit 1; }

# The schedule's refusals name what llama-diffusion-cli needs.
if err=$("$bin" generate -q -m "$ar/models/llada_moe_tiny" --prompt-ids $prompt --schedule llama_cli --gen-length 50 \
  --block-length 8 2>&1); then
  echo "FAIL: a canvas of 60 positions in blocks of 8 was accepted"; exit 1
fi
grep -q "multiple of block_length 8" <<<"$err" || { echo "FAIL: $err"; exit 1; }
# --experts: an unknown value is an error, never a silent default; `load` needs --weights auto.
if err=$("$bin" generate -q -m "$ar/gguf/llada_moe_tiny_f32.gguf" --prompt-ids $prompt --experts lazy 2>&1); then
  echo "FAIL: --experts lazy was accepted"; exit 1
fi
grep -q "'lazy' is not one of first-use, load, in-place" <<<"$err" || { echo "FAIL: $err"; exit 1; }
if err=$("$bin" generate -q -m "$ar/gguf/llada_moe_tiny_f32.gguf" --prompt-ids $prompt --experts load \
  --weights f32 2>&1); then
  echo "FAIL: --experts load --weights f32 was accepted"; exit 1
fi
grep -q "needs --weights auto" <<<"$err" || { echo "FAIL: $err"; exit 1; }
echo "ok: $n golden runs"
