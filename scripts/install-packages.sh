#!/bin/sh
# Installs the Debian packages named as arguments that are not installed yet
# (apt-get, through sudo when not root). Prints what it installs on stderr.
set -eu
missing=""
for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -n "$missing" ] || exit 0
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
echo "installing$missing" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >&2
