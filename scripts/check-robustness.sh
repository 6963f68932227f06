#!/bin/sh
# Robustness checks, run by scripts/check.sh after the plain test suite:
#   1. the whole test suite once under AddressSanitizer + UndefinedBehaviorSanitizer
#      (build-asan/, -DLINFORMER_SANITIZE=ON), LeakSanitizer included: every
#      test's process (Criterion workers too) must end without a report. This
#      is also the leak check of a program that creates and frees everything:
#      tests/test_hygiene.c creates and frees contexts, layers, projections and
#      loaded layers hundreds of times.
#   2. each libFuzzer target (build-fuzz/, CC=clang -DLINFORMER_FUZZ=ON) for
#      LF_FUZZ_SECONDS (60) on a copy of its seed corpus plus tests/fuzz/regressions/,
#      once more when LeakSanitizer's own tracer crashed at exit after the campaign.
# tests/lsan.supp holds the LeakSanitizer suppressions (PoCL's kernel compiler
# only), each explained there.
# Sanitizer reports go to files (ASAN_OPTIONS log_path), because Criterion
# counts a test whose worker LeakSanitizer reports at exit as passed; the script
# fails when any report file exists and prints them.
# Environment: LF_BUILD_ASAN, LF_BUILD_FUZZ (build folders, default build-asan
# and build-fuzz), LF_FUZZ_SECONDS, LF_SKIP_ASAN=1 / LF_SKIP_FUZZ=1.
set -eu
cd "$(dirname "$0")/.."
root=$(pwd)
start=$(date +%s)
asan_dir=${LF_BUILD_ASAN:-build-asan}
fuzz_dir=${LF_BUILD_FUZZ:-build-fuzz}
seconds=${LF_FUZZ_SECONDS:-60}
jobs=$(nproc)

# ---- packages: clang with libFuzzer, beside what scripts/setup.sh installs ----
scripts/install-packages.sh clang libclang-rt-14-dev

supp="$root/tests/lsan.supp"
fail=0

# Prints and counts sanitizer reports left in folder $1; returns 1 if any.
reports() {
    found=0
    for f in "$1"/report.*; do
        [ -e "$f" ] || continue
        # LSan reports that the suppressions emptied are not written; an empty file is no report
        [ -s "$f" ] || continue
        # A forked child's LeakSanitizer names a thread of its parent it could
        # not stop ("False leaks are possible"): a warning, no leak reported.
        grep -v -E "^==[0-9]+==Running thread [0-9]+ was not suspended. False leaks are possible.$|^$" "$f" |
            grep -q . || continue
        found=1
        echo "==== sanitizer report $f" >&2
        cat "$f" >&2
    done
    return $found
}

# True when folder $1 holds reports and every one is only LeakSanitizer's
# "Tracer caught signal" fatal error: a known, intermittent failure of LSan's
# thread-stopping tracer, not a finding about the program.
only_tracer_crashes() {
    any=1
    for f in "$1"/report.*; do
        [ -s "$f" ] || continue
        grep -q "Tracer caught signal" "$f" || return 1
        grep -v -E "Tracer caught signal|LeakSanitizer has encountered a fatal error|HINT: " "$f" | grep -q . && return 1
        any=0
    done
    return $any
}

# ---- 1. the test suite under ASan + UBSan + LSan ----
if [ "${LF_SKIP_ASAN:-0}" != 1 ]; then
    echo "check-robustness: building $asan_dir (ASan + UBSan)" >&2
    # PoCL's compiled kernels from the main build where it has them: PoCL's
    # LLVM builds them, not the sanitizers' compiler, and keys them by source,
    # options and device, so compiling them all again only costs minutes
    shared_cache=
    [ -d build/pocl-cache ] && shared_cache="-DLF_POCL_CACHE_DIR=$root/build/pocl-cache"
    cmake -S . -B "$asan_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLINFORMER_SANITIZE=ON $shared_cache >&2
    cmake --build "$asan_dir" -j"$jobs" >&2
    logs="$root/$asan_dir/sanitizer-reports"
    case "$asan_dir" in /*) logs="$asan_dir/sanitizer-reports" ;; esac
    rm -rf "$logs"
    # detect_leaks: LSan at every process exit. PoCL is not built with ASan:
    # its allocations are still intercepted; nothing more is needed for it.
    export LSAN_OPTIONS="suppressions=$supp:print_suppressions=0"
    export CRITERION_JOBS=1
    echo "check-robustness: running the tests under the sanitizers" >&2
    # One ctest run per test, each with its own report folder, so a report
    # names its test, and a test whose only reports are LeakSanitizer's own
    # tracer crash (it could not stop the threads to look: no leak was
    # checked, none found) runs again, at most twice.
    for t in $(ctest --test-dir "$asan_dir" -N | sed -n 's/^ *Test *#[0-9]*: //p'); do
        tries=0
        while :; do
            dir="$logs/$t"
            rm -rf "$dir"
            mkdir -p "$dir"
            # use_sigaltstack=0: PoCL's LLVM, set up on whichever thread first
            # opens a device, swaps that thread's signal stack for a malloc'd
            # one of 72 KiB where AddressSanitizer's own is smaller (32 KiB on
            # AVX2 machines), and AddressSanitizer then dies unmapping the
            # malloc'd one as the thread exits ("unable to unmap").
            export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:use_sigaltstack=0:log_path=$dir/report"
            export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$dir/report"
            passed=1
            ctest --test-dir "$asan_dir" --output-on-failure -R "^$(echo "$t" | sed 's/[.]/[.]/g')\$" >"$dir.log" 2>&1 || passed=0
            if only_tracer_crashes "$dir" && [ $tries -lt 2 ]; then
                tries=$((tries + 1))
                echo "check-robustness: $t: LeakSanitizer's tracer crashed; running it again ($tries)" >&2
                continue
            fi
            break
        done
        if [ $passed = 0 ]; then
            cat "$dir.log" >&2
            echo "check-robustness: $t failed under the sanitizers" >&2
            fail=1
        else
            grep -E "Test +#[0-9]+:" "$dir.log" | tail -n 1 | sed "s/^[^:]*: */  /" >&2 || true
        fi
        if ! reports "$dir"; then
            echo "check-robustness: the sanitizers reported errors or leaks in $t (above)" >&2
            fail=1
        fi
    done
    unset ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS
