#!/usr/bin/env python3
"""The demo models' GPU recipe (corpus v2): tokenize, train the dLLM and its AR twin side by side, distill a
few-step student. Each phase has a wall-clock deadline: the lease on a GPU machine is short, so the number of steps
is set from the measured step time (recorded in the output) instead of fixed in advance. gpu_run.sh runs the phases
in one call; export.py / export_ar.py turn the outputs into the model directories on the CPU machine.

    python3 gpu_pipeline.py tokenize --corpus DIR --tokenizer tokenizer.json --work W [--expect heldout.sha256]
    python3 gpu_pipeline.py train --objective llada|ar --work W --name teacher --until EPOCH_S --out OUT
    python3 gpu_pipeline.py distill --work W --teacher W/teacher_fp32.pt --until EPOCH_S --out OUT

train: the LLaDA objective (train.py's, 1/p-weighted masked CE, stratified t) or next-token CE, on random seq_len
windows of the training stream, AdamW (0.9/0.95, wd 0.1 except norms), linear warmup then cosine to 0.1x, clip 1.0,
bf16 autocast with f32 master weights, fused attention. 5% of batches are cropped to a random length in [16, L].

distill (certainty-forcing, after dParallel, Chen et al. 2025, and LLaDA2.0's confidence-aware training):
  1. the teacher's own answers: on windows of the training stream, a span (8-64 tokens: inside the window with
     context on both sides, or the window's suffix) is masked and the teacher fills it with the exact schedule
     (one token per step, low-confidence remasking, semi-autoregressive blocks of 32, greedy);
  2. the student starts as the teacher and learns to reproduce those fills in few steps: semi-autoregressive block
     masks over the span (blocks before block k clean, block k masked at ratio t ~ U(0,1] and, in a second forward,
     with the complementary mask, blocks after k fully masked); loss = mean CE on block k's masked positions +
     ENTROPY_WEIGHT x mean entropy (softmax at temperature 0.5) on the masked positions the student already
     predicts correctly.
"""
import argparse
import hashlib
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import corpus  # noqa: E402
from model import LLaDAModel, llada_config, num_params  # noqa: E402

EOS, BOS, MASK = 4090, 4091, 4092
V = 4096
V1_HELDOUT_FILES = 14  # corpus v1's held-out stdlib files: the first documents of corpus v2's held-out file
ENTROPY_WEIGHT, ENTROPY_T = 2.0, 0.5
DIST_BLOCK = 32


def log(*a):
    print(f"[{time.strftime('%H:%M:%S')}]", *a, flush=True)


def device():
    return "cuda" if torch.cuda.is_available() else "cpu"


def autocast():
    return torch.autocast("cuda", dtype=torch.bfloat16) if torch.cuda.is_available() else \
        torch.autocast("cpu", dtype=torch.bfloat16, enabled=False)


# ---------------------------------------------------------------------------------------------------- tokenize
_REF = None


def _init_ref_encoder(path):
    global _REF
    from bpe_tokenizer import BPETokenizer
    _REF = BPETokenizer(path)


def _ref_encode(text):
    return _REF.encode_ordinary(text)


