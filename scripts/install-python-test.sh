#!/bin/sh
# What the Python package's tests (tests/python) need, in a virtual
# environment build/pyenv that also sees Debian's packages: PyTorch and numpy
# from Debian (python3-torch, python3-numpy); from the Python package index,
# each at the version pinned in scripts/python-pins.sh, safetensors, pytest, lucidrains' linformer
# (without its dependencies, so torch stays Debian's) and the build backend
# of pyproject.toml with its dependencies.
set -eu
cd "$(dirname "$0")/.."
. scripts/python-pins.sh
scripts/install-packages.sh python3-torch python3-numpy python3-venv python3-pip
[ -x build/pyenv/bin/python ] || /usr/bin/python3 -m venv --system-site-packages build/pyenv
pip="build/pyenv/bin/python -m pip install -q --disable-pip-version-check"
build/pyenv/bin/python -c "import safetensors, pytest, scikit_build_core" 2>/dev/null ||
    $pip "safetensors==$SAFETENSORS_VERSION" "pytest==$PYTEST_VERSION" $BUILD_BACKEND >&2
build/pyenv/bin/python -c "import linformer" 2>/dev/null ||
    $pip --no-deps "linformer==$LINFORMER_VERSION" >&2
