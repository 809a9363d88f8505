#!/usr/bin/env python3
"""The scheduler study's answers per cache mode and block length, from `dllm study --out-json`: for each (cache,
block), the setting with the fewest forwards per token whose accuracy is within X points of the exact schedule
(same rule as the study's own answer: point estimate >= exact - X), by exact-token accuracy and by token edit
similarity. Prints markdown.

    python3 tools/study/study_answers.py bench/results/scheduler_study.json
"""
import json
import sys


def main():
    d = json.load(open(sys.argv[1]))
    g = d["grid"]
    rows = g["settings"]
    exact = next(r for r in rows if r["exact"])
    within = [a["within_points"] for a in g["answers"]]
    out = [f"Exact schedule (steps = span = {g['span']}, one block, no cache): accuracy "
           f"{100 * exact['accuracy']:.1f} %, similarity {100 * exact['similarity']:.1f} %, "
           f"{exact['median_tokens_per_second']:.0f} tokens/s. Each cell: the setting with the fewest forwards per "
           f"token within X points of that (point estimates), its forwards/token and median tokens/s.\n"]
    head = "| cache | block | " + " | ".join(
        f"{m} within {x:g}" for m in ("accuracy", "similarity") for x in within) + " |"
    out.append(head)
    out.append("|---|---|" + "---|" * (2 * len(within)))
    keys = sorted({(r["cache"], r["block_length"]) for r in rows}, key=lambda k: (["none", "prefix", "dual"].index(
        k[0]) if k[0] in ("none", "prefix", "dual") else 9, -k[1]))
    for cache, block in keys:
        cells = []
        for metric in ("accuracy", "similarity"):
            for x in within:
                ok = [r for r in rows if r["cache"] == cache and r["block_length"] == block and
                      r[metric] >= exact[metric] - x / 100 - 1e-12]
                if not ok:
                    cells.append("none")
                    continue
                b = min(ok, key=lambda r: (r["forwards_per_token"], -r["median_tokens_per_second"]))
                cells.append(f"{b['schedule']} ({b['forwards_per_token']:.3f} fwd/tok, "
                             f"{b['median_tokens_per_second']:.0f} tok/s)")
        out.append(f"| {cache} | {block} | " + " | ".join(cells) + " |")
    print("\n".join(out))


if __name__ == "__main__":
    main()
