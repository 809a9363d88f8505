#!/usr/bin/env bash
# `dllm study` end to end on a corpus of its own: the corpus is an argument (a clear error without it or with one
# that is not there), and a tiny study over two files writes the JSON and the markdown report.
#
#   tests/cli/study.sh PATH/TO/dllm REPO_ROOT
set -euo pipefail
bin=$1
root=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mkdir -p "$tmp/corpus/pkg"
for i in $(seq 1 40); do echo "def f$i(a, b):"; echo "    return a + b * $i"; echo; done > "$tmp/corpus/one.py"
for i in $(seq 1 40); do echo "class C$i:"; echo "    x = $i"; echo; done > "$tmp/corpus/pkg/two.py"
printf '# held out\none.py\npkg/two.py\n' > "$tmp/list.txt"
tiny=(--heldout-list "$tmp/list.txt" --window 64 --loss-ratios 0.5 --metric-windows 2 --metric-spans 8
  --metric-suffixes 8 --windows 2 --span 8 --block-lengths 8 --thresholds 0.9 --caches none -t 1 -q)

if err=$("$bin" study "${tiny[@]}" 2>&1); then echo "FAIL: study without --corpus succeeded"; exit 1; fi
grep -q -- "--corpus DIR" <<<"$err" || { echo "FAIL: no hint at --corpus: $err"; exit 1; }
if err=$("$bin" study "${tiny[@]}" --corpus "$tmp/nowhere" 2>&1); then
  echo "FAIL: study with a missing corpus succeeded"; exit 1
fi
grep -q "$tmp/nowhere: not a directory" <<<"$err" || { echo "FAIL: missing corpus not named: $err"; exit 1; }

"$bin" study "${tiny[@]}" --corpus "$tmp/corpus" --out-json "$tmp/out.json" --out-md "$tmp/out.md" > "$tmp/stdout"
cmp -s "$tmp/stdout" "$tmp/out.md" || { echo "FAIL: the printed report differs from --out-md"; exit 1; }
for key in '"loss"' '"metric"' '"grid"' '"heldout_files": 2' '"answers"'; do
  grep -q "$key" "$tmp/out.json" || { echo "FAIL: $key not in the JSON"; exit 1; }
done
grep -q -- "--corpus $tmp/corpus" "$tmp/out.md" || { echo "FAIL: the report does not record the corpus"; exit 1; }
echo "study: ok"
