#!/usr/bin/env bash
# Many callers, one pool: a steady caller B (one job a second, 30 jobs of
# 100 ms) beside a caller A that floods the pool, on `kennel serve` with a
# pool of 2 demo workers and `max_waiting = 64`:
#
#   alone         B alone
#   flood         A keeps 64 jobs in flight (of 1,000) while B runs
#   prio          B at `Kennel-Priority: high` while A keeps 6 low-priority
#   prio-x10      jobs in flight, then 60 (ten times the load); both with
#                 the service's own token (one caller, no tenant limits)
#   keys-alone    B alone on a keyed pool (bench/fairness/worker.py: a load
#                 of 300 ms, jobs of 100 ms, 2 workers of 2 keys), its key "b"
#   keys-flood    A floods that pool over 50 keys meanwhile
#
# With tenants (the default), A and B are tenants "a" and "b" of weight 1,
# each with `max_queued = 32`; with --before, there are no tenants and both
# use the service's one token (the scenes run on any kennel since the
# asynchronous jobs: a header it does not know is ignored).
#
# A refused job of A (429 or 503) is sent again after its Retry-After (at
# most 1 s). Prints one JSON line per scene (bench/fairness/client.py):
# B's p50 and p99 latency (send to answer, ms), B's refusals, A's jobs done.
#
# B's first job is not counted (it loads B's key on the keyed pool).
#
# Usage: bench/fairness.sh [--before] [--only REGEX]
#        (KENNEL_BIN=path: that kennel instead of building this checkout's)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/common.sh

before=0
only=.
while [ $# -gt 0 ]; do
    case $1 in
        --before) before=1 ;;
        --only) only=$2; shift ;;
        *) die "unknown argument $1" ;;
    esac
    shift
done

if [ -n "${KENNEL_BIN:-}" ]; then
    BIN=$KENNEL_BIN
else
    say "== building target/release/kennel"
    cargo build --release --quiet -p kennel-server --bin kennel
    BIN=$(pwd)/target/release/kennel
fi
PY=$(python3 -c 'import sys; print(sys.executable)')

dir=$(mktemp -d)
server=
cleanup() {
    [ -n "$server" ] && kill -TERM "$server" 2>/dev/null && wait "$server" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT

export BENCH_TOKEN=bench-token-operator BENCH_TOKEN_A=bench-token-a BENCH_TOKEN_B=bench-token-b
if [ "$before" = 1 ]; then
    tenants=
    token_a=$BENCH_TOKEN token_b=$BENCH_TOKEN
else
    tenants='
[[tenant]]
name = "a"
token_env = "BENCH_TOKEN_A"
max_queued = 32

[[tenant]]
name = "b"
token_env = "BENCH_TOKEN_B"
max_queued = 32
'
    token_a=$BENCH_TOKEN_A token_b=$BENCH_TOKEN_B
fi

cat >"$dir/kennel.toml" <<TOML
[server]
listen = "127.0.0.1:0"
run_dir = "$dir/run"
state_dir = "$dir/state"
token_env = "BENCH_TOKEN"
$tenants
[[pool]]
name = "p"
argv = ["$BIN", "worker", "demo", "--warmup", "0s"]
startup = "parallel"
sizing = { kind = "fixed", workers = 2 }
max_waiting = 64
job_timeout = "1m"

[[pool]]
name = "k"
argv = ["$PY", "$(pwd)/bench/fairness/worker.py"]
startup = "parallel"
sizing = { kind = "fixed", workers = 2 }
max_waiting = 64
job_timeout = "1m"
keys_per_worker = 2
TOML
RUST_LOG=error "$BIN" serve --config "$dir/kennel.toml" >"$dir/out" 2>"$dir/err" &
server=$!
for _ in $(seq 300); do
    grep -q "^kennel listening on" "$dir/out" 2>/dev/null && break
    sleep 0.1
done
URL=$(sed -n 's/^kennel listening on \(http:\/\/.*\)$/\1/p' "$dir/out" | head -1)
[ -n "$URL" ] || die "kennel did not start: $(cat "$dir/err")"
for pool in p k; do
    for _ in $(seq 100); do
        idle=$(curl -s -H "Authorization: Bearer $BENCH_TOKEN" "$URL/pools/$pool/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["idle"])')
        [ "$idle" = 2 ] && break
        sleep 0.1
    done
done

scene() { # NAME POOL ARGS...
    local name=$1 pool=$2
    shift 2
    printf '%s\n' "$name" | grep -Eq "$only" || return 0
    say "== $name"
    "$PY" bench/fairness/client.py "$URL" "$pool" "$name" --token-a "$token_a" --token-b "$token_b" "$@"
}

scene alone p
scene flood p --flood 64
scene prio p --flood 6 --token-a "$BENCH_TOKEN" --token-b "$BENCH_TOKEN" --priority-a low --priority-b high
scene prio-x10 p --flood 60 --token-a "$BENCH_TOKEN" --token-b "$BENCH_TOKEN" --priority-a low --priority-b high
scene keys-alone k --key-b b
scene keys-flood k --key-b b --flood 64 --flood-keys 50
