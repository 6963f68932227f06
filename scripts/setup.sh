#!/bin/sh
# Installs what the build needs (Debian packages, and Intel's OpenCL CPU
# runtime into build/ as a second OpenCL platform beside PoCL: see
# scripts/install-intel-opencl.sh, LINFORMER_SKIP_INTEL=1 skips it; the
# Oclgrind simulator in an ICD folder of its own: scripts/install-oclgrind.sh;
# and Intel's MKL, the host GEMMs' BLAS on Intel CPUs, into build/mkl:
# scripts/install-mkl.sh, LINFORMER_SKIP_MKL=1 skips it),
# then configures and builds into build/. Safe to run again: it installs only
# what is missing.
set -eu
cd "$(dirname "$0")/.."
scripts/install-packages.sh cmake make gcc pkg-config ocl-icd-opencl-dev opencl-headers pocl-opencl-icd \
    clinfo libclblast-dev libcriterion-dev libcjson-dev liblapacke-dev libopenblas-dev gnuplot-nox patchelf
scripts/install-intel-opencl.sh
scripts/install-oclgrind.sh
scripts/install-mkl.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >&2
cmake --build build -j"$(nproc)" >&2
