#!/bin/sh
# Writes a relocatable bundle of a build: a folder to copy to a machine that has
# an OpenCL driver and nothing else (no compiler, no packages) and run there.
#
# usage: scripts/bundle.sh OUT [BUILD]      (BUILD: default build/)
#
#   bin/linformer        the program (a wrapper: scripts/bundle/env.sh says what it sets)
#   lib/                 liblinformer.so and every shared library the program and
#                        the tests load that is not glibc (found with ldd): the
#                        OpenCL ICD loader, CLBlast, cJSON, Criterion and its
#                        dependencies
#   lib/compat/          libstdc++ and libgcc_s, used where the system's are older
#                        than needed; needs lists the symbol versions needed
#   tests/, run-tests.sh the test executables, the files they read, their runner
#   BUNDLE               what was bundled from where, and the glibc it needs
#
# Every executable and library gets a run path relative to itself ($ORIGIN), so
# the bundle runs from any folder with nothing set. glibc (libc, libm, libdl,
# libpthread, librt, the dynamic loader ...) stays the system's: it goes with
# the system's loader, and must be at least the version BUNDLE names.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: scripts/bundle.sh OUT [BUILD]   (BUILD: default build/)" >&2
    exit 2
fi
out=$1
build=${2:-$root/build}
[ -x "$build/linformer" ] || { echo "bundle: no program in $build: build first (scripts/setup.sh)" >&2; exit 1; }
command -v patchelf >/dev/null || { echo "bundle: patchelf is missing (scripts/install-packages.sh patchelf)" >&2; exit 1; }
if [ -e "$out" ] && [ ! -f "$out/BUNDLE" ] && [ -n "$(ls -A "$out")" ]; then
    echo "bundle: $out exists and is not a bundle; not overwriting it" >&2
    exit 1
fi
rm -rf "$out"
mkdir -p "$out/bin" "$out/libexec" "$out/lib/compat" "$out/tests"
out=$(cd "$out" && pwd)

# ---- our files ----
cp "$build/linformer" "$out/libexec/linformer"
cp -P "$build"/liblinformer.so* "$out/lib/"
for t in "$build"/tests/test_*; do
    [ -f "$t" ] && [ -x "$t" ] && cp "$t" "$out/tests/"
done
cp "$root/scripts/bundle/linformer" "$out/bin/linformer"
cp "$root/scripts/bundle/run-tests.sh" "$out/run-tests.sh"
cp "$root/scripts/bundle/env.sh" "$out/libexec/env.sh"
# The files the tests read, where helpers.h's LINFORMER_TEST_DATA expects them.
mkdir -p "$out/tests/data" "$out/tests/fuzz"
cp -R "$root/tests/data/pytorch" "$root/tests/data/models" "$out/tests/data/"
for d in "$root"/tests/fuzz/corpus_* "$root/tests/fuzz/regressions"; do
    cp -R "$d" "$out/tests/fuzz/"
done

# ---- the libraries they load ----
# glibc's own libraries are left to the system (see above).
. "$root/scripts/bundle/env.sh"
ldd "$out"/libexec/linformer "$out"/tests/test_* "$out"/lib/liblinformer.so.*.*.* | awk '$2 == "=>" { print $1, $3 }' | sort -u | while read -r soname path; do
    lf_glibc_lib "$soname" && continue
    if [ "$path" = "not" ]; then
        echo "bundle: $soname is not found on this machine (ldd)" >&2
        exit 1
    fi
    case $soname in
    libstdc++.so.* | libgcc_s.so.*) cp -L "$path" "$out/lib/compat/$soname" ;;
    *) cp -L "$path" "$out/lib/$soname" ;;
    esac
done

# ---- run paths relative to each file ----
for f in "$out"/libexec/linformer "$out"/tests/test_*; do
    patchelf --set-rpath '$ORIGIN/../lib' "$f"
done
for f in "$out"/lib/*.so* "$out"/lib/compat/*.so*; do
    [ -L "$f" ] || patchelf --set-rpath '$ORIGIN' "$f"
done

# ---- what is in it ----
# newest FAMILY_version (GLIBC, GLIBCXX, ...) that the files after FAMILY need
newest() {
    family=$1
    shift
    objdump -T "$@" | grep '\*UND\*' | grep -o "(${family}_[0-9.]*)" | tr -d '()' | sort -u -V | tail -n 1
}
# the same, over the bundle's files but lib/compat/
ours() {
    newest "$1" "$out"/libexec/linformer "$out"/tests/test_* "$out"/lib/*.so*
}
{
    echo "libstdc++.so.6 $(ours GLIBCXX) $(ours CXXABI)"
    echo "libgcc_s.so.1 $(ours GCC)"
} >"$out/lib/compat/needs"
glibc=$(ours GLIBC | sed 's/^GLIBC_//')
glibc_compat=$(newest GLIBC "$out"/lib/compat/*.so* | sed 's/^GLIBC_//')
{
    echo "linformer bundle"
    echo "source:    $(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)"
    echo "built:     $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), $(uname -m)"
    echo "glibc:     $glibc or newer ($glibc_compat where lib/compat/ is used)"
    echo "C++ needs: $(tr '\n' ' ' <"$out/lib/compat/needs")"
    echo "libraries: $(cd "$out/lib" && ls -d ./*.so* compat/*.so* | sed 's|^\./||' | tr '\n' ' ')"
} >"$out/BUNDLE"
cp "$root/scripts/bundle/README.md" "$out/README.md"
echo "bundle: $out ($(du -sh "$out" | cut -f1), needs glibc $glibc)" >&2
