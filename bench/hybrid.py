#!/usr/bin/python3
"""The hybrid measured on trained models: routing (AR alone / dLLM alone / auto) and diffusion drafting.

    /usr/bin/python3 bench/hybrid.py [--dllm build/dllm] [--ar models/demo-ar] [--dlm models/demo] \
        [--out bench/results/hybrid] [--reps 3]

Writes OUT.json (every measurement), OUT.md (tables, commands, machine) and OUT.png (matplotlib, if installed).
Run it on a quiet machine: it times whole generations, and the machine has 2 cores.

Prompts come from the held-out files of the demo models (tools/train/heldout_files.txt under
/usr/lib/python3.11: neither model saw them), chosen with a fixed seed, so the truth after each prompt is known:

* drafting: `dllm generate -m AR --max-tokens 64` alone and with `--draft DLM --draft-tokens k` for k = 4, 8, 16
  (one denoising step per draft; k = 8 also with 2 steps). Greedy, so the text must equal AR alone (checked).
  Reported: mean accepted drafted tokens per round, drafter / verifier seconds, tokens/s and the speed-up over
  AR alone (medians over --reps runs of each prompt; `seconds` is the engine's own generation time, not the
  process start).
* routing: one `dllm serve --model ar=AR --model dllm=DLM --route-short-max-tokens 64` and a mixed request set
  on /v1/completions, sent one at a time: short continuations (max_tokens 16), long generations (max_tokens 128)
  and infill (prompt + `suffix`, max_tokens = the true middle's length), each sent to `ar`, to `dllm` and to
  `auto`. The AR model cannot infill: in the `ar` column the suffix is dropped (it continues the prefix).
  Reported per kind: median latency, tokens/s (completion tokens / summed latency) and similarity to the held-out
  truth (difflib ratio of the generated text and the true continuation of the same length in characters).
"""
import argparse
import difflib
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "train"))
import data  # noqa: E402  (held-out split of the demo models)

DRAFT_SETTINGS = [(4, 1), (8, 1), (16, 1), (8, 2)]  # (draft tokens k, denoising steps per draft)


def held_out_snippets(n, seed, prefix_lines=10, middle_lines=1, suffix_lines=4):
    """n (prefix, middle, suffix) triples cut at line boundaries of held-out files, non-blank middles."""
    rng = random.Random(seed)
    files = data.read_heldout_list()
    out = []
    while len(out) < n:
        lines = data.read_text(rng.choice(files)).splitlines(keepends=True)
        if len(lines) < prefix_lines + middle_lines + suffix_lines + 1:
            continue
        i = rng.randrange(prefix_lines, len(lines) - middle_lines - suffix_lines)
        mid = "".join(lines[i:i + middle_lines])
        if len(mid.strip()) < 8:
            continue
        out.append(("".join(lines[i - prefix_lines:i]), mid, "".join(lines[i + middle_lines:i + middle_lines +
                                                                             suffix_lines])))
    return out


def similarity(generated, truth):
    truth = truth[:max(len(generated), 1)]
    return difflib.SequenceMatcher(None, generated, truth).ratio()


