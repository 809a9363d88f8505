#!/usr/bin/env bash
# `dllm sweep` on the block-diffusion models: every official loop gives the same tokens with the block cache on
# as off (agreement 100% with its own uncached row) while running fewer tokens through the model.
#
#   tests/cli/block_sweep.sh PATH/TO/dllm REPO_ROOT
set -euo pipefail
bin=$1
root=$2
check() {
  local json=$1
  python3 - "$json" <<'PY'
import json, sys
rows = {r["setting"]: r for r in json.loads(sys.argv[1])["settings"]}
pairs = [(k, k.replace(", no cache", " + block cache")) for k in rows if k.endswith(", no cache")]
assert len(pairs) >= 2, f"expected no-cache / cache pairs, got {list(rows)}"
for off, on in pairs:
    a, b = rows[off], rows[on]
    assert b["outputs"] == a["outputs"], (off, a["outputs"], b["outputs"])
    assert b["forward_tokens"] < a["forward_tokens"], (off, a["forward_tokens"], b["forward_tokens"])
print(f"ok: {len(pairs)} loops, cache on = off")
PY
}
for args in "-m $root/tests/data/oracle/models/sdar_tiny_f32 --gen-length 32 --block-length 4" \
            "-m $root/tests/data/oracle/models/sdar_moe_tiny_f32 --gen-length 32 --block-length 4" \
            "--shape llada2-tiny --gen-length 32 --block-length 8"; do
  # shellcheck disable=SC2086
  out=$("$bin" sweep $args --num-prompts 2 --json)
  check "$out"
done
