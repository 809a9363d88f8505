#!/usr/bin/python3
"""A Hugging Face LLaDA directory with random weights at a 0.5B shape (Qwen2.5-0.5B's widths: d_model 896, 24
layers, 14 heads, 2 KV heads, MLP 4864; LLaDA's vocabulary of 126464 with [MASK] = 126336; untied output head;
N(0, 0.02) matrices, unit norms, F16 safetensors), for speed comparisons on the same file: `dllm convert` turns it
into F32 / BF16 / F16 / Q8_0 / Q4_K GGUF that both dllm and llama.cpp's llama-diffusion-cli run. No
tokenizer.json: the GGUF gets the placeholder vocabulary "<i>" (user-defined tokens, which llama.cpp parses out of
a prompt text), and speed does not depend on the text.

    /usr/bin/python3 bench/peer/make_random_llada.py OUT_DIR [--layers 24]
"""
import argparse

import numpy as np

from random_safetensors import write_model

CONFIG = {"architectures": ["LLaDAModelLM"], "model_type": "llada", "activation_type": "silu",
          "block_type": "llama", "d_model": 896, "n_layers": 24, "n_heads": 14, "n_kv_heads": 2,
          "mlp_hidden_size": 4864, "mlp_ratio": 4, "vocab_size": 126464, "embedding_size": 126464,
          "mask_token_id": 126336, "eos_token_id": 126081, "pad_token_id": 126081, "bos_token_id": 126080,
          "max_sequence_length": 4096, "rope": True, "rope_theta": 500000.0, "rms_norm_eps": 1e-05,
          "layer_norm_type": "rms", "include_bias": False, "include_qkv_bias": False, "weight_tying": False,
          "alibi": False, "scale_logits": False, "input_emb_norm": False, "attention_layer_norm": False}


def tensors(cfg, rng):
    d, f, v = cfg["d_model"], cfg["mlp_hidden_size"], cfg["embedding_size"]
    kv = cfg["n_kv_heads"] * (d // cfg["n_heads"])

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    yield "model.transformer.wte.weight", mat(v, d)
    for i in range(cfg["n_layers"]):
        p = f"model.transformer.blocks.{i}."
        yield p + "attn_norm.weight", np.ones(d, np.float16)
        yield p + "ff_norm.weight", np.ones(d, np.float16)
        yield p + "q_proj.weight", mat(d, d)
        yield p + "k_proj.weight", mat(kv, d)
        yield p + "v_proj.weight", mat(kv, d)
        yield p + "attn_out.weight", mat(d, d)
        yield p + "ff_proj.weight", mat(f, d)
        yield p + "up_proj.weight", mat(f, d)
        yield p + "ff_out.weight", mat(d, f)
    yield "model.transformer.ln_f.weight", np.ones(d, np.float16)
    yield "model.transformer.ff_out.weight", mat(v, d)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cfg = dict(CONFIG, n_layers=args.layers)
    write_model(args.out, cfg, tensors(cfg, np.random.default_rng(args.seed)))


if __name__ == "__main__":
    main()
