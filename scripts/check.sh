#!/bin/sh
# The whole test suite: sets up and builds like scripts/setup.sh, runs every
# Criterion test once on each OpenCL platform (PoCL, and Intel's CPU runtime
# unless LINFORMER_SKIP_INTEL=1: tests/CMakeLists.txt), then the Oclgrind
# stage (scripts/check-oclgrind.sh: the GPU path on a simulated GPU), every
# GPU program through three vendors' compilers (scripts/check-gpu-compilers.sh),
# the relocatable bundle, then builds a program against the installed package and runs the robustness
# checks (on the default device), the Python package's tests
# (scripts/check-python.sh), the serving load test (scripts/check-serve.sh),
# and every command of README.md and docs/ (scripts/check-docs.py).
set -eu
cd "$(dirname "$0")/.."
mkdir -p build
scripts/setup.sh

# One test process at a time: each uses every core through the OpenCL device.
export CRITERION_JOBS=1
ctest --test-dir build --output-on-failure -LE oclgrind
scripts/check-oclgrind.sh
scripts/check-gpu-compilers.sh
scripts/check-bundle.sh
tests/consumer/check.sh
scripts/check-robustness.sh
scripts/check-python.sh
scripts/check-serve.sh
scripts/check-docs.py
