#!/usr/bin/python3
"""Tiny Llama-3.1-style fixture with rope_scaling (rope_type "llama3"), and its goldens.

Writes
  tests/data/oracle/ar/models/llama31_tiny_rope_scaled/  (llama3_tiny's weights, tokenizer and config, plus
      rope_scaling {factor 8, low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings 32}: the
      small original context makes the scaling move most rotated pairs at the fixture's short positions)
  tests/data/oracle/ar/golden/llama31_tiny_rope_scaled/greedy_f64.json + logits_f64_p0.npy (float32 file)
in the layout of llama.cpp's goldens for llama3_tiny (tests/data/oracle/ar/README.md), so the same tests
read both.

The goldens come from an independent float64 numpy forward written from transformers' LlamaForCausalLM and
_compute_llama3_parameters (no torch, no engine code): greedy decoding recomputes the whole sequence every
step (no cache). Before anything is written, the same forward without rope_scaling must reproduce llama.cpp's
goldens for llama3_tiny (prompt logits within 1e-4, all 32 greedy ids); the script stops if it does not.

Run from anywhere:  /usr/bin/python3 tools/oracle/make_llama3_rope_scaled.py
Dependencies: Python 3 + numpy only.
"""

import json
import math
import os
import shutil
import struct
import sys

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
AR = os.path.join(ROOT, "tests", "data", "oracle", "ar")
BASE = "llama3_tiny"
NAME = "llama31_tiny_rope_scaled"
SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
           "original_max_position_embeddings": 32}


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", name
        b, e = info["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype="<f4").reshape(info["shape"]).astype(np.float64)
    return out


def inv_freq(cfg, hd):
    base = float(cfg["rope_theta"])
    f = 1.0 / (base ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    rs = cfg.get("rope_scaling")
    if not rs:
        return f
    factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    low_wl, high_wl = old / low, old / high
    wl = 2 * math.pi / f
    scaled = np.where(wl > low_wl, f / factor, f)
    smooth = (old / wl - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wl < high_wl) & ~(wl > low_wl)
    return np.where(medium, smoothed, scaled)


def rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def forward(W, cfg, ids):
    """Logits [T, vocab] of a causal LlamaForCausalLM over ids (HF semantics, float64)."""
    d, H, KV = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or d // H
    eps = cfg["rms_norm_eps"]
    T = len(ids)
    ang = np.outer(np.arange(T, dtype=np.float64), inv_freq(cfg, hd))
    cos, sin = np.cos(ang), np.sin(ang)

    def rope(x):  # x [T, heads, hd], rotate_half
        x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
        c, s = cos[:, None, :], sin[:, None, :]
        return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)

    x = W["model.embed_tokens.weight"][ids]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms(x, W[p + "input_layernorm.weight"], eps)
        q = rope((h @ W[p + "self_attn.q_proj.weight"].T).reshape(T, H, hd))
        k = rope((h @ W[p + "self_attn.k_proj.weight"].T).reshape(T, KV, hd))
        v = (h @ W[p + "self_attn.v_proj.weight"].T).reshape(T, KV, hd)
        out = np.zeros((T, H, hd))
        for i in range(H):
            j = i // (H // KV)
            s = q[:, i] @ k[:, j].T / math.sqrt(hd) + mask
            s = np.exp(s - s.max(axis=1, keepdims=True))
            out[:, i] = (s / s.sum(axis=1, keepdims=True)) @ v[:, j]
        x = x + out.reshape(T, H * hd) @ W[p + "self_attn.o_proj.weight"].T
        h = rms(x, W[p + "post_attention_layernorm.weight"], eps)
        g = h @ W[p + "mlp.gate_proj.weight"].T
        x = x + ((g / (1 + np.exp(-g))) * (h @ W[p + "mlp.up_proj.weight"].T)) @ W[p + "mlp.down_proj.weight"].T
    head = W["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else W["lm_head.weight"]
    return rms(x, W["model.norm.weight"], eps) @ head.T


def greedy(W, cfg, prompt, n):
    ids, gaps = list(prompt), []
    for _ in range(n):
        logits = forward(W, cfg, ids)[-1]
        top2 = np.sort(logits)[-2:]
        gaps.append(float(top2[1] - top2[0]))
        ids.append(int(np.argmax(logits)))
    return ids[len(prompt):], gaps


def write_npy(path, a):
    np.save(path, np.ascontiguousarray(a, dtype="<f4"))


def main():
    base_dir = os.path.join(AR, "models", BASE)
    cfg = json.load(open(os.path.join(base_dir, "config.json")))
    W = read_safetensors(os.path.join(base_dir, "model.safetensors"))
    golden = json.load(open(os.path.join(AR, "golden", BASE, "greedy_f32.json")))
    case = golden["cases"][0]
    ref = np.load(os.path.join(AR, "golden", BASE, "logits_f32_p0.npy"))
    got = forward(W, cfg, case["prompt"])
    err = float(np.abs(got - ref).max())
    out, _ = greedy(W, cfg, case["prompt"], case["n_new"])
    print(f"check against llama.cpp ({BASE}): prompt logits max |diff| {err:.2e}, greedy ids equal: "
          f"{out == case['output']}")
    if err > 1e-4 or out != case["output"]:
        sys.exit("the float64 forward does not reproduce llama.cpp's goldens; nothing written")

    scaled = dict(cfg, rope_scaling=SCALING)
    plain_logits = got
    got = forward(W, scaled, case["prompt"])
    moved = float(np.abs(got - plain_logits).max())
    print(f"rope_scaling moves the prompt logits by up to {moved:.3f}")
    if moved < 1e-2:
        sys.exit("rope_scaling barely changes the logits: the fixture would not test it")
    n_new = 24
    out, gaps = greedy(W, scaled, case["prompt"], n_new)
    dst = os.path.join(AR, "models", NAME)
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(base_dir):
        if f != "config.json":
            shutil.copy(os.path.join(base_dir, f), os.path.join(dst, f))
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(scaled, f, indent=2)
        f.write("\n")
    gdir = os.path.join(AR, "golden", NAME)
    os.makedirs(gdir, exist_ok=True)
    write_npy(os.path.join(gdir, "logits_f64_p0.npy"), got)
    doc = {
        "model": NAME,
        "format": "f32 weights, float64 reference",
        "hf_dir": f"models/{NAME}",
        "reference": "tools/oracle/make_llama3_rope_scaled.py (numpy float64, HF LlamaForCausalLM semantics, "
                     "checked against llama.cpp's llama3_tiny goldens first)",
        "settings": {"decode": "argmax of the logits, whole sequence recomputed each step, no EOS stop"},
        "cases": [{"id": "p0_n%d" % n_new, "prompt": case["prompt"], "n_new": n_new, "output": out,
                   "prompt_logits_file": f"golden/{NAME}/logits_f64_p0.npy",
                   "min_top1_top2_gap": min(gaps), "gaps": gaps}],
    }
    with open(os.path.join(gdir, "greedy_f64.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {dst} and {gdir}; smallest top-1/top-2 gap {min(gaps):.4f}")


if __name__ == "__main__":
    main()
