#!/bin/sh
# What bench/compare_peers.py needs: a virtual environment build/peers-env
# that sees Debian's PyTorch (python3-torch, so no torch comes from the Python
# package index) and holds, pinned, ONNX Runtime and OpenVINO (the ONNX peers),
# safetensors, and lucidrains' linformer (the module every side runs; without
# its dependencies, which would pull a second torch). Run after scripts/setup.sh;
# safe to run again. Not part of CI: the comparison is run by hand.
set -eu
cd "$(dirname "$0")/.."
ONNXRUNTIME_VERSION=1.32.0
OPENVINO_VERSION=2026.4.1
SAFETENSORS_VERSION=0.8.0
LINFORMER_VERSION=0.2.3
ENV=build/peers-env
scripts/install-packages.sh python3-torch python3-numpy python3-venv python3-pip
[ -x "$ENV/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$ENV"
pip="$ENV/bin/python -m pip install -q --disable-pip-version-check"
$pip "onnxruntime==$ONNXRUNTIME_VERSION" "openvino==$OPENVINO_VERSION" "safetensors==$SAFETENSORS_VERSION" >&2
$pip --no-deps "linformer==$LINFORMER_VERSION" >&2
# Fails here, not mid-comparison, if a peer cannot load beside Debian's torch.
"$ENV/bin/python" -c "import torch, onnxruntime, openvino, safetensors, linformer"
