#!/bin/sh
# Runs the bundle's tests (the Criterion executables in tests/) one after the
# other from wherever the bundle is, prints a line per test and a summary, and
# exits non-zero when a test fails, times out or is left unrun (usage below).
set -eu
bundle=$(cd "$(dirname "$(readlink -f "$0")")" && pwd)
LF_BUNDLE=$bundle
. "$bundle/libexec/env.sh"
lf_bundle_env "$@"
shift "$lf_icd_shift"

usage() {
    cat >&2 <<'TEXT'
usage: run-tests.sh [--icd LIB] [--logs DIR] [--timeout S] [--budget S] [TEST...]
  TEST        tests to run (test_device or device), instead of every one
  --icd LIB   (first) the OpenCL driver library, where the system has no .icd file
  --logs DIR  each test's output goes to DIR/TEST.log (its tail is printed on
              failure) instead of the terminal
  --timeout S one test's limit in seconds (default 1800, as under CTest)
  --budget S  the whole run's limit: tests not started when it is spent are
              reported as not run (default: no limit)
The device is the default one, or LINFORMER_DEVICE's. Kernel caches go to
LINFORMER_CACHE_DIR and POCL_CACHE_DIR when set, else to cache/ in the bundle
(a temporary folder when the bundle is read-only).
TEXT
    exit "${1:-2}"
}
logs="" timeout=1800 budget=0
while [ $# -gt 0 ]; do
    case $1 in
    --logs) [ $# -ge 2 ] || usage; logs=$2; shift 2 ;;
    --timeout) [ $# -ge 2 ] || usage; timeout=$2; shift 2 ;;
    --budget) [ $# -ge 2 ] || usage; budget=$2; shift 2 ;;
    -h | --help) usage 0 ;;
    -*) echo "run-tests: unknown option $1" >&2; usage ;;
    *) break ;;
    esac
done
for n in "$timeout" "$budget"; do
    case $n in '' | *[!0-9]*) echo "run-tests: $n is not a number of seconds" >&2; exit 2 ;; esac
done

# The tests find the data and the program of the bundle, not of the build.
export LINFORMER_TEST_DATA="$bundle" LINFORMER_TOOL="$bundle/bin/linformer"
export CRITERION_JOBS=1
if [ -z "${LINFORMER_CACHE_DIR-}" ] || [ -z "${POCL_CACHE_DIR-}" ]; then
    cache=$bundle/cache
    mkdir -p "$cache" 2>/dev/null && [ -w "$cache" ] || cache=$(mktemp -d)
    export LINFORMER_CACHE_DIR="${LINFORMER_CACHE_DIR:-$cache/kernels}" POCL_CACHE_DIR="${POCL_CACHE_DIR:-$cache/pocl}"
fi
[ -z "$logs" ] || mkdir -p "$logs"

if [ $# -eq 0 ]; then
    set -- "$bundle"/tests/test_*
else
    for t in "$@"; do
        shift
        set -- "$@" "$bundle/tests/test_${t#test_}"
    done
fi

# run_one EXE: runs one test within the time left and prints its line; sets
# outcome to pass, fail or timeout. With --logs, Criterion's --verbose names
# each test as it starts, so the log of a test that hangs says which one.
run_one() {
    name=${1##*/}
    limit=$timeout
    if [ "$budget" -gt 0 ]; then
        left=$((budget - ($(date +%s) - start)))
        [ "$left" -lt "$limit" ] && limit=$left
    fi
    t0=$(date +%s)
    rc=0
    if [ -n "$logs" ]; then
        timeout -k 10 "$limit" "$1" --jobs 1 --verbose >"$logs/$name.log" 2>&1 || rc=$?
    else
        timeout -k 10 "$limit" "$1" --jobs 1 || rc=$?
    fi
    took=$(($(date +%s) - t0))
    case $rc in
    0) outcome=pass; echo "run-tests: PASS    $name (${took} s)" ;;
    124 | 137) outcome=timeout; echo "run-tests: TIMEOUT $name (after ${limit} s)" ;;
    *) outcome=fail; echo "run-tests: FAIL    $name (exit $rc, ${took} s)" ;;
    esac
    if [ "$rc" != 0 ] && [ -n "$logs" ]; then
        tail -n 25 "$logs/$name.log" | sed 's/^/    /'
    fi
}

start=$(date +%s)
passed=0 failed="" timedout="" unrun=""
for exe in "$@"; do
    name=${exe##*/}
    if [ ! -x "$exe" ]; then
        failed="$failed $name(missing)"
    elif [ "$budget" -gt 0 ] && [ $(($(date +%s) - start)) -ge "$budget" ]; then
        unrun="$unrun $name"
    else
        run_one "$exe"
        case $outcome in
        pass) passed=$((passed + 1)) ;;
        fail) failed="$failed $name" ;;
        timeout) timedout="$timedout $name" ;;
        esac
    fi
done
echo "run-tests: $passed passed; failed:${failed:- none}; timed out:${timedout:- none};" \
    "not run:${unrun:- none} ($(($(date +%s) - start)) s, device ${LINFORMER_DEVICE:-default})"
[ -z "$failed$timedout$unrun" ]
