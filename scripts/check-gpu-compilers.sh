#!/bin/sh
# The GPU compilers' check: every program the library builds for each device
# profile (`linformer kernels --emit`, the GPUs of host/ops/device_profiles.c)
# compiled by three GPU vendors' compilers, installed here into
# build/gpu-compilers/ (nothing registered: no ICD, the suite's devices stay
# as they are):
#   Intel  ocloc (Debian's intel-opencl-icd) for dg2 (Arc) and pvc (Max);
#   AMD    clang-15's amdgcn backend with rocm-device-libs for gfx90a and gfx1030;
#   NVIDIA clang-15's nvptx64-nvidia-nvcl with libclc-15's builtins to PTX,
#          then ptxas (the Python package index's nvidia-cuda-nvcc) for sm_80
#          and sm_90. This is not NVIDIA's OpenCL front end: see
#          scripts/gpu_compilers.py.
# It fails on a build error, on local memory past a profile's limit, or on a
# spill or scratch (private memory) use past scripts/gpu-compilers-baseline.tsv
# (the attention kernel where a work-item's two rows of d_head floats do not
# fit in registers; --write-baseline rewrites it), and writes the table of
# registers, spills, local memory and occupancy per kernel and target to
# build/gpu-compilers/table.md and table.csv. Needs build/linformer
# (scripts/setup.sh). GPU_COMPILERS_EXTRA=FILE.cl adds a program of one's own
# to every profile (to see the check fail); LINFORMER_SKIP_GPU_COMPILERS=1
# skips it (CI does not).
set -eu
cd "$(dirname "$0")/.."
if [ "${LINFORMER_SKIP_GPU_COMPILERS:-0}" = 1 ]; then
    echo "check-gpu-compilers: skipped (LINFORMER_SKIP_GPU_COMPILERS=1)" >&2
    exit 0
fi
[ -x build/linformer ] || { echo "check-gpu-compilers: no build/linformer (run scripts/setup.sh)" >&2; exit 1; }

# The pins: Debian bookworm's packages and the wheel that carries ptxas.
DEBS="intel-opencl-icd=22.43.24595.41-1 libigc1=1.0.12504.6-1+deb12u1 libigdfcl1=1.0.12504.6-1+deb12u1
libopencl-clang14=14.0.0-4 libllvmspirvlib14=14.0.0-5 libigdgmm12=22.3.3+ds1-1 rocm-device-libs=5.2.3-2
libclc-15=1:15.0.6-4"
CLANG_VERSION="1:15.0.6-4+b1"
NVCC_WHEEL="nvidia-cuda-nvcc==13.5.37"

out=build/gpu-compilers
root=$out/root
stamp="$DEBS $NVCC_WHEEL"
start=$(date +%s)
scripts/install-packages.sh clang-15
have=$(dpkg-query -W -f='${Version}' clang-15)
[ "$have" = "$CLANG_VERSION" ] ||
    echo "check-gpu-compilers: clang-15 is $have, the check was set up with $CLANG_VERSION" >&2
if [ ! -e $out/installed ] || [ "$(cat $out/installed)" != "$stamp" ]; then
    rm -rf $root $out/debs $out/wheel
    mkdir -p $root $out/debs $out/wheel
    # apt-get download needs the package lists once, as apt-get install does
    (cd $out/debs && apt-get download $DEBS >/dev/null 2>&1) ||
        { apt-get update -qq && (cd $out/debs && apt-get download $DEBS >/dev/null); }
    for deb in $out/debs/*.deb; do dpkg -x "$deb" $root; done
    python3 -m pip download -q --no-deps --only-binary=:all: -d $out/wheel "$NVCC_WHEEL"
    mkdir -p $root/bin
    python3 -c 'import sys, zipfile; open(sys.argv[2], "wb").write(zipfile.ZipFile(sys.argv[1]).read("nvidia/cu13/bin/ptxas"))' \
        $out/wheel/*.whl $root/bin/ptxas
    chmod +x $root/bin/ptxas
    rm -rf $out/debs $out/wheel
    echo "$stamp" >$out/installed
fi
echo "check-gpu-compilers: compilers ready in $(($(date +%s) - start)) s" >&2

rm -rf $out/kernels
mkdir -p $out/kernels
for profile in $(build/linformer kernels --profiles | cut -f1); do
    env -u LINFORMER_KERNEL_PARAMS build/linformer kernels --emit $out/kernels/$profile --device-profile $profile
done
python3 scripts/gpu_compilers.py --root $root --kernels $out/kernels --table $out/table \
    --baseline scripts/gpu-compilers-baseline.tsv ${GPU_COMPILERS_EXTRA:+--extra "$GPU_COMPILERS_EXTRA"} "$@"
echo "check-gpu-compilers: passed in $(($(date +%s) - start)) s" >&2
