#!/bin/sh
# Installs build/ into a fresh prefix and builds the consumer against it both
# ways, with pkg-config and with find_package(Linformer); each must run. The
# library's whole program in docs/library.md (its first C block) is cut out
# of the chapter and built and run the same way. Every compile must be
# silent: including linformer.h prints nothing.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$root/build" --prefix "$work/prefix" >/dev/null
libdir=$(ls -d "$work"/prefix/lib*/ | head -n 1)
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

awk '/^```c$/ { code = 1; next } code && /^```$/ { exit } code' \
    "$root/docs/library.md" >"$work/docs_example.c"
grep -q 'main(' "$work/docs_example.c" || { echo "consumer: no whole program found in docs/library.md" >&2; exit 1; }

# Builds $1 into $2 with pkg-config; anything the compiler says is a failure.
build_quietly() {
    PKG_CONFIG_PATH="$libdir/pkgconfig" cc "$1" -o "$2" \
        $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs linformer) 2>"$work/cc.log"
    if [ -s "$work/cc.log" ]; then
        echo "consumer: compiling $1 printed:" >&2
        cat "$work/cc.log" >&2
        exit 1
    fi
}
build_quietly "$root/tests/consumer/main.c" "$work/with-pkg-config"
"$work/with-pkg-config"
build_quietly "$work/docs_example.c" "$work/docs-example"
"$work/docs-example"
# linformer.h keeps the OpenCL headers' own default target: OpenCL 2.0+
# calls stay declared for an application that includes it first.
PKG_CONFIG_PATH="$libdir/pkgconfig" cc -std=c11 -Werror -Wall -c "$root/tests/consumer/newer_opencl.c" -o "$work/newer_opencl.o" \
    $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags linformer) 2>"$work/cc.log" || {
    echo "consumer: linformer.h hid OpenCL 2.0+ declarations from an application including it first:" >&2
    cat "$work/cc.log" >&2
    exit 1
}

cmake -S "$root/tests/consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/consumer"
echo "consumer: built and ran against the installed package with pkg-config and find_package, and docs/library.md's program"
