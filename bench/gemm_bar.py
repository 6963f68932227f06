#!/usr/bin/env python3
"""The GEMMs of lucidrains' 12-layer Linformer forward as PyTorch runs them: the bar our GEMMs are held to.

    python bench/gemm_bar.py [--device cuda] [--n 4096,16384] [--repeat 20] [--csv FILE]

Each GEMM of one layer's forward, in the shapes the library's plan gives them
(d_model 512, 8 heads of 64, k 256, feed-forward 2048; the projection on the
input first, E X and F X as one batch of two): q and out, E X and F X, the kv
projections of their 256 rows, the scores and P V of every head, ffn1 and ffn2.
PyTorch runs each in float32 with TF32 off (the same arithmetic as an fp32
SGEMM), timed over --repeat runs after a warm-up (CUDA events on a GPU, the
wall clock on the CPU), the median kept. Prints a table, with each shape's
share of the layer's GEMM time, and the 12 layers' total beside `run
--profile`'s GEMM stages; --csv appends the rows.
"""
import argparse
import csv
import os
import statistics
import time

import torch

D, HEADS, K, FF = 512, 8, 256, 2048
DH = D // HEADS


def shapes(n):
    """(name, batch, m, n, k) of one layer's GEMMs at sequence length n: C[batch, m, n] = A[m, k] B[k, n]."""
    return [("gemm q", 1, n, D, D), ("seq_project, input first", 2, K, D, n), ("gemm kv", 2, K, D, D),
            ("gemm scores", HEADS, n, K, DH), ("gemm pv", HEADS, n, DH, K), ("gemm out", 1, n, D, D),
            ("gemm ffn1", 1, n, FF, D), ("gemm ffn2", 1, n, D, FF)]


def median_ms(fn, device, repeat):
    fn()  # warm-up: cuBLAS picks and loads its kernel
    times = []
    for _ in range(repeat):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--n", default="4096,16384", help="sequence lengths, comma-separated")
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--csv", help="append the rows here")
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    name = torch.cuda.get_device_name() if args.device == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    rows = []
    for n in (int(v) for v in args.n.split(",")):
        gen = torch.Generator(device=args.device).manual_seed(n)
        layer = []
        for stage, batch, m, cols, inner in shapes(n):
            a = torch.rand(batch, m, inner, device=args.device, generator=gen)
            b = torch.rand(batch, inner, cols, device=args.device, generator=gen)
            c = torch.empty(batch, m, cols, device=args.device)
            ms = median_ms(lambda: torch.bmm(a, b, out=c), args.device, args.repeat)
            flops = 2.0 * batch * m * cols * inner
            layer.append((stage, batch, m, cols, inner, flops, ms))
        total = sum(row[-1] for row in layer)
        print(f"gemm_bar: PyTorch {torch.__version__} on {name}, n {n}, float32, TF32 off; median of {args.repeat}")
        print(f"{'stage':<26}{'batch x m x n x k':>24}{'GFLOP':>9}{'ms':>10}{'TFLOP/s':>9}{'share':>7}")
        for stage, batch, m, cols, inner, flops, ms in layer:
            print(f"{stage:<26}{f'{batch} x {m} x {cols} x {inner}':>24}{flops * 1e-9:>9.2f}{ms:>10.3f}"
                  f"{flops / ms * 1e-9:>9.2f}{100 * ms / total:>6.1f}%")
            rows.append({"device": name, "torch": torch.__version__, "n": n, "stage": stage, "batch": batch, "m": m,
                         "n_cols": cols, "k": inner, "gflop": round(flops * 1e-9, 4), "ms": round(ms, 4),
                         "tflops": round(flops / ms * 1e-9, 3)})
        print(f"{'12 layers':<26}{'':>24}{12 * sum(r[5] for r in layer) * 1e-9:>9.1f}{12 * total:>10.3f}\n")
    if args.csv:
        new = not os.path.exists(args.csv) or os.path.getsize(args.csv) == 0
        with open(args.csv, "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            if new:
                w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
