#!/usr/bin/python3
"""Export the demo's autoregressive twin (train.py --objective ar) as a Hugging Face Llama directory.

    /usr/bin/python3 tools/train/export_ar.py --run /work/train_ckpt/run_ar --out models/demo-ar

The twin is the demo dLLM's network (d_model, layers, heads, SwiGLU, RoPE theta, tokenizer, data, optimiser,
schedule: all as models/demo) with a causal mask, trained on next-token prediction. Its blocks are exactly a
Llama decoder layer (pre-RMSNorm, NeoX rotate-half RoPE, SwiGLU, no biases, untied head), so it is written in
the `LlamaForCausalLM` layout and runs in any Llama runtime (transformers, llama.cpp after conversion, dllm).
Because it shares models/demo's tokenizer.json byte for byte, the demo dLLM can draft for it
(`dllm generate -m models/demo-ar --draft models/demo`).

Writes config.json, generation_config.json, model.safetensors, tokenizer.json + tokenizer_config.json (copied from
--tokenizer-dir, default models/demo), training_log.csv, eval_log.csv, loss_curve.png, eval_heldout.json
(next-token CE / accuracy on all held-out chunks), reference_generation.json (greedy continuations by this torch
model, for the engine's parity test) and README.md (model card).
"""
import argparse
import datetime
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from train import _threads_from_argv  # noqa: E402,F401  (sets OPENBLAS/OMP thread env before torch)
import numpy as np  # noqa: E402
import torch  # noqa: E402

import data  # noqa: E402
import safetensors_io  # noqa: E402
from export import SAMPLE_PROMPTS, copy_tokenizer_and_logs, prompt_text  # noqa: E402
from model import LLaDAModel, num_params  # noqa: E402
from train import evaluate_ar  # noqa: E402

GEN_TOKENS = 64


def llama_state_dict(sd, n_layers):
    """model.transformer.* (model.py) -> the Hugging Face Llama tensor names."""
    out = {"model.embed_tokens.weight": sd["model.transformer.wte.weight"],
           "model.norm.weight": sd["model.transformer.ln_f.weight"],
           "lm_head.weight": sd["model.transformer.ff_out.weight"]}
    names = {"attn_norm": "input_layernorm", "q_proj": "self_attn.q_proj", "k_proj": "self_attn.k_proj",
             "v_proj": "self_attn.v_proj", "attn_out": "self_attn.o_proj", "ff_norm": "post_attention_layernorm",
             "ff_proj": "mlp.gate_proj", "up_proj": "mlp.up_proj", "ff_out": "mlp.down_proj"}
    for i in range(n_layers):
        for src, dst in names.items():
            out[f"model.layers.{i}.{dst}.weight"] = sd[f"model.transformer.blocks.{i}.{src}.weight"]
    assert len(out) == len(sd), "every tensor is mapped once"
    return out


def from_llama_state_dict(sd, n_layers):
    inv = {}
    for k, v in llama_state_dict({k: k for k in _names(n_layers)}, n_layers).items():
        inv[k] = v
    return {inv[k]: t for k, t in sd.items()}


def _names(n_layers):
    names = ["model.transformer.wte.weight", "model.transformer.ln_f.weight", "model.transformer.ff_out.weight"]
    for i in range(n_layers):
        for s in ("attn_norm", "q_proj", "k_proj", "v_proj", "attn_out", "ff_norm", "ff_proj", "up_proj", "ff_out"):
            names.append(f"model.transformer.blocks.{i}.{s}.weight")
    return names


def llama_config(cfg, dtype):
    return {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": cfg["bos_token_id"],
        "eos_token_id": cfg["eos_token_id"],
        "head_dim": cfg["d_model"] // cfg["n_heads"],
        "hidden_act": "silu",
        "hidden_size": cfg["d_model"],
        "initializer_range": cfg["init_std"],
        "intermediate_size": cfg["mlp_hidden_size"],
        "max_position_embeddings": cfg["max_sequence_length"],
        "mlp_bias": False,
        "model_type": "llama",
        "num_attention_heads": cfg["n_heads"],
        "num_hidden_layers": cfg["n_layers"],
        "num_key_value_heads": cfg["n_heads"],
        "pad_token_id": cfg["pad_token_id"],
        "pretraining_tp": 1,
        "rms_norm_eps": cfg["rms_norm_eps"],
        "rope_scaling": None,
        "rope_theta": cfg["rope_theta"],
        "tie_word_embeddings": False,
        "torch_dtype": "float32" if dtype == "F32" else "bfloat16",
        "transformers_version": "4.46.3",
        "use_cache": True,
        "vocab_size": cfg["vocab_size"],
    }


