"""Minimal safetensors reader/writer (no `safetensors` package on Debian): u64 LE header length N, N bytes of
JSON {name: {dtype, shape, data_offsets:[begin,end]}, "__metadata__": {...}} padded with spaces to a multiple of 8,
then the raw little-endian tensor data (offsets relative to the end of the header)."""
import json
import struct

import numpy as np
import torch

_NP = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "I64": np.int64}


def save(tensors, path, metadata=None, dtype="F32"):
    """tensors: dict name -> torch tensor. dtype F32 or BF16 (BF16 = round-to-nearest-even of the f32 value)."""
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    for name in sorted(tensors):
        t = tensors[name].detach().to(torch.float32).contiguous()
        if dtype == "F32":
            b = t.numpy().astype("<f4").tobytes()
        elif dtype == "BF16":
            b = t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()
        else:
            raise ValueError(dtype)
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load(path):
    """-> dict name -> torch float32 tensor."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        raw = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        buf = raw[b:e]
        if info["dtype"] == "BF16":
            a = np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16
            arr = a.view(np.float32)
        else:
            arr = np.frombuffer(buf, dtype=_NP[info["dtype"]]).astype(np.float32)
        out[name] = torch.from_numpy(arr.reshape(info["shape"]).copy())
    return out
