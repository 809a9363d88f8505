#!/usr/bin/env python3
"""Teacher vs distilled student from two `dllm study --out-json` runs on the same held-out windows (same --seed,
--windows, --span): forwards per token and accuracy at each threshold, and the answer to "does the student reach
the teacher's exact-schedule accuracy (within 1 point) with >= 3x fewer forwards?".

    python3 tools/study/compare_distillation.py bench/results/scheduler_study.json \
        bench/results/distillation_student.json > bench/results/distillation_table.md

Accuracy CIs are the studies' 95% intervals over windows; a teacher-vs-student difference is unpaired here (the
studies record window means, not per-window results), so its interval is sqrt(ci_t^2 + ci_s^2): conservative.
"""
import json
import math
import sys


def rows_by_key(study, cache="none"):
    out = {}
    for r in study["grid"]["settings"]:
        if r["cache"] == cache:
            out[(r["schedule"], r["block_length"])] = r
    return out


def pct(x):
    return f"{100 * x:.1f}"


def main():
    teacher, student = (json.load(open(p)) for p in sys.argv[1:3])
    for k in ("windows", "span"):
        if teacher["grid"][k] != student["grid"][k]:
            sys.exit(f"the studies differ in grid {k}: {teacher['grid'][k]} vs {student['grid'][k]}")
    t_rows, s_rows = rows_by_key(teacher), rows_by_key(student)
    exact = next(r for r in teacher["grid"]["settings"] if r["exact"])
    out = []
    out.append(f"Held-out span infill, {teacher['grid']['windows']} windows x span {teacher['grid']['span']} "
               f"(tokens {teacher['grid']['tokens']}), no cache. Teacher exact schedule (1 token per forward): "
               f"accuracy {pct(exact['accuracy'])} ± {pct(exact['ci95'])} %, similarity "
               f"{pct(exact['similarity'])} ± {pct(exact['similarity_ci95'])} %.\n")
    out.append("| schedule | block | teacher fwd/token | teacher acc % | teacher sim % | student fwd/token | "
               "student acc % | student sim % | student acc - teacher exact, points |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    best = None
    for key in sorted(t_rows, key=lambda k: (k[1], k[0])):
        if key not in s_rows:
            continue
        t, s = t_rows[key], s_rows[key]
        d = s["accuracy"] - exact["accuracy"]
        dci = math.hypot(s["ci95"], exact["ci95"])
        out.append(f"| {key[0]} | {key[1]} | {t['forwards_per_token']:.3f} | {pct(t['accuracy'])} ± {pct(t['ci95'])} "
                   f"| {pct(t['similarity'])} | {s['forwards_per_token']:.3f} | {pct(s['accuracy'])} ± "
                   f"{pct(s['ci95'])} | {pct(s['similarity'])} | {100 * d:+.1f} ± {100 * dci:.1f} |")
        if d >= -0.01 - 1e-12 and (best is None or s["forwards_per_token"] < best[1]["forwards_per_token"]):
            best = (key, s, d)
    out.append("")
    for metric, name in (("accuracy", "exact-token accuracy"), ("similarity", "token edit similarity")):
        ok_s = [r for r in s_rows.values() if r[metric] >= exact[metric] - 0.01 - 1e-12]
        ok_t = [r for r in t_rows.values() if r[metric] >= exact[metric] - 0.01 - 1e-12]
        line = f"* **By {name}** (teacher exact: {pct(exact[metric])} %): "
        if ok_s:
            b = min(ok_s, key=lambda r: r["forwards_per_token"])
            ratio = exact["forwards_per_token"] / b["forwards_per_token"]
            line += (f"the student's fewest forwards within 1 point: {b['schedule']}, block {b['block_length']}: "
                     f"{b['forwards_per_token']:.3f} forwards/token, **{ratio:.1f}x fewer** than the teacher's exact "
                     f"schedule ({pct(b[metric])} %; goal >= 3x: {'met' if ratio >= 3 else 'not met'}). ")
        else:
            line += "no student setting within 1 point. "
        if ok_t:
            tb = min(ok_t, key=lambda r: r["forwards_per_token"])
            line += (f"The teacher alone: {tb['schedule']}, block {tb['block_length']}: "
                     f"{tb['forwards_per_token']:.3f} forwards/token, "
                     f"{exact['forwards_per_token'] / tb['forwards_per_token']:.1f}x fewer ({pct(tb[metric])} %).")
        out.append(line)
    print("\n".join(out))


if __name__ == "__main__":
    main()
