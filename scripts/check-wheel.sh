#!/bin/sh
# The wheel of scripts/build-wheel.sh, installed where the build's packages
# are out of reach: a fresh virtual environment of Debian's Python that sees
# no system site packages (numpy and safetensors from the package index, at
# the versions of scripts/python-pins.sh), LD_LIBRARY_PATH empty, run from outside the tree.
# tests/python/wheel_check.py then runs a model on each CPU runtime against
# PyTorch's output, and checks (ldd, and the process's own mappings) that
# CLBlast, OpenBLAS, cJSON and the ICD loader come from the wheel, not from
# /usr/lib. Exits with its status.
set -eu
cd "$(dirname "$0")/.."
. scripts/python-pins.sh
wheel=$(scripts/build-wheel.sh)
env=build/wheel-env
rm -rf "$env"
/usr/bin/python3 -m venv "$env"
"$env/bin/python" -m pip install -q --disable-pip-version-check "numpy==$NUMPY_VERSION" \
    "safetensors==$SAFETENSORS_VERSION" "$wheel" >&2
export OCL_ICD_VENDORS="${OCL_ICD_VENDORS:-$PWD/build/opencl-vendors}"
export LINFORMER_CACHE_DIR="$PWD/build/kernel-cache" POCL_CACHE_DIR="$PWD/build/pocl-cache"
root=$PWD
cd /
LD_LIBRARY_PATH= exec "$root/$env/bin/python" "$root/tests/python/wheel_check.py" "$root/tests/data"
