#!/usr/bin/env python3
"""Writes the PyTorch fixtures of tests/test_model.c.

Each fixture is a small random model from lucidrains' `linformer` package
(Linformer or LinformerLM), saved with torch.save as its state dict and turned
into NAME.model.safetensors by python -m linformer_cl.convert, with one forward
of it in NAME.io.safetensors: the input (x f32, or tokens i64), lengths when
the batch mixes lengths, and y as PyTorch computed it in eval mode, in
float64 from the float32 weights the file holds. A sequence of a mixed batch
runs alone at its own length, as PyTorch has no padding mask; rows past a
length are 0.

Needs torch (Debian's python3-torch), safetensors, the package linformer_cl
(`pip install .`) and `pip install --no-deps linformer==0.2.3`. The files
are committed, so the tests need no PyTorch. Run from anywhere; the files land in models/ beside this script.
"""
import copy
import os
import tempfile

import torch
from linformer import Linformer, LinformerLM
from safetensors.torch import save_file

from linformer_cl import convert

HERE = os.path.dirname(os.path.abspath(__file__))

OUT = os.path.join(HERE, "models")

# name, class, module arguments, batch, n, lengths (None = all n)
FIXTURES = [
    ("encoder_depth3", Linformer, dict(dim=12, seq_len=20, depth=3, k=5, heads=3), 2, 20, None),
    ("encoder_short", Linformer, dict(dim=12, seq_len=24, depth=3, k=6, heads=2), 1, 13, None),
    ("encoder_one_kv_head_mixed", Linformer,
     dict(dim=12, seq_len=20, depth=3, k=4, heads=3, dim_head=5, one_kv_head=True), 4, 20, [20, 11, 1, 0]),
    ("lm", LinformerLM, dict(num_tokens=30, dim=12, seq_len=16, depth=2, k=4, heads=2), 2, 16, None),
    ("lm_share_kv_short_mixed", LinformerLM,
     dict(num_tokens=30, dim=12, seq_len=24, depth=2, k=5, heads=3, share_kv=True), 2, 17, [17, 9]),
    ("lm_one_kv_head", LinformerLM,
     dict(num_tokens=25, dim=12, seq_len=16, depth=3, k=4, heads=2, one_kv_head=True, share_kv=True), 1, 16, None),
]


def forward(model, inputs, lengths):
    """y of each sequence alone at its length; rows past it 0."""
    with torch.no_grad():
        if lengths is None:
            return model(inputs)
        out = None
        for b, length in enumerate(lengths):
            if length:
                y = model(inputs[b:b + 1, :length])
                if out is None:
                    out = torch.zeros(inputs.shape[0], inputs.shape[1], y.shape[-1], dtype=y.dtype)
                out[b, :length] = y[0]
        return out


def write(index, name, cls, args, batch, n, lengths):
    torch.manual_seed(2000 + index)
    model = cls(**args).eval().float()
    exact = copy.deepcopy(model).double()
    lm = cls is LinformerLM
    if lm:
        inputs = torch.randint(0, args["num_tokens"], (batch, n), dtype=torch.int64)
        y = forward(exact, inputs, lengths)
    else:
        inputs = torch.randn(batch, n, args["dim"], dtype=torch.float64).float()
        y = forward(exact, inputs.double(), lengths)
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = os.path.join(tmp, "model.pt")
        torch.save(model.state_dict(), ckpt)
        rc = convert.main([ckpt, os.path.join(OUT, f"{name}.model.safetensors"),
                                      "--heads", str(args["heads"])])
        assert rc == 0, name
    io = {"tokens" if lm else "x": inputs.contiguous(), "y": y.float().contiguous()}
    if lengths is not None:
        io["lengths"] = torch.tensor(lengths, dtype=torch.int64)
    save_file(io, os.path.join(OUT, f"{name}.io.safetensors"))


def main():
    os.makedirs(OUT, exist_ok=True)
    for index, fixture in enumerate(FIXTURES):
        write(index, *fixture)


if __name__ == "__main__":
    main()
