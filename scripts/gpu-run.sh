#!/bin/sh
# The GPU run of a bundle (scripts/bundle.sh) on a machine that has the GPU's
# driver and nothing else, each step time-boxed so one hang cannot eat the
# machine's time, everything logged into OUTDIR:
#   0. the machine: glibc, the driver (nvidia-smi), the OpenCL .icd files; when
#      there are none, or none of them gives the selector a device (an image may
#      carry a pocl.icd without PoCL), the driver's library
#      (libnvidia-opencl.so.1) is searched for and named with LINFORMER_ICD
#   1. linformer devices, and which device the selector picks
#   2. the bundle's test suite on that device (run-tests.sh, one log per test)
#   3. linformer bench over n x k, d_model 512, 8 heads: DEVICE.csv, DEVICE.json,
#      DEVICE.png named after the device (without gnuplot on the machine, the
#      plot's data and script: summary.txt says how to draw it)
#   4. with LF_GPU_PERF=1: bench/gemm_bar.py, the 12-layer model's GEMMs in
#      PyTorch with TF32 off (the bar: DEVICE-gemm-bar.csv), and the copy
#      kernel's bandwidth at vector widths 1 and 4 (the bench's yardsticks under
#      LINFORMER_KERNEL_PARAMS=vw=1 and vw=4: DEVICE-vw1.log, DEVICE-vw4.log)
#   5. with LF_GPU_PEERS=1: bench/compare_peers.py beside this script, the same
#      lucidrains modules (the layer and the 12-layer model) through `linformer
#      run` on the device and through PyTorch on the GPU (CUDA), outputs checked
#      against PyTorch's: DEVICE-peers.csv, and each of our runs once more with
#      --profile into profiles/ (needs a Python with torch, safetensors and
#      linformer: LF_GPU_PYTHON); with LF_GPU_PERF=1 also the 12-layer model at
#      its first n with the elementwise kernels at vw=4 (profiles-vw4/) and
#      with the attention kernel's d_head split in two, ds=2 (profiles-ds2/)
#   6. with LF_GPU_TUNE=1: `linformer tune` (`--model` on the 12-layer model at
#      its first n, where step 5 kept its weights in models/), then step 3 again into
#      DEVICE-tuned.* (LF_GPU_PERF=1: step 5 again into DEVICE-peers-tuned.csv
#      and profiles-tuned/ instead)
# summary.txt has one line per step; the exit status is non-zero if a step failed.
#
# usage: scripts/gpu-run.sh BUNDLE OUTDIR
# Environment (defaults in brackets):
#   LINFORMER_DEVICE  the device selector [gpu]
#   LINFORMER_ICD     the driver library, instead of the .icd files or the search
#   LF_GPU_DRIVER     the library searched for [libnvidia-opencl.so.1]
#   LF_GPU_N          bench sequence lengths [512..65536]
#   LF_GPU_K          bench compressed lengths [128,256]
#   LF_GPU_TESTS      tests to run, space-separated (test_device or device) [all,
#                     test_kernels last: its grids compile the most programs,
#                     over 60 s on a cold NVIDIA H200]; "none" skips step 2
#   LF_GPU_PYTHON     the Python of step 4 [python3]
#   LF_GPU_TORCH_DEVICE  where step 4's PyTorch runs [cuda]
#   LF_GPU_PEERS_N, LF_GPU_PEERS_MODEL_N
#                     step 4's sequence lengths: the layer's [4096,16384], the
#                     12-layer model's [4096,16384]
#   LF_GPU_DEVICES_S, LF_GPU_TESTS_S, LF_GPU_TEST_S, LF_GPU_BENCH_S, LF_GPU_BAR_S,
#   LF_GPU_COPY_S, LF_GPU_PEERS_S, LF_GPU_TUNE_S
#                     time boxes in seconds: devices [30], the test suite [300],
#                     one test [120], one bench sweep [150], the GEMM bar [60],
#                     one copy bandwidth [30], the peers [240], tune [120: it
#                     searches for 30 s less]
set -eu
if [ $# -ne 2 ]; then
    sed -n '/^# usage:/,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
bundle=$(cd "$1" && pwd)
[ -x "$bundle/bin/linformer" ] || { echo "gpu-run: $1 is not a bundle (scripts/bundle.sh)" >&2; exit 2; }
mkdir -p "$2"
out=$(cd "$2" && pwd)
. "$bundle/libexec/env.sh" # lf_system_icds, lf_system_lib
tool=$bundle/bin/linformer
export LINFORMER_DEVICE="${LINFORMER_DEVICE:-gpu}"
summary=$out/summary.txt
: >"$summary"
status=0

# note TEXT: a line in the summary and on the terminal
note() {
    echo "gpu-run: $*" | tee -a "$summary" >&2
}
# step NAME SECONDS LOG CMD...: runs CMD under a time limit, output into LOG;
# SIGINT first (bench stops and still writes what it measured), KILL 30 s later.
# Notes the outcome; sets step_rc to CMD's exit status.
step() {
    name=$1 limit=$2 log=$3
    shift 3
    t0=$(date +%s)
    step_rc=0
    timeout -s INT -k 30 "$limit" "$@" >"$log" 2>&1 || step_rc=$?
    took=$(($(date +%s) - t0))
    case $step_rc in
    0) note "$name: ok (${took} s)" ;;
    124 | 137) note "$name: TIMED OUT after ${limit} s (log: ${log#"$out"/})" ;;
    *) note "$name: exit $step_rc (${took} s; log: ${log#"$out"/})" ;;
    esac
}

