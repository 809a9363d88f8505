"""Writes a random Hugging Face model directory (config.json + one model.safetensors of F16 tensors): the part
make_random_llada.py and make_random_qwen2.py share."""
import json
import os
import struct


def write_model(out, cfg, tensors):
    """Writes cfg as out/config.json and the (name, float16 array) pairs of `tensors` as out/model.safetensors."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as fh:
        json.dump(cfg, fh, indent=2)
    items = list(tensors)
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, t in items:
        header[name] = {"dtype": "F16", "shape": list(t.shape), "data_offsets": [off, off + t.nbytes]}
        off += t.nbytes
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)  # the data starts 8-byte aligned
    with open(os.path.join(out, "model.safetensors"), "wb") as fh:
        fh.write(struct.pack("<Q", len(h)) + h)
        for _, t in items:
            fh.write(t.tobytes())
    print(f"wrote {out}: {off / 1e9:.2f} GB of F16 weights, {len(items)} tensors")
