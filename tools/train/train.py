#!/usr/bin/python3
"""Train the demo LLaDA-architecture masked diffusion model on the Python stdlib (CPU, Debian torch).

    /usr/bin/python3 tools/train/train.py --out /work/train_ckpt/run --tokenizer /work/train_ckpt/tokenizer/tokenizer.json \
        [--d-model 192 --n-layers 4 --n-heads 4 --mlp 576 --seq-len 256 --batch 8 --steps 2000 --lr 1e-3] \
        [--seed 0] [--threads 1] [--resume]

Objective (LLaDA, Nie et al. 2025, Algorithm 1 / pseudo-code): for each sequence x0 of length L, t ~ U(0,1],
p = (1-eps) t + eps; every token is replaced by the mask id independently with probability p; loss =
sum over masked positions of CE(logits, x0) / p, divided by (batch * L). The t of the B sequences of a batch are
stratified (t_i = (u + i) / B, u ~ U[0,1)), which is still t ~ U(0,1] per sequence, only with less variance.
With probability --var-len-prob a whole batch is cropped to a random length in [16, L] (LLaDA uses 1% random-length
sequences so the model also sees short contexts).

Data: training files of data.py, each encoded with the reference tokenizer and followed by <|endoftext|>,
concatenated in sorted path order into one stream; a training sequence = seq_len tokens from a random offset.
Held-out: held-out files, same encoding, cut into consecutive seq_len chunks; the masked-token loss is evaluated
at fixed mask ratios (--eval-ratios) with fixed masks (seed 1234) every --eval-every steps.

Determinism: batch offsets and masks of step s come from generators seeded with (seed, s), so a resumed run
(--resume, from OUT/ckpt.pt written every --ckpt-every steps) reproduces the uninterrupted one.
Outputs in OUT: ckpt.pt, train_log.csv (step,tokens,loss,lr,elapsed_s,tok_per_s), eval_log.csv
(step,tokens,ratio,loss,acc), config.json, tokens cache (tokens_train.npy, tokens_heldout.npy).
"""
import argparse
import csv
import json
import math
import os
import sys
import time


def _threads_from_argv(default=1):
    for i, a in enumerate(sys.argv):
        if a == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
    return str(default)


# Debian's torch uses the system libblas.so.3: install libopenblas0-pthread (reference BLAS is ~20x slower) and
# keep OpenBLAS to the same thread count as torch (must be set before torch is imported).
os.environ.setdefault("OPENBLAS_NUM_THREADS", _threads_from_argv())
os.environ.setdefault("OMP_NUM_THREADS", _threads_from_argv())

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import data  # noqa: E402
from bpe_tokenizer import BPETokenizer  # noqa: E402
from model import LLaDAModel, llada_config, num_params  # noqa: E402

EOS, BOS, MASK = "<|endoftext|>", "<|startoftext|>", "<|mdm_mask|>"


def build_streams(tok, cache_dir):
    tp, hp = os.path.join(cache_dir, "tokens_train.npy"), os.path.join(cache_dir, "tokens_heldout.npy")
    if os.path.exists(tp) and os.path.exists(hp):
        return np.load(tp), np.load(hp)
    train_files, held_files = data.split()
    assert held_files == data.read_heldout_list(), "held-out list differs from tools/train/heldout_files.txt"
    eos = tok.token_to_id(EOS)

    def enc(files):
        out = []
        for rel in files:
            out.extend(tok.encode_ordinary(data.read_text(rel)))
            out.append(eos)
        return np.array(out, dtype=np.int32)

    t0 = time.time()
    tr, he = enc(train_files), enc(held_files)
    print(f"tokenized: train {len(tr)} tokens ({len(train_files)} files), held-out {len(he)} tokens "
          f"({len(held_files)} files) in {time.time() - t0:.1f}s", flush=True)
    np.save(tp, tr)
    np.save(hp, he)
    return tr, he


def lr_at(step, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    prog = min(1.0, (step - args.warmup) / max(1, args.steps - args.warmup))
    return args.lr * (args.min_lr_ratio + (1 - args.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * prog)))


def get_batch(stream, step, args):
    rng = np.random.default_rng([args.seed, step, 1])
    L = args.seq_len
    if rng.random() < args.var_len_prob:
        L = int(rng.integers(16, args.seq_len + 1))
    if args.objective == "ar":
        L += 1  # inputs x[:, :-1], next-token targets x[:, 1:]
    offs = rng.integers(0, len(stream) - L, size=args.batch)
    x = np.stack([stream[o:o + L] for o in offs]).astype(np.int64)
    return torch.from_numpy(x)


def mask_batch(x, mask_id, gen, eps=1e-3, t=None):
    B, L = x.shape
    if t is None:
        u = torch.rand(1, generator=gen)
        t = (u + torch.arange(B, dtype=torch.float32)) / B        # stratified, each t_i ~ U[0,1)
        t = 1.0 - t                                                # (0, 1]
    p = ((1 - eps) * t + eps)[:, None].expand(B, L)
    masked = torch.rand((B, L), generator=gen) < p
    noisy = torch.where(masked, torch.full_like(x, mask_id), x)
    return noisy, masked, p