def run_json(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")
    return json.loads(r.stdout)


def drafting(args, prompts):
    rows = []
    for pi, (prefix, mid, suffix) in enumerate(prompts):
        base = [args.dllm, "generate", "-q", "--json", "-m", args.ar, "-p", prefix, "--max-tokens", "64"]
        runs = {"ar": [run_json(base) for _ in range(args.reps)]}
        for k, s in DRAFT_SETTINGS:
            cmd = base + ["--draft", args.dlm, "--draft-tokens", str(k), "--draft-steps", str(s)]
            runs[f"k{k}s{s}"] = [run_json(cmd) for _ in range(args.reps)]
        ref_text = runs["ar"][0]["texts"][0]
        for name, rs in runs.items():
            for r in rs:
                if r["texts"][0] != ref_text:
                    raise SystemExit(f"prompt {pi}, {name}: speculative text differs from AR alone (greedy)")
            sp = rs[0].get("speculative", {})
            rows.append({"prompt": pi, "setting": name, "tokens": len(rs[0]["outputs"][0]),
                         "seconds": statistics.median(r["seconds"] for r in rs),
                         "rounds": sp.get("rounds"), "drafted": sp.get("drafted"), "accepted": sp.get("accepted"),
                         "draft_seconds": statistics.median(r["speculative"]["draft_seconds"] for r in rs) if sp
                         else None,
                         "verify_seconds": statistics.median(r["speculative"]["verify_seconds"] for r in rs) if sp
                         else None})
        print(f"drafting: prompt {pi + 1}/{len(prompts)} done", file=sys.stderr, flush=True)
    summary = []
    ar_sec = {r["prompt"]: r["seconds"] for r in rows if r["setting"] == "ar"}
    for name in ["ar"] + [f"k{k}s{s}" for k, s in DRAFT_SETTINGS]:
        rs = [r for r in rows if r["setting"] == name]
        tokens = sum(r["tokens"] for r in rs)
        secs = sum(r["seconds"] for r in rs)
        e = {"setting": name, "tokens": tokens, "seconds": secs, "tokens_per_second": tokens / secs,
             "speedup": statistics.median(ar_sec[r["prompt"]] / r["seconds"] for r in rs)}
        if name != "ar":
            rounds = sum(r["rounds"] for r in rs)
            e.update({"mean_accepted": sum(r["accepted"] for r in rs) / rounds,
                      "acceptance_rate": sum(r["accepted"] for r in rs) / sum(r["drafted"] for r in rs),
                      "draft_seconds": sum(r["draft_seconds"] for r in rs),
                      "verify_seconds": sum(r["verify_seconds"] for r in rs)})
        summary.append(e)
    return rows, summary


class Server:
    def __init__(self, args):
        self.log = tempfile.NamedTemporaryFile("w+", prefix="dllm-serve-", suffix=".log")
        self.p = subprocess.Popen([args.dllm, "serve", "--port", "0", "--model", f"ar={args.ar}", "--model",
                                   f"dllm={args.dlm}", "--route-short-max-tokens", "64"],
                                  stdout=self.log, stderr=subprocess.STDOUT, text=True)
        self.port = None
        t0 = time.time()
        while self.port is None and time.time() - t0 < 60 and self.p.poll() is None:
            m = re.search(r"listening on \S*:(\d+)", open(self.log.name).read())
            if m:
                self.port = int(m.group(1))
            time.sleep(0.1)
        if self.port is None:
            self.p.kill()
            raise SystemExit("dllm serve did not start")

    def complete(self, body):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        t0 = time.perf_counter()
        with urllib.request.urlopen(req, timeout=600) as r:
            j = json.loads(r.read())
        return j, time.perf_counter() - t0

    def close(self):
        self.p.terminate()
        self.p.wait(timeout=30)


def routing(args, snippets):
    n_short, n_long = args.short, args.long
    reqs = []
    for i, (prefix, mid, suffix) in enumerate(snippets):
        if i < n_short:
            reqs.append({"kind": "short", "prompt": prefix, "max_tokens": 16, "truth": mid + suffix})
        elif i < n_short + n_long:
            reqs.append({"kind": "long", "prompt": prefix, "max_tokens": 128, "truth": mid + suffix})
        else:
            reqs.append({"kind": "infill", "prompt": prefix, "suffix": suffix, "middle": mid, "truth": mid})
    srv = Server(args)
    rows = []
    try:
        # the true middle's length in tokens, from the served tokenizer (the two models share it)
        for r in reqs:
            if r["kind"] == "infill":
                j, _ = srv.complete({"model": "dllm", "prompt": r["prompt"] + r["middle"], "max_tokens": 1,
                                     "temperature": 0})
                j0, _ = srv.complete({"model": "dllm", "prompt": r["prompt"], "max_tokens": 1, "temperature": 0})
                r["max_tokens"] = max(1, j["usage"]["prompt_tokens"] - j0["usage"]["prompt_tokens"])
        for mode in ("ar", "dllm", "auto"):
            for r in reqs:
                body = {"model": mode, "prompt": r["prompt"], "max_tokens": r["max_tokens"], "temperature": 0}
                if r["kind"] == "infill" and mode != "ar":
                    body["suffix"] = r["suffix"]
                j, sec = srv.complete(body)
                text = j["choices"][0]["text"]
                rows.append({"mode": mode, "kind": r["kind"], "seconds": sec,
                             "completion_tokens": j["usage"]["completion_tokens"],
                             "routed_to": j.get("dllm", {}).get("route", {}).get("model", mode),
                             "reason": j.get("dllm", {}).get("route", {}).get("reason", ""),
                             "similarity": similarity(text, r["truth"])})
            print(f"routing: mode {mode} done", file=sys.stderr, flush=True)
    finally:
        srv.close()
    summary = []
    for mode in ("ar", "dllm", "auto"):
        for kind in ("short", "long", "infill", "all"):
            rs = [r for r in rows if r["mode"] == mode and (kind == "all" or r["kind"] == kind)]
            summary.append({"mode": mode, "kind": kind, "requests": len(rs),
                            "median_latency_s": statistics.median(r["seconds"] for r in rs),
                            "total_s": sum(r["seconds"] for r in rs),
                            "tokens_per_second": sum(r["completion_tokens"] for r in rs) /
                            sum(r["seconds"] for r in rs),
                            "similarity": statistics.mean(r["similarity"] for r in rs),
                            "routed": sorted({f"{r['routed_to']}" for r in rs})})
    return rows, summary


def plot(draft_summary, route_summary, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # noqa: BLE001
        print("matplotlib unavailable, no plot:", e, file=sys.stderr)
        return False
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8), dpi=100)
    kinds = ["short", "long", "infill", "all"]
    modes = ["ar", "dllm", "auto"]
    w = 0.26
    for mi, mode in enumerate(modes):
        vals = [next(s["median_latency_s"] for s in route_summary if s["mode"] == mode and s["kind"] == k)
                for k in kinds]
        a1.bar([i + (mi - 1) * w for i in range(len(kinds))], vals, w, label=f"model={mode}")
    a1.set_xticks(range(len(kinds)))
    a1.set_xticklabels(kinds)
    a1.set_ylabel("median latency (s)")
    a1.set_title("mixed requests: AR alone, dLLM alone, auto")
    a1.legend(fontsize=8)
    ds = [s for s in draft_summary if s["setting"] != "ar"]
    a2.bar(range(len(ds)), [s["speedup"] for s in ds], color="tab:green", label="speed-up over AR alone")
    a2.axhline(1.0, color="gray", lw=0.8)
    a2.set_xticks(range(len(ds)))
    a2.set_xticklabels([s["setting"].replace("k", "k=").replace("s", ", steps ") for s in ds], fontsize=8)
    a2.set_ylabel("speed-up (median over prompts)")
    ax = a2.twinx()
    ax.plot(range(len(ds)), [s["mean_accepted"] for s in ds], "ko-", label="mean accepted / round")
    ax.set_ylim(0, max(1.0, 1.2 * max(s["mean_accepted"] for s in ds)))
    ax.set_ylabel("accepted drafted tokens per round (line)")
    a2.set_title("diffusion-drafted speculative decoding")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dllm", default=os.path.join(ROOT, "build", "dllm"))
    ap.add_argument("--ar", default=os.path.join(ROOT, "models", "demo-ar"))
    ap.add_argument("--dlm", default=os.path.join(ROOT, "models", "demo"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "hybrid"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=8, help="drafting prompts")
    ap.add_argument("--short", type=int, default=8)
    ap.add_argument("--long", type=int, default=4)
    ap.add_argument("--infill", type=int, default=8)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--replot", action="store_true", help="only redraw OUT.png from OUT.json")
    args = ap.parse_args()
    if args.replot:
        j = json.load(open(args.out + ".json"))
        plot(j["drafting"]["summary"], j["routing"]["summary"], args.out + ".png")
        return
    t0 = time.time()
    prompts = held_out_snippets(args.prompts, args.seed)
    d_rows, d_sum = drafting(args, prompts)
    r_rows, r_sum = routing(args, held_out_snippets(args.short + args.long + args.infill, args.seed + 1))
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    meta = {"command": " ".join(sys.argv), "cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "wall_s": round(time.time() - t0)}
    with open(args.out + ".json", "w") as f:
        json.dump({"meta": meta, "drafting": {"summary": d_sum, "rows": d_rows},
                   "routing": {"summary": r_sum, "rows": r_rows}}, f, indent=1)
        f.write("\n")
    have_plot = plot(d_sum, r_sum, args.out + ".png")
    write_md(args, meta, d_sum, r_sum, have_plot)
    print(open(args.out + ".md").read())


def write_md(args, meta, d_sum, r_sum, have_plot):
    rel = os.path.relpath
    L = ["# Hybrid: routing and diffusion drafting on the trained demo models\n",
         f"AR model `{rel(args.ar, ROOT)}` (the demo dLLM's autoregressive twin), dLLM `{rel(args.dlm, ROOT)}`; "
         f"prompts from their held-out files. {meta['date']}, {meta['cpu']}, {meta['cores']} cores, f32, "
         f"2 threads; nothing else ran. Raw numbers in `{os.path.basename(args.out)}.json`.\n",
         "```sh", f"/usr/bin/python3 bench/hybrid.py --reps {args.reps}   # {meta['wall_s']} s", "```\n"]
    if have_plot:
        L.append(f"![hybrid]({os.path.basename(args.out)}.png)\n")
    # What the numbers say, computed from them.
    best = max((s for s in d_sum if s["setting"] != "ar"), key=lambda s: s["speedup"])
    ar_round = next(s for s in d_sum if s["setting"] == "ar")["seconds"] / max(
        1, next(s for s in d_sum if s["setting"] == "ar")["tokens"])
    per_round = (best["draft_seconds"] + best["verify_seconds"]) / max(1, best["tokens"] / (best["mean_accepted"] + 1))
    need = per_round / ar_round - 1
    by = {(s["mode"], s["kind"]): s for s in r_sum}
    L += ["## Reading\n",
          f"* Drafting: the best setting ({best['setting']}) keeps {best['mean_accepted']:.2f} drafted tokens a "
          f"round and runs at {best['speedup']:.2f}x AR alone. A round (draft + verify) costs "
          f"{per_round * 1e3:.2f} ms against {ar_round * 1e3:.2f} ms per token for AR alone, so drafting pays "
          f"only above ~{max(need, 0):.1f} accepted tokens a round. The two demo models are the same size, so the "
          "drafter is never cheaper than the verifier; the gain the literature reports needs a drafter that "
          "agrees more and costs less relative to the verifier (a large AR model: memory-bound single-token "
          "forwards).",
          f"* Routing: `auto` sent short requests to the AR model and long / infill requests to the dLLM; over "
          f"the whole set it took {by[('auto', 'all')]['total_s']:.2f} s against {by[('ar', 'all')]['total_s']:.2f} s "
          f"(AR alone) and {by[('dllm', 'all')]['total_s']:.2f} s (dLLM alone), with similarity "
          f"{by[('auto', 'all')]['similarity']:.3f} / {by[('ar', 'all')]['similarity']:.3f} / "
          f"{by[('dllm', 'all')]['similarity']:.3f}. On infill the dLLM (which sees the suffix) scores "
          f"{by[('dllm', 'infill')]['similarity']:.3f} and the AR model (which cannot) "
          f"{by[('ar', 'infill')]['similarity']:.3f}.\n"]
    L += ["## Diffusion-drafted speculative decoding\n",
          f"`dllm generate -m {rel(args.ar, ROOT)} -p PROMPT --max-tokens 64 [--draft {rel(args.dlm, ROOT)} "
          f"--draft-tokens k --draft-steps s]`, {args.prompts} held-out prompts, greedy (every speculative text "
          f"equals AR alone: checked), median of {args.reps} runs each.\n",
          "| setting | mean accepted / round | acceptance | drafter s | verifier s | tokens/s | speed-up |",
          "|---|---|---|---|---|---|---|"]
    for s in d_sum:
        if s["setting"] == "ar":
            L.append(f"| AR alone | | | | {s['seconds']:.3f} | {s['tokens_per_second']:.0f} | 1.00 |")
        else:
            L.append(f"| {s['setting'].replace('k', 'k=').replace('s', ', steps ')} | {s['mean_accepted']:.2f} | "
                     f"{s['acceptance_rate']:.0%} | {s['draft_seconds']:.3f} | {s['verify_seconds']:.3f} | "
                     f"{s['tokens_per_second']:.0f} | {s['speedup']:.2f} |")
    L += ["", "## Routing a mixed request set\n",
          f"`dllm serve --model ar={rel(args.ar, ROOT)} --model dllm={rel(args.dlm, ROOT)} "
          f"--route-short-max-tokens 64` (server defaults otherwise: the dLLM's exact schedule, one token per step); "
          f"{args.short} short (max_tokens 16), {args.long} long (max_tokens 128), {args.infill} infill (suffix; "
          "max_tokens = true middle), one at a time, temperature 0. Similarity: difflib ratio to the held-out truth "
          "(0-1; `ar` cannot see the suffix of infill requests).\n",
          "| model | requests | median latency s | total s | tokens/s | similarity | went to |",
          "|---|---|---|---|---|---|---|"]
    for s in r_sum:
        L.append(f"| {s['mode']} / {s['kind']} | {s['requests']} | {s['median_latency_s']:.3f} | {s['total_s']:.2f} | "
                 f"{s['tokens_per_second']:.0f} | {s['similarity']:.3f} | {', '.join(s['routed'])} |")
    L.append("")
    with open(args.out + ".md", "w") as f:
        f.write("\n".join(L))


if __name__ == "__main__":
    main()
