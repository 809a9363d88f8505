#!/usr/bin/python3
"""Export the GPU recipe's outputs (gpu_run.sh: teacher.pt, ar.pt, student.pt) as the shipped model directories.

    /usr/bin/python3 tools/train/export_gpu.py --kind dllm    --pt RUN/teacher.pt --out models/demo
    /usr/bin/python3 tools/train/export_gpu.py --kind student --pt RUN/student.pt --out models/demo-fast \
        --teacher-pt RUN/teacher.pt
    /usr/bin/python3 tools/train/export_gpu.py --kind ar      --pt RUN/ar.pt      --out models/demo-ar

Weights are written as BF16 safetensors (the GPU run's bf16 copies of its f32 master weights; everything below is
computed from the file as written, in f32, on this CPU with Debian's torch). Also: config.json,
generation_config.json, tokenizer files (models/demo's, byte for byte), training_log.csv, eval_log.csv,
loss_curve.png, eval_heldout.json (corpus v1's 14 held-out stdlib files, the protocol of the first demo model's card,
so the numbers compare; plus the GPU run's corpus v2 held-out numbers), reference_generation.json (the engine's
parity fixture) and README.md (the card: its hand-written parts are tools/train/cards/<kind>.md).
"""
import argparse
import csv
import datetime
import json
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from train import _threads_from_argv  # noqa: E402,F401  (thread env before torch)
import numpy as np  # noqa: E402
import torch  # noqa: E402

import data  # noqa: E402
import safetensors_io  # noqa: E402
from bpe_tokenizer import BPETokenizer  # noqa: E402
from export import SAMPLE_PROMPTS, prompt_text  # noqa: E402
from export_ar import from_llama_state_dict, greedy, llama_config, llama_state_dict  # noqa: E402
from model import LLaDAModel, llada_generate, num_params  # noqa: E402
from train import evaluate, evaluate_ar  # noqa: E402

ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
TOKENIZER_DIR = os.path.join(ROOT, "models", "demo")
EVAL_RATIOS = [0.15, 0.3, 0.5, 0.7, 0.85]
GEN = {"gen_length": 64, "block_length": 64, "steps": 64}


def v1_heldout_stream(tok):
    eos = tok.token_to_id("<|endoftext|>")
    out = []
    for rel in data.read_heldout_list():
        out.extend(tok.encode_ordinary(data.read_text(rel)))
        out.append(eos)
    return np.array(out, dtype=np.int32)


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1 if path.endswith("generation.json") else 2)
        f.write("\n")


