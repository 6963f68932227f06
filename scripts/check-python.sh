#!/bin/sh
# The Python package: installs it from this tree into build/pyenv (`pip
# install .` with the pinned build backend of scripts/install-python-test.sh,
# no build isolation, so nothing unpinned is fetched), then runs its tests
# (tests/python) on PoCL and Intel's CPU runtime, then the repaired wheel in
# an environment without the build's packages (scripts/check-wheel.sh).
# Exits 1 when either fails.
set -eu
cd "$(dirname "$0")/.."
scripts/install-python-test.sh
build/pyenv/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation . >&2
export OCL_ICD_VENDORS="${OCL_ICD_VENDORS:-$PWD/build/opencl-vendors}"
export POCL_CACHE_DIR="$PWD/build/pocl-cache" LINFORMER_CACHE_DIR="$PWD/build/kernel-cache"
export LF_TOOL_PATH="$PWD/build/linformer"
status=0
# the installed package, not python/; the server's tests are scripts/check-serve.sh's
(cd tests/python && ../../build/pyenv/bin/python -m pytest -q -p no:cacheprovider --ignore=test_serve_server.py .) ||
    status=1
scripts/check-wheel.sh || status=1
exit $status