def cmd_tokenize(a):
    t0 = time.time()
    # The reference encoder (bpe_tokenizer.py: identical to the engine's tokenizer on corpus v2's held-out files,
    # checked below against the engine's ids) in one process per core: ~15 s for corpus v2 on 16 cores.
    import multiprocessing
    pool = multiprocessing.Pool(os.cpu_count(), initializer=_init_ref_encoder, initargs=(a.tokenizer,))
    encode = lambda docs: pool.map(_ref_encode, docs, chunksize=16)
    which = f"bpe_tokenizer.py x {os.cpu_count()} processes"
    os.makedirs(a.work, exist_ok=True)
    for split in ("train", "heldout"):
        docs = corpus.read_docs(os.path.join(a.corpus, f"{split}.txt.xz"))
        if a.max_docs:
            docs = docs[:a.max_docs]
        encs = encode(docs)
        parts = []
        for e in encs:
            parts.append(np.asarray(e, dtype=np.uint16))
            parts.append(np.array([EOS], dtype=np.uint16))
        ids = np.concatenate(parts)
        np.save(os.path.join(a.work, f"{split}.npy"), ids)
        log(f"{split}: {len(docs)} files, {len(ids)} tokens ({which}, {time.time() - t0:.1f}s)")
        if split == "heldout":
            n1 = sum(len(e) + 1 for e in encs[:V1_HELDOUT_FILES])
            np.save(os.path.join(a.work, "heldout_v1.npy"), ids[:n1])
            log(f"heldout v1 (first {V1_HELDOUT_FILES} files): {n1} tokens")
            digest = hashlib.sha256(ids.astype("<u2").tobytes()).hexdigest()
            if a.expect:
                want = open(a.expect).read().split()
                ok = want == [str(len(ids)), digest]
                log(f"held-out ids vs the engine's tokenizer: {'IDENTICAL' if ok else 'DIFFERENT'} "
                    f"({len(ids)} {digest[:16]} vs {' '.join(want)[:40]})")


# ------------------------------------------------------------------------------------------------------- train
def make_config(a):
    cfg = llada_config(V, a.d_model, a.n_layers, a.n_heads, a.mlp, 1024, eos_token_id=EOS, pad_token_id=EOS,
                       mask_token_id=MASK)
    cfg["bos_token_id"] = BOS
    return cfg


def windows(stream, B, L, gen):
    offs = torch.randint(0, len(stream) - L, (B,), generator=gen, device=stream.device)
    return stream[offs[:, None] + torch.arange(L, device=stream.device)[None, :]]


def llada_loss(model, x, gen, eps=1e-3):
    B, L = x.shape
    u = torch.rand(1, generator=gen, device=x.device)
    t = 1.0 - (u + torch.arange(B, device=x.device)) / B
    p = ((1 - eps) * t + eps)[:, None].expand(B, L)
    masked = torch.rand((B, L), generator=gen, device=x.device) < p
    noisy = torch.where(masked, torch.full_like(x, MASK), x)
    with autocast():
        logits = model(noisy)
    tok = F.cross_entropy(logits[masked].float(), x[masked], reduction="none") / p[masked]
    return tok.sum() / (B * L)


def ar_loss(model, x):
    with autocast():
        logits = model(x[:, :-1])
    return F.cross_entropy(logits.reshape(-1, V).float(), x[:, 1:].reshape(-1))