def write_logs(meta, out, kind):
    with open(os.path.join(out, "training_log.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "loss", "lr", "elapsed_s"] if kind == "student" else
                   ["step", "tokens", "loss", "lr", "elapsed_s"])
        w.writerows(meta["train_log"])
    if kind != "student":
        with open(os.path.join(out, "eval_log.csv"), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["step", "tokens", "ratio", "loss", "acc"])
            for step, tokens, res in meta["eval_log"]:
                for r, (loss, acc) in res.items():
                    w.writerow([step, tokens, r, f"{loss:.5f}", f"{acc:.5f}"])


def plot(meta, path, kind):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # noqa: BLE001
        print("matplotlib unavailable, no plot:", e)
        return False
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=100)
    rows = meta["train_log"]
    if kind == "student":
        ax.plot([r[0] for r in rows], [r[1] for r in rows], lw=1, label="certainty-forcing loss (CE + 2 x entropy)")
        ax.set_xlabel("distillation step")
    else:
        label = "train next-token CE" if kind == "ar" else "train LLaDA loss (1/t weighted)"
        ax.plot([r[1] / 1e6 for r in rows], [r[2] for r in rows], lw=1, label=label)
        by = {}
        for step, tokens, res in meta["eval_log"]:
            for r, (loss, _) in res.items():
                by.setdefault(r, []).append((tokens / 1e6, loss))
        for r, pts in by.items():
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", ms=3, lw=1,
                    label="held-out next-token CE" if r == "next" else f"held-out masked-token CE, t={r}")
        ax.set_xlabel("training tokens (M)")
    ax.set_ylabel("loss (nats)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kind", required=True, choices=["dllm", "student", "ar"])
    ap.add_argument("--pt", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--teacher-pt", help="--kind student: the teacher's output (its card is linked)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    ck = torch.load(args.pt)
    cfg, meta = ck["cfg"], ck["meta"]
    sd = {k: v.float() for k, v in ck["state_dict"].items()}
    ar = args.kind == "ar"
    model = LLaDAModel(cfg, causal=ar)
    model.load_state_dict(sd)
    st_path = os.path.join(args.out, "model.safetensors")
    if ar:
        safetensors_io.save(llama_state_dict(model.state_dict(), cfg["n_layers"]), st_path,
                            metadata={"format": "pt"}, dtype="BF16")
        model.load_state_dict(from_llama_state_dict(safetensors_io.load(st_path), cfg["n_layers"]))
        write_json(os.path.join(args.out, "config.json"), llama_config(cfg, "BF16"))
        write_json(os.path.join(args.out, "generation_config.json"), {
            "_from_model_config": True, "bos_token_id": cfg["bos_token_id"], "eos_token_id": cfg["eos_token_id"],
            "pad_token_id": cfg["pad_token_id"], "transformers_version": "4.46.3"})
    else:
        safetensors_io.save(model.state_dict(), st_path, metadata={"format": "pt"}, dtype="BF16")
        model.load_state_dict(safetensors_io.load(st_path))
        write_json(os.path.join(args.out, "config.json"), {k: v for k, v in cfg.items() if k != "bos_token_id"})
        write_json(os.path.join(args.out, "generation_config.json"), {
            "_from_model_config": True, "bos_token_id": cfg["bos_token_id"], "eos_token_id": cfg["eos_token_id"],
            "pad_token_id": cfg["pad_token_id"], "mask_token_id": cfg["mask_token_id"],
            "transformers_version": "4.46.3"})
    model.eval()
    for fn in ("tokenizer.json", "tokenizer_config.json"):
        src, dst = os.path.join(TOKENIZER_DIR, fn), os.path.join(args.out, fn)
        if os.path.abspath(src) != os.path.abspath(dst):
            shutil.copy(src, dst)
    tok = BPETokenizer(os.path.join(args.out, "tokenizer.json"))
    write_logs(meta, args.out, args.kind)
    have_plot = plot(meta, os.path.join(args.out, "loss_curve.png"), args.kind)

    held = v1_heldout_stream(tok)

    class A:
        seq_len = 256
        eval_batch = 16
        eval_ratios = EVAL_RATIOS
    t0 = time.time()
    n_seq = len(held) // A.seq_len
    ev = {"heldout_files": "tools/train/heldout_files.txt (corpus v1's 14 stdlib files)",
          "heldout_tokens": int(len(held)), "sequences": n_seq, "seq_len": A.seq_len,
          "gpu_run_corpus_v2_heldout": meta["final_eval"]["v2"],
          "gpu_run_corpus_v1_heldout": meta["final_eval"]["v1"]}
    if ar:
        (ce, acc), = evaluate_ar(model, held, A).values()
        ev.update({"next_token_ce": round(ce, 4), "next_token_acc": round(acc, 4),
                   "perplexity": round(float(np.exp(ce)), 2)})
    else:
        res = evaluate(model, held, A, cfg["mask_token_id"])
        ev.update({"mask_seed": "torch.Generator().manual_seed(1234 + int(t*1000))",
                   "ratios": {str(r): {"masked_token_ce": round(loss, 4), "masked_token_acc": round(acc, 4),
                                       "perplexity": round(float(np.exp(loss)), 2)}
                              for r, (loss, acc) in res.items()}})
    print(f"held-out eval ({n_seq} seqs) in {time.time() - t0:.0f}s: {json.dumps(ev)}", flush=True)
    write_json(os.path.join(args.out, "eval_heldout.json"), ev)

    gens = []
    for rel, anchor, nl in SAMPLE_PROMPTS:
        ptxt = prompt_text(rel, anchor, nl)
        pids = tok.encode(ptxt)
        if ar:
            out = greedy(model, pids, GEN["gen_length"])
            gens.append({"file": rel, "prompt_text": ptxt, "prompt_ids": pids, "max_tokens": GEN["gen_length"],
                         "generated_ids": out, "generated_text": tok.decode(out)})
        else:
            out = llada_generate(model, pids, **GEN)
            gens.append({"file": rel, "prompt_text": ptxt, "prompt_ids": pids,
                         "kwargs": dict(GEN, temperature=0.0, cfg_scale=0.0, remasking="low_confidence"),
                         "generated_ids": out, "generated_text": tok.decode(out)})
        print(f"--- {rel}\n{ptxt}\033[1m{tok.decode(out)}\033[0m", flush=True)
    note = ("tools/train/export_ar.py greedy (full recompute per token, argmax = lowest id on ties), f32 compute, "
            "weights read back from model.safetensors; no stop at <|endoftext|>") if ar else \
        ("tools/train/model.py llada_generate (official LLaDA generate, low_confidence, temperature 0, cfg 0), "
         "f32 compute, weights from model.safetensors")
    write_json(os.path.join(args.out, "reference_generation.json"), {"note": note, "cases": gens})
    write_card(args, cfg, meta, model, ev, gens, have_plot)
    total = sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out))
    print(f"wrote {args.out}: {total / 1e6:.1f} MB")


