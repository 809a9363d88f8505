#!/usr/bin/python3
"""Re-record demo_infill.json (a regression fixture of the engine on models/demo) after models/demo changes:
each case's text and params are kept, its canvas / spans / filled ids / forwards are what `dllm infill` gives now.

    /usr/bin/python3 tests/data/infill/record_demo_infill.py build/dllm
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
FLAGS = {"block_length": "--block-length", "steps": "--steps", "cache": "--cache", "threshold": "--threshold"}


def main():
    dllm = sys.argv[1]
    path = os.path.join(HERE, "demo_infill.json")
    d = json.load(open(path))
    for c in d["cases"]:
        cmd = [dllm, "infill", "-m", os.path.join(ROOT, "models", "demo"), "--dtype", "f32", "-t", "1", "--json",
               "--text", c["text"]]
        for k, v in c["params"].items():
            if v:  # 0 = the engine's default
                cmd += [FLAGS[k], str(v)]
        r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        c["canvas"], c["filled"], c["forwards"] = r["canvas"], r["ids"], r["forwards"]
        c["spans"] = [[s["begin"], s["length"]] for s in r["spans"]]
        print(repr(r["text"]))
    with open(path, "w") as f:
        json.dump(d, f)
    print("wrote", path)


if __name__ == "__main__":
    main()
