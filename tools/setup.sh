#!/bin/sh
# Installs what the build needs (Debian packages), then configures and builds
# into build/. Safe to run again: it installs only what is missing.
set -eu
cd "$(dirname "$0")/.."

packages="cmake make gcc pkg-config ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
          libclblast-dev libcriterion-dev libcjson-dev gnuplot-nox ${LF_EXTRA_PACKAGES:-}"
missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    echo "setup: installing$missing" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >&2
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${LF_CMAKE_FLAGS:-} >&2
cmake --build build -j"$(nproc)" >&2
