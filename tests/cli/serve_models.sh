#!/usr/bin/env bash
# `dllm serve --model` flag errors, before any socket is bound: names must be unique, 'auto' is the router's,
# NAME=PATH needs both; --help explains the router's policy (docs/hybrid.md). The server itself:
# tests/server/hybrid.test.mjs.
#
#   tests/cli/serve_models.sh PATH/TO/dllm REPO_ROOT
set -euo pipefail
bin=$1
root=$2
demo=$root/models/demo
ar=$root/tests/data/oracle/ar/models/qwen2_tiny
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
checked=0

# expect_fail PATTERN ARGS...: `dllm serve ARGS` exits non-zero and says PATTERN on stderr.
expect_fail() {
  local pattern=$1
  shift
  if timeout 60 "$bin" serve -q --port 0 "$@" 2>"$tmp/err.txt" >/dev/null; then
    echo "FAIL: dllm serve $* was accepted"; exit 1
  fi
  grep -q -- "$pattern" "$tmp/err.txt" || { echo "FAIL: dllm serve $*: expected '$pattern' in:"; cat "$tmp/err.txt"; exit 1; }
  checked=$((checked + 1))
}

expect_fail "two models are named 'x'" --model "x=$demo" --model "x=$ar"
expect_fail "two models are named 'demo'" -m "$demo" -m "$demo"
expect_fail "'auto' is the router's name" --model "auto=$demo"
expect_fail "is not PATH or NAME=PATH" --model "=$demo"
expect_fail "may hold letters, digits" --model "a b=$demo"
expect_fail "route-short-max-tokens must be >= 0" --model "$demo" --route-short-max-tokens -1

help=$("$bin" serve --help)
for want in "--route-short-max-tokens" "--route-keywords" "reason only_kind" "reason short_generation" \
            "dllm_route_total" "NAME=PATH"; do
  grep -q -- "$want" <<<"$help" || { echo "FAIL: dllm serve --help does not mention '$want'"; exit 1; }
  checked=$((checked + 1))
done
echo "serve_models: $checked checks passed"
