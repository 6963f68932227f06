#!/bin/sh
# Installs build/ into a fresh prefix and builds the consumer against it both
# ways, with pkg-config and with find_package(Linformer); each must run.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$root/build" --prefix "$work/prefix" >/dev/null
libdir=$(ls -d "$work"/prefix/lib*/ | head -n 1)
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

PKG_CONFIG_PATH="$libdir/pkgconfig" cc "$root/tests/consumer/main.c" -o "$work/with-pkg-config" \
    $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs linformer)
"$work/with-pkg-config"

cmake -S "$root/tests/consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/consumer"
echo "consumer: built and ran against the installed package with pkg-config and find_package"