TITLES = {
    "dllm": "# dllm demo model: a LLaDA-architecture masked diffusion model for Python code",
    "student": "# demo-fast: the demo dLLM distilled for few-step decoding (certainty forcing)",
    "ar": "# demo-ar: the demo dLLM's autoregressive twin (Llama layout)",
}


def write_card(args, cfg, meta, model, ev, gens, have_plot):
    a = meta["args"]
    n_par = num_params(model)
    L = [TITLES[args.kind] + "\n"]
    L.append(open(os.path.join(HERE, "cards", f"{args.kind}.md")).read().strip() + "\n")
    L.append("## Model\n")
    L.append("| | |\n|---|---|")
    L.append(f"| parameters | {n_par:,} |")
    L.append(f"| hidden / layers / heads (head dim) | {cfg['d_model']} / {cfg['n_layers']} / {cfg['n_heads']} "
             f"({cfg['d_model'] // cfg['n_heads']}) |")
    L.append(f"| MLP (SwiGLU) | {cfg['mlp_hidden_size']} |")
    L.append(f"| vocab | {cfg['vocab_size']} (byte-level BPE of the first demo model: eos = pad `<|endoftext|>` "
             f"{cfg['eos_token_id']}, bos {cfg['bos_token_id']}, mask `<|mdm_mask|>` {cfg['mask_token_id']}, "
             f"fim markers 4093-4095 reserved) |")
    L.append(f"| rope_theta / rms eps | {cfg['rope_theta']:g} / {cfg['rms_norm_eps']:g} |")
    L.append(f"| trained context | {a['seq_len']} tokens (max {cfg['max_sequence_length']}) |")
    L.append("| weights | `model.safetensors`, BF16 (the engine runs a BF16 file in bf16 by default; `--dtype f32` is "
             "the exact path that reproduces `reference_generation.json`, and the checks below compute in f32) |\n")
    L.append("## Data: corpus v2\n")
    L.append("The Python 3.11 standard library (corpus v1, the same 652 files and the same 14 held-out files) plus "
             "the Python sources of the 269 Debian 12 packages in `tools/train/corpus_packages.txt` (django, sympy, "
             "numpy, scipy, pandas, matplotlib, twisted, ansible, sqlalchemy, calibre, ...), built by "
             "`tools/train/corpus.py`: test and vendored directories, generated-looking files and exact duplicates "
             "dropped, at most 2.5 MB per top-level package. 21,494 files; split by file with v1's rule (held out "
             "iff `sha1(key)[:8] % 1000 < 30`): **training 20,845 files, 76,076,033 tokens; held out 649 files "
             "(`tools/train/heldout_files_v2.txt`), 2,661,416 tokens**. Tokenizer: models/demo's (trained on v1's "
             "training files), unchanged; the GPU run's token ids were checked identical to the engine's "
             "tokenizer on the whole held-out set (sha256 of the id stream).\n")
    L.append("## Training\n")
    if args.kind == "student":
        L.append(f"From the teacher (models/demo) by certainty-forcing distillation (`tools/train/gpu_pipeline.py "
                 f"distill`, after dParallel and LLaDA2.0's confidence-aware training): {meta['teacher_fills']:,} "
                 f"teacher fills of training windows (spans of 8/16/32/64 tokens inside a 256-token window or at "
                 f"its end, filled by the teacher with the exact schedule: one token per step, low-confidence, "
                 f"semi-autoregressive blocks of 32); then {meta['steps']:,} steps of batch {a['batch']}, AdamW "
                 f"lr {a['lr']:g} (warmup {a['warmup']}, cosine to 0.1x, no weight decay), loss = CE on the "
                 f"teacher's tokens at block k's masked positions (blocks before k clean, block k masked at "
                 f"t ~ U(0,1] and, in a second forward, with the complementary mask, later blocks fully masked) + "
                 f"2 x entropy (softmax at temperature 0.5) at the positions the student already predicts "
                 f"correctly. {meta['gpu']}, torch {meta['torch']}, {meta['wall_s']:.0f} s in all.\n")
        L.append("How often the teacher's exact-schedule fill equals the original text (training windows): " +
                 ", ".join(f"{k} {v:.3f}" for k, v in meta["fill_agreement"].items()) + ".\n")
    else:
        obj = ("next-token cross-entropy (causal mask)" if args.kind == "ar" else
               "the LLaDA objective: per sequence t ~ U(0,1] (stratified in the batch), each token masked with "
               "p = (1-1e-3) t + 1e-3, loss = masked-token CE / p summed, / (batch x length)")
        L.append(f"{obj}; {a['seq_len']}-token windows at random offsets of the training stream, 5% of batches "
                 f"cropped to a random length in [16, {a['seq_len']}]. AdamW (0.9/0.95, weight decay {a['wd']}, "
                 f"none on norms), lr {a['lr']:g}, {a['warmup']} warmup steps then cosine to 0.1x, clip 1.0, "
                 f"batch {a['batch']} x {a['seq_len']}, bf16 autocast with f32 master weights, seed {a['seed']} "
                 f"(`tools/train/gpu_pipeline.py train`).\n")
        L.append(f"* steps: {meta['steps']:,}; tokens: {meta['tokens']:,} (~{meta['tokens'] / 76076033:.1f} epochs)")
        L.append(f"* wall time: {meta['wall_s'] / 60:.1f} min on one {meta['gpu']} (torch {meta['torch']}), shared "
                 f"with the {'dLLM' if args.kind == 'ar' else 'AR twin'} trained beside it; the step count "
                 f"followed the measured step time to fill the GPU lease")
        last = meta["train_log"][-10:]
        L.append(f"* final train loss (mean of the last {len(last) * 50} steps' samples): "
                 f"{sum(r[2] for r in last) / len(last):.3f}\n")
    if have_plot:
        L.append("![loss curve](loss_curve.png)\n")
    L.append("## Held-out\n")
    if args.kind == "ar":
        L.append(f"Next-token CE and argmax accuracy, all {ev['sequences']} consecutive 256-token chunks of corpus "
                 f"v1's held-out stream (the first demo-ar's protocol; this engine's CPU, f32): CE "
                 f"**{ev['next_token_ce']:.3f}** (perplexity {ev['perplexity']:.1f}), accuracy "
                 f"**{ev['next_token_acc']:.3f}** (first demo-ar, 1.9M parameters, 4M tokens: 4.230 / 0.260). "
                 f"On corpus v2's held-out set (the GPU run, bf16, 4,096 chunks): CE "
                 f"{ev['gpu_run_corpus_v2_heldout']['next'][0]:.3f}, accuracy "
                 f"{ev['gpu_run_corpus_v2_heldout']['next'][1]:.3f}.\n")
    else:
        L.append(f"Masked-token CE and argmax accuracy at fixed mask ratios, all {ev['sequences']} consecutive "
                 f"256-token sequences of corpus v1's held-out stream (the first demo model's protocol and masks; "
                 f"CPU, f32), and corpus v2's held-out set (GPU run, bf16, 4,096 sequences):\n")
        L.append("| mask ratio t | CE (v1) | accuracy (v1) | CE (v2) | accuracy (v2) |\n|---|---|---|---|---|")
        for k, v in ev["ratios"].items():
            c2, a2 = ev["gpu_run_corpus_v2_heldout"][k]
            L.append(f"| {k} | {v['masked_token_ce']:.3f} | {v['masked_token_acc']:.3f} | {c2:.3f} | {a2:.3f} |")
        L.append("\nThe first demo model (1.9M parameters, 4M tokens, one CPU thread) had 5.762 / 0.109 at t=0.15 "
                 "on the same v1 sequences and masks.\n")
        if "infill_by_steps" in meta:
            ib = meta["infill_by_steps"]
            L.append("Span infill on the GPU (512 held-out v2 windows, a 32-token span with context on both sides, "
                     "exact-token accuracy, fixed number of steps, low-confidence, greedy):\n")
            L.append("| steps | " + " | ".join(ib["teacher"].keys()) + " |\n|---" * 1 + "|---" * len(ib["teacher"]) + "|")
            for who in ("teacher", "student"):
                L.append(f"| {who} | " + " | ".join(f"{v:.3f}" for v in ib[who].values()) + " |")
            L.append("\nThe engine's measurement (threshold decoding, forwards per token, confidence intervals) is "
                     "in bench/results/distillation.md.\n")
    L.append("## Sample (held-out prompts)\n")
    how = ("greedy, 64 tokens" if args.kind == "ar" else
           "official LLaDA `generate`, low-confidence remasking, gen_length 64, block_length 64, steps 64")
    L.append(f"{how}, computed with `tools/train/model.py` from `model.safetensors` (token ids in "
             f"`reference_generation.json`, which the engine's tests reproduce). Prompts from held-out files.\n")
    for g in gens:
        L.append(f"`{g['file']}`, prompt:\n\n```python\n{g['prompt_text'].rstrip()}\n```\n\ngenerated:\n")
        L.append(f"```python\n{g['generated_text']}\n```\n")
    L.append("## Reproduce\n")
    L.append("```sh\n" + RECIPE + "```\n")
    L.append(f"Exported {datetime.datetime.utcnow().strftime('%Y-%m-%d %H:%M')} UTC. Training data licenses: those "
             f"of the Debian packages listed (PSF for the standard library; BSD/MIT/Apache/GPL/LGPL for the "
             f"others).\n")
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write("\n".join(L))