# ---- 0. the machine ----
vendors() {
    ls -A /etc/OpenCL/vendors 2>/dev/null | tr '\n' ' '
}
{
    echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "kernel:  $(uname -srm)"
    echo "glibc:   $(getconf GNU_LIBC_VERSION 2>/dev/null || echo unknown)"
    cat "$bundle/BUNDLE"
    echo "icd files: $(vendors)"
    if command -v nvidia-smi >/dev/null; then
        timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true
    fi
} >"$out/machine.txt" 2>&1
if [ -n "${LINFORMER_ICD-}" ]; then
    note "driver: LINFORMER_ICD=$LINFORMER_ICD"
elif lf_system_icds && "$tool" devices --device "$LINFORMER_DEVICE" >/dev/null 2>&1; then
    note "driver: the system's .icd files: $(vendors)"
elif lib=$(lf_system_lib "${LF_GPU_DRIVER:-libnvidia-opencl.so.1}"); then
    export LINFORMER_ICD="$lib"
    note "driver: no .icd file with a \"$LINFORMER_DEVICE\" device; found $lib (LINFORMER_ICD)"
else
    note "driver: no .icd file with a \"$LINFORMER_DEVICE\" device and no ${LF_GPU_DRIVER:-libnvidia-opencl.so.1} found; the steps below fail"
fi

# ---- 1. devices ----
step devices "${LF_GPU_DEVICES_S:-30}" "$out/devices.log" \
    sh -c '"$1" devices && echo && "$1" devices --device "$LINFORMER_DEVICE"' sh "$tool"
[ "$step_rc" = 0 ] || status=1
name=$(sed -n 's/^selector .* picks [0-9]*:[0-9]* //p' "$out/devices.log" | head -n 1)
slug=$(printf '%s' "${name:-$LINFORMER_DEVICE}" | tr '[:upper:]' '[:lower:]' | sed 's/[^a-z0-9]\{1,\}/-/g; s/^-//; s/-$//')
note "device: ${name:-not found} (selector \"$LINFORMER_DEVICE\"; files named $slug)"

# ---- 2. the test suite ----
tests=${LF_GPU_TESTS-}
if [ "$tests" = none ]; then
    note "tests: skipped (LF_GPU_TESTS=none)"
elif [ -z "$tests" ]; then
    for t in "$bundle"/tests/test_*; do
        [ "${t##*/}" = test_kernels ] || tests="$tests ${t##*/}"
    done
    tests="$tests test_kernels"
fi
if [ "$tests" != none ]; then
    # shellcheck disable=SC2086 # a list of names
    step tests "$((${LF_GPU_TESTS_S:-300} + 60))" "$out/tests.log" \
        "$bundle/run-tests.sh" --logs "$out/tests" --timeout "${LF_GPU_TEST_S:-120}" \
        --budget "${LF_GPU_TESTS_S:-300}" $tests
    [ "$step_rc" = 0 ] || status=1
    tail -n 1 "$out/tests.log" >>"$summary"
fi

# ---- 3. the bench ----
# bench_sweep SUFFIX: one sweep into $slug$SUFFIX.{csv,json,png}. Without
# gnuplot here the bench keeps the plot's data and script and exits 1 saying
# so: that alone (the CSV written) is no failure; the summary says how to
# draw the plot.
bench_sweep() {
    base=$out/$slug$1
    step "bench$1" "${LF_GPU_BENCH_S:-150}" "$base.log" "$tool" bench --device "$LINFORMER_DEVICE" \
        --n "${LF_GPU_N:-512..65536}" --k "${LF_GPU_K:-128,256}" --d-model 512 --heads 8 \
        --csv "$base.csv" --json "$base.json" --plot "$base.png"
    no_gnuplot=$(grep -c '^linformer bench: --plot: gnuplot is not installed' "$base.log" || true)
    if [ "$step_rc" = 1 ] && [ "$no_gnuplot" = 1 ] && [ -s "$base.csv" ]; then
        draw=$(sed -n 's/^linformer bench: --plot: gnuplot is not installed.* and run \(gnuplot -c .*\)$/\1/p' "$base.log" |
            sed "s|$out/||g")
        note "  the bench ran; ${base##*/}.png is left to draw where gnuplot is, in this folder: $draw"
    elif [ "$step_rc" != 0 ]; then
        status=1
    fi
}
bench_sweep ""

