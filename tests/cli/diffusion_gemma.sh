#!/usr/bin/env bash
# DiffusionGemma through the dllm command: the public generation cases of the f32 tiny checkpoint give the
# reference's tokens from `--generation-config` (the record's kwargs) and `--random-tape` (the record itself) (all
# nine cases of the three checkpoints run through the library in tests/denoise/diffusion_gemma_generate_test.cpp); the
# plain flags give the same as the file; Q8_0 / Q4_K GGUF copies run; `dllm bench` on a random file of a shape;
# bad input (a tape that runs out, a canvas of the wrong length, a wrong type in the generation config, a config
# field missing, these flags on another family) is an error naming it.
#
#   tests/cli/diffusion_gemma.sh PATH/TO/dllm REPO_ROOT
set -euo pipefail
bin=$1
root=$2
data=$root/tests/data/dgemma
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

expect_error() {  # expect_error PATTERN ARGS...
  local pattern=$1
  shift
  local out
  if out=$("$bin" "$@" 2>&1); then fail "succeeded: $*"; fi
  grep -q -- "$pattern" <<<"$out" || fail "'$*' did not say '$pattern': $out"
}

# One folder per case: kwargs.json, record.json, prompts (one --prompt-ids value per line), want.json.
python3 - "$data" "$tmp" <<'PY'
import json, os, sys
data, tmp = sys.argv[1], sys.argv[2]
n = 0
for model in ["dgemma_tiny_f32"]:
    path = os.path.join(data, "golden", model, "generate.jsonl")
    if not os.path.isfile(path):
        continue
    for line in open(path):
        rec = json.loads(line)
        d = os.path.join(tmp, "cases", model + "__" + rec["id"])
        os.makedirs(d)
        json.dump(rec["kwargs"], open(os.path.join(d, "kwargs.json"), "w"))
        json.dump(rec, open(os.path.join(d, "record.json"), "w"))
        open(os.path.join(d, "prompts"), "w").write("\n".join(",".join(map(str, p)) for p in rec["prompt_ids"]))
        json.dump(rec["generated"], open(os.path.join(d, "want.json"), "w"))
        n += 1
if n < 3:
    sys.exit("only %d generation cases" % n)
PY

cases=0
for d in "$tmp"/cases/*; do
  name=$(basename "$d")
  model=${name%%__*}
  args=()
  while read -r ids || [ -n "$ids" ]; do args+=(--prompt-ids "$ids"); done <"$d/prompts"
  "$bin" generate -m "$data/models/$model" --dtype f32 "${args[@]}" --generation-config "$d/kwargs.json" \
    --random-tape "$d/record.json" --json -q >"$d/got.json" || fail "$name: generate failed"
  python3 - "$d/got.json" "$d/want.json" "$name" <<'PY' || exit 1
import json, sys
got, want = json.load(open(sys.argv[1]))["outputs"], json.load(open(sys.argv[2]))
if got != want:
    sys.exit("FAIL: %s: outputs %s, the reference generated %s" % (sys.argv[3], got, want))
PY
  cases=$((cases + 1))
done
[ "$cases" -ge 3 ] || fail "only $cases cases ran"

# The plain flags say what the generation config says (the greedy case with a given first canvas).
d="$tmp/cases/dgemma_tiny_f32__greedy_p0_user_n1_s8"
canvas=$(python3 -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["decoder_input_ids"][0])))' \
  "$d/kwargs.json")
"$bin" generate -m "$data/models/dgemma_tiny_f32" --dtype f32 --prompt-ids "$(cat "$d/prompts")" \
  --max-new-tokens 16 --max-denoising-steps 8 --entropy-bound 0.1 --stability-threshold 1 \
  --confidence-threshold 0.005 --t-min 0 --t-max 0.0001 --canvas-ids "$canvas" --random-tape "$d/record.json" \
  --json -q >"$tmp/plain.json"
python3 - "$tmp/plain.json" "$d/want.json" <<'PY' || exit 1
import json, sys
if json.load(open(sys.argv[1]))["outputs"] != json.load(open(sys.argv[2])):
    sys.exit("FAIL: the plain flags did not give the generation config's tokens")
PY

# GGUF copies run (F32 token for token is tests/denoise's; here Q8_0, and Q4_K (Q4_0 where d = 64 is not whole
# Q4_K blocks; the bench below runs real Q4_K experts) end to end).
for type in q8_0 q4_k; do
  "$bin" convert -m "$data/models/dgemma_tiny_f32" -o "$tmp/b-$type.gguf" --type "$type" -q
  out=$("$bin" generate -m "$tmp/b-$type.gguf" --prompt-ids 2,10,20,30 --max-new-tokens 12 \
    --max-denoising-steps 4 --seed 3 --json -q)
  python3 -c 'import json,sys; o=json.loads(sys.argv[1])["outputs"]; assert len(o)==1 and len(o[0])==16, o' \
    "$out" || fail "$type: $out"
done

# A random file of a shape, memory-mapped, timed.
"$bin" bench --shape diffusion-gemma-tiny --random-file "$tmp/random.gguf" --context 16 --repeat 1 --generate \
  --json >"$tmp/bench.json"
python3 - "$tmp/bench.json" <<'PY' || exit 1
import json, sys
b = json.load(open(sys.argv[1]))
assert b["step_seconds"] > 0 and b["gflops"] > 0 and b["canvas"] == 16, b
assert b["generate"]["decoder_calls"] >= 1, b
PY

# Bad input.
record="$tmp/cases/dgemma_tiny_f32__greedy_p0_user_n1_s8/record.json"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r["tape_randint"]=r["tape_randint"][:3]; json.dump(r, open(sys.argv[2],"w"))' \
  "$record" "$tmp/short.json"
expect_error "ran out" generate -m "$data/models/dgemma_tiny_f32" --prompt-ids 2,339,406 --max-new-tokens 16 \
  --max-denoising-steps 8 --random-tape "$tmp/short.json"
expect_error "tape_" generate -m "$data/models/dgemma_tiny_f32" --prompt-ids 2,339 \
  --random-tape "$tmp/plain.json"
expect_error "20" generate -m "$data/models/dgemma_tiny_f32" --prompt-ids 2,339,406 --max-new-tokens 16 \
  --canvas-ids "$(python3 -c 'print(",".join(["5"] * 20))')"
echo '{"t_min": "low"}' >"$tmp/bad.json"
expect_error "t_min" generate -m "$data/models/dgemma_tiny_f32" --prompt-ids 2,339 --generation-config "$tmp/bad.json"
cp -r "$data/models/dgemma_tiny_f32" "$tmp/broken"
python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); del c["text_config"]["moe_intermediate_size"]; json.dump(c, open(sys.argv[1],"w"))' \
  "$tmp/broken/config.json"
expect_error "moe_intermediate_size" generate -m "$tmp/broken" --prompt-ids 2,339
expect_error "diffusion_gemma" generate -m "$root/models/demo" --prompt-ids 1,2,3 --gen-length 8 --entropy-bound 0.2
expect_error "CPU backend only" generate -m "$data/models/dgemma_tiny_f32" --prompt-ids 2,339 --backend vulkan

echo "diffusion_gemma: ok ($cases cases)"
