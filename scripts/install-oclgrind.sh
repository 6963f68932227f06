#!/bin/sh
# Installs Debian's Oclgrind, an OpenCL device simulator that checks kernels
# for data races, out-of-bounds accesses, barrier divergence and API misuse,
# and writes build/opencl-vendors-oclgrind/: the drivers of
# build/opencl-vendors/ (else the system's) plus Oclgrind. The package writes
# no .icd of its own. Oclgrind reports itself as a GPU and the default device
# is the first GPU, so it stays out of build/opencl-vendors/, where it would
# become the default device of the normal tests; the Oclgrind stage
# (scripts/check-oclgrind.sh) and `--device oclgrind` use this folder:
#     OCL_ICD_VENDORS=$PWD/build/opencl-vendors-oclgrind build/linformer devices
# Safe to run again. LINFORMER_SKIP_OCLGRIND=1 skips it (CI does not).
set -eu
cd "$(dirname "$0")/.."
vendors=build/opencl-vendors-oclgrind
if [ "${LINFORMER_SKIP_OCLGRIND:-0}" = 1 ]; then
    echo "install-oclgrind: skipped (LINFORMER_SKIP_OCLGRIND=1)" >&2
    rm -rf "$vendors"
    exit 0
fi
scripts/install-packages.sh oclgrind
lib=$(dpkg -L oclgrind | grep '/liboclgrind-rt-icd\.so$' | head -n 1)
[ -n "$lib" ] || { echo "install-oclgrind: the oclgrind package has no liboclgrind-rt-icd.so" >&2; exit 1; }
rm -rf "$vendors"
mkdir -p "$vendors"
for icd in build/opencl-vendors/*.icd /etc/OpenCL/vendors/*.icd; do
    [ -e "$icd" ] && [ ! -e "$vendors/$(basename "$icd")" ] && cp -P "$icd" "$vendors/"
done
echo "$lib" >"$vendors/oclgrind.icd"
echo "install-oclgrind: $(oclgrind --version 2>/dev/null | grep -m1 Oclgrind); OCL_ICD_VENDORS=$vendors lists it" >&2