RECIPE = """# corpus v2 (CPU machine, Debian 12): the packages' .deb files, unpacked outside the repo, then selected
mkdir -p /work/corpus/debs /work/corpus/root && cd /work/corpus/debs && \\
  cut -d= -f1 /work/main/tools/train/corpus_packages.txt | xargs -n1 apt-get download
for d in /work/corpus/debs/*.deb; do dpkg-deb -x "$d" /work/corpus/root; done
cd /work/main && /usr/bin/python3 tools/train/corpus.py --root /work/corpus/root --out .corpus
cp models/demo/tokenizer.json .corpus/   # + .corpus/heldout.sha256: "<count> <sha256>" of the engine's held-out ids
# one GPU call (H200: 503 s): tokenize, dLLM + AR twin side by side until t=370 s, distill until t=525 s
tools/train/gpu_run.sh .corpus OUT 370 405 525
# back on the CPU machine
/usr/bin/python3 tools/train/export_gpu.py --kind dllm --pt OUT/teacher.pt --out models/demo
/usr/bin/python3 tools/train/export_gpu.py --kind ar --pt OUT/ar.pt --out models/demo-ar
/usr/bin/python3 tools/train/export_gpu.py --kind student --pt OUT/student.pt --out models/demo-fast
"""


if __name__ == "__main__":
    main()