@torch.no_grad()
def greedy(model, ids, n):
    """Greedy decoding, full recompute each token (the reference; ties -> lowest id as torch.argmax)."""
    x = list(ids)
    for _ in range(n):
        logits = model(torch.tensor([x]))[0, -1]
        x.append(int(logits.argmax()))
    return x[len(ids):]


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
            label="train next-token CE (mean of 20 steps)")
    ax.plot([int(r["tokens"]) / 1e6 for r in eval_rows], [float(r["loss"]) for r in eval_rows], "o-", ms=3, lw=1,
            label="held-out next-token CE (first 48 sequences)")
    ax.set_xlabel("training tokens (M)")
    ax.set_ylabel("loss (nats)")
    ax.set_ylim(0, 8.5)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True, help="train.py --objective ar output dir (ckpt.pt, logs)")
    ap.add_argument("--tokenizer-dir", default=os.path.join(HERE, "..", "..", "models", "demo"))
    ap.add_argument("--out", default="models/demo-ar")
    ap.add_argument("--dtype", default="F32", choices=["F32", "BF16"])
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)

    ck = torch.load(os.path.join(args.run, "ckpt.pt"))
    cfg, targs = ck["cfg"], ck["args"]
    assert targs.get("objective") == "ar", "--run is not an autoregressive run (train.py --objective ar)"
    model = LLaDAModel(cfg, causal=True)
    model.load_state_dict(ck["model"])
    st_path = os.path.join(args.out, "model.safetensors")
    safetensors_io.save(llama_state_dict(model.state_dict(), cfg["n_layers"]), st_path,
                        metadata={"format": "pt"}, dtype=args.dtype)
    # evaluate what was written (BF16: rounded weights), read back through the Llama names
    model.load_state_dict(from_llama_state_dict(safetensors_io.load(st_path), cfg["n_layers"]))
    model.eval()

    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(llama_config(cfg, args.dtype), f, indent=2)
        f.write("\n")
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump({"_from_model_config": True, "bos_token_id": cfg["bos_token_id"],
                   "eos_token_id": cfg["eos_token_id"], "pad_token_id": cfg["pad_token_id"],
                   "transformers_version": "4.46.3"}, f, indent=2)
        f.write("\n")
    tok, rows, ds, have_plot = copy_tokenizer_and_logs(args, plot)

    held = np.load(os.path.join(os.path.dirname(os.path.abspath(args.run)), "tokens_heldout.npy"))

    class A:
        seq_len = targs["seq_len"]
        eval_batch = 16
    t0 = time.time()
    (ce, acc), = evaluate_ar(model, held, A).values()
    n_seq = len(held) // A.seq_len
    print(f"held-out eval ({n_seq} seqs of {A.seq_len}) in {time.time() - t0:.0f}s: CE {ce:.4f} acc {acc:.4f}")
    last_train = sum(float(r["loss"]) for r in rows[-100:]) / min(100, len(rows))
    ev = {"heldout_files": "tools/train/heldout_files.txt", "heldout_tokens": int(len(held)), "sequences": n_seq,
          "seq_len": A.seq_len, "next_token_ce": round(ce, 4), "next_token_acc": round(acc, 4),
          "perplexity": round(float(np.exp(ce)), 2), "final_train_loss_mean_last100_steps": round(last_train, 4)}
    with open(os.path.join(args.out, "eval_heldout.json"), "w") as f:
        json.dump(ev, f, indent=2)
        f.write("\n")

    gens = []
    for rel, anchor, nl in SAMPLE_PROMPTS:
        ptxt = prompt_text(rel, anchor, nl)
        pids = tok.encode(ptxt)
        out = greedy(model, pids, GEN_TOKENS)
        gens.append({"file": rel, "prompt_text": ptxt, "prompt_ids": pids, "max_tokens": GEN_TOKENS,
                     "generated_ids": out, "generated_text": tok.decode(out)})
        print(f"--- {rel}\n{ptxt}\033[1m{tok.decode(out)}\033[0m", flush=True)
    with open(os.path.join(args.out, "reference_generation.json"), "w") as f:
        json.dump({"note": "tools/train/export_ar.py greedy (full recompute per token, argmax = lowest id on "
                           "ties), f32, weights read back from model.safetensors; no stop at <|endoftext|>",
                   "cases": gens}, f, indent=1)
        f.write("\n")
    write_card(args, cfg, targs, ck, model, ev, gens, ds, have_plot)
    total = sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out))
    print(f"wrote {args.out}: {total / 1e6:.1f} MB")


