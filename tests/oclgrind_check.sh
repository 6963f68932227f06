#!/bin/sh
# Runs a test command on Oclgrind with OCLGRIND_LOG=LOG (the other checks come
# from the environment: tests/CMakeLists.txt) and fails when the command fails
# or when Oclgrind wrote anything to the log: every line it writes there is a
# diagnostic (a data race, an access out of bounds, a divergent barrier, a
# non-uniform write, API misuse).
#     oclgrind_check.sh LOG COMMAND [ARG...]
set -u
log=$1
shift
mkdir -p "$(dirname "$log")"
rm -f "$log"
OCLGRIND_LOG=$log "$@"
rc=$?
if [ -s "$log" ]; then
    echo "oclgrind_check: Oclgrind reported (from $log):"
    head -n 60 "$log"
    exit 1
fi
exit $rc
