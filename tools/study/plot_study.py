#!/usr/bin/env python3
"""Plot of the scheduler study (`dllm study --out-json`): held-out infill accuracy against median tokens/s.

    /usr/bin/python3 tools/study/plot_study.py bench/results/scheduler_study.json bench/results/scheduler_study.svg

One point per setting: colour = cache mode, marker = schedule family (fixed steps / threshold), filled = one block,
hollow = the smaller block length; error bars = 95% CI of the accuracy over windows; the exact per-token schedule is
starred, and the bands are exact - 1 and exact - 3 points.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    src, dst = sys.argv[1], sys.argv[2]
    d = json.load(open(src))
    g = d["grid"]
    rows = g["settings"]
    colors = {"none": "tab:blue", "prefix": "tab:orange", "dual": "tab:green"}
    big = max(r["block_length"] for r in rows)
    fig, ax = plt.subplots(figsize=(9, 5.5))
    exact = 100 * g["exact_accuracy"]
    for x, style in ((1, ":"), (3, "--")):
        ax.axhline(exact - x, color="grey", ls=style, lw=0.8, label=f"exact - {x} point{'s' if x > 1 else ''}")
    seen = set()
    for r in rows:
        acc, ci, tps = 100 * r["accuracy"], 100 * r["ci95"], r["median_tokens_per_second"]
        thr = r["schedule"].startswith("threshold")
        marker = "s" if thr else "o"
        full = r["block_length"] == big
        c = colors[r["cache"]]
        label = f"{'threshold' if thr else 'fixed steps'}, cache {r['cache']}, block {r['block_length']}"
        ax.errorbar(tps, acc, yerr=ci, fmt=marker, color=c, mfc=c if full else "white", ms=6, elinewidth=0.5,
                    capsize=0, alpha=0.85, label=None if label in seen else label)
        seen.add(label)
        if r["exact"]:
            ax.plot(tps, acc, "*", color="black", ms=14, label="exact (steps = gen, 1 block, no cache)")
        if not thr:
            ax.annotate(r["schedule"].replace("steps ", "s"), (tps, acc), textcoords="offset points", xytext=(4, 3),
                        fontsize=6, color=c)
    ax.set_xscale("log")
    ax.set_xlabel("median tokens/s (filled tokens per second of one request, batch 1)")
    ax.set_ylabel("exact-token accuracy on held-out span (%)")
    ax.set_title(f"{d['model']}: span {g['span']} in {d['window']}-token held-out windows, "
                 f"{g['windows']} windows ({g['tokens']} tokens), {d['threads']} thread(s)", fontsize=9)
    ax.legend(fontsize=6, loc="lower right", ncol=2)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(dst)
    print(f"wrote {dst}")


if __name__ == "__main__":
    main()
