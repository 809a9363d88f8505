#!/usr/bin/python3
"""Check model.py against the LLaDA reference goldens (/work/shared/oracle, llada_tiny_f32): load the tiny
checkpoint into LLaDAModel and compare logits of the three forward.json sequences (tolerance 5e-4 abs)."""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
from model import LLaDAModel, llada_generate  # noqa: E402

ORACLE = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/oracle"


def main():
    mdir = os.path.join(ORACLE, "models/llada_tiny_f32")
    cfg = json.load(open(os.path.join(mdir, "config.json")))
    model = LLaDAModel(cfg)
    sd = safetensors_io.load(os.path.join(mdir, "model.safetensors"))
    missing, unexpected = model.load_state_dict(sd, strict=True), None
    model.eval()
    fw = json.load(open(os.path.join(ORACLE, "golden/llada_tiny_f32/forward.json")))
    worst = 0.0
    with torch.no_grad():
        for s in fw["sequences"]:
            ref = np.load(os.path.join(ORACLE, s["logits_file"]))
            got = model(torch.tensor([s["input_ids"]]))[0].numpy()
            d = float(np.abs(got - ref).max())
            worst = max(worst, d)
            am = (got.argmax(-1) == np.array(s["argmax"])).all()
            print(f"seq {s['index']}: T={s['length']} max|dlogit|={d:.2e} argmax match={am}")
    gj = json.load(open(os.path.join(ORACLE, "golden/llada_tiny_f32/generate.json")))
    ok_gen = True
    n = 0
    for c in gj["cases"]:
        if not c["id"].startswith("lowconf_") or len(c["prompt"]) != 1:
            continue
        k = c["kwargs"]
        got = llada_generate(model, c["prompt"][0], k["gen_length"], k["block_length"], k["steps"])
        n += 1
        if got != c["generated"][0]:
            ok_gen = False
            print("generate mismatch", c["id"], c.get("near_tie"))
    print(f"low-confidence generate: {n} cases checked, {'all match' if ok_gen else 'MISMATCH'}")
    ok = worst < 5e-4 and ok_gen
    print("OK" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
