#!/usr/bin/env bash
# `dllm rewrite` end to end on the demo model: everything outside the rewritten lines is byte-identical, the span
# is filled (no mask left), --diff is a unified diff that `patch` applies, --refine runs its rounds, and bad
# --lines are clear errors.
#
#   tests/cli/rewrite.sh PATH/TO/dllm REPO_ROOT
set -euo pipefail
bin=$1
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model=(-m "$root/models/demo" --dtype f32 -t 1 -q)

cat > "$tmp/stack.py" <<'PY'
import os


class Stack:
    """A last-in, first-out stack."""

    def __init__(self):
        self._items = []

    def push(self, item):
        self._items.append(item)

    def pop(self):
        return self._items.pop()

    def __len__(self):
        return len(self._items)
PY
head -n 12 "$tmp/stack.py" > "$tmp/before"
tail -n +15 "$tmp/stack.py" > "$tmp/after"

"$bin" rewrite "$tmp/stack.py" --lines 13-14 "${model[@]}" > "$tmp/out.py"
head -c "$(wc -c < "$tmp/before")" "$tmp/out.py" | cmp -s - "$tmp/before" || { echo "FAIL: lines before the span changed"; exit 1; }
tail -c "$(wc -c < "$tmp/after")" "$tmp/out.py" | cmp -s - "$tmp/after" || { echo "FAIL: lines after the span changed"; exit 1; }
grep -q "mdm_mask" "$tmp/out.py" && { echo "FAIL: a mask is left"; exit 1; }
cmp -s "$tmp/out.py" "$tmp/stack.py" && echo "note: the model rewrote the lines as they were"

"$bin" rewrite "$tmp/stack.py" --lines 13-14 "${model[@]}" --diff > "$tmp/out.diff" || true
if [ -s "$tmp/out.diff" ]; then
  head -n 1 "$tmp/out.diff" | grep -q "^--- $tmp/stack.py" || { echo "FAIL: no diff header"; exit 1; }
  cp "$tmp/stack.py" "$tmp/patched.py"
  patch -s "$tmp/patched.py" < "$tmp/out.diff"
  cmp -s "$tmp/patched.py" "$tmp/out.py" || { echo "FAIL: the diff does not turn the file into the printed one"; exit 1; }
fi

json=$("$bin" rewrite "$tmp/stack.py" --lines 13-14 "${model[@]}" --refine 2 --refine-tokens 3 --json)
grep -q '"refine":\[{"changed":[0-9]*,"remasked":3},{"changed":[0-9]*,"remasked":3}\]' <<<"$json" ||
  { echo "FAIL: refine rounds not reported: $json"; exit 1; }

# A file longer than the model's positions: the canvas keeps the context nearest to the span, the output the
# whole file.
for i in $(seq 1 400); do echo "def f$i(a, b):"; echo "    return a + b * $i"; done > "$tmp/long.py"
"$bin" rewrite "$tmp/long.py" --lines 401-402 "${model[@]}" > "$tmp/long_out.py"
head -n 400 "$tmp/long_out.py" | cmp -s - <(head -n 400 "$tmp/long.py") || { echo "FAIL: long file: prefix changed"; exit 1; }
"$bin" rewrite "$tmp/long.py" --lines 401-402 "${model[@]}" --context 32 --json | grep -q '"tokens":' ||
  { echo "FAIL: --context"; exit 1; }

for bad in 0-2 5-3 x 13-99; do
  if err=$("$bin" rewrite "$tmp/stack.py" --lines "$bad" "${model[@]}" 2>&1); then
    echo "FAIL: --lines $bad accepted"; exit 1
  fi
  grep -q -- "--lines" <<<"$err" || { echo "FAIL: --lines $bad: error does not name --lines: $err"; exit 1; }
done
if "$bin" rewrite "$tmp/nowhere.py" --lines 1 "${model[@]}" 2>/dev/null; then echo "FAIL: missing file accepted"; exit 1; fi
echo "rewrite: ok"
