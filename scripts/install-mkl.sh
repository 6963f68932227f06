#!/bin/sh
# Installs Intel's MKL from the Python package index into build/mkl/: the
# host GEMM backend's other BLAS, which the library loads at run time and takes
# by default on Intel CPUs (host/blas/host_blas.c; LINFORMER_HOST_BLAS=openblas
# keeps OpenBLAS). Every program and test built in build/ finds it there
# through its run path; nothing outside build/ is written.
# Safe to run again: it downloads only when the pinned version changes.
# LINFORMER_SKIP_MKL=1 skips it (CI does not: .ci/run clears it).
set -eu
cd "$(dirname "$0")/.."

MKL=2026.2.0 # the pinned version, in this one place

dest=build/mkl
stamp="mkl $MKL"

if [ "${LINFORMER_SKIP_MKL:-0}" = 1 ]; then
    echo "install-mkl: skipped (LINFORMER_SKIP_MKL=1)" >&2
    exit 0
fi

if [ "$(cat "$dest/VERSIONS" 2>/dev/null)" != "$stamp" ]; then
    scripts/install-packages.sh unzip libgomp1 # MKL's threads are GNU OpenMP's
    python3 -m pip --version >/dev/null 2>&1 || scripts/install-packages.sh python3-pip
    echo "install-mkl: downloading $stamp" >&2
    rm -rf "$dest"
    mkdir -p "$dest/wheel"
    python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$dest/wheel" "mkl==$MKL"
    # What cblas_sgemm loads (seen with LD_DEBUG=files): the single dynamic
    # library, its LP64 interface, the core, the GNU OpenMP threading layer,
    # and the kernels for each x86 target (MKL picks one by the CPU). Left
    # out: the Intel OpenMP and TBB layers (their runtimes are other wheels),
    # vector math, ScaLAPACK and the cluster libraries.
    unzip -q -o -j "$dest"/wheel/mkl-*.whl -d "$dest" \
        '*/lib/libmkl_rt.so.3' '*/lib/libmkl_intel_lp64.so.3' '*/lib/libmkl_core.so.3' \
        '*/lib/libmkl_gnu_thread.so.3' '*/lib/libmkl_def.so.3' '*/lib/libmkl_mc3.so.3' \
        '*/lib/libmkl_avx2.so.3' '*/lib/libmkl_avx512.so.3' '*/lib/libmkl_avx10.so.3'
    unzip -q -o "$dest"/wheel/mkl-*.whl '*/LICENSE.txt' -d "$dest/license"
    rm -rf "$dest/wheel"
    echo "$stamp" >"$dest/VERSIONS"
fi
echo "install-mkl: $stamp in $dest" >&2
