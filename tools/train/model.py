#!/usr/bin/python3
"""LLaDA-architecture masked diffusion transformer in PyTorch.

Same config.json keys and state_dict names as GSAI-ML/LLaDA-8B-Instruct (HF `LLaDAModelLM`), so the engine loads
the export like any LLaDA checkpoint:
    model.transformer.wte.weight                      [vocab, d]
    model.transformer.blocks.{i}.attn_norm.weight     [d]       RMSNorm
    model.transformer.blocks.{i}.{q,k,v}_proj.weight  [d, d]    (n_kv_heads == n_heads)
    model.transformer.blocks.{i}.attn_out.weight      [d, d]
    model.transformer.blocks.{i}.ff_norm.weight       [d]
    model.transformer.blocks.{i}.ff_proj.weight       [mlp, d]  SiLU gate
    model.transformer.blocks.{i}.up_proj.weight       [mlp, d]
    model.transformer.blocks.{i}.ff_out.weight        [d, mlp]
    model.transformer.ln_f.weight                     [d]
    model.transformer.ff_out.weight                   [vocab, d] untied LM head
Block: h=RMS(x); x += attn_out(SDPA(rope(q), rope(k), v)) with NO mask (bidirectional); h=RMS(x);
x += ff_out(silu(ff_proj h) * up_proj h). logits = ff_out(RMS(x)). RoPE: NeoX rotate-half, theta = rope_theta.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def llada_config(vocab_size, d_model, n_layers, n_heads, mlp_hidden_size, max_sequence_length,
                 eos_token_id, pad_token_id, mask_token_id, rope_theta=500000.0, rms_norm_eps=1e-5,
                 init_std=0.02):
    """config.json dict with the keys of LLaDA-8B-Instruct (values adapted)."""
    return {
        "activation_type": "silu",
        "alibi": False,
        "alibi_bias_max": 8.0,
        "architectures": ["LLaDAModelLM"],
        "attention_dropout": 0.0,
        "attention_layer_norm": False,
        "attention_layer_norm_with_affine": True,
        "auto_map": {
            "AutoConfig": "configuration_llada.LLaDAConfig",
            "AutoModelForCausalLM": "modeling_llada.LLaDAModelLM",
            "AutoModel": "modeling_llada.LLaDAModelLM",
        },
        "bias_for_layer_norm": False,
        "block_group_size": 1,
        "block_type": "llama",
        "d_model": d_model,
        "embedding_dropout": 0.0,
        "embedding_size": vocab_size,
        "eos_token_id": eos_token_id,
        "flash_attention": False,
        "include_bias": False,
        "include_qkv_bias": False,
        "init_cutoff_factor": None,
        "init_device": "meta",
        "init_fn": "mitchell",
        "init_std": init_std,
        "input_emb_norm": False,
        "layer_norm_type": "rms",
        "layer_norm_with_affine": True,
        "mask_token_id": mask_token_id,
        "max_sequence_length": max_sequence_length,
        "mlp_hidden_size": mlp_hidden_size,
        "mlp_ratio": max(1, round(mlp_hidden_size / d_model)),
        "model_type": "llada",
        "multi_query_attention": None,
        "n_heads": n_heads,
        "n_kv_heads": n_heads,
        "n_layers": n_layers,
        "pad_token_id": pad_token_id,
        "precision": "amp_bf16",
        "residual_dropout": 0.0,
        "rms_norm_eps": rms_norm_eps,
        "rope": True,
        "rope_full_precision": True,
        "rope_theta": rope_theta,
        "scale_logits": False,
        "transformers_version": "4.46.3",
        "use_cache": False,
        "vocab_size": vocab_size,
        "weight_tying": False,
    }


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


def rope_cos_sin(T, head_dim, theta, device=None):
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim))
    ang = torch.arange(T, dtype=torch.float32, device=device)[:, None] * inv_freq[None, :]
    emb = torch.cat([ang, ang], dim=-1)
    return emb.cos(), emb.sin()


def apply_rope(x, cos, sin):
    # x [B, H, T, hd]; NeoX rotate-half
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    rot = torch.cat([-x2, x1], dim=-1)
    return x * cos + rot * sin


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, mlp = cfg["d_model"], cfg["mlp_hidden_size"]
        self.n_heads = cfg["n_heads"]
        self.sdpa = False  # LLaDAModel.use_sdpa() switches it on
        self.attn_norm = RMSNorm(d, cfg["rms_norm_eps"])
        self.ff_norm = RMSNorm(d, cfg["rms_norm_eps"])
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, d, bias=False)
        self.v_proj = nn.Linear(d, d, bias=False)
        self.attn_out = nn.Linear(d, d, bias=False)
        self.ff_proj = nn.Linear(d, mlp, bias=False)
        self.up_proj = nn.Linear(d, mlp, bias=False)
        self.ff_out = nn.Linear(mlp, d, bias=False)

    def forward(self, x, cos, sin, causal=False):
        B, T, d = x.shape
        H = self.n_heads
        hd = d // H
        h = self.attn_norm(x)
        q = self.q_proj(h).view(B, T, H, hd).transpose(1, 2)
        k = self.k_proj(h).view(B, T, H, hd).transpose(1, 2)
        v = self.v_proj(h).view(B, T, H, hd).transpose(1, 2)
        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)
        if self.sdpa:  # fused attention (torch >= 2, the GPU recipe); same function as below
            q, k = q.to(v.dtype), k.to(v.dtype)  # rope's f32 cos/sin promoted them under autocast
            y = F.scaled_dot_product_attention(q, k, v, is_causal=causal).transpose(1, 2).reshape(B, T, d)
        else:
            att = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(hd))   # no mask: bidirectional
            if causal:  # the autoregressive twin (train.py --objective ar): position i sees 0..i
                att = att.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
            att = att.softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(B, T, d)
        x = x + self.attn_out(y)
        h = self.ff_norm(x)
        x = x + self.ff_out(F.silu(self.ff_proj(h)) * self.up_proj(h))
        return x


class Transformer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.wte = nn.Embedding(cfg["embedding_size"], cfg["d_model"])
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg["n_layers"])])
        self.ln_f = RMSNorm(cfg["d_model"], cfg["rms_norm_eps"])
        self.ff_out = nn.Linear(cfg["d_model"], cfg["embedding_size"], bias=False)


class LLaDAModel(nn.Module):
    """state_dict keys: model.transformer.* exactly as the HF LLaDA checkpoint.

    causal=True: the same network with a causal mask, trained as an autoregressive LM (the demo's AR twin,
    exported in the Llama layout by export_ar.py)."""

    def __init__(self, cfg, causal=False):
        super().__init__()
        self.cfg = cfg
        self.causal = causal
        self.model = nn.Module()
        self.model.transformer = Transformer(cfg)
        self._rope = {}
        self.reset_parameters()

    def reset_parameters(self):
        std = self.cfg["init_std"]
        n_layers = self.cfg["n_layers"]
        for name, p in self.named_parameters():
            if p.dim() == 1:
                nn.init.ones_(p)
            elif name.endswith("attn_out.weight") or name.endswith("blocks.0.ff_out.weight") or \
                    (".blocks." in name and name.endswith("ff_out.weight")):
                nn.init.normal_(p, 0.0, std / math.sqrt(2 * n_layers))  # residual projections (GPT-2 style)
            else:
                nn.init.normal_(p, 0.0, std)

    def use_sdpa(self):
        """Fused attention where this torch has it (>= 2.0; Debian's 1.13 keeps the explicit softmax)."""
        for blk in self.model.transformer.blocks:
            blk.sdpa = hasattr(F, "scaled_dot_product_attention")
        return self

    def rope(self, T, device):
        key = (T, str(device))
        if key not in self._rope:
            hd = self.cfg["d_model"] // self.cfg["n_heads"]
            self._rope[key] = rope_cos_sin(T, hd, self.cfg["rope_theta"], device)
        return self._rope[key]

    def forward(self, input_ids):
        tr = self.model.transformer
        x = tr.wte(input_ids)
        cos, sin = self.rope(input_ids.shape[1], input_ids.device)
        for blk in tr.blocks:
            x = blk(x, cos, sin, self.causal)
        return tr.ff_out(tr.ln_f(x))


def num_params(model):
    return sum(p.numel() for p in model.parameters())


@torch.no_grad()
def llada_generate(model, prompt_ids, gen_length=64, block_length=64, steps=64, mask_id=None):
    """Official LLaDA `generate` with remasking='low_confidence', temperature 0, cfg 0 (batch of 1)."""
    mask_id = model.cfg["mask_token_id"] if mask_id is None else mask_id
    x = torch.full((1, len(prompt_ids) + gen_length), mask_id, dtype=torch.long)
    x[0, :len(prompt_ids)] = torch.tensor(prompt_ids, dtype=torch.long)
    P = len(prompt_ids)
    assert gen_length % block_length == 0
    num_blocks = gen_length // block_length
    assert steps % num_blocks == 0
    spb = steps // num_blocks
    for nb in range(num_blocks):
        s, e = P + nb * block_length, P + (nb + 1) * block_length
        mask_count = int((x[0, s:e] == mask_id).sum())
        base, rem = divmod(mask_count, spb)
        nt = [base + (1 if i < rem else 0) for i in range(spb)]
        for i in range(spb):
            mask_index = x == mask_id
            logits = model(x)
            x0 = logits.argmax(-1)
            p = logits.float().softmax(-1)
            conf = torch.gather(p, -1, x0[..., None])[..., 0]
            conf[:, e:] = -float("inf")
            x0 = torch.where(mask_index, x0, x)
            conf = torch.where(mask_index, conf, torch.tensor(-float("inf")))
            if nt[i] > 0:
                idx = torch.topk(conf[0], nt[i]).indices
                x[0, idx] = x0[0, idx]
    return x[0, P:].tolist()