def llada_loss(model, x, mask_id, gen):
    noisy, masked, p = mask_batch(x, mask_id, gen)
    logits = model(noisy)
    tok_loss = F.cross_entropy(logits[masked], x[masked], reduction="none") / p[masked]
    return tok_loss.sum() / (x.shape[0] * x.shape[1])


def heldout_chunks(held, seq_len, max_seqs=None):
    """The consecutive seq_len-token chunks of the held-out stream (the first max_seqs), [n, seq_len]."""
    n = len(held) // seq_len
    if max_seqs:
        n = min(n, max_seqs)
    return torch.from_numpy(held[:n * seq_len].astype(np.int64)).view(n, seq_len)


def ar_loss(model, x):
    """Next-token cross-entropy (the autoregressive twin): mean over all positions."""
    logits = model(x[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))


@torch.no_grad()
def evaluate_ar(model, held, args, max_seqs=None):
    """Next-token CE and argmax accuracy over consecutive seq_len-token chunks of the held-out stream (each
    chunk predicts its tokens 1..L-1 from the ones before, within the chunk)."""
    model.eval()
    seqs = heldout_chunks(held, args.seq_len, max_seqs)
    n = len(seqs)
    tot, correct, cnt = 0.0, 0, 0
    for i in range(0, n, args.eval_batch):
        x = seqs[i:i + args.eval_batch]
        logits = model(x[:, :-1]).reshape(-1, model.cfg["embedding_size"])
        tgt = x[:, 1:].reshape(-1)
        tot += F.cross_entropy(logits, tgt, reduction="sum").item()
        correct += (logits.argmax(-1) == tgt).sum().item()
        cnt += tgt.numel()
    model.train()
    return {"next": (tot / cnt, correct / cnt)}