# ---- 4. the GEMM bar and the copy bandwidth, when asked for ----
if [ "${LF_GPU_PERF:-0}" = 1 ]; then
    step gemm-bar "${LF_GPU_BAR_S:-60}" "$out/$slug-gemm-bar.log" env PYTHONUNBUFFERED=1 \
        "${LF_GPU_PYTHON:-python3}" "$root/bench/gemm_bar.py" --device "${LF_GPU_TORCH_DEVICE:-cuda}" \
        --n "${LF_GPU_PEERS_MODEL_N:-4096,16384}" --csv "$out/$slug-gemm-bar.csv"
    [ "$step_rc" = 0 ] || status=1
    for vw in 1 4; do
        step "copy-vw$vw" "${LF_GPU_COPY_S:-30}" "$out/$slug-vw$vw.log" env LINFORMER_KERNEL_PARAMS="vw=$vw" \
            "$tool" bench --device "$LINFORMER_DEVICE" --n 512 --k 128 --d-model 512 --heads 8 --modes linformer
        [ "$step_rc" = 0 ] || status=1
        grep 'copy bandwidth' "$out/$slug-vw$vw.log" | sed "s/^/  vw=$vw: /" >>"$summary" || true
    done
fi

# ---- 5. the peers, when asked for ----
# peers SUFFIX: compare_peers into $slug-peers$SUFFIX.csv, our profiles into profiles$SUFFIX/
peers() {
    step "peers$1" "${LF_GPU_PEERS_S:-240}" "$out/$slug-peers$1.log" env PYTHONUNBUFFERED=1 \
        "${LF_GPU_PYTHON:-python3}" "$root/bench/compare_peers.py" --linformer "$tool" --peers pytorch \
        --torch-device "${LF_GPU_TORCH_DEVICE:-cuda}" --devices "$LINFORMER_DEVICE" --n "${LF_GPU_PEERS_N:-4096,16384}" \
        --model-n "${LF_GPU_PEERS_MODEL_N:-4096,16384}" --rounds 2 --repeat 3 --no-wall \
        --csv "$out/$slug-peers$1.csv" --profile-dir "$out/profiles$1" --save-models "$out/models"
    [ "$step_rc" = 0 ] || status=1
}
[ "${LF_GPU_PEERS:-0}" = 1 ] && peers ""
# model_with PARAMS SUFFIX: the 12-layer model at its first n once more under
# LINFORMER_KERNEL_PARAMS=PARAMS, profiled, into $slug-peers-SUFFIX.csv and profiles-SUFFIX/
model_with() {
    step "peers-$2" "$((${LF_GPU_PEERS_S:-240} / 2))" "$out/$slug-peers-$2.log" env PYTHONUNBUFFERED=1 \
        LINFORMER_KERNEL_PARAMS="$1" "${LF_GPU_PYTHON:-python3}" "$root/bench/compare_peers.py" --linformer "$tool" \
        --peers pytorch --torch-device "${LF_GPU_TORCH_DEVICE:-cuda}" --devices "$LINFORMER_DEVICE" \
        --model linformer12 --model-n "$(echo "${LF_GPU_PEERS_MODEL_N:-4096}" | cut -d, -f1)" --rounds 1 --repeat 3 \
        --no-wall --csv "$out/$slug-peers-$2.csv" --profile-dir "$out/profiles-$2"
    [ "$step_rc" = 0 ] || status=1
}
# the elementwise kernels four floats a work-item; and the attention kernel
# with d_head 64 split across two work-items of a query (the default splits
# from d_head 128 only), beside the default run of step 5
if [ "${LF_GPU_PERF:-0}" = 1 ] && [ "${LF_GPU_PEERS:-0}" = 1 ]; then
    model_with vw=4 vw4
    model_with ds=2 ds2
fi

# ---- 6. tuning, when asked for ----
if [ "${LF_GPU_TUNE:-0}" = 1 ]; then
    tune_s=${LF_GPU_TUNE_S:-120}
    # the 12-layer model's own GEMMs where step 5 kept its weights, else the fixed shapes
    model_n=$(echo "${LF_GPU_PEERS_MODEL_N:-4096}" | cut -d, -f1)
    model="$out/models/linformer-12-layers-n$model_n.model.safetensors"
    set --
    [ -f "$model" ] && set -- --model "$model" --seq-len "$model_n"
    step tune "$tune_s" "$out/tune.log" "$tool" tune --device "$LINFORMER_DEVICE" \
        --seconds "$((tune_s > 60 ? tune_s - 30 : tune_s / 2))" "$@"
    [ "$step_rc" = 0 ] || status=1
    if [ "${LF_GPU_PERF:-0}" = 1 ] && [ "${LF_GPU_PEERS:-0}" = 1 ]; then
        peers -tuned
    else
        bench_sweep -tuned
    fi
fi
note "done: $( [ $status = 0 ] && echo no step failed || echo A STEP FAILED ); logs in $out"
exit $status
