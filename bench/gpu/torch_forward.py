#!/usr/bin/env python3
"""The side-by-side anchor for `dllm bench --backend vulkan` on a lent GPU (bench/gpu/run.sh): the same-shape
bidirectional forward in PyTorch bf16 with scaled_dot_product_attention, as the reference code, Fast-dLLM and
dInfer run it. Random weights (the time does not depend on them); prints ms a forward and GFLOP/s counted as
dllm bench counts them (2 x multiply-adds of the matrices, the head and attention's two products).

  python3 bench/gpu/torch_forward.py --shape llada-8b --layers 4 --tokens 256 1024
"""
import argparse
import json
import sys

SHAPES = {  # the real configs' numbers (src/model/shapes: the same table dllm bench uses)
    "llada-8b": dict(d=4096, heads=32, kv_heads=32, head_dim=128, ffn=12288, vocab=126464),
    "llada-1b": dict(d=2048, heads=16, kv_heads=16, head_dim=128, ffn=8192, vocab=126464),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="llada-8b", choices=sorted(SHAPES))
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--tokens", type=int, nargs="+", default=[256])
    ap.add_argument("--repeat", type=int, default=10)
    a = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("torch_forward: no torch on this machine: no PyTorch anchor")
        return 0
    if not torch.cuda.is_available():
        print("torch_forward: torch has no CUDA device here: no PyTorch anchor")
        return 0
    s = SHAPES[a.shape]
    dev, dt = "cuda", torch.bfloat16
    d, H, KV, hd, ffn, V = s["d"], s["heads"], s["kv_heads"], s["head_dim"], s["ffn"], s["vocab"]
    g = torch.Generator(device=dev).manual_seed(0)

    def w(*shape):
        return (torch.randn(*shape, generator=g, device=dev, dtype=torch.float32) * 0.02).to(dt)

    layers = [dict(q=w(H * hd, d), k=w(KV * hd, d), v=w(KV * hd, d), o=w(d, H * hd), gate=w(ffn, d),
                   up=w(ffn, d), down=w(d, ffn), n1=torch.ones(d, device=dev, dtype=dt),
                   n2=torch.ones(d, device=dev, dtype=dt)) for _ in range(a.layers)]
    head = w(V, d)

    def rms(x, wt):
        return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5)).to(dt) * wt

    def forward(x):
        T = x.shape[1]
        for L in layers:
            h = rms(x, L["n1"])
            q = (h @ L["q"].T).view(1, T, H, hd).transpose(1, 2)
            k = (h @ L["k"].T).view(1, T, KV, hd).transpose(1, 2)
            v = (h @ L["v"].T).view(1, T, KV, hd).transpose(1, 2)
            att = F.scaled_dot_product_attention(q, k, v, is_causal=False)
            x = x + att.transpose(1, 2).reshape(1, T, H * hd) @ L["o"].T
            h = rms(x, L["n2"])
            x = x + (F.silu(h @ L["gate"].T) * (h @ L["up"].T)) @ L["down"].T
        return rms(x, layers[-1]["n2"]) @ head.T

    results = []
    for T in a.tokens:
        x = w(1, T, d)
        with torch.inference_mode():
            for _ in range(3):
                forward(x)
            torch.cuda.synchronize()
            times = []
            for _ in range(a.repeat):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                forward(x)
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end) / 1e3)
        times.sort()
        sec = times[len(times) // 2]
        per_layer = 2 * T * d * (H * hd + 2 * KV * hd + H * hd + 3 * ffn) + 4 * T * T * H * hd
        flops = a.layers * per_layer + 2 * T * d * V
        r = dict(shape=a.shape, layers=a.layers, tokens=T, seconds=sec, gflops=flops / sec / 1e9,
                 device=torch.cuda.get_device_name(), torch=torch.__version__)
        results.append(r)
        print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
