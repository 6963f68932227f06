#!/bin/sh
# Checks the relocatable bundle (scripts/bundle.sh): builds one from build/,
# copies it into an empty temporary folder and, from there, with a clean
# environment (env -i: no PATH, HOME or library path):
#   1. every library of every executable resolves into the bundle, or to glibc
#   2. bin/linformer devices: through the system's .icd files; with none and
#      --icd LIB or LINFORMER_ICD=LIB instead; with the bundled C++ runtime
#   3. bin/linformer run on a PyTorch fixture, compared with the fixture's y
#   4. the bundle's tests that read files or run the program (test_arguments,
#      test_device, test_run, test_pytorch, test_bench, test_model, test_rank:
#      what a move can break; the others run the same library code as under
#      CTest), and one showing
#      that the tests read the bundle's data, not the source tree's.
#      LF_BUNDLE_TESTS=all runs every test (about 4 minutes here, cold caches).
# Runs after scripts/setup.sh (scripts/check.sh calls it after CTest), in about a minute.
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
start=$(date +%s)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. scripts/bundle/env.sh

scripts/bundle.sh "$work/made" build
mkdir "$work/empty" "$work/copy"
cp -R "$work/made" "$work/copy/bundle"
rm -rf "$work/made"
b=$work/copy/bundle
# A clean environment, with the build's warm kernel caches.
clean() {
    env -i POCL_CACHE_DIR="$root/build/pocl-cache" LINFORMER_CACHE_DIR="$root/build/kernel-cache" "$@"
}
fail() {
    echo "check-bundle: $*" >&2
    exit 1
}

# ---- 1. libraries ----
for f in "$b"/libexec/linformer "$b"/tests/test_* "$b"/lib/*.so* "$b"/lib/compat/*.so*; do
    clean ldd "$f" | awk '$2 == "=>" { print $1, $3 }' | while read -r soname path; do
        case $path in
        "$b"/*) ;;
        *)
            # the C++ runtime is the system's where it is new enough (env.sh)
            case $soname in libstdc++.so.* | libgcc_s.so.*) continue ;; esac
            lf_glibc_lib "$soname" || fail "${f#"$b"/} loads $soname from $path, not from the bundle"
            ;;
        esac
    done
done
echo "check-bundle: every library resolves into the bundle or to glibc" >&2

# ---- 2. devices ----
clean "$b/bin/linformer" devices >"$work/devices.log" 2>&1 || fail "devices failed: $(cat "$work/devices.log")"
grep -q "(default)" "$work/devices.log" || fail "devices marks no default: $(cat "$work/devices.log")"
clean LINFORMER_BUNDLE_COMPAT=1 "$b/bin/linformer" devices >/dev/null 2>&1 ||
    fail "devices failed with the bundled libstdc++ (LINFORMER_BUNDLE_COMPAT=1)"
# The first system driver, named by its library, with the .icd files hidden.
icd=$(ls /etc/OpenCL/vendors/*.icd | head -n 1)
lib=$(cat "$icd")
case $lib in /*) ;; *) lib=$(lf_system_lib "$lib") || fail "no library $(cat "$icd") of $icd" ;; esac
if clean OCL_ICD_VENDORS="$work/empty" "$b/bin/linformer" devices >/dev/null 2>&1; then
    fail "devices found a device with no .icd file: the next check would prove nothing"
fi
clean OCL_ICD_VENDORS="$work/empty" "$b/bin/linformer" --icd "$lib" devices >/dev/null 2>&1 ||
    fail "devices failed with --icd $lib"
clean OCL_ICD_VENDORS="$work/empty" LINFORMER_ICD="$lib" "$b/bin/linformer" devices >/dev/null 2>&1 ||
    fail "devices failed with LINFORMER_ICD=$lib"
echo "check-bundle: devices from the system's .icd files, from --icd $lib and LINFORMER_ICD" >&2

# ---- 3. a run on a PyTorch fixture ----
fx=$b/tests/data/pytorch/plain
if clean "$b/bin/linformer" run --help 2>&1 | grep -q -- --check; then
    clean "$b/bin/linformer" run --model "$fx.model.safetensors" --input "$fx.io.safetensors" \
        --output "$work/y.safetensors" --check || fail "run --check on the fixture plain failed"
elif command -v python3 >/dev/null; then
    # until run has --check: its input without the fixture's y, and the comparison here
    python3 scripts/bundle/fixture.py input "$fx.io.safetensors" "$work/x.safetensors"
    clean "$b/bin/linformer" run --model "$fx.model.safetensors" --input "$work/x.safetensors" \
        --output "$work/y.safetensors" || fail "run on the fixture plain failed"
    python3 scripts/bundle/fixture.py compare "$fx.io.safetensors" "$work/y.safetensors" ||
        fail "run on the fixture plain does not match its y"
else
    echo "check-bundle: run on a fixture skipped: no run --check and no python3 to compare" >&2
fi

# ---- 4. the tests ----
if [ "${LF_BUNDLE_TESTS:-}" = all ]; then set --; else set -- arguments device run pytorch bench model rank; fi
clean "$b/run-tests.sh" --logs "$work/logs" "$@" || fail "the bundle's tests failed (above)"
if clean LINFORMER_TEST_DATA="$work/empty" "$b/tests/test_pytorch" --jobs 1 >/dev/null 2>&1; then
    fail "test_pytorch passed without its data: the tests do not read LINFORMER_TEST_DATA"
fi
echo "check-bundle: passed in $(($(date +%s) - start)) s" >&2
