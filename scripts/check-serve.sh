#!/bin/sh
# The serving load test (bench/serve_load.py): linformer-serve on loopback,
# 4 clients x 50 requests of random lengths, every answer compared bit for bit
# with a direct forward on the device that gave it, every kind of bad request
# and clients that hang up while the load goes on (and, on PoCL alone, every
# hostile request of bench/serve_hostile.py), then a SIGTERM with
# requests in flight. On PoCL alone, with an instance on each device (PoCL
# and Intel's runtime), smaller on a token model, and served over gRPC alone
# (--no-http). Then tests/python/test_serve_server.py: readiness that follows
# the instances' processes, the warm-up, what the metrics count a rejected
# request in, a configuration without host paths, an exported repository
# served by the stock tritonserver (its metrics too). Installs PyTriton and
# Triton's client, versions pinned here, into build/pyenv (psutil is Debian's).
set -eu
cd "$(dirname "$0")/.."
PYTRITON_VERSION=0.7.0
TRITONCLIENT_VERSION=2.73.0
scripts/install-python-test.sh
scripts/install-packages.sh python3-psutil
PY=build/pyenv/bin/python
$PY -c "from importlib.metadata import version as v
assert v('nvidia-pytriton') == '$PYTRITON_VERSION' and v('tritonclient') == '$TRITONCLIENT_VERSION'" 2>/dev/null ||
    $PY -m pip install -q "nvidia-pytriton==$PYTRITON_VERSION" "tritonclient[http,grpc]==$TRITONCLIENT_VERSION" >&2

# The package from the source tree, over the library of the build tree.
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
export LINFORMER_LIBRARY="${LINFORMER_LIBRARY:-$PWD/build/liblinformer.so}"
[ -d build/opencl-vendors ] && export OCL_ICD_VENDORS="${OCL_ICD_VENDORS:-$PWD/build/opencl-vendors}"
MODELS=tests/data/models
load() { $PY bench/serve_load.py --bad 1 --seconds 240 "$@"; }
load $MODELS/encoder_short.model.safetensors --device pocl --hostile 1 --log build/serve-load-pocl.log
load $MODELS/encoder_short.model.safetensors --device all --log build/serve-load-all.log
load $MODELS/lm.model.safetensors --device pocl --clients 2 --requests 10 --log build/serve-load-lm.log
load $MODELS/encoder_short.model.safetensors --device pocl --grpc-only --clients 2 --requests 10 \
    --log build/serve-load-grpc.log
export POCL_CACHE_DIR="$PWD/build/pocl-cache" LINFORMER_CACHE_DIR="$PWD/build/kernel-cache"
(cd tests/python && timeout 900 ../../$PY -m pytest -q -p no:cacheprovider test_serve_server.py)
