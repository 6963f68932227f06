#!/bin/sh
# Installs build/ into a fresh prefix and builds the consumer against it both
# ways, with pkg-config and with find_package(Linformer); each must run. The
# library example of README.md (its first C block after "## The library") is
# cut out of README and built and run the same way. Every compile must be
# silent: including linformer.h prints nothing.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$root/build" --prefix "$work/prefix" >/dev/null
libdir=$(ls -d "$work"/prefix/lib*/ | head -n 1)
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

awk '/^## The library$/ { section = 1 } section && /^```c$/ { code = 1; next } code && /^```$/ { exit } code' \
    "$root/README.md" >"$work/readme_example.c"
grep -q 'main(' "$work/readme_example.c" || { echo "consumer: no library example found in README.md" >&2; exit 1; }

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
build_quietly "$work/readme_example.c" "$work/readme-example"
"$work/readme-example"

cmake -S "$root/tests/consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/consumer"
echo "consumer: built and ran against the installed package with pkg-config and find_package, and README's example"
