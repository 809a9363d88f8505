#!/usr/bin/python3
"""Export a training checkpoint as the Hugging Face style directory models/demo/.

    /usr/bin/python3 tools/train/export.py --run /work/train_ckpt/run --tokenizer-dir /work/train_ckpt/tokenizer \
        --out models/demo [--dtype F32] [--threads 1]

Writes config.json, generation_config.json, model.safetensors (hand-written safetensors), tokenizer.json,
tokenizer_config.json, loss_curve.png (matplotlib, if installed), training_log.csv (train loss averaged per 20
steps), eval_log.csv (periodic held-out evals), eval_heldout.json (final held-out masked-token loss/accuracy on
ALL held-out sequences at several mask ratios), reference_generation.json (prompt ids + low-confidence
generations from this torch model, for engine parity tests) and README.md (model card).
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
from train import _threads_from_argv  # noqa: E402,F401  (sets OPENBLAS/OMP thread env before torch)
import numpy as np  # noqa: E402
import torch  # noqa: E402

import data  # noqa: E402
import safetensors_io  # noqa: E402
from bpe_tokenizer import BPETokenizer  # noqa: E402
from model import LLaDAModel, llada_generate, num_params  # noqa: E402
from train import evaluate  # noqa: E402

EVAL_RATIOS = [0.15, 0.3, 0.5, 0.7, 0.85]

# Held-out prompts for the sample / reference generations: (held-out file, text the prompt ends with).
# The prompt is the file's text from the start of the line containing `anchor` up to and including `anchor`'s
# line plus the following `lines` lines.
SAMPLE_PROMPTS = [
    ("textwrap.py", "def dedent(text):", 12),
    ("locale.py", "def _strcoll(a,b):", 0),
    ("email/policy.py", "class EmailPolicy(Policy):", 6),
]


def prompt_text(rel, anchor, n_lines):
    text = data.read_text(rel)
    lines = text.splitlines(keepends=True)
    for i, ln in enumerate(lines):
        if anchor in ln:
            return "".join(lines[i:i + 1 + n_lines])
    raise ValueError(f"{anchor!r} not in {rel}")


def downsample_log(path, every=20):
    rows = list(csv.DictReader(open(path)))
    out = []
    for i in range(0, len(rows), every):
        chunk = rows[i:i + every]
        out.append({"step": int(chunk[-1]["step"]), "tokens": int(chunk[-1]["tokens"]),
                    "loss": sum(float(r["loss"]) for r in chunk) / len(chunk),
                    "lr": float(chunk[-1]["lr"]), "elapsed_s": float(chunk[-1]["elapsed_s"])})
    return rows, out


def copy_tokenizer_and_logs(args, plot_fn):
    """tokenizer files from args.tokenizer_dir, training_log.csv (20-step means), eval_log.csv and
    loss_curve.png (plot_fn) into args.out. Returns (tokenizer, train rows, 20-step means, plot written)."""
    for fn in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(args.tokenizer_dir, fn), os.path.join(args.out, fn))
    tok = BPETokenizer(os.path.join(args.out, "tokenizer.json"))
    rows, ds = downsample_log(os.path.join(args.run, "train_log.csv"))
    with open(os.path.join(args.out, "training_log.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", "tokens", "loss_mean20", "lr", "elapsed_s"])
        for r in ds:
            w.writerow([r["step"], r["tokens"], f"{r['loss']:.4f}", f"{r['lr']:.6g}", f"{r['elapsed_s']:.0f}"])
    eval_rows = list(csv.DictReader(open(os.path.join(args.run, "eval_log.csv"))))
    shutil.copy(os.path.join(args.run, "eval_log.csv"), os.path.join(args.out, "eval_log.csv"))
    return tok, rows, ds, plot_fn(ds, eval_rows, os.path.join(args.out, "loss_curve.png"))


def plot(train_ds, eval_rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # noqa: BLE001
        print("matplotlib unavailable, no plot:", e)
        return False
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=100)
    ax.plot([r["tokens"] / 1e6 for r in train_ds], [r["loss"] for r in train_ds], lw=1.2,
            label="train LLaDA loss (1/t weighted, mean of 20 steps)")
    for ratio in sorted({float(r["ratio"]) for r in eval_rows}):
        rs = [r for r in eval_rows if float(r["ratio"]) == ratio]
        ax.plot([int(r["tokens"]) / 1e6 for r in rs], [float(r["loss"]) for r in rs], "o-", ms=3, lw=1,
                label=f"held-out masked-token CE, t={ratio}")
    ax.set_xlabel("training tokens (M)")
    ax.set_ylabel("loss (nats)")
    ax.set_ylim(0, min(8.5, max(r["loss"] for r in train_ds[1:]) + 0.5) if len(train_ds) > 1 else None)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True, help="training output dir (ckpt.pt, train_log.csv, eval_log.csv)")
    ap.add_argument("--tokenizer-dir", required=True)
    ap.add_argument("--out", default="models/demo")
    ap.add_argument("--dtype", default="F32", choices=["F32", "BF16"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--eval-seqs", type=int, default=0, help="limit the final eval (0 = all held-out sequences)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)

    ck = torch.load(os.path.join(args.run, "ckpt.pt"))
    cfg, targs = ck["cfg"], ck["args"]
    model = LLaDAModel(cfg)
    model.load_state_dict(ck["model"])
    model.eval()
    # weights as stored (BF16 export is evaluated with BF16-rounded weights)
    sd = {k: v for k, v in model.state_dict().items()}
    st_path = os.path.join(args.out, "model.safetensors")
    safetensors_io.save(sd, st_path, metadata={"format": "pt"}, dtype=args.dtype)
    model.load_state_dict(safetensors_io.load(st_path))
    model.eval()

    hf_cfg = {k: v for k, v in cfg.items() if k != "bos_token_id"}
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(hf_cfg, f, indent=2)
        f.write("\n")
    gen_cfg = {"_from_model_config": True, "bos_token_id": cfg["bos_token_id"], "eos_token_id": cfg["eos_token_id"],
               "pad_token_id": cfg["pad_token_id"], "mask_token_id": cfg["mask_token_id"],
               "transformers_version": "4.46.3"}
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump(gen_cfg, f, indent=2)
        f.write("\n")
    tok, rows, ds, have_plot = copy_tokenizer_and_logs(args, plot)

    # final held-out evaluation on all held-out sequences
    held = np.load(os.path.join(os.path.dirname(os.path.abspath(args.run)), "tokens_heldout.npy"))

    class A:  # evaluation settings
        seq_len = targs["seq_len"]
        eval_batch = 16
        eval_ratios = EVAL_RATIOS
    t0 = time.time()
    res = evaluate(model, held, A, cfg["mask_token_id"], args.eval_seqs or None)
    n_seq = len(held) // A.seq_len
    if args.eval_seqs:
        n_seq = min(n_seq, args.eval_seqs)
    print(f"held-out eval ({n_seq} seqs of {A.seq_len}) in {time.time() - t0:.0f}s:", res, flush=True)
    last_train = sum(float(r["loss"]) for r in rows[-100:]) / min(100, len(rows))
    ev = {"heldout_files": "tools/train/heldout_files.txt", "heldout_tokens": int(len(held)),
          "sequences": n_seq, "seq_len": A.seq_len, "mask_seed": "torch.Generator().manual_seed(1234 + int(t*1000))",
          "ratios": {str(r): {"masked_token_ce": round(l, 4), "masked_token_acc": round(a, 4),
                              "perplexity": round(float(np.exp(l)), 2)} for r, (l, a) in res.items()},
          "final_train_loss_mean_last100_steps": round(last_train, 4)}
    with open(os.path.join(args.out, "eval_heldout.json"), "w") as f:
        json.dump(ev, f, indent=2)
        f.write("\n")

    # sample / reference generations
    gens = []
    for rel, anchor, nl in SAMPLE_PROMPTS:
        assert rel in data.read_heldout_list()
        ptxt = prompt_text(rel, anchor, nl)
        pids = tok.encode(ptxt)
        t0 = time.time()
        out = llada_generate(model, pids, gen_length=64, block_length=64, steps=64)
        gens.append({"file": rel, "prompt_text": ptxt, "prompt_ids": pids,
                     "kwargs": {"gen_length": 64, "block_length": 64, "steps": 64, "temperature": 0.0,
                                "cfg_scale": 0.0, "remasking": "low_confidence"},
                     "generated_ids": out, "generated_text": tok.decode(out), "seconds": round(time.time() - t0, 1)})
        print(f"--- {rel}\n{ptxt}\033[1m{tok.decode(out)}\033[0m", flush=True)
    with open(os.path.join(args.out, "reference_generation.json"), "w") as f:
        json.dump({"note": "tools/train/model.py llada_generate (official LLaDA generate, low_confidence, "
                           "temperature 0, cfg 0), f32, weights from model.safetensors", "cases": gens}, f, indent=1)
        f.write("\n")

    write_card(args, cfg, targs, ck, model, ev, gens, ds, rows, have_plot, tok)
    total = sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out))
    print(f"wrote {args.out}: {total/1e6:.1f} MB")


def write_card(args, cfg, targs, ck, model, ev, gens, ds, rows, have_plot, tok):
    n_par = num_params(model)
    n_emb = cfg["embedding_size"] * cfg["d_model"]
    steps = ck["step"]
    tokens = steps * targs["batch"] * targs["seq_len"]
    train_files, held_files = data.split()
    train_tok = int(np.load(os.path.join(os.path.dirname(os.path.abspath(args.run)), "tokens_train.npy")).shape[0])
    hours = ck.get("elapsed_s", 0) / 3600
    r = ev["ratios"]
    L = []
    L.append("# dllm demo model: a small LLaDA-architecture masked diffusion model for Python code\n")
    L.append("A %.1fM-parameter masked diffusion language model with the **LLaDA architecture** (same `config.json` "
             "keys and tensor names as GSAI-ML/LLaDA-8B-Instruct: bidirectional transformer, RMSNorm, NeoX RoPE, "
             "SwiGLU, untied head, no biases), trained from scratch with the LLaDA objective on the Python 3.11 "
             "standard library sources, on one CPU thread. It is the engine's built-in demo model: small enough "
             "to ship in the repo and trained for real (about an hour of one shared CPU core), so its predictions "
             "and confidences are those of a trained model rather than noise. It is far too small and too briefly "
             "trained to be a useful code model: expect Python-flavoured tokens and local structure, not correct "
             "code.\n" % (n_par / 1e6))
    L.append("## Model\n")
    L.append("| | |\n|---|---|")
    L.append(f"| parameters | {n_par:,} ({(n_par - n_emb):,} without the input embedding) |")
    L.append(f"| d_model / layers / heads (head dim) | {cfg['d_model']} / {cfg['n_layers']} / {cfg['n_heads']} "
             f"({cfg['d_model'] // cfg['n_heads']}) |")
    L.append(f"| MLP hidden (SwiGLU) | {cfg['mlp_hidden_size']} |")
    L.append(f"| vocab | {cfg['vocab_size']} (byte-level BPE, {cfg['vocab_size'] - 262} merges + 256 bytes + 6 special) |")
    L.append(f"| special ids | eos = pad `<|endoftext|>` {cfg['eos_token_id']}, bos `<|startoftext|>` "
             f"{cfg['bos_token_id']}, mask `<|mdm_mask|>` {cfg['mask_token_id']}, `<|fim_prefix|>` "
             f"{tok.token_to_id('<|fim_prefix|>')}, `<|fim_middle|>` {tok.token_to_id('<|fim_middle|>')}, "
             f"`<|fim_suffix|>` {tok.token_to_id('<|fim_suffix|>')} (fim markers reserved, unused in training) |")
    L.append(f"| rope_theta / rms eps | {cfg['rope_theta']:g} / {cfg['rms_norm_eps']:g} |")
    L.append(f"| trained context | {targs['seq_len']} tokens (`max_sequence_length` {cfg['max_sequence_length']}) |")
    L.append(f"| weights | `model.safetensors`, {args.dtype} |\n")
    L.append("## Data\n")
    L.append(f"All `*.py` files of the Debian `python3.11` standard library under `/usr/lib/python3.11` "
             f"(packages libpython3.11-minimal / libpython3.11-stdlib), excluding `site-packages`, `dist-packages` "
             f"and test directories (`test/`, `tests/`, `idle_test/`): {len(train_files) + len(held_files)} files. "
             f"Split by file: a file is held out iff `int(sha1(relpath)[:8], 16) % 1000 < "
             f"{data.HELDOUT_PER_MILLE}`. **Held-out: {len(held_files)} files, listed in "
             f"`tools/train/heldout_files.txt`** ({ev['heldout_tokens']:,} tokens); training: {len(train_files)} "
             f"files, {train_tok:,} tokens. The tokenizer was trained on the training files only. Each file is "
             f"encoded and followed by `<|endoftext|>`; training sequences are {targs['seq_len']}-token windows at "
             f"random offsets of the concatenated stream.\n")
    L.append("## Training\n")
    L.append(f"LLaDA objective: per sequence t ~ U(0,1] (stratified within a batch), p = (1-1e-3) t + 1e-3, each "
             f"token replaced by the mask id with probability p, loss = sum of masked-token cross-entropy / p, "
             f"divided by batch x length. AdamW (betas 0.9/0.95, weight decay {targs['wd']}, no decay on norms), "
             f"lr {targs['lr']:g} with {targs['warmup']} warmup steps then cosine to {targs['min_lr_ratio']:g}x, "
             f"grad clip {targs['clip']}, batch {targs['batch']} x {targs['seq_len']} tokens, "
             f"{targs['var_len_prob']:g} of batches cropped to a random length in [16, {targs['seq_len']}], "
             f"seed {targs['seed']}.\n")
    L.append(f"* steps: {steps:,}; tokens seen: {tokens:,} (~{tokens / train_tok:.2f} epochs)")
    L.append(f"* wall time: {hours * 60:.0f} min on 1 thread of a shared 2-core AMD EPYC VM "
             f"(Debian torch 1.13 + OpenBLAS), ~{tokens / max(ck.get('elapsed_s', 1), 1):.0f} tokens/s")
    L.append(f"* final train loss (mean of the last 100 steps, 1/t-weighted LLaDA loss): "
             f"{ev['final_train_loss_mean_last100_steps']:.3f}\n")
    if have_plot:
        L.append("![loss curve](loss_curve.png)\n")
    L.append("Loss curve as a table (train: mean of 20 steps; full log in `training_log.csv`, periodic held-out "
             "evals on the first 48 held-out sequences in `eval_log.csv`):\n")
    L.append("| step | tokens | train loss |\n|---|---|---|")
    pick = [d for i, d in enumerate(ds) if i % max(1, len(ds) // 10) == 0] + [ds[-1]]
    seen = set()
    for d in pick:
        if d["step"] in seen:
            continue
        seen.add(d["step"])
        L.append(f"| {d['step']} | {d['tokens']:,} | {d['loss']:.3f} |")
    L.append("")
    L.append("## Held-out masked-token loss\n")
    L.append(f"All {ev['sequences']} consecutive {ev['seq_len']}-token sequences of the held-out stream; each token "
             f"masked independently with probability t (fixed masks, seed in `eval_heldout.json`); cross-entropy "
             f"(nats, unweighted) and argmax accuracy over the masked positions:\n")
    L.append("| mask ratio t | CE | perplexity | accuracy |\n|---|---|---|---|")
    for k, v in r.items():
        L.append(f"| {k} | {v['masked_token_ce']:.3f} | {v['perplexity']:.2f} | {v['masked_token_acc']:.3f} |")
    L.append("")
    L.append("## Sample (held-out prompts)\n")
    L.append("Official LLaDA `generate`, low-confidence remasking, gen_length 64, block_length 64, steps 64, "
             "temperature 0, computed with `tools/train/model.py` from `model.safetensors` (token ids in "
             "`reference_generation.json`). Prompts are taken from held-out files the model never saw.\n")
    for g in gens:
        L.append(f"`{g['file']}`, prompt:\n\n```python\n{g['prompt_text'].rstrip()}\n```\n\ngenerated (64 tokens):\n")
        L.append(f"```python\n{g['generated_text']}\n```\n")
    lim = os.path.join(HERE, "model_card_limitations.md")
    if os.path.exists(lim):  # hand-written assessment of the shipped run
        L.append(open(lim).read())
    L.append("## Reproduce\n")
    hist = ck.get("history", [{"from_step": 0, "args": targs}])
    cmds = []
    for i, h in enumerate(hist):
        extra = ""
        if i + 1 < len(hist):
            extra += f" --stop-at {hist[i + 1]['from_step']}"
        if i > 0:
            extra += " --resume"
        cmds.append(TRAIN_CMD.format(**h["args"]).rstrip() + extra)
    L.append("```sh\n" + RECIPE.format(train="\n".join(cmds), dtype=args.dtype) + "```\n")
    L.append("Checkpoints (`ckpt.pt`, resumable with `--resume`), the token cache and the raw logs are kept outside "
             "the repo (`/work/train_ckpt/`); only this export is committed.\n")
    L.append(f"Exported {datetime.datetime.utcnow().strftime('%Y-%m-%d %H:%M')} UTC. License of the training data: "
             f"Python Software Foundation License (CPython standard library).\n")
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write("\n".join(L))


TRAIN_CMD = """/usr/bin/python3 tools/train/train.py --out /work/train_ckpt/run --tokenizer /work/train_ckpt/tokenizer/tokenizer.json \\
    --d-model {d_model} --n-layers {n_layers} --n-heads {n_heads} --mlp {mlp} --seq-len {seq_len} --batch {batch} \\
    --steps {steps} --lr {lr} --warmup {warmup} --seed {seed} --threads {threads}
"""

RECIPE = """apt-get install -y python3-torch python3-numpy python3-matplotlib libopenblas0-pthread
/usr/bin/python3 tools/train/data.py --check          # held-out list matches this machine
/usr/bin/python3 tools/train/tokenizer_train.py --out /work/train_ckpt/tokenizer
{train}
/usr/bin/python3 tools/train/export.py --run /work/train_ckpt/run --tokenizer-dir /work/train_ckpt/tokenizer \\
    --out models/demo --dtype {dtype}
"""


if __name__ == "__main__":
    main()
