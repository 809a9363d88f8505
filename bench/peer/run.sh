#!/usr/bin/env bash
# dllm vs llama.cpp on the same GGUF files, llama-bench's pp256 / tg64 (issue 15 item 2, issue 14).
#
#   bench/peer/run.sh [BUILD_DIR=build] [WORK_DIR=/work/peer] [REPEAT=5]
#
# llama.cpp runs from node-llama-cpp's prebuilt binaries (npm, installed into WORK_DIR/nlc, outside the repo;
# ggml picks its CPU variant at run time, reported as cpu_backend). The model is Qwen2.5-0.5B's shape with random
# weights (bench/peer/make_random_qwen2.py) converted by `dllm convert` to F16, Q8_0 and Q4_K: the same file for
# both engines. Each file: dllm then llama.cpp, then llama.cpp then dllm (order effects cancel in the medians).
# Writes WORK_DIR/results.jsonl and prints a Markdown table. Run on a quiet machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
work=${2:-/work/peer}
repeat=${3:-5}
mkdir -p "$work/models" "$work/nlc"
if [ ! -d "$work/nlc/node_modules/node-llama-cpp" ]; then
  (cd "$work/nlc" && npm init -y >/dev/null && npm i -E node-llama-cpp@3.21.1 --no-audit --no-fund >/dev/null)
fi
hf=$work/models/qwen2.5-0.5b-random
[ -f "$hf/model.safetensors" ] || /usr/bin/python3 "$root/bench/peer/make_random_qwen2.py" "$hf"
out=$work/results.jsonl
: >"$out"
for t in f16 q8_0 q4_k; do
  g=$work/models/qwen2.5-0.5b-random-$t.gguf
  [ -f "$g" ] || "$build/dllm" convert -q -m "$hf" -o "$g" --type "$t"
  dllm_run() {
    "$build/dllm" bench --ar -m "$g" --pp 256 --tg 64 --repeat "$repeat" --json 2>/dev/null |
      python3 -c "import json,sys; j=json.load(sys.stdin); j['engine']='dllm'; j['type']='$t'; print(json.dumps(j))" >>"$out"
  }
  llama_run() {
    NODE_PATH=$work/nlc/node_modules node "$root/bench/peer/llama_cpp_bench.mjs" "$g" --pp 256 --tg 64 \
      --repeat "$repeat" --threads 2 |
      python3 -c "import json,sys; j=json.load(sys.stdin); j['type']='$t'; print(json.dumps(j))" >>"$out"
  }
  dllm_run; llama_run; llama_run; dllm_run
  echo "$t done" >&2
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
peak = next(r["peak_f32_fma_gflops_measured"] for r in rows if r["engine"] == "dllm")
bw = next(r["memory_read_gb_per_s_measured"] for r in rows if r["engine"] == "dllm")
print(f"machine: f32 FMA peak {peak:.0f} GFLOP/s, memory read {bw:.1f} GB/s (dllm bench's own measurements)\n")
print("| weights | dllm pp256 tok/s | llama.cpp pp256 tok/s | pp ratio | dllm tg64 tok/s | llama.cpp tg64 tok/s | tg ratio | dllm tg % of bandwidth |")
print("|---|---|---|---|---|---|---|---|")
for t in ("f16", "q8_0", "q4_k"):
    d = [r for r in rows if r["type"] == t and r["engine"] == "dllm"]
    l = [r for r in rows if r["type"] == t and r["engine"] != "dllm"]
    dpp = statistics.median(r["pp_tokens_per_second"] for r in d)
    lpp = statistics.median(r["pp_tokens_per_second"] for r in l)
    dtg = statistics.median(r["tg_tokens_per_second"] for r in d)
    ltg = statistics.median(r["tg_tokens_per_second"] for r in l)
    frac = statistics.median(r["tg_fraction_of_bandwidth"] for r in d)
    print(f"| {t} | {dpp:.1f} | {lpp:.1f} | {dpp / lpp:.2f} | {dtg:.1f} | {ltg:.1f} | {dtg / ltg:.2f} | {frac:.0%} |")
print("\nllama.cpp CPU backend:", sorted({v for r in rows if r["engine"] != "dllm" for v in r.get("cpu_backend", [])}))
PY
