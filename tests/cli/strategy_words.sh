#!/usr/bin/env bash
# The strategy words end to end through `dllm`: every word `dllm generate --help` lists for an axis (read from the
# help, which the table in src/denoise/strategy_names.cpp writes) runs a real generation under every flag of that
# axis; aliases give their word's tokens; unknown words exit non-zero naming the flag and listing the words, in
# generate, infill and serve alike.
#
#   tests/cli/strategy_words.sh PATH/TO/dllm REPO_ROOT
set -euo pipefail
bin=$1
root=$2
model=$root/tests/data/oracle/models/llada_tiny_f32
block_model=$root/tests/data/oracle/models/sdar_tiny_f32  # the block-diffusion words run here

help=$("$bin" generate --help)
# "--unmask TEXT  Which ...: a, b, c (aliases: x = a, y = b); default ..." -> "a b c x y"
words() {
  local line
  line=$(grep -E -- "^ *--$1 " <<<"$help") || { echo "FAIL: --help has no --$1" >&2; exit 1; }
  sed -E 's/^[^:]*: ([^;]*);.*/\1/; s/\(aliases://; s/\)//; s/ = [a-z_]+//g; s/,/ /g' <<<"$line"
}
run() {
  "$bin" generate -q --json --dtype f32 -m "$model" --prompt-ids 10,20,30 --gen-length 16 --block-length 8 --steps 8 \
    --seed 3 "$@" | sed 's/"seconds":[^,}]*//; s/"tokens_per_second":[^,}]*//'
}

run_block() {
  "$bin" generate -q --json --dtype f32 -m "$block_model" --prompt-ids 10,20,30,40,50 --gen-length 16 --steps 2 \
    --seed 3 "$@" | sed 's/"seconds":[^,}]*//; s/"tokens_per_second":[^,}]*//'
}
block_only=" low_confidence_static low_confidence_dynamic block "
# llama-diffusion-cli lays its blocks over prompt + generation: 3 + 13 = 16, two blocks of 8 and 4 steps each.
run_llama_cli() {
  "$bin" generate -q --json --dtype f32 -m "$model" --prompt-ids 10,20,30 --gen-length 13 --block-length 8 --steps 8 \
    --seed 3 "$@" | sed 's/"seconds":[^,}]*//; s/"tokens_per_second":[^,}]*//'
}

n=0
for axis in "unmask alg remasking" schedule sampler cache; do
  first=${axis%% *}
  list=$(words "$first")
  [ -n "$list" ] || { echo "FAIL: no words for --$first in --help"; exit 1; }
  for flag in $axis; do
    for word in $list; do
      if [[ $block_only == *" $word "* ]]; then
        out=$(run_block "--$flag" "$word") || { echo "FAIL: generate (sdar) --$flag $word"; exit 1; }
        grep -q '"canvas":\[\[' <<<"$out" || { echo "FAIL: generate (sdar) --$flag $word: no canvas: $out"; exit 1; }
      elif [ "$word" = llama_cli ]; then
        out=$(run_llama_cli "--$flag" "$word") || { echo "FAIL: generate --$flag $word"; exit 1; }
      else
        out=$(run "--$flag" "$word") || { echo "FAIL: generate --$flag $word"; exit 1; }
      fi
      grep -q '"outputs":\[\[' <<<"$out" || { echo "FAIL: generate --$flag $word: $out"; exit 1; }
      n=$((n + 1))
    done
  done
done

