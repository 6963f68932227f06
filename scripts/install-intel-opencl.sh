#!/bin/sh
# Installs Intel's OpenCL CPU runtime from the Python package index into
# build/intel-opencl/ and writes build/opencl-vendors/, an ICD folder holding
# the system's drivers (/etc/OpenCL/vendors/*.icd) plus this runtime. Programs
# see both platforms with
#     export OCL_ICD_VENDORS=$PWD/build/opencl-vendors
# (CTest sets it for every test). Nothing outside build/ is written: the
# machine's own ICD folder, and so the default device of every other OpenCL
# program on it, stays as it was, and no root is needed.
# Safe to run again: it downloads only when the pinned versions change.
# LINFORMER_SKIP_INTEL=1 skips it (CI does not: .ci/run clears it).
set -eu
cd "$(dirname "$0")/.."

# The pinned versions, in this one place. intel-opencl-rt's libintelocl.so
# finds the others through its $ORIGIN run path, so all go into one folder.
INTEL_OPENCL_RT=2026.2.0
INTEL_CMPLR_LIB_RT=2026.2.0 # libimf, libsvml, libirng, libintlc
INTEL_TBB=2023.2.0          # libtbb, libtbbmalloc (the runtime's task scheduler)

dest=build/intel-opencl
vendors=build/opencl-vendors
stamp="opencl-rt $INTEL_OPENCL_RT cmplr-lib-rt $INTEL_CMPLR_LIB_RT tbb $INTEL_TBB"

if [ "${LINFORMER_SKIP_INTEL:-0}" = 1 ]; then
    echo "install-intel-opencl: skipped (LINFORMER_SKIP_INTEL=1)" >&2
    rm -rf "$vendors"
    exit 0
fi

if [ "$(cat "$dest/VERSIONS" 2>/dev/null)" != "$stamp" ]; then
    scripts/install-packages.sh unzip
    python3 -m pip --version >/dev/null 2>&1 || scripts/install-packages.sh python3-pip
    echo "install-intel-opencl: downloading $stamp" >&2
    rm -rf "$dest"
    mkdir -p "$dest/wheels" "$dest/lib"
    python3 -m pip download --quiet --no-deps --only-binary=:all: --dest "$dest/wheels" \
        "intel-opencl-rt==$INTEL_OPENCL_RT" "intel-cmplr-lib-rt==$INTEL_CMPLR_LIB_RT" "tbb==$INTEL_TBB"
    # Only what the CPU device loads (seen with strace): the runtime, its
    # compiler, its built-in libraries for each x86 target (the runtime picks
    # one by the CPU), and the libraries they link. Left out: Intel's own ICD
    # loader, the LTO plugin, tracing and NUMA-binding libraries, and every
    # second copy of a library under another soname (zip has no symlinks).
    for w in "$dest"/wheels/*.whl; do
        unzip -q -o -j "$w" -d "$dest/lib" \
            '*/lib/libintelocl.so' '*/lib/libcommon_clang.so.*' '*/lib/cl.cfg' \
            '*/lib/cllibrary*' '*/lib/clbltfn*.rtl' '*/lib/libocl_svml_*.so' \
            '*/lib/libimf.so' '*/lib/libsvml.so' '*/lib/libirng.so' '*/lib/libintlc.so.5' \
            '*/lib/libtbb.so.12' '*/lib/libtbbmalloc.so.2' 2>/dev/null || [ $? = 11 ] # 11: no match in this wheel
    done
    for f in libintelocl.so libcommon_clang.so.* libtbb.so.12 libsvml.so; do
        [ -e "$dest/lib/"$f ] || { echo "install-intel-opencl: no $f in the wheels" >&2; exit 1; }
    done
    unzip -q -o "$dest"/wheels/intel_opencl_rt-*.whl '*/LICENSE.txt' -d "$dest/license"
    rm -rf "$dest/wheels"
    echo "$stamp" >"$dest/VERSIONS"
fi

# The runtime's oneTBB under a soname of its own. A process that loaded the
# system's older libtbb.so.12 first (Debian's PyTorch does, through OpenCV)
# would otherwise hand that one to the runtime, which then fails to load
# (an undefined tbb::detail::r1 symbol) and the ICD loader drops the platform
# without a word. With its own soname the copy here is loaded beside the
# system's, and the runtime's symbols bind to it (LD_DEBUG=bindings shows it).
if [ -e "$dest/lib/libtbb.so.12" ]; then
    scripts/install-packages.sh patchelf
    mv "$dest/lib/libtbb.so.12" "$dest/lib/libtbb_intelocl.so.12"
    patchelf --set-soname libtbb_intelocl.so.12 "$dest/lib/libtbb_intelocl.so.12"
    patchelf --replace-needed libtbb.so.12 libtbb_intelocl.so.12 "$dest/lib/libintelocl.so"
fi

# The ICD folder: the system's drivers, then this one (an absolute path, as
# the loader dlopen()s it from any working directory).
rm -rf "$vendors"
mkdir -p "$vendors"
for icd in /etc/OpenCL/vendors/*.icd; do
    [ -e "$icd" ] && ln -s "$icd" "$vendors/"
done
echo "$(cd "$dest/lib" && pwd)/libintelocl.so" >"$vendors/intel-cpu.icd"
echo "install-intel-opencl: $stamp in $dest; OCL_ICD_VENDORS=$vendors lists it" >&2
