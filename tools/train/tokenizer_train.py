#!/usr/bin/python3
"""Train the byte-level BPE tokenizer of the demo model (pure Python) and write an HF tokenizer.json.

    /usr/bin/python3 tools/train/tokenizer_train.py --out /work/train_ckpt/tokenizer [--vocab-size 4096]

Training text: the TRAINING files of data.py (held-out files are never seen). Pre-tokenisation = Qwen2 regex
Split + ByteLevel (see bpe_tokenizer.py). Vocabulary = 256 byte tokens, then merges in the order learned
(most frequent adjacent pair over the word counts; ties -> smallest pair in string order), then the special
tokens (added_tokens) at the top ids. Deterministic.
"""
import argparse
import collections
import heapq
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import data  # noqa: E402
from bpe_tokenizer import (QWEN2_PATTERN, BYTE_ENC, compile_qwen2_pattern, split_words,  # noqa: E402
                           to_byte_level)

SPECIAL_TOKENS = [
    "<|endoftext|>",    # eos = pad
    "<|startoftext|>",  # bos
    "<|mdm_mask|>",     # mask token of the masked diffusion model
    "<|fim_prefix|>",   # infill markers (reserved; not used in pre-training)
    "<|fim_middle|>",
    "<|fim_suffix|>",
]

CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|startoftext|>' if loop.first else '' }}"
    "{{ message['content'] }}{% if not loop.last %}\n{% endif %}{% endfor %}"
)


def train_bpe(word_counts, n_merges, log_every=500):
    words = []   # list of [symbols], symbols are strings
    freqs = []
    for w, f in word_counts.items():
        words.append(list(w))
        freqs.append(f)
    pair_count = collections.defaultdict(int)
    pair_words = collections.defaultdict(set)
    for wi, syms in enumerate(words):
        f = freqs[wi]
        for a, b in zip(syms, syms[1:]):
            pair_count[(a, b)] += f
            pair_words[(a, b)].add(wi)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    merges = []
    t0 = time.time()
    while len(merges) < n_merges and heap:
        negc, pair = heapq.heappop(heap)
        if pair_count.get(pair, 0) != -negc:
            continue  # stale
        if -negc < 2:
            break
        a, b = pair
        new = a + b
        merges.append(pair)
        affected = list(pair_words.pop(pair, ()))
        changed = set()
        for wi in affected:
            syms = words[wi]
            f = freqs[wi]
            # remove old pairs
            for p in zip(syms, syms[1:]):
                pair_count[p] -= f
                changed.add(p)
            out, i = [], 0
            while i < len(syms):
                if i + 1 < len(syms) and syms[i] == a and syms[i + 1] == b:
                    out.append(new)
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            words[wi] = out
            for p in zip(out, out[1:]):
                pair_count[p] += f
                pair_words[p].add(wi)
                changed.add(p)
        for p in changed:
            c = pair_count.get(p, 0)
            if c <= 0:
                pair_count.pop(p, None)
                pair_words.pop(p, None)
            else:
                heapq.heappush(heap, (-c, p))
        pair_count.pop(pair, None)
        if log_every and len(merges) % log_every == 0:
            print(f"  merge {len(merges)}/{n_merges}  count {-negc}  {a!r}+{b!r}  {time.time() - t0:.1f}s",
                  flush=True)
    return merges


def build_tokenizer_json(merges, vocab_size):
    vocab = {}
    for b in range(256):
        vocab[BYTE_ENC[b]] = len(vocab)
    merge_strs = []
    for a, b in merges:
        merge_strs.append(f"{a} {b}")
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
    assert len(vocab) + len(SPECIAL_TOKENS) == vocab_size, (len(vocab), vocab_size)
    added = []
    for i, t in enumerate(SPECIAL_TOKENS):
        added.append({"id": len(vocab) + i, "content": t, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True})
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN}, "behavior": "Isolated", "invert": False},
            bl]},
        "post_processor": None,
        "decoder": dict(bl),
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merge_strs},
    }


def tokenizer_config(vocab_size):
    first = vocab_size - len(SPECIAL_TOKENS)
    return {
        "add_bos_token": False,
        "add_eos_token": False,
        "added_tokens_decoder": {str(first + i): {"content": t, "lstrip": False, "normalized": False,
                                                  "rstrip": False, "single_word": False, "special": True}
                                 for i, t in enumerate(SPECIAL_TOKENS)},
        "bos_token": "<|startoftext|>",
        "eos_token": "<|endoftext|>",
        "pad_token": "<|endoftext|>",
        "mask_token": "<|mdm_mask|>",
        "additional_special_tokens": SPECIAL_TOKENS[3:],
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 4096,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory (tokenizer.json, tokenizer_config.json)")
    ap.add_argument("--vocab-size", type=int, default=4096)
    args = ap.parse_args()
    t0 = time.time()
    train_files, _ = data.split()
    regex = compile_qwen2_pattern()
    counts = collections.Counter()
    for rel in train_files:
        for w in split_words(regex, data.read_text(rel)):
            counts[w] += 1
    wc = collections.Counter()
    for w, c in counts.items():
        wc[to_byte_level(w)] += c
    print(f"{len(train_files)} training files, {sum(wc.values())} words, {len(wc)} unique "
          f"({time.time() - t0:.1f}s)", flush=True)
    # merges needed: vocab - 256 bytes - specials (+ merges whose result already exists, which add no token)
    target = args.vocab_size - 256 - len(SPECIAL_TOKENS)
    merges = []
    n = target
    while True:
        merges = train_bpe(wc, n)
        n_new = len({a + b for a, b in merges} - set(BYTE_ENC.values()))
        if n_new >= target or len(merges) < n:
            break
        n += target - n_new
    # trim to exactly `target` new tokens
    seen, keep = set(BYTE_ENC.values()), []
    for a, b in merges:
        if len(seen) - 256 >= target:
            break
        keep.append((a, b))
        seen.add(a + b)
    tj = build_tokenizer_json(keep, args.vocab_size)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False, indent=1)
    with open(os.path.join(args.out, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer_config(args.vocab_size), f, ensure_ascii=False, indent=2)
    print(f"wrote {args.out}/tokenizer.json: {len(keep)} merges, vocab {args.vocab_size} "
          f"({time.time() - t0:.1f}s)")


if __name__ == "__main__":
    main()
