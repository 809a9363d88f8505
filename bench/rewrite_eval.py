#!/usr/bin/python3
"""Rewriting a span in context vs writing it left to right, and what refine rounds change (issue 17 item 4).

    /usr/bin/python3 bench/rewrite_eval.py [--dllm build/dllm] [--model models/demo] [--samples 60] \
        [--out bench/results/rewrite_eval]

Samples: two consecutive non-blank lines inside the held-out stdlib files of the demo models
(tools/train/heldout_files.txt under /usr/lib/python3.11), at least 10 lines from either end of the file, chosen
with a fixed seed; each sample is cut to its 10 lines before + the 2 lines + 10 lines after (a 22-line file).
For each sample, the 2 lines (n tokens) are re-made by:
  * rewrite: `dllm rewrite --lines 11-12` (the 10 lines on both sides as context, one token per step: n forwards);
  * rewrite + refine R: the same, then R rounds remasking a quarter of the span (R x n/4 more forwards);
  * left to right: `dllm generate -p <the 10 lines before> --gen-length n --block-length 1` (n forwards, one
    token per forward, no right context): what a left-to-right writer with the same forwards produces.
Measured against the original lines: exact-token accuracy (position by position) and token similarity
(1 - token edit distance / n), means with 95% intervals over samples (normal approximation), and the paired
difference rewrite - left to right.
"""
import argparse
import json
import math
import os
import random
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def edit_distance(a, b):
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
        prev = cur
    return prev[len(b)]


def scores(got, truth):
    n = len(truth)
    acc = sum(1 for g, t in zip(got, truth) if g == t) / n
    sim = max(0.0, 1 - edit_distance(got, truth) / n)
    return acc, sim


def mean_ci(xs):
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, 0.0
    var = sum((x - m) ** 2 for x in xs) / (len(xs) - 1)
    return m, 1.96 * math.sqrt(var / len(xs))


def run_json(cmd):
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def samples(n, seed):
    files = [ln.strip() for ln in open(os.path.join(ROOT, "tools/train/heldout_files.txt"))
             if ln.strip() and not ln.startswith("#")]
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        rel = rng.choice(files)
        lines = open(os.path.join("/usr/lib/python3.11", rel), encoding="utf-8").read().splitlines(keepends=True)
        if len(lines) < 30:
            continue
        a = rng.randrange(10, len(lines) - 12)
        if not lines[a].strip() or not lines[a + 1].strip():
            continue
        out.append((rel, a + 1, "".join(lines[a - 10:a + 12])))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dllm", default=os.path.join(ROOT, "build", "dllm"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "demo"))
    ap.add_argument("--samples", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--refine", type=int, nargs="+", default=[1, 3])
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "rewrite_eval"))
    a = ap.parse_args()
    common = ["-m", a.model, "--dtype", "f32", "-t", "2", "-q"]
    res = {"rewrite": [], "left_to_right": []}
    for r in a.refine:
        res[f"rewrite + refine {r}"] = []
    forwards = {k: [] for k in res}
    changed = {r: [] for r in a.refine}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (rel, line, text) in enumerate(samples(a.samples, a.seed)):
            path = os.path.join(tmp, f"s{i}.py")
            open(path, "w", encoding="utf-8").write(text)
            lines = text.splitlines(keepends=True)
            prefix, span = "".join(lines[:10]), "".join(lines[10:12])
            truth = json.loads(subprocess.run([a.dllm, "tokenize", "-t", a.model], input=json.dumps(span) + "\n",
                                              check=True, capture_output=True, text=True).stdout)
            base = [a.dllm, "rewrite", path, "--lines", "11-12", *common, "--json"]
            r0 = run_json(base)
            res["rewrite"].append(scores(r0["span_ids"], truth))
            forwards["rewrite"].append(r0["forwards"])
            for r in a.refine:
                rr = run_json(base + ["--refine", str(r)])
                res[f"rewrite + refine {r}"].append(scores(rr["span_ids"], truth))
                forwards[f"rewrite + refine {r}"].append(rr["forwards"])
                changed[r].append(sum(x["changed"] for x in rr["refine"]) / max(1, sum(x["remasked"] for x in rr["refine"])))
            g = run_json([a.dllm, "generate", *common, "-p", prefix, "--gen-length", str(len(truth)),
                          "--block-length", "1", "--json"])
            res["left_to_right"].append(scores(g["outputs"][0], truth))
            forwards["left_to_right"].append(g["forwards"])
    rows = []
    for k, v in res.items():
        acc = mean_ci([x[0] for x in v])
        sim = mean_ci([x[1] for x in v])
        rows.append({"method": k, "samples": len(v), "accuracy": acc[0], "accuracy_ci95": acc[1],
                     "similarity": sim[0], "similarity_ci95": sim[1]})
    paired_acc = mean_ci([x[0] - y[0] for x, y in zip(res["rewrite"], res["left_to_right"])])
    paired_sim = mean_ci([x[1] - y[1] for x, y in zip(res["rewrite"], res["left_to_right"])])
    out = {"samples": a.samples, "seed": a.seed, "model": os.path.relpath(a.model, ROOT), "rows": rows,
           "rewrite_minus_left_to_right": {"accuracy": paired_acc, "similarity": paired_sim},
           "refine_changed_share": {str(r): sum(v) / len(v) for r, v in changed.items()},
           "mean_forwards_per_sample": {k: sum(v) / len(v) for k, v in forwards.items()}}
    json.dump(out, open(a.out + ".json", "w"), indent=1)
    md = [f"# Rewriting a span in context vs left to right: {out['model']}\n",
          f"`/usr/bin/python3 bench/rewrite_eval.py --samples {a.samples}` (bench/rewrite_eval.py says how the "
          f"samples are made): {a.samples} held-out samples of two lines, f32, 2 threads.\n",
          "| method | accuracy % (95% CI) | similarity % (95% CI) | forwards per sample |", "|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['method']} | {100 * r['accuracy']:.1f} ± {100 * r['accuracy_ci95']:.1f} | "
                  f"{100 * r['similarity']:.1f} ± {100 * r['similarity_ci95']:.1f} | "
                  f"{out['mean_forwards_per_sample'][r['method']]:.1f} |")
    pa, ps = out["rewrite_minus_left_to_right"]["accuracy"], out["rewrite_minus_left_to_right"]["similarity"]
    md.append(f"\nRewrite minus left to right (paired, same forwards): accuracy {100 * pa[0]:+.1f} ± {100 * pa[1]:.1f} "
              f"points, similarity {100 * ps[0]:+.1f} ± {100 * ps[1]:.1f} points. Share of remasked tokens that a "
              f"refine round changed: " + ", ".join(f"{r} round(s) {100 * v:.0f} %" for r, v in
                                                     out["refine_changed_share"].items()) + ".")
    open(a.out + ".md", "w").write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
