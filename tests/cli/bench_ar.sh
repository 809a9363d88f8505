#!/usr/bin/env bash
# `dllm bench --ar` end to end on the tiny qwen2 (f32 GGUF, and converted to Q8_0 so its matrices run as packed
# int8 panels with q/k/v and gate/up grouped): the JSON has pp / tg speeds, the breakdown of a token's time, and
# the matmuls by role, whose bytes add up to every matrix a token reads (so a role left untimed, or counted
# twice, fails) and whose time covers the matmul kernels' (each role's clock encloses its kernels).
#
#   tests/cli/bench_ar.sh PATH/TO/dllm REPO_ROOT
set -euo pipefail
bin=$1
root=$2
ar=$root/tests/data/oracle/ar
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" convert -q -m "$ar/models/qwen2_tiny" -o "$tmp/q8.gguf" --type q8_0
checked=0
for model in "$ar/gguf/qwen2_tiny_f32.gguf" "$tmp/q8.gguf"; do
  "$bin" bench --ar -m "$model" --pp 8 --tg 4 --repeat 1 --json 2>/dev/null >"$tmp/out.json"
  python3 - "$tmp/out.json" "$model" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
name = sys.argv[2]
def fail(msg):
    sys.exit(f"FAIL {name}: {msg}\n{json.dumps(j, indent=1)[:3000]}")
for key in ("pp_tokens_per_second", "tg_tokens_per_second", "tg_gb_per_s", "memory_read_gb_per_s_measured"):
    if not j.get(key, 0) > 0: fail(f"{key} missing or not positive")
roles = j["tg_matmul_by_role"]
if sorted(roles) != sorted(["q/k/v", "o", "gate/up", "down", "head"]): fail(f"roles {sorted(roles)}")
mb = sum(r["mb_per_token"] for r in roles.values())
if abs(mb - j["weight_gb"] * 1000) > 1e-6 * max(1.0, mb): fail(f"roles read {mb} MB a token, the matrices are {j['weight_gb'] * 1000}")
role_time = sum(r["time_fraction"] for r in roles.values())
kernel_time = j["tg_time_fraction"]["matmul"]
if not (0.95 * kernel_time <= role_time <= 1.0 + 1e-9): fail(f"roles take {role_time} of a token, the matmul kernels {kernel_time}")
for n, r in roles.items():
    if not r["gb_per_s"] > 0: fail(f"{n}: no GB/s")
PY
  checked=$((checked + 1))
done
[ "$checked" = 2 ] || { echo "FAIL: checked $checked models"; exit 1; }
# The text report names the roles too.
"$bin" bench --ar -m "$tmp/q8.gguf" --pp 8 --tg 4 --repeat 1 2>/dev/null | grep -q 'matmuls by role.*q/k/v.*gate/up.*head' ||
  { echo "FAIL: the text report has no matmuls-by-role line"; exit 1; }
echo "bench --ar: $checked models checked"
