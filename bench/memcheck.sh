#!/usr/bin/env bash
# Runs every test binary of the pool core (crates/kennel) under valgrind's
# memcheck (docs/RELIABILITY.md): an invalid read or write, a use of
# uninitialised memory or a definite leak fails the run.
#
# Usage: bench/memcheck.sh [extra args for the test binaries]
# (PROPTEST_CASES defaults to 32 here: valgrind runs ~30x slower.)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "memcheck.sh: valgrind is not installed" >&2; exit 2; }
export PROPTEST_CASES=${PROPTEST_CASES:-32}

bins=$(cargo test -p kennel --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"])')
failed=0
for bin in $bins; do
    name=$(basename "$bin")
    log=$(mktemp)
    if valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
        --show-leak-kinds=definite "$bin" --test-threads=1 "$@" > "$log" 2>&1; then
        echo "ok     $name: $(grep -E '^test result' "$log" | tail -1)"
    else
        echo "FAILED $name"; tail -40 "$log"; failed=1
    fi
    rm -f "$log"
done
exit $failed
