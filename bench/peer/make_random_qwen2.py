#!/usr/bin/python3
"""A Hugging Face Qwen2.5-0.5B directory with random weights (config.json of the real model, N(0, 0.02)
matrices, unit norms, F16 safetensors), for speed comparisons on the same file: `dllm convert` turns it into
F16 / Q8_0 / Q4_K GGUF that both dllm and llama.cpp run. No tokenizer.json: the GGUF gets the placeholder
vocabulary that llama.cpp accepts (speed does not depend on the text).

    /usr/bin/python3 bench/peer/make_random_qwen2.py OUT_DIR [--layers 24]
"""
import argparse

import numpy as np

from random_safetensors import write_model

CONFIG = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
          "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
          "num_key_value_heads": 2, "vocab_size": 151936, "rope_theta": 1000000.0, "rms_norm_eps": 1e-06,
          "tie_word_embeddings": True, "bos_token_id": 151643, "eos_token_id": 151645,
          "max_position_embeddings": 32768, "hidden_act": "silu", "torch_dtype": "float16"}


def tensors(cfg, rng):
    d, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd = d // cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"] * hd

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    yield "model.embed_tokens.weight", mat(v, d)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        yield p + "input_layernorm.weight", np.ones(d, np.float16)
        yield p + "post_attention_layernorm.weight", np.ones(d, np.float16)
        for name, rows in (("q", d), ("k", kv), ("v", kv)):
            yield p + f"self_attn.{name}_proj.weight", mat(rows, d)
            yield p + f"self_attn.{name}_proj.bias", (rng.standard_normal(rows, dtype=np.float32) * 0.02).astype(
                np.float16)
        yield p + "self_attn.o_proj.weight", mat(d, d)
        yield p + "mlp.gate_proj.weight", mat(f, d)
        yield p + "mlp.up_proj.weight", mat(f, d)
        yield p + "mlp.down_proj.weight", mat(d, f)
    yield "model.norm.weight", np.ones(d, np.float16)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cfg = dict(CONFIG, num_hidden_layers=args.layers)
    write_model(args.out, cfg, tensors(cfg, np.random.default_rng(args.seed)))


if __name__ == "__main__":
    main()
