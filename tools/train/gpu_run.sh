#!/bin/bash
# The demo models' GPU recipe in one call (tools/train/README.md "Corpus v2 on a GPU"): tokenize corpus v2, train
# the dLLM (teacher) and its AR twin side by side on one GPU, then distill the few-step student. Deadlines are
# absolute (seconds after this script starts) because the GPU lease is short: the step counts follow the measured
# step times and are recorded in each output's meta. Outputs: OUT/{teacher,ar,student}.pt (bf16 weights, config,
# logs), OUT/log.txt.
#   CORPUS_DIR holds train.txt.xz, heldout.txt.xz (corpus.py), heldout.sha256 (the engine's ids) and tokenizer.json
#   tools/train/gpu_run.sh CORPUS_DIR OUT [TRAIN_UNTIL_S=370] [DATA_UNTIL_S=405] [DISTILL_UNTIL_S=525]
set -u
corpus=$1 out=$2
t0=$(date +%s)
train_until=$((t0 + ${3:-370})) data_until=$((t0 + ${4:-405})) distill_until=$((t0 + ${5:-525}))
here=$(cd "$(dirname "$0")" && pwd)
work=/tmp/dllm_train_work
mkdir -p "$work" "$out"
export PYTHONUNBUFFERED=1
py() { python3 "$here/gpu_pipeline.py" "$@"; }
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import torch, tokenizers; print("torch", torch.__version__, "tokenizers", tokenizers.__version__)'
  py tokenize --corpus "$corpus" --tokenizer "$corpus/tokenizer.json" --work "$work" \
    --expect "$corpus/heldout.sha256"
  py train --objective llada --name teacher --work "$work" --out "$out" --until "$train_until" --lr 3e-3 &
  py train --objective ar --name ar --work "$work" --out "$out" --until "$train_until" --lr 2e-3 &
  wait
  py distill --work "$work" --out "$out" --teacher "$work/teacher_fp32.pt" --data-until "$data_until" \
    --until "$distill_until" --reserve 20
  echo "total $(( $(date +%s) - t0 )) s"
} 2>&1 | tee "$out/log.txt"