# Aliases and synonyms are the same generation.
same() {
  [ "$(run $1)" = "$(run $2)" ] || { echo "FAIL: '$1' and '$2' differ"; exit 1; }
}
differ() {
  [ "$(run $1)" != "$(run $2)" ] || { echo "FAIL: '$1' and '$2' give the same tokens: the checks below see nothing"; exit 1; }
}
differ "--unmask confidence" "--unmask margin"
differ "--unmask random" "--alg origin"
same "--unmask confidence" "--alg maskgit_plus"
same "--unmask confidence" "--remasking low_confidence"
same "--unmask margin" "--alg topk_margin"
same "--alg origin" "--unmask random --schedule timestep_bernoulli"
same "--unmask confidence --schedule uniform --cache none" ""  # LLaDA's defaults
same "--cache dual --cache-refresh 1" "--cache none"          # refreshing every step is exact
same "--schedule threshold --threshold 0.5" "--threshold 0.5"
same "--sampler gumbel" ""                                    # LLaDA's token rule is the default
differ "--sampler gumbel --temperature 1" "--sampler categorical --temperature 1"
[ "$(run_llama_cli --schedule llama_cli)" = "$(run_llama_cli --schedule llama_cli --unmask sequential)" ] ||
  { echo "FAIL: llama_cli's default order is not sequential"; exit 1; }
run --unmask sequential | grep -q '"outputs":\[\[' || { echo "FAIL: llada --unmask sequential"; exit 1; }

# Block-diffusion models: the block cache is exact; the words of the other families are refused, and theirs
# refused by the bidirectional families.
no_forwards() { sed 's/"forwards":[0-9]*//'; }
[ "$(run_block --cache block | no_forwards)" = "$(run_block --cache none | no_forwards)" ] ||
  { echo "FAIL: sdar --cache block and --cache none differ"; exit 1; }
[ "$(run_block --remasking low_confidence_dynamic)" = "$(run_block)" ] || { echo "FAIL: sdar default"; exit 1; }
[ "$(run_block --remasking low_confidence_static)" = "$(run_block --unmask confidence --schedule uniform)" ] ||
  { echo "FAIL: sdar low_confidence_static"; exit 1; }
for args in "--cache dual" "--unmask margin" "--schedule factor" "--sampler gumbel" "--block-loop llada3"; do
  if run_block $args >/dev/null 2>&1; then echo "FAIL: sdar $args succeeded"; exit 1; fi
done
for args in "--remasking low_confidence_static" "--alg low_confidence_dynamic" \
  "--cache block" "--block-loop sdar"; do
  if run $args >/dev/null 2>&1; then echo "FAIL: llada $args succeeded"; exit 1; fi
done
run_block --block-loop llada2.1 | grep -q '"canvas":' || { echo "FAIL: llada2.1 loop on sdar"; exit 1; }

# Unknown words: non-zero exit, the flag named, the words listed; the same for infill and serve.
fails() {
  local err
  if err=$("$@" 2>&1); then echo "FAIL: '$*' succeeded"; exit 1; fi
  grep -q "is not one of" <<<"$err" || { echo "FAIL: '$*' does not list the words: $err"; exit 1; }
  echo "$err"
}
fails run --alg magic | grep -q -- "--alg: 'magic' is not one of confidence, margin" || { echo "FAIL: --alg message"; exit 1; }
fails run --schedule fast | grep -q -- "--schedule: 'fast' is not one of uniform," || { echo "FAIL: --schedule"; exit 1; }
fails run --cache all | grep -q -- "--cache: 'all' is not one of none, prefix, dual, block" || { echo "FAIL: --cache"; exit 1; }
fails "$bin" infill -q -m "$root/models/demo" --text 'a <|mask:4|> b' --remasking magic >/dev/null
fails timeout 20 "$bin" serve -q -m "$model" --port 0 --alg magic >/dev/null
fails timeout 20 "$bin" serve -q -m "$model" --port 0 --cache everything >/dev/null

# infill takes the same words (one of each axis).
"$bin" infill -q --json --dtype f32 -m "$root/models/demo" --text 'def f(x):
    return <|mask:4|>
' --alg topk_margin --schedule timestep --cache prefix | grep -q '"spans"' || { echo "FAIL: infill with words"; exit 1; }
echo "strategy_words: ok ($n generations)"