fi

# ---- 2. the fuzzers ----
if [ "${LF_SKIP_FUZZ:-0}" != 1 ]; then
    echo "check-robustness: building $fuzz_dir (clang, libFuzzer)" >&2
    CC=clang cmake -S . -B "$fuzz_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLINFORMER_FUZZ=ON \
        -DLINFORMER_SANITIZE=ON -DLINFORMER_TESTS=OFF >&2
    cmake --build "$fuzz_dir" -j"$jobs" --target fuzz_safetensors fuzz_loader fuzz_model >&2
    case "$fuzz_dir" in /*) fabs="$fuzz_dir" ;; *) fabs="$root/$fuzz_dir" ;; esac
    export POCL_CACHE_DIR="$fabs/pocl-cache" LINFORMER_CACHE_DIR="$fabs/kernel-cache"
    export LSAN_OPTIONS="suppressions=$supp:print_suppressions=0"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    for target in safetensors loader model; do
        work="$fabs/run-$target"
        rm -rf "$work"
        mkdir -p "$work/corpus" "$work/artifacts"
        cp tests/fuzz/corpus_$target/* "$work/corpus/"
        for f in tests/fuzz/regressions/*; do
            case "$f" in *.md) ;; *) [ -f "$f" ] && cp "$f" "$work/corpus/" ;; esac
        done
        echo "check-robustness: fuzz_$target for ${seconds}s" >&2
        # -max_len keeps inputs small: the loaders must refuse huge shapes from
        # their headers alone (a whole model's seeds need 8192). -timeout: no
        # single input may take 10 s (60 for a model, see below).
        max_len=4096 unwind=1 timeout=10
        if [ $target = model ]; then
            # A whole model runs a forward, so PoCL compiles kernels in it: its
            # leaks there reach the suppressions only through the full unwinder
            # (tests/lsan.supp), under which a compile takes tens of seconds.
            # So the seeds' kernels are compiled into the caches first, leak
            # checks off, and a new variant a mutation brings may take 60 s.
            max_len=8192 unwind=0 timeout=60
            ASAN_OPTIONS=detect_leaks=0 "$fabs/tests/fuzz/fuzz_$target" -runs=0 "$work/corpus" >"$work/warm-up.log" 2>&1 ||
                { tail -n 30 "$work/warm-up.log" >&2; echo "check-robustness: fuzz_$target failed on its seeds" >&2; fail=1; }
        fi
        campaign() {
            ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=$unwind" \
                "$fabs/tests/fuzz/fuzz_$target" -max_len=$max_len -timeout=$timeout -rss_limit_mb=4096 \
                -max_total_time="$seconds" -print_final_stats=1 \
                -artifact_prefix="$work/artifacts/" "$work/corpus" >"$work/log" 2>&1
        }
        # LeakSanitizer's own tracer can crash (a SIGSEGV while it stops the
        # threads, PoCL's and OpenBLAS's among them) in the leak check at exit,
        # after the campaign has finished with no input failing ("Done N
        # runs"): that is the sanitizer failing, not a finding, and the
        # campaign runs once more. A leak it finds says "detected memory leaks".
        sanitizer_failed() {
            grep -q "^Done [0-9]* runs" "$work/log" &&
                grep -q "LeakSanitizer has encountered a fatal error" "$work/log"
        }
        ok=1
        campaign || ok=0
        if [ $ok = 0 ] && sanitizer_failed; then
            echo "check-robustness: fuzz_$target: LeakSanitizer's tracer crashed at exit after the campaign; running it again" >&2
            rm -f "$work/artifacts/"*
            ok=1
            campaign || ok=0
        fi
        if [ $ok = 0 ]; then
            tail -n 60 "$work/log" >&2
            echo "check-robustness: fuzz_$target found a problem; its input is in $work/artifacts/." >&2
            echo "  Fix it, then keep the input in tests/fuzz/regressions/ (see the README there)." >&2
            fail=1
        else
            grep -E "^(stat::number_of_executed_units|stat::new_units_added|Done)" "$work/log" | sed "s/^/  fuzz_$target: /" >&2 || true
        fi
    done
fi

echo "check-robustness: $( [ $fail = 0 ] && echo passed || echo FAILED ) in $(( $(date +%s) - start )) s" >&2
exit $fail
