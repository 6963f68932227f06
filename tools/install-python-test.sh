#!/bin/sh
# What the checkpoint converter's test (tests/test_convert_checkpoint.py)
# needs: PyTorch from Debian (python3-torch) and safetensors from the Python
# package index, in a virtual environment build/pyenv that also sees Debian's
# packages. The version is pinned here.
set -eu
cd "$(dirname "$0")/.."
SAFETENSORS_VERSION=0.8.0
tools/install-packages.sh python3-torch python3-venv python3-pip
[ -x build/pyenv/bin/python ] || /usr/bin/python3 -m venv --system-site-packages build/pyenv
build/pyenv/bin/python -c "import safetensors" 2>/dev/null ||
    build/pyenv/bin/python -m pip install -q "safetensors==$SAFETENSORS_VERSION" >&2
