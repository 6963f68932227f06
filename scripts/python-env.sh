#!/bin/sh
# Usage: scripts/python-env.sh DIR [EXTRA...]
# Makes DIR a virtual environment of Debian's own Python that sees Debian's
# PyTorch and numpy (python3-torch, python3-numpy), and installs this tree's
# package linformer_cl into it with the extras named (pyproject.toml: serve),
# safetensors (for `python -m linformer_cl.convert`) and lucidrains' linformer
# (the modules the examples build from; without its dependencies, so torch
# stays Debian's). Debian's Python is named by its path, /usr/bin/python3:
# the first `python3` on PATH may be another one (pyenv, conda) that cannot
# see Debian's packages. Then `python -m linformer_cl.check` says what the
# environment sees. Safe to run again: it reinstalls the package.
set -eu
[ $# -ge 1 ] || { echo "usage: scripts/python-env.sh DIR [EXTRA...]" >&2; exit 2; }
dir=$1
shift
extras=$(echo "$*" | tr ' ' ',')
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/python-pins.sh"
"$root/scripts/install-packages.sh" python3-torch python3-numpy python3-venv python3-pip
[ -x "$dir/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$dir"
"$dir/bin/python" -c 'import torch' 2>/dev/null || {
    echo "python-env: $dir/bin/python does not see Debian's PyTorch (is $dir a venv of another Python?)" >&2
    exit 1
}
pip="$dir/bin/python -m pip install -q --disable-pip-version-check"
$pip "$root${extras:+[$extras]}" "safetensors==$SAFETENSORS_VERSION" >&2
$pip --no-deps "linformer==$LINFORMER_VERSION" >&2
# what the environment sees (torch, safetensors, linformer, the OpenCL devices), failing where one is missing
"$dir/bin/python" -m linformer_cl.check --need torch safetensors linformer >&2
echo "python-env: $dir holds linformer_cl${extras:+ with [$extras]}; run $dir/bin/python" >&2
