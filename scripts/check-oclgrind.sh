#!/bin/sh
# The Oclgrind stage: runs the tests labelled "oclgrind" (tests/CMakeLists.txt)
# on the Oclgrind simulator, the library's GPU path (QB 1 with key tiles in
# local memory, CLBlast's GEMMs, work-groups sized from the device) under
# Oclgrind's race, bounds, barrier, uniform-write and API checks with 32 KiB
# of local memory. A mismatch or any line in a test's Oclgrind log
# (build/oclgrind-logs/) fails it. Needs a build from scripts/setup.sh, which
# writes build/opencl-vendors-oclgrind/ (scripts/install-oclgrind.sh);
# LINFORMER_SKIP_OCLGRIND=1 skips it (CI does not).
set -eu
cd "$(dirname "$0")/.."
if [ "${LINFORMER_SKIP_OCLGRIND:-0}" = 1 ]; then
    echo "check-oclgrind: skipped (LINFORMER_SKIP_OCLGRIND=1)" >&2
    exit 0
fi
if [ ! -e build/opencl-vendors-oclgrind/oclgrind.icd ]; then
    echo "check-oclgrind: no build/opencl-vendors-oclgrind/oclgrind.icd (run scripts/setup.sh)" >&2
    exit 1
fi
CRITERION_JOBS=1 ctest --test-dir build --output-on-failure -L oclgrind