@torch.no_grad()
def eval_masked(model, held, L, ratios, max_seqs, batch=64):
    """Masked-token CE / accuracy over consecutive L-token chunks at fixed ratios (masks seeded per ratio)."""
    model.eval()
    n = min(len(held) // L, max_seqs)
    seqs = held[:n * L].view(n, L)
    res = {}
    for r in ratios:
        gen = torch.Generator(device=held.device).manual_seed(1234 + int(r * 1000))
        tot, cor, cnt = 0.0, 0, 0
        for i in range(0, n, batch):
            x = seqs[i:i + batch]
            m = torch.rand(x.shape, generator=gen, device=x.device) < r
            with autocast():
                lg = model(torch.where(m, torch.full_like(x, MASK), x))[m].float()
            tot += F.cross_entropy(lg, x[m], reduction="sum").item()
            cor += (lg.argmax(-1) == x[m]).sum().item()
            cnt += int(m.sum())
        res[str(r)] = [tot / max(cnt, 1), cor / max(cnt, 1)]
    model.train()
    return res


@torch.no_grad()
def eval_next(model, held, L, max_seqs, batch=64):
    model.eval()
    n = min(len(held) // L, max_seqs)
    seqs = held[:n * L].view(n, L)
    tot, cor, cnt = 0.0, 0, 0
    for i in range(0, n, batch):
        x = seqs[i:i + batch]
        with autocast():
            lg = model(x[:, :-1]).reshape(-1, V).float()
        tgt = x[:, 1:].reshape(-1)
        tot += F.cross_entropy(lg, tgt, reduction="sum").item()
        cor += (lg.argmax(-1) == tgt).sum().item()
        cnt += tgt.numel()
    model.train()
    return {"next": [tot / cnt, cor / cnt]}


def load_stream(work, name, dev):
    return torch.from_numpy(np.load(os.path.join(work, f"{name}.npy")).astype(np.int64)).to(dev)


def save_outputs(path_prefix, model, cfg, meta):
    """bf16 weights (the shipped files are bf16: half the repository bytes, nothing lost that the engine's f32
    compute would keep) + config + logs in one torch file (cmd_train keeps the f32 weights in the work dir)."""
    sd = {k: v.detach().to("cpu", torch.bfloat16) for k, v in model.state_dict().items()}
    torch.save({"state_dict": sd, "cfg": cfg, "meta": meta}, path_prefix + ".pt")


def optimizer(model, lr, wd):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    kw = {"fused": True} if torch.cuda.is_available() else {}
    return torch.optim.AdamW([{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), eps=1e-8, **kw)


class Schedule:
    """Linear warmup, then cosine to min_ratio x lr over a total fixed once the step time is measured."""

    def __init__(self, lr, warmup, min_ratio=0.1):
        self.lr, self.warmup, self.min_ratio, self.total = lr, warmup, min_ratio, None

    def at(self, step):
        if step < self.warmup or self.total is None:
            return self.lr * min(1.0, (step + 1) / self.warmup)
        prog = min(1.0, (step - self.warmup) / max(1, self.total - self.warmup))
        return self.lr * (self.min_ratio + (1 - self.min_ratio) * 0.5 * (1 + math.cos(math.pi * prog)))


def cmd_train(a):
    dev = device()
    torch.manual_seed(a.seed)
    gen = torch.Generator(device=dev).manual_seed(a.seed)
    train = load_stream(a.work, "train", dev)
    held = load_stream(a.work, "heldout", dev)
    held1 = load_stream(a.work, "heldout_v1", dev)
    cfg = make_config(a)
    model = LLaDAModel(cfg, causal=a.objective == "ar").to(dev).use_sdpa()
    opt = optimizer(model, a.lr, a.wd)
    sched = Schedule(a.lr, a.warmup)
    log(f"{a.name}: {a.objective}, params {num_params(model) / 1e6:.3f}M, train tokens {len(train)}, "
        f"batch {a.batch}x{a.seq_len}, lr {a.lr}, until {time.strftime('%H:%M:%S', time.localtime(a.until))}")
    train_log, eval_log = [], []
    t0 = time.time()
    tokens, step, t_measure = 0, 0, None
    eval_time = 0.0
    while True:
        if step == 30:
            if dev == "cuda":
                torch.cuda.synchronize()
            t_measure = time.time()
        if step == 130 or (sched.total is None and step > 130):
            if dev == "cuda":
                torch.cuda.synchronize()
            per_step = (time.time() - t_measure) / 100
            left = a.until - time.time() - a.reserve
            sched.total = step + max(1, int(left / per_step * 0.97))
            log(f"{a.name}: {per_step * 1e3:.1f} ms/step -> {sched.total} steps "
                f"({sched.total * a.batch * a.seq_len / 1e6:.0f}M tokens)")
        if sched.total is not None and step >= sched.total:
            break
        if time.time() > a.until - a.reserve:  # safety: the deadline wins over the estimate
            log(f"{a.name}: deadline at step {step}")
            sched.total = step
            break
        lr = sched.at(step)
        for g in opt.param_groups:
            g["lr"] = lr
        L = a.seq_len
        if torch.rand(1, generator=gen, device=dev).item() < a.var_len_prob:
            L = int(torch.randint(16, a.seq_len + 1, (1,), generator=gen, device=dev).item())
        x = windows(train, a.batch, L + (1 if a.objective == "ar" else 0), gen)
        loss = ar_loss(model, x) if a.objective == "ar" else llada_loss(model, x, gen)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens += x.numel()
        if step % 50 == 0:
            lv = loss.item()
            train_log.append([step, tokens, round(lv, 5), lr, round(time.time() - t0, 1)])
        if step % a.eval_every == 0:
            te = time.time()
            r = eval_next(model, held, a.seq_len, 64) if a.objective == "ar" else \
                eval_masked(model, held, a.seq_len, [0.15, 0.5, 0.85], 64)
            eval_time += time.time() - te
            eval_log.append([step, tokens, r])
            log(f"{a.name} step {step}/{sched.total} loss {train_log[-1][2] if train_log else 0:.4f} lr {lr:.2e} "
                f"tok/s {tokens / (time.time() - t0 - eval_time):.0f} eval {json.dumps(r)}")
    wall = time.time() - t0
    log(f"{a.name}: {step} steps, {tokens / 1e6:.1f}M tokens in {wall:.0f}s")
    final = {}
    if a.objective == "ar":
        final["v1"] = eval_next(model, held1, a.seq_len, 10 ** 9)
        final["v2"] = eval_next(model, held, a.seq_len, 4096)
    else:
        ratios = [0.15, 0.3, 0.5, 0.7, 0.85]
        final["v1"] = eval_masked(model, held1, a.seq_len, ratios, 10 ** 9)
        final["v2"] = eval_masked(model, held, a.seq_len, ratios, 4096)
    log(f"{a.name} final held-out: {json.dumps(final)}")
    meta = {"args": vars(a), "steps": step, "tokens": tokens, "wall_s": wall, "train_log": train_log,
            "eval_log": eval_log, "final_eval": final, "params": num_params(model),
            "gpu": torch.cuda.get_device_name() if dev == "cuda" else "cpu", "torch": torch.__version__}
    save_outputs(os.path.join(a.out, a.name), model, cfg, meta)
    torch.save({"state_dict": model.state_dict(), "cfg": cfg}, os.path.join(a.work, f"{a.name}_fp32.pt"))
    log(f"{a.name}: saved")


# ----------------------------------------------------------------------------------------------------- distill
@torch.no_grad()
def teacher_fill(model, x, span_start, span_len, block=DIST_BLOCK, per_step=1):
    """Fill x[:, s:s+n] (per-row start, same length) with the exact schedule: one token per step (per_step > 1:
    that many), the most confident masked positions of the current block (semi-autoregressive blocks of
    `block`), greedy."""
    B, L = x.shape
    pos = torch.arange(L, device=x.device)[None, :]
    in_span = (pos >= span_start[:, None]) & (pos < span_start[:, None] + span_len)
    blk = torch.where(in_span, (pos - span_start[:, None]) // block, torch.full_like(pos, 1 << 20))
    x = torch.where(in_span, torch.full_like(x, MASK), x)
    rows = torch.arange(B, device=x.device)
    assert block % per_step == 0
    for _ in range(span_len // per_step):
        masked = x == MASK
        with autocast():
            logits = model(x).float()
        p = logits.softmax(-1)
        conf, pred = p.max(-1)
        cur = torch.where(masked, blk, torch.full_like(blk, 1 << 20)).min(-1, keepdim=True).values
        conf = torch.where(masked & (blk == cur), conf, torch.full_like(conf, -1.0))
        j = conf.topk(per_step, dim=-1).indices
        x[rows[:, None], j] = pred[rows[:, None], j]
    return x, in_span, blk


@torch.no_grad()
def infill_eval(model, held, L, n_windows=512, span=32, steps=(32, 16, 8, 4, 2, 1)):
    """Exact-token accuracy of held-out span fills (context on both sides) at several step counts."""
    model.eval()
    n = min(len(held) // L, n_windows)
    x = held[:n * L].view(n, L).clone()
    gen = torch.Generator(device=held.device).manual_seed(99)
    s = torch.randint(16, L - span - 16 + 1, (n,), generator=gen, device=held.device)
    out = {}
    for st in steps:
        xf, in_span, _ = teacher_fill(model, x.clone(), s, span, block=span, per_step=span // st)
        out[str(st)] = (xf[in_span] == x[in_span]).float().mean().item()
    model.train()
    return out


def certainty_forcing_loss(model, x, in_span, blk, gen):
    """Semi-AR block masks over the span, the mask and its complement; CE + entropy on correct positions."""
    B, L = x.shape
    nblk = int(torch.where(in_span, blk, torch.zeros_like(blk)).max().item()) + 1
    k = torch.randint(0, nblk, (B, 1), generator=gen, device=x.device)
    t = torch.rand((B, 1), generator=gen, device=x.device).clamp_min(1e-3)
    r = torch.rand((B, L), generator=gen, device=x.device)
    cur = in_span & (blk == k)
    later = in_span & (blk > k)
    total = 0.0
    for m in (cur & (r < t), cur & (r >= t)):
        noisy = torch.where(m | later, torch.full_like(x, MASK), x)
        with autocast():
            logits = model(noisy)
        lg = logits[m].float()
        tgt = x[m]
        if tgt.numel() == 0:
            continue
        ce = F.cross_entropy(lg, tgt)
        q = (lg / ENTROPY_T).softmax(-1)
        ent = -(q * torch.log(q + 1e-12)).sum(-1)
        correct = (lg.argmax(-1) == tgt).float()
        total = total + ce + ENTROPY_WEIGHT * (ent * correct).sum() / correct.sum().clamp_min(1)
    return total


def span_batch(train, B, L, span_len, suffix, gen):
    x = windows(train, B, L, gen)
    if suffix:
        s = torch.full((B,), L - span_len, device=x.device)
    else:
        lo = min(16, (L - span_len) // 4)  # context on both sides, as dllm study's span tasks
        s = torch.randint(lo, L - span_len - lo + 1, (B,), generator=gen, device=x.device)
    return x, s


def cmd_distill(a):
    dev = device()
    torch.manual_seed(a.seed)
    gen = torch.Generator(device=dev).manual_seed(a.seed + 7)
    train = load_stream(a.work, "train", dev)
    held = load_stream(a.work, "heldout", dev)
    held1 = load_stream(a.work, "heldout_v1", dev)
    ck = torch.load(a.teacher, map_location=dev)
    cfg = ck["cfg"]
    teacher = LLaDAModel(cfg).to(dev).use_sdpa()
    teacher.load_state_dict(ck["state_dict"])
    teacher.eval()
    t0 = time.time()
    # 1. the teacher's fills, until the data deadline
    kinds = [(n, suf) for n in (8, 16, 32, 64) for suf in (False, True)]
    data = []
    n_fill = 0
    while time.time() < a.data_until:
        n, suf = kinds[len(data) % len(kinds)]
        x, s = span_batch(train, a.gen_batch, a.seq_len, n, suf, gen)
        xf, in_span, blk = teacher_fill(teacher, x, s, n)
        agree = (xf[in_span] == x[in_span]).float().mean().item()
        data.append((xf, in_span, blk, n, suf, agree))
        n_fill += a.gen_batch
    log(f"distill: {n_fill} teacher fills ({len(data)} batches of {a.gen_batch}) in {time.time() - t0:.0f}s; "
        f"fill == original text: " + ", ".join(
            f"{'suffix' if suf else 'span'} {n}: {np.mean([d[5] for d in data if d[3] == n and d[4] == suf]):.3f}"
            for n, suf in kinds if any(d[3] == n and d[4] == suf for d in data)))
    # 2. the student
    student = LLaDAModel(cfg).to(dev).use_sdpa()
    student.load_state_dict(ck["state_dict"])
    student.train()
    opt = optimizer(student, a.lr, 0.0)
    sched = Schedule(a.lr, a.warmup)
    t1 = time.time()
    step, train_log, t_measure = 0, [], None
    mb = a.batch
    while True:
        if step == 10:
            if dev == "cuda":
                torch.cuda.synchronize()
            t_measure = time.time()
        if step == 60:
            if dev == "cuda":
                torch.cuda.synchronize()
            per = (time.time() - t_measure) / 50
            sched.total = step + max(1, int((a.until - a.reserve - time.time()) / per * 0.97))
            log(f"distill: {per * 1e3:.1f} ms/step -> {sched.total} steps")
        if (sched.total is not None and step >= sched.total) or time.time() > a.until - a.reserve:
            break
        xf, in_span, blk, n, suf, _ = data[step % len(data)]
        i = torch.randint(0, xf.shape[0] - mb + 1, (1,), generator=gen, device=dev).item()
        lr = sched.at(step)
        for g in opt.param_groups:
            g["lr"] = lr
        loss = certainty_forcing_loss(student, xf[i:i + mb], in_span[i:i + mb], blk[i:i + mb], gen)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 25 == 0:
            train_log.append([step, round(loss.item(), 5), lr, round(time.time() - t1, 1)])
        if step % 200 == 0:
            log(f"distill step {step}/{sched.total} loss {loss.item():.4f}")
    ratios = [0.15, 0.3, 0.5, 0.7, 0.85]
    final = {"v1": eval_masked(student, held1, a.seq_len, ratios, 10 ** 9),
             "v2": eval_masked(student, held, a.seq_len, ratios, 4096)}
    log(f"student: {step} steps in {time.time() - t1:.0f}s; final held-out {json.dumps(final)}")
    infill = {"teacher": infill_eval(teacher, held, a.seq_len), "student": infill_eval(student, held, a.seq_len)}
    log(f"held-out span-32 infill exact-token accuracy by steps: {json.dumps(infill)}")
    meta = {"args": vars(a), "steps": step, "teacher_fills": n_fill, "train_log": train_log, "final_eval": final, "infill_by_steps": infill,
            "fill_agreement": {f"{'suffix' if suf else 'span'} {n}": float(np.mean(
                [d[5] for d in data if d[3] == n and d[4] == suf])) for n, suf in kinds
                if any(d[3] == n and d[4] == suf for d in data)},
            "wall_s": time.time() - t0, "gpu": torch.cuda.get_device_name() if dev == "cuda" else "cpu",
            "torch": torch.__version__}
    save_outputs(os.path.join(a.out, "student"), student, cfg, meta)
    log("student: saved")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tokenize")
    t.add_argument("--corpus", required=True)
    t.add_argument("--tokenizer", required=True)
    t.add_argument("--work", required=True)
    t.add_argument("--expect", default="", help="'<count> <sha256>' of the held-out ids from the engine")
    t.add_argument("--max-docs", type=int, default=0, help="dry runs: only the first N documents")
    for name in ("train", "distill"):
        p = sub.add_parser(name)
        p.add_argument("--work", required=True)
        p.add_argument("--out", required=True)
        p.add_argument("--until", type=float, required=True, help="deadline, seconds since the epoch")
        p.add_argument("--reserve", type=float, default=25.0, help="seconds kept for the final eval and saving")
        p.add_argument("--seq-len", type=int, default=256)
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--warmup", type=int, default=200 if name == "train" else 30)
    t = sub.choices["train"]
    t.add_argument("--objective", choices=["llada", "ar"], default="llada")
    t.add_argument("--name", required=True)
    t.add_argument("--d-model", type=int, default=256)
    t.add_argument("--n-layers", type=int, default=6)
    t.add_argument("--n-heads", type=int, default=4)
    t.add_argument("--mlp", type=int, default=768)
    t.add_argument("--batch", type=int, default=256)
    t.add_argument("--lr", type=float, default=3e-3)
    t.add_argument("--wd", type=float, default=0.1)
    t.add_argument("--var-len-prob", type=float, default=0.05)
    t.add_argument("--eval-every", type=int, default=500)
    d = sub.choices["distill"]
    d.add_argument("--teacher", required=True)
    d.add_argument("--data-until", type=float, required=True, help="stop making teacher fills at this time")
    d.add_argument("--gen-batch", type=int, default=512)
    d.add_argument("--batch", type=int, default=128)
    d.add_argument("--lr", type=float, default=3e-4)
    a = ap.parse_args()
    if a.cmd != "tokenize":
        os.makedirs(a.out, exist_ok=True)
    {"tokenize": cmd_tokenize, "train": cmd_train, "distill": cmd_distill}[a.cmd](a)


if __name__ == "__main__":
    main()
