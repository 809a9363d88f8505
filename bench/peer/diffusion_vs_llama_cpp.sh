#!/usr/bin/env bash
# dllm generate vs llama.cpp's llama-diffusion-cli on the same GGUF files with the same schedule (issue 14 item 4).
#
#   bench/peer/diffusion_vs_llama_cpp.sh LLAMA_BIN_DIR [BUILD_DIR=build] [WORK_DIR=/work/peer] [REPEAT=3]
#
# LLAMA_BIN_DIR holds llama.cpp's own llama-diffusion-cli, built by hand from llama.cpp's source for this CPU
# (Release, GGML_NATIVE=ON); this script downloads and builds nothing, and llama.cpp's source and binaries never
# enter this repository. The table names the commit (llama-diffusion-cli --version) and each file's real mix of
# tensor types (`dllm convert --type q4_k` on d_model 896 writes Q4_0 where rows are not whole 256-element blocks).
# Each file is read once before each run (this VM drops page cache between runs: a first forward would otherwise
# read from disk). The model is a random LLaDA at a 0.5B shape (bench/peer/make_random_llada.py) converted by `dllm
# convert` to F32, BF16, F16, Q8_0 and Q4_K: the same file for both engines. The schedule is llama-diffusion-cli's
# own: a 256-token canvas (-ub 256: a 33-token prompt, BOS included, and 223 masks), block length 32, STEPS steps
# (default 16: 2 per block), --top-k 1 --temp 0 (deterministic); dllm runs it as `--schedule llama_cli` (the same
# loop, forward for forward: docs/denoising.md). Per file: dllm then llama.cpp, then llama.cpp then dllm, REPEAT
# times (order effects cancel in the medians). Both report the generation time without the load; seconds per step
# = that time / steps. The output tokens of both are compared (identical: yes / no).
#
# Then the trained demo model (models/demo converted to F32 and to F16 GGUF): token identity on a real prompt with
# the chat template both apply (F16: dllm's f16 weights against llama.cpp's, under 64 steps and under an
# order-free schedule, one step per block: every masked position committed by its argmax at once, so the commit
# order cannot differ), and end to end: llama-diffusion-cli's schedule (64 steps, and 256: one token per step, as
# the reference generate() runs) over a 256 canvas against dllm with --cache dual and a confidence threshold (the
# Fast-dLLM settings), generated tokens per second of wall time of the whole command.
# Writes WORK_DIR/diffusion_results.jsonl and prints a Markdown table. Run on a quiet machine.
set -euo pipefail
if [ $# -lt 1 ] || [ ! -x "$1/llama-diffusion-cli" ]; then
  echo "usage: $0 LLAMA_BIN_DIR [BUILD_DIR] [WORK_DIR] [REPEAT]   (LLAMA_BIN_DIR/llama-diffusion-cli must exist)" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
llama=$(cd "$1" && pwd)/llama-diffusion-cli
build=${2:-$root/build}
work=${3:-/work/peer}
repeat=${4:-3}
steps=${STEPS:-16}
types=${TYPES:-"f32 bf16 f16 q8_0 q4_k"}
mkdir -p "$work/models"
hf=$work/models/llada-0.5b-random
[ -f "$hf/model.safetensors" ] || /usr/bin/python3 "$root/bench/peer/make_random_llada.py" "$hf"
out=$work/diffusion_results.jsonl
: >"$out"

# The prompt: 32 placeholder tokens <100>..<131> (llama.cpp adds BOS 126080, as the LLaDA family does).
prompt_text=$(python3 -c "print(''.join(f'<{i}>' for i in range(100, 132)))")
prompt_ids=$(python3 -c "print(','.join(str(i) for i in [126080] + list(range(100, 132))))")

# llama-diffusion-cli logs everything to stderr: "total time: X ms" then the detokenized output.
llama_parse() {  # ENGINE TYPE LOGFILE WALL
  python3 - "$@" <<'PY'
import json, re, sys
engine, typ, log, wall = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
s = open(log, encoding="utf-8", errors="replace").read()
m = re.search(r"total time: ([0-9.]+)ms", s)
if not m:
    sys.exit(f"llama-diffusion-cli failed, its log:\n{s[-3000:]}")
rest = s[m.end():]
text = rest[rest.index(" I \n") + 4:].rstrip("\n") if " I \n" in rest else ""
print(json.dumps({"engine": engine, "type": typ, "seconds": float(m.group(1)) / 1000, "wall": wall,
                  "text": text, "ids": [int(x) for x in re.findall(r"<(\d+)>", text)]}))
PY
}
dllm_parse() {  # ENGINE TYPE JSONFILE WALL
  python3 - "$@" <<'PY'
import json, sys
engine, typ, path, wall = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
j = json.load(open(path))
print(json.dumps({"engine": engine, "type": typ, "seconds": j["seconds"], "wall": wall, "forwards": j["forwards"],
                  "text": j.get("texts", [""])[0], "ids": j["outputs"][0]}))
PY
}
now() { date +%s.%N; }

commit=$("$llama" --version 2>&1 | sed -n 's/^version: //p')
for t in $types; do
  g=$work/models/llada-0.5b-random-$t.gguf
  [ -f "$g" ] || "$build/dllm" convert -q -m "$hf" -o "$g" --type "$t"
  echo "{\"engine\": \"mix\", \"type\": \"$t\", \"mix\": \"$(python3 "$root/bench/peer/gguf_type_mix.py" "$g")\", \"commit\": \"$commit\"}" >>"$out"
  dllm_run() {
    cat "$g" >/dev/null
    local t0; t0=$(now)
    "$build/dllm" generate -m "$g" --prompt-ids "$prompt_ids" --schedule llama_cli --gen-length 223 \
      --block-length 32 --steps "$steps" --json 2>/dev/null >"$work/d.json"
    dllm_parse dllm "$t" "$work/d.json" "$(python3 -c "print($(now) - $t0)")" >>"$out"
  }
  llama_run() {
    cat "$g" >/dev/null
    local t0; t0=$(now)
    "$llama" -m "$g" -p "$prompt_text" -ub 256 --diffusion-block-length 32 --diffusion-steps "$steps" \
      --top-k 1 --temp 0 -t 2 >/dev/null 2>"$work/l.log"
    llama_parse llama.cpp "$t" "$work/l.log" "$(python3 -c "print($(now) - $t0)")" >>"$out"
  }
  for _ in $(seq 1 "$repeat"); do dllm_run; llama_run; llama_run; dllm_run; done
  echo "$t done" >&2
done

# The demo model: tokens on a real prompt (both apply the chat template), and end to end.
demo=$work/models/demo-f32.gguf
[ -f "$demo" ] || "$build/dllm" convert -q -m "$root/models/demo" -o "$demo" --type f32
demo_prompt='def parse_args(argv):'
n_prompt=$(echo "\"$demo_prompt\"" | "$build/dllm" tokenize --tokenizer "$demo" | python3 -c "import json,sys; print(len(json.load(sys.stdin)))")
n_prompt=$((n_prompt + 1))  # the chat template's <|startoftext|>
demo16=$work/models/demo-f16.gguf
[ -f "$demo16" ] || "$build/dllm" convert -q -m "$root/models/demo" -o "$demo16" --type f16
for demo_steps in 8 64; do  # 8: one step per block of 32 (order-free)
  "$build/dllm" generate -m "$demo16" -p "$demo_prompt" --chat --schedule llama_cli --gen-length $((256 - n_prompt)) \
    --block-length 32 --steps $demo_steps --json 2>/dev/null >"$work/d.json"
  dllm_parse dllm demo-f16-$demo_steps "$work/d.json" 0 >>"$out"
  "$llama" -m "$demo16" -p "$demo_prompt" -ub 256 --diffusion-block-length 32 --diffusion-steps $demo_steps \
    --top-k 1 --temp 0 -t 2 >/dev/null 2>"$work/l.log"
  llama_parse llama.cpp demo-f16-$demo_steps "$work/l.log" 0 >>"$out"
done
for _ in $(seq 1 "$repeat"); do
  cat "$demo" >/dev/null
  t0=$(now)
  "$build/dllm" generate -m "$demo" -p "$demo_prompt" --chat --schedule llama_cli --gen-length $((256 - n_prompt)) \
    --block-length 32 --steps 64 --json 2>/dev/null >"$work/d.json"
  dllm_parse dllm demo-exact "$work/d.json" "$(python3 -c "print($(now) - $t0)")" >>"$out"
  t0=$(now)
  "$llama" -m "$demo" -p "$demo_prompt" -ub 256 --diffusion-block-length 32 --diffusion-steps 64 --top-k 1 --temp 0 \
    -t 2 >/dev/null 2>"$work/l.log"
  llama_parse llama.cpp demo-exact "$work/l.log" "$(python3 -c "print($(now) - $t0)")" >>"$out"
  # One token per step, as the reference generate() runs by default (steps = the canvas: 8 blocks of 32 steps).
  t0=$(now)
  "$llama" -m "$demo" -p "$demo_prompt" -ub 256 --diffusion-block-length 32 --diffusion-steps 256 --top-k 1 \
    --temp 0 -t 2 >/dev/null 2>"$work/l.log"
  llama_parse llama.cpp demo-exact256 "$work/l.log" "$(python3 -c "print($(now) - $t0)")" >>"$out"
  t0=$(now)
  # dllm's own block schedule needs whole blocks of masks: 224 tokens (llama.cpp's canvas gives it 256 - prompt),
  # so the end-to-end comparison is in generated tokens per second of wall time.
  "$build/dllm" generate -m "$demo" -p "$demo_prompt" --chat --gen-length $(((256 - n_prompt) / 32 * 32)) \
    --block-length 32 --cache dual --threshold 0.9 --json 2>/dev/null >"$work/d.json"
  dllm_parse dllm demo-dual "$work/d.json" "$(python3 -c "print($(now) - $t0)")" >>"$out"
done

python3 - "$out" "$steps" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
mixes = {r["type"]: r["mix"] for r in rows if r["engine"] == "mix"}
commit = next((r["commit"] for r in rows if r["engine"] == "mix"), "?")
rows = [r for r in rows if r["engine"] != "mix"]
steps = int(sys.argv[2])
med = lambda xs: statistics.median(xs)
print(f"llama.cpp {commit} (llama-diffusion-cli). Random LLaDA 0.5B shape, 256-token canvas (33 prompt + 223), "
      f"block 32, {steps} steps, --top-k 1 --temp 0, 2 threads; medians [min-max] of the runs; seconds exclude loading\n")
print("| file (real mix of types) | dllm s/forward | llama.cpp s/forward | ratio | dllm tok/s | llama.cpp tok/s | tokens identical |")
print("|---|---|---|---|---|---|---|")
seen = []
for r in rows:
    if not r["type"].startswith("demo") and r["type"] not in seen:
        seen.append(r["type"])
for t in seen:
    d = [r for r in rows if r["type"] == t and r["engine"] == "dllm"]
    l = [r for r in rows if r["type"] == t and r["engine"] != "dllm"]
    # Both run the same loop, forward for forward (dllm counts them: an empty trailing block costs one too).
    fw = d[0]["forwards"]
    ds, ls = med([r["seconds"] for r in d]) / fw, med([r["seconds"] for r in l]) / fw
    rng = lambda rs: f"[{min(r['seconds'] for r in rs) / fw:.3f}-{max(r['seconds'] for r in rs) / fw:.3f}]"
    same = "yes" if all(r["ids"] == l[0]["ids"] for r in d + l) else "no"
    print(f"| {t.upper()} ({mixes.get(t, '?')}) | {ds:.3f} {rng(d)} | {ls:.3f} {rng(l)} | {ls / ds:.2f}x | "
          f"{223 / (ds * fw):.1f} | {223 / (ls * fw):.1f} | {same} |")
d = [r for r in rows if r["type"] == "demo-exact" and r["engine"] == "dllm"]
l = [r for r in rows if r["type"] == "demo-exact" and r["engine"] != "dllm"]
f = [r for r in rows if r["type"] == "demo-dual"]
if d and l:
    same = d[0]["text"] == l[0]["text"]
    print(f"\nDemo model (F32 GGUF), chat prompt, 256-token canvas, block 32:\n")
    print("| run | generated tokens | seconds (generation) | wall (whole command) | forwards | tokens/s (wall) | vs llama.cpp 64 / 256 steps |")
    print("|---|---|---|---|---|---|---|")
    def row(name, rs, n_forwards):
        n = len(rs[0]["ids"]) if rs[0]["engine"] == "dllm" else 256 - n_prompt
        w = med([r["wall"] for r in rs])
        return name, n, med([r["seconds"] for r in rs]), w, n_forwards, n / w
    n_prompt = 256 - len(d[0]["ids"])
    l256 = [r for r in rows if r["type"] == "demo-exact256"]
    out = [row("llama-diffusion-cli, 64 steps", l, 64), row("llama-diffusion-cli, 256 steps (one token per step)", l256, 256),
           row("dllm --schedule llama_cli, 64 steps", d, d[0]["forwards"]),
           row("dllm --cache dual --threshold 0.9", f, f[0]["forwards"])]
    for name, n, sec, w, fw, tps in out:
        print(f"| {name} | {n} | {sec:.3f} | {w:.3f} | {fw} | {tps:.1f} | {tps / out[0][5]:.2f}x / {tps / out[1][5]:.2f}x |")
    print(f"\nSame text from the exact schedule: {'yes' if same else 'no'}")
    if not same:
        print(f"dllm: {d[0]['text']!r}\nllama.cpp: {l[0]['text']!r}")
for st in (8, 64):
    pair = [r for r in rows if r["type"] == f"demo-f16-{st}"]
    if len(pair) == 2:
        same = pair[0]["text"] == pair[1]["text"]
        print(f"Demo model as F16 GGUF (dllm --dtype auto: f16 weights), {st} steps"
              f"{' (one per block: order-free)' if st == 8 else ''}: same text as llama.cpp's F16: {'yes' if same else 'no'}"
              f" ({len(pair[0]['text'])} characters)")
PY
