#!/usr/bin/env bash
# Instructions per lend + return of a default pool on one task, counted by
# valgrind's callgrind: repeatable whatever else the machine is doing, so a
# change to the lend path can be compared with the commit before it.
#
#   bench/cycles.sh            this checkout
#   bench/cycles.sh REV        this checkout and REV (built in a worktree
#                              under target/cycles-REV), side by side
set -euo pipefail
cd "$(dirname "$0")/.."

count() { # dir target-dir -> instructions per cycle
    (cd "$1" && CARGO_TARGET_DIR="$2" cargo build --quiet --release -p kennel-bench --example lend_cycles)
    local bin="$2/release/examples/lend_cycles" few many
    few=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" 1000 2>&1 | awk '/refs:/ {gsub(",", "", $4); print $4}')
    many=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" 21000 2>&1 | awk '/refs:/ {gsub(",", "", $4); print $4}')
    echo $(( (many - few) / 20000 ))
}

here=$(count . "$PWD/target")
echo "this checkout: $here instructions per lend + return"
if [ $# -ge 1 ]; then
    tree="$PWD/target/cycles-$1"
    [ -d "$tree" ] || git worktree add --detach "$tree" "$1" >/dev/null
    mkdir -p "$tree/crates/kennel-bench/examples"
    cp crates/kennel-bench/examples/lend_cycles.rs "$tree/crates/kennel-bench/examples/"
    # A commit from before the bench package's shared `Noop` gets the same
    # worker written into the example.
    if ! grep -q "pub struct Noop" "$tree/crates/kennel-bench/src/lib.rs"; then
        {
            echo "use kennel::{BoxError, ExitSignal, Exited, Killer, Worker};"
            sed -n '/^pub struct Noop/,$p' crates/kennel-bench/src/lib.rs
        } > "$tree/crates/kennel-bench/examples/noop.rs.in"
        sed -i 's/^use kennel_bench::Noop;/include!("noop.rs.in");/' "$tree/crates/kennel-bench/examples/lend_cycles.rs"
    fi
    there=$(count "$tree" "$PWD/target/cycles-target")
    echo "$1: $there instructions per lend + return"
fi