@torch.no_grad()
def evaluate(model, held, args, mask_id, max_seqs=None):
    """Mean CE and accuracy over masked tokens at fixed mask ratios, fixed masks."""
    model.eval()
    seqs = heldout_chunks(held, args.seq_len, max_seqs)
    n = len(seqs)
    res = {}
    for r in args.eval_ratios:
        gen = torch.Generator().manual_seed(1234 + int(r * 1000))
        tot, correct, cnt = 0.0, 0, 0
        for i in range(0, n, args.eval_batch):
            x = seqs[i:i + args.eval_batch]
            masked = torch.rand(x.shape, generator=gen) < r
            noisy = torch.where(masked, torch.full_like(x, mask_id), x)
            logits = model(noisy)[masked]
            tgt = x[masked]
            tot += F.cross_entropy(logits, tgt, reduction="sum").item()
            correct += (logits.argmax(-1) == tgt).sum().item()
            cnt += int(masked.sum())
        res[r] = (tot / max(cnt, 1), correct / max(cnt, 1))
    model.train()
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--objective", choices=["llada", "ar"], default="llada",
                    help="llada: masked diffusion (bidirectional); ar: the same network with a causal mask "
                         "trained on next-token prediction (the demo's autoregressive twin, export_ar.py)")
    ap.add_argument("--d-model", type=int, default=192)
    ap.add_argument("--n-layers", type=int, default=4)
    ap.add_argument("--n-heads", type=int, default=4)
    ap.add_argument("--mlp", type=int, default=576)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--max-seq-len", type=int, default=1024, help="max_sequence_length in config.json")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr-ratio", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--wd", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--var-len-prob", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--eval-seqs", type=int, default=48, help="held-out sequences used by periodic evals")
    ap.add_argument("--eval-batch", type=int, default=16)
    ap.add_argument("--eval-ratios", type=float, nargs="+", default=[0.15, 0.5, 0.85])
    ap.add_argument("--ckpt-every", type=int, default=100)
    ap.add_argument("--stop-at", type=int, default=0, help="save a checkpoint and stop after this step "
                    "(simulates an interruption; continue with --resume)")
    ap.add_argument("--bench", type=int, default=0, help="only time this many steps, write nothing")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    tok = BPETokenizer(args.tokenizer)
    V = len(tok)
    train_stream, held = build_streams(tok, os.path.dirname(os.path.abspath(args.out)))
    eos, mask_id = tok.token_to_id(EOS), tok.token_to_id(MASK)
    cfg = llada_config(V, args.d_model, args.n_layers, args.n_heads, args.mlp, args.max_seq_len,
                       eos_token_id=eos, pad_token_id=eos, mask_token_id=mask_id)
    cfg["bos_token_id"] = tok.token_to_id(BOS)
    model = LLaDAModel(cfg, causal=args.objective == "ar")
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    ckpt_path = os.path.join(args.out, "ckpt.pt")
    start = 0
    elapsed_before = 0.0
    history = [{"from_step": 0, "args": vars(args)}]
    if args.resume and os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        start = ck["step"]
        elapsed_before = ck.get("elapsed_s", 0.0)
        history = ck.get("history", [{"from_step": 0, "args": ck["args"]}]) + [{"from_step": start, "args": vars(args)}]
        if ck["args"]["steps"] != args.steps:
            print(f"note: --steps changed from {ck['args']['steps']} to {args.steps}: the cosine schedule is "
                  f"recomputed from step {start} on", flush=True)
        print(f"resumed from {ckpt_path} at step {start}", flush=True)
    n_emb = cfg["embedding_size"] * cfg["d_model"]
    print(f"params {num_params(model)/1e6:.3f}M (non-embedding {(num_params(model) - n_emb)/1e6:.3f}M), "
          f"vocab {V}, train tokens {len(train_stream)}, held-out tokens {len(held)}, "
          f"tokens/step {args.batch * args.seq_len}, steps {args.steps}, threads {args.threads}", flush=True)
    if not args.bench:
        with open(os.path.join(args.out, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        with open(os.path.join(args.out, "args.json"), "w") as f:
            json.dump(vars(args), f, indent=2)
    mode = "a" if start > 0 else "w"
    if start > 0 and not args.bench:  # drop log rows written after the checkpoint by the interrupted run
        for fn in ("train_log.csv", "eval_log.csv"):
            fp = os.path.join(args.out, fn)
            if os.path.exists(fp):
                lines = open(fp, newline="").read().splitlines(keepends=True)
                keep = lines[:1] + [ln for ln in lines[1:] if ln.strip() and int(ln.split(",")[0]) <= start]
                open(fp, "w", newline="").writelines(keep)
    tlog = open(os.path.join(args.out, "train_log.csv"), mode, newline="") if not args.bench else None
    elog = open(os.path.join(args.out, "eval_log.csv"), mode, newline="") if not args.bench else None
    tw = csv.writer(tlog) if tlog else None
    ew = csv.writer(elog) if elog else None
    if start == 0 and tw:
        tw.writerow(["step", "tokens", "loss", "lr", "elapsed_s", "tok_per_s"])
        ew.writerow(["step", "tokens", "ratio", "loss", "acc"])

    def save(step, elapsed):
        tmp = ckpt_path + ".tmp"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "cfg": cfg,
                    "args": vars(args), "elapsed_s": elapsed,
                    "history": history}, tmp)
        os.replace(tmp, ckpt_path)

    def run_eval(step, tokens):
        t0 = time.time()
        if args.objective == "ar":
            res = evaluate_ar(model, held, args, args.eval_seqs)
        else:
            res = evaluate(model, held, args, mask_id, args.eval_seqs)
        s = "  ".join(f"t={r}: loss {l:.3f} acc {a:.3f}" for r, (l, a) in res.items())
        print(f"[eval step {step}] held-out masked-token {s}  ({time.time() - t0:.1f}s)", flush=True)
        for r, (l, a) in res.items():
            ew.writerow([step, tokens, r, f"{l:.5f}", f"{a:.5f}"])
        elog.flush()
        return time.time() - t0

    model.train()
    t_start = time.time()
    eval_time = 0.0
    tokens = start * args.batch * args.seq_len  # nominal (variable-length batches counted at seq_len)
    real_tokens = 0
    ema = None
    end = start + args.bench if args.bench else args.steps
    for step in range(start, end):
        lr = lr_at(step, args)
        for g in opt.param_groups:
            g["lr"] = lr
        x = get_batch(train_stream, step, args)
        gen = torch.Generator().manual_seed(args.seed * 1_000_003 + step)
        loss = ar_loss(model, x) if args.objective == "ar" else llada_loss(model, x, mask_id, gen)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        tokens += args.batch * args.seq_len
        real_tokens += x.numel()
        lv = loss.item()
        ema = lv if ema is None else 0.95 * ema + 0.05 * lv
        done = step + 1
        el = time.time() - t_start - eval_time
        tps = real_tokens / max(el, 1e-9)
        if tw:
            tw.writerow([done, tokens, f"{lv:.5f}", f"{lr:.6g}", f"{elapsed_before + time.time() - t_start:.1f}",
                         f"{tps:.1f}"])
        if done % args.log_every == 0 or done == end:
            eta = (end - done) * el / max(done - start, 1)
            print(f"step {done}/{end}  loss {lv:.4f} (ema {ema:.4f})  lr {lr:.2e}  {tps:.0f} tok/s  "
                  f"tokens {tokens/1e6:.2f}M  elapsed {(elapsed_before + time.time() - t_start)/60:.1f}m  "
                  f"ETA {eta/60:.1f}m", flush=True)
            if tlog:
                tlog.flush()
        if args.bench:
            continue
        if done % args.eval_every == 0 or done == end:
            eval_time += run_eval(done, tokens)
        if done % args.ckpt_every == 0 or done == end or done == args.stop_at:
            save(done, elapsed_before + time.time() - t_start)
        if done == args.stop_at:
            print(f"stopping at step {done} (--stop-at)", flush=True)
            break
    if args.bench:
        print(f"bench: {real_tokens / (time.time() - t_start):.0f} tok/s")


if __name__ == "__main__":
    main()
