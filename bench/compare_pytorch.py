#!/usr/bin/env python3
"""Times one Linformer attention layer in PyTorch and in `linformer run`, side by side.

For each sequence length it builds lucidrains' LinformerSelfAttention
(pip install --no-deps linformer safetensors; torch from Debian's python3-torch
or pip), saves its weights and one input as safetensors files, times PyTorch's
forward (wall clock, median of --repeat after a warm-up) and runs
`linformer run --repeat` on the same files (median device time of the forward,
as the program prints it). It prints both per-forward times, their ratio, and
the largest difference between the two outputs.

    python3 bench/compare_pytorch.py --n 4096,16384 [--linformer build/linformer]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from linformer import LinformerSelfAttention
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", default="4096,16384", help="sequence lengths, comma-separated")
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--k", type=int, default=256)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--repeat", type=int, default=5, help="timed forwards per side")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="PyTorch's intra-op threads")
    p.add_argument("--device", help="the device selector passed to linformer run")
    p.add_argument("--linformer", default=os.path.join(HERE, "..", "build", "linformer"), help="the program")
    return p.parse_args()


def time_pytorch(layer, x, repeat):
    """Median wall time of one forward in ms, after one warm-up forward."""
    times = []
    with torch.no_grad():
        y = layer(x)
        for _ in range(repeat):
            start = time.perf_counter()
            y = layer(x)
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), y


def time_linformer(args, folder):
    """Median device time of one forward in ms as `linformer run` reports it, and its output."""
    out = os.path.join(folder, "y.safetensors")
    cmd = [args.linformer, "run", "--model", os.path.join(folder, "model.safetensors"),
           "--input", os.path.join(folder, "x.safetensors"), "--output", out, "--repeat", str(args.repeat + 1)]
    if args.device:
        cmd += ["--device", args.device]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"compare_pytorch: {' '.join(cmd)} failed:\n{run.stderr}")
    found = re.search(r"([0-9.]+) ms median device time", run.stderr)
    if not found:
        sys.exit(f"compare_pytorch: no time in the output of linformer run:\n{run.stderr}")
    return float(found.group(1)), load_file(out)["y"]


def compare(args, n):
    torch.manual_seed(n)
    layer = LinformerSelfAttention(dim=args.d_model, seq_len=n, k=args.k, heads=args.heads).eval()
    x = torch.randn(args.batch, n, args.d_model)
    with tempfile.TemporaryDirectory() as folder:
        state = {key: value.contiguous() for key, value in layer.state_dict().items()}
        save_file(state, os.path.join(folder, "model.safetensors"), metadata={"heads": str(args.heads)})
        save_file({"x": x}, os.path.join(folder, "x.safetensors"))
        torch_ms, y_torch = time_pytorch(layer, x, args.repeat)
        lf_ms, y_lf = time_linformer(args, folder)
    diff = (y_torch - y_lf).abs().max().item()
    print(f"| {n} | {torch_ms:.0f} ms | {lf_ms:.0f} ms | {torch_ms / lf_ms:.2f}x | {diff:.1e} |", flush=True)


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    print(f"d_model {args.d_model}, heads {args.heads}, k {args.k}, batch {args.batch}; "
          f"PyTorch {torch.__version__} on {torch.get_num_threads()} threads, median of {args.repeat}")
    print("| n | PyTorch | linformer | speed-up | max |y diff| |\n|---|---|---|---|---|", flush=True)
    for n in (int(v) for v in args.n.split(",")):
        compare(args, n)


if __name__ == "__main__":
    main()
