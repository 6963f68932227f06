#!/usr/bin/env python3
"""Writes the PyTorch fixtures of tests/test_pytorch.c.

causal_dense is lucidrains' weights under PyTorch's own causal softmax
attention (the n x n scores masked above the diagonal), the reference of the
library's causal dense and flash modes.

Each fixture is a LinformerSelfAttention from lucidrains' `linformer` package
(with torch, safetensors and `pip install --no-deps linformer==0.2.3`), saved
as its state dict (NAME.model.safetensors, __metadata__ "heads") and one forward of it
(NAME.io.safetensors: x, and y as PyTorch computed it, in eval mode).
Run from anywhere; the files land beside this script. They are committed, so
the tests need no PyTorch.
"""
import os

import torch
from linformer import LinformerSelfAttention
from safetensors.torch import save_file

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pytorch")

# name, module arguments, batch, n, dtype the weights are stored in
FIXTURES = [
    ("plain", dict(dim=32, seq_len=48, k=8, heads=4), 2, 48, torch.float32),
    ("short_sequence", dict(dim=32, seq_len=64, k=16, heads=2), 1, 37, torch.float32),
    ("share_kv_one_kv_head", dict(dim=24, seq_len=40, k=12, heads=3, dim_head=10, one_kv_head=True, share_kv=True),
     2, 33, torch.float32),
    ("one_kv_head", dict(dim=40, seq_len=30, k=30, heads=5, one_kv_head=True), 1, 30, torch.float32),
    ("stored_f64", dict(dim=16, seq_len=20, k=5, heads=2), 2, 20, torch.float64),
    ("stored_f16", dict(dim=16, seq_len=24, k=6, heads=2), 1, 24, torch.float16),
    ("stored_bf16", dict(dim=16, seq_len=24, k=6, heads=2), 1, 17, torch.bfloat16),
]


def causal_attention(layer, x):
    """Exact causal attention with the layer's q/k/v/out projections."""
    b, n, _ = x.shape
    h = layer.heads
    q = layer.to_q(x).reshape(b, n, h, -1).transpose(1, 2)
    k = layer.to_k(x).reshape(b, n, h, -1).transpose(1, 2)
    v = layer.to_v(x).reshape(b, n, h, -1).transpose(1, 2)
    scores = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
    future = torch.ones(n, n, dtype=torch.bool).triu(1)
    attn = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
    return layer.to_out((attn @ v).transpose(1, 2).reshape(b, n, -1))


def write_causal():
    torch.manual_seed(2000)
    args = dict(dim=32, seq_len=40, k=8, heads=4)
    layer = LinformerSelfAttention(**args).eval().double()
    x = torch.randn(2, 37, args["dim"], dtype=torch.float64)
    with torch.no_grad():
        y = causal_attention(layer, x)
    state = {key: value.float().contiguous() for key, value in layer.state_dict().items()}
    save_file(state, os.path.join(HERE, "causal_dense.model.safetensors"),
              metadata={"heads": str(args["heads"]), "causal": "1"})
    save_file({"x": x.float().contiguous(), "y": y.float().contiguous()},
              os.path.join(HERE, "causal_dense.io.safetensors"))
    print("causal_dense", tuple(x.shape))


def main():
    os.makedirs(HERE, exist_ok=True)
    for index, (name, args, batch, n, dtype) in enumerate(FIXTURES):
        torch.manual_seed(1000 + index)
        layer = LinformerSelfAttention(**args).eval()
        # Keep the weights the file holds: round them to its dtype, and compute
        # in float64 (or float32 from the rounded weights for half types).
        compute = torch.float64 if dtype == torch.float64 else torch.float32
        layer = layer.to(dtype).to(compute)
        x = torch.randn(batch, n, args["dim"], dtype=compute)
        with torch.no_grad():
            y = layer(x)
        state = {key: value.to(dtype).contiguous() for key, value in layer.state_dict().items()}
        save_file(state, os.path.join(HERE, f"{name}.model.safetensors"), metadata={"heads": str(args["heads"])})
        save_file({"x": x.float().contiguous(), "y": y.float().contiguous()},
                  os.path.join(HERE, f"{name}.io.safetensors"))
        print(name, sorted(state), tuple(x.shape))
    write_causal()


if __name__ == "__main__":
    main()
