#!/usr/bin/python3
"""Check that the reference encoder (bpe_tokenizer.py) matches the official HF `tokenizers` library.

    mkdir -p /tmp/tokcheck && (cd /tmp/tokcheck && npm install tokenizers)     # outside the repo
    /usr/bin/python3 tools/train/check_tokenizer.py models/demo/tokenizer.json [--node-modules /tmp/tokcheck/node_modules]

Samples: every held-out file whole, plus ~400 random line ranges from held-out files (seeded), plus hand-written
edge cases (unicode, digits, contractions, CRLF, whitespace runs, special tokens). Compares ids and decode().
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import data  # noqa: E402
from bpe_tokenizer import BPETokenizer  # noqa: E402

EDGE = [
    "", " ", "\n", "\r\n", "  \n\n\t  x", "x  ", "I'm you'LL we'Re it's", "a1234b 5.67e-8 ０１２",
    "naïve café — “quotes” 日本語テキスト 🙂 emoji\u00a0nbsp\u2003em", "<|endoftext|>def<|mdm_mask|> x<|startoftext|>",
    "<|fim_prefix|>a<|fim_suffix|>b<|fim_middle|>", "    \n        return\n\n\n", "\t\tif x:\r\n\t\t\tpass\r\n",
    "__init__ __name__ == '__main__'", "x=='''doc'''+\"\"\"s\"\"\"", "ǅungla ǈ ǋ ſtraße", "\x00\x01\x1f\x7f",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tokenizer")
    ap.add_argument("--node-modules", default="/tmp/tokcheck/node_modules")
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    held = data.read_heldout_list()
    texts = [data.read_text(f) for f in held]
    samples = list(EDGE) + texts
    for _ in range(args.n):
        lines = rng.choice(texts).splitlines(keepends=True)
        a = rng.randrange(len(lines))
        samples.append("".join(lines[a:a + rng.randint(1, 30)]))
    tok = BPETokenizer(args.tokenizer)
    with tempfile.TemporaryDirectory() as td:
        sp, op = os.path.join(td, "s.json"), os.path.join(td, "o.json")
        with open(sp, "w", encoding="utf-8") as f:
            json.dump(samples, f)
        env = dict(os.environ, NODE_PATH=args.node_modules)
        subprocess.run(["node", os.path.join(HERE, "check_tokenizer_hf.js"), args.tokenizer, sp, op],
                       check=True, env=env)
        with open(op, encoding="utf-8") as f:
            ref = json.load(f)
    bad = 0
    ntok = 0
    for s, r in zip(samples, ref):
        ids = tok.encode(s)
        ntok += len(ids)
        dec = tok.decode(ids)
        if ids != r["ids"] or dec != r["decoded"]:
            bad += 1
            if bad <= 5:
                print("MISMATCH", repr(s[:80]), ids[:20], r["ids"][:20], repr(dec[:40]), repr(r["decoded"][:40]))
    print(f"{len(samples)} samples, {ntok} tokens: {len(samples) - bad} identical, {bad} mismatches")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