def write_card(args, cfg, targs, ck, model, ev, gens, ds, have_plot):
    n_par = num_params(model)
    steps = ck["step"]
    tokens = steps * targs["batch"] * targs["seq_len"]
    train_tok = int(np.load(os.path.join(os.path.dirname(os.path.abspath(args.run)), "tokens_train.npy")).shape[0])
    L = ["# demo-ar: the demo dLLM's autoregressive twin (Llama layout)\n",
         f"A {n_par / 1e6:.1f}M-parameter **autoregressive** language model for Python code: the network of "
         "`models/demo` (same size, tokenizer, data, split, optimiser and schedule) with a causal mask, trained on "
         "next-token prediction. It exists so that the hybrid features (routing between an AR model and a dLLM, "
         "diffusion-drafted speculative decoding: docs/hybrid.md) are shown on two models that learned the same "
         "thing the two ways, not on random weights. Written as a Hugging Face `LlamaForCausalLM` directory; its "
         "`tokenizer.json` is models/demo's, byte for byte, so `dllm generate -m models/demo-ar --draft "
         "models/demo` is accepted.\n",
         "## Model\n", "| | |\n|---|---|",
         f"| parameters | {n_par:,} |",
         f"| hidden / layers / heads (head dim) | {cfg['d_model']} / {cfg['n_layers']} / {cfg['n_heads']} "
         f"({cfg['d_model'] // cfg['n_heads']}) |",
         f"| MLP (SwiGLU) | {cfg['mlp_hidden_size']} |",
         f"| vocab | {cfg['vocab_size']} (models/demo's byte-level BPE; eos `<|endoftext|>` {cfg['eos_token_id']}) |",
         f"| rope_theta / rms eps | {cfg['rope_theta']:g} / {cfg['rms_norm_eps']:g} |",
         f"| trained context | {targs['seq_len']} tokens (max_position_embeddings {cfg['max_sequence_length']}) |",
         f"| weights | `model.safetensors`, {args.dtype} |\n",
         "## Training\n",
         f"Data and split as models/demo (Python 3.11 standard library, held-out files in "
         f"`tools/train/heldout_files.txt`; {train_tok:,} training tokens). Next-token cross-entropy on "
         f"{targs['seq_len']}-token windows at random offsets; AdamW (0.9/0.95, weight decay {targs['wd']}), lr "
         f"{targs['lr']:g}, {targs['warmup']} warmup steps, cosine to {targs['min_lr_ratio']:g}x, clip "
         f"{targs['clip']}, batch {targs['batch']}, seed {targs['seed']}.\n",
         f"* steps: {steps:,}; tokens: {tokens:,} (~{tokens / train_tok:.2f} epochs)",
         f"* wall time: {ck.get('elapsed_s', 0) / 60:.0f} min on {targs['threads']} thread(s) "
         f"(Debian torch 1.13 + OpenBLAS)",
         f"* final train loss (mean of the last 100 steps): {ev['final_train_loss_mean_last100_steps']:.3f}\n"]
    if have_plot:
        L.append("![loss curve](loss_curve.png)\n")
    L += ["## Held-out next-token loss\n",
          f"All {ev['sequences']} consecutive {ev['seq_len']}-token chunks of the held-out stream, each token "
          f"predicted from the ones before it in its chunk: CE **{ev['next_token_ce']:.3f}** nats (perplexity "
          f"{ev['perplexity']:.1f}), argmax accuracy **{ev['next_token_acc']:.3f}**. (Not comparable one to one "
          "with models/demo's masked-token numbers: a masked position there may see context on both sides.)\n",
          "## Sample (held-out prompts, greedy, 64 tokens)\n"]
    for g in gens:
        L.append(f"`{g['file']}`, prompt:\n\n```python\n{g['prompt_text'].rstrip()}\n```\n\ngenerated:\n")
        L.append(f"```python\n{g['generated_text']}\n```\n")
    a = targs
    L += ["## Reproduce\n", "```sh",
          "apt-get install -y python3-torch python3-numpy python3-matplotlib libopenblas0-pthread",
          f"/usr/bin/python3 tools/train/train.py --objective ar --out /work/train_ckpt/run_ar "
          f"--tokenizer models/demo/tokenizer.json \\\n    --d-model {a['d_model']} --n-layers {a['n_layers']} "
          f"--n-heads {a['n_heads']} --mlp {a['mlp']} --seq-len {a['seq_len']} --batch {a['batch']} "
          f"--steps {a['steps']} --lr {a['lr']} --warmup {a['warmup']} --seed {a['seed']} --threads {a['threads']}",
          f"/usr/bin/python3 tools/train/export_ar.py --run /work/train_ckpt/run_ar --out models/demo-ar "
          f"--dtype {args.dtype}", "```\n",
          f"Exported {datetime.datetime.utcnow().strftime('%Y-%m-%d %H:%M')} UTC. Training data license: Python "
          "Software Foundation License (CPython standard library).\n"]
    with open(os.path.join(args.out, "README.md"), "w") as f:
        f.write("\n".join(L))


if __name__ == "__main__":
    main()
