#!/usr/bin/env bash
# dllm vs llama.cpp on the same GGUF files, autoregressive pp256 / tg64 (issue 42: the peer's own tools).
#
#   bench/peer/run.sh LLAMA_BIN_DIR [BUILD_DIR=build] [WORK_DIR=/work/peer] [ROUNDS=3]
#
# LLAMA_BIN_DIR holds llama.cpp's own `llama-bench`, built by hand from llama.cpp's source for this CPU (Release,
# GGML_NATIVE=ON); this script downloads and builds nothing, and llama.cpp's source and binaries never enter
# this repository. llama-bench reports the commit it was built from (build_commit), which the table prints.
# The model is Qwen2.5-0.5B's shape with random weights (bench/peer/make_random_qwen2.py) converted by `dllm
# convert` to F16, Q8_0 and Q4_K: the same file for both engines. `dllm convert --type q4_k` on hidden 896 writes
# Q4_0 where rows are not whole 256-element blocks; the table names each file's real mix of types.
# Each file is read once before each engine's run (this VM drops page cache between runs: a first forward would
# otherwise read from disk). ROUNDS interleaved rounds per file: dllm, llama.cpp, llama.cpp, dllm; each run
# itself repeats 3 times (llama-bench -r 3 after its warm-up run; dllm bench --repeat 3, medians). Writes
# WORK_DIR/results.jsonl and prints a Markdown table of medians and [min-max] ranges. Run on a quiet machine.
set -euo pipefail
if [ $# -lt 1 ] || [ ! -x "$1/llama-bench" ]; then
  echo "usage: $0 LLAMA_BIN_DIR [BUILD_DIR] [WORK_DIR] [ROUNDS]   (LLAMA_BIN_DIR/llama-bench must exist)" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
llama_bench=$(cd "$1" && pwd)/llama-bench
build=${2:-$root/build}
work=${3:-/work/peer}
rounds=${4:-3}
types=${TYPES:-"f16 q8_0 q4_k"}
mkdir -p "$work/models"
hf=$work/models/qwen2.5-0.5b-random
[ -f "$hf/model.safetensors" ] || /usr/bin/python3 "$root/bench/peer/make_random_qwen2.py" "$hf"
out=$work/results.jsonl
: >"$out"
for t in $types; do
  g=$work/models/qwen2.5-0.5b-random-$t.gguf
  [ -f "$g" ] || "$build/dllm" convert -q -m "$hf" -o "$g" --type "$t"
  mix=$(python3 "$root/bench/peer/gguf_type_mix.py" "$g")
  dllm_run() {
    cat "$g" >/dev/null
    "$build/dllm" bench --ar -m "$g" --pp 256 --tg 64 --repeat 3 --threads 2 --json 2>/dev/null |
      python3 -c "import json,sys; j=json.load(sys.stdin); j['engine']='dllm'; j['type']='$t'; j['mix']='$mix'; print(json.dumps(j))" >>"$out"
  }
  llama_run() {
    cat "$g" >/dev/null
    "$llama_bench" -m "$g" -p 256 -n 64 -t 2 -r 3 -o json 2>/dev/null |
      python3 -c "
import json, statistics, sys
tests = json.load(sys.stdin)
j = {'engine': 'llama.cpp', 'type': '$t', 'mix': '$mix', 'build_commit': tests[0]['build_commit'],
     'cpu_info': tests[0].get('cpu_info', ''), 'backends': tests[0].get('backends', '')}
for r in tests:
    key = 'pp' if r['n_prompt'] > 0 else 'tg'
    j[key + '_tokens_per_second'] = statistics.median(r['samples_ts'])
print(json.dumps(j))" >>"$out"
  }
  for _ in $(seq 1 "$rounds"); do dllm_run; llama_run; llama_run; dllm_run; done
  echo "$t done" >&2
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = statistics.median
d0 = next(r for r in rows if r["engine"] == "dllm")
l0 = next(r for r in rows if r["engine"] != "dllm")
print(f"llama.cpp {l0['build_commit']} (llama-bench, backends {l0['backends']}, {l0['cpu_info']}); "
      f"machine: f32 FMA peak {d0['peak_f32_fma_gflops_measured']:.0f} GFLOP/s, memory read "
      f"{d0['memory_read_gb_per_s_measured']:.1f} GB/s (dllm bench's own measurements, first run)\n")
print("| file (real mix of types) | dllm precision | dllm pp256 tok/s | llama.cpp pp256 tok/s | pp ratio | "
      "dllm tg64 tok/s | llama.cpp tg64 tok/s | tg ratio | dllm tg % of bandwidth |")
print("|---|---|---|---|---|---|---|---|---|")
def cell(xs):
    return f"{med(xs):.1f} [{min(xs):.1f}-{max(xs):.1f}]"
for t in dict.fromkeys(r["type"] for r in rows):
    d = [r for r in rows if r["type"] == t and r["engine"] == "dllm"]
    l = [r for r in rows if r["type"] == t and r["engine"] != "dllm"]
    dpp, lpp = [r["pp_tokens_per_second"] for r in d], [r["pp_tokens_per_second"] for r in l]
    dtg, ltg = [r["tg_tokens_per_second"] for r in d], [r["tg_tokens_per_second"] for r in l]
    frac = med(r["tg_fraction_of_bandwidth"] for r in d)
    prec = ", ".join(f"{k} -> {v}" for k, v in d[0].get("precision", {}).items())
    print(f"| {t.upper()} ({d[0]['mix']}) | {prec} | {cell(dpp)} | {cell(lpp)} | {med(dpp) / med(lpp):.2f}x | "
          f"{cell(dtg)} | {cell(ltg)} | {med(dtg) / med(ltg):.2f}x | {frac:.0%} |")
print(f"\n{len(rows)} runs; each cell: median [min-max] over the runs of that engine on that file.")
PY
