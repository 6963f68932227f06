#!/bin/sh
# The performance run for a lent GPU (bench/NOTES.md, "GPU"): scripts/gpu-run.sh
# without the test suite, with the GEMM bar (the model's GEMMs in PyTorch, TF32
# off), the copy bandwidth at vector widths 1 and 4, the peers (the layer and
# the 12-layer model at n 4096 and 16384 against PyTorch on CUDA) with our
# stage profiles, the model once more with the elementwise kernels at vw=4
# and once with the attention kernel's d_head 64 split across two work-items
# of a query (ds=2), then `linformer tune --model` on that model's own GEMMs and
# the peers again, tuned. Each step is time-boxed
# so that the whole run takes at most about 7 minutes; every
# step writes its files into OUTDIR as it ends, so a run cut short keeps what
# it measured. Any of gpu-run.sh's variables may be set to change it.
#
# usage: scripts/gpu-perf.sh BUNDLE OUTDIR
set -eu
export LF_GPU_TESTS="${LF_GPU_TESTS:-none}" LF_GPU_PERF=1 LF_GPU_PEERS="${LF_GPU_PEERS:-1}" \
    LF_GPU_TUNE="${LF_GPU_TUNE:-1}" LF_GPU_N="${LF_GPU_N:-512,4096,16384}" LF_GPU_K="${LF_GPU_K:-256}" \
    LF_GPU_BENCH_S="${LF_GPU_BENCH_S:-30}" LF_GPU_BAR_S="${LF_GPU_BAR_S:-30}" LF_GPU_COPY_S="${LF_GPU_COPY_S:-25}" \
    LF_GPU_PEERS_S="${LF_GPU_PEERS_S:-90}" LF_GPU_TUNE_S="${LF_GPU_TUNE_S:-60}"
exec "$(dirname "$0")/gpu-run.sh" "$@"
