#!/usr/bin/env bash
# What 500 `/events` subscribers cost an overloaded `kennel serve`
# (docs/BENCHMARKS.md): wrk drives far more jobs than a 2-worker pool with
# a queue of 4 takes, so most are turned away (503) and every one is a
# pool event; the throughput (answers per second, 200 and 503) is measured
# without subscribers, with SUBSCRIBERS reading `/events` all along, and
# without again, in the same run. The ratio is the run with subscribers
# over the mean of the two without.
#
# Prints, for bench/run.sh:
#   events/0: rps=...
#   events/500: rps=... frames=... lagged=...
#   events/ratio: 0.97
#
# Usage: bench/events.sh   (environment: KENNEL_EVENTS_SECONDS, default 10;
#                           KENNEL_EVENTS_SUBSCRIBERS, default 500)
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_RUN=${KENNEL_EVENTS_SECONDS:-10}
SUBSCRIBERS=${KENNEL_EVENTS_SUBSCRIBERS:-500}

. bench/common.sh

need_wrk

say "== building target/release/kennel"
cargo build --release --quiet -p kennel-server --bin kennel
BIN=target/release/kennel

dir=$(mktemp -d)
cat > "$dir/kennel.toml" <<TOML
[server]
listen = "127.0.0.1:0"

[[pool]]
name = "demo"
argv = ["@kennel", "worker", "demo", "--warmup", "50ms"]
startup = "parallel"
sizing = { kind = "fixed", workers = 2 }
max_waiting = 4
TOML
cat > "$dir/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"iterations": 20000}'
LUA

RUST_LOG=warn "$BIN" serve --config "$dir/kennel.toml" > "$dir/stdout" 2> "$dir/stderr" &
server=$!
subs=""
cleanup() {
    [ -n "$subs" ] && kill -TERM "$subs" 2>/dev/null || true
    kill -TERM "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT

for _ in $(seq 300); do
    grep -q "^kennel listening on" "$dir/stdout" 2>/dev/null && break
    kill -0 "$server" 2>/dev/null || { cat "$dir/stderr" >&2; die "the server did not start"; }
    sleep 0.1
done
url=$(sed -n 's/^kennel listening on \(http:\/\/127\.0\.0\.1:[0-9]*\)$/\1/p' "$dir/stdout")
[ -n "$url" ] || die "no loopback address"
for _ in $(seq 300); do
    idle=$(curl -s "$url/pools/demo/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("idle", 0))' 2>/dev/null || echo 0)
    [ "$idle" = 2 ] && break
    sleep 0.1
done
[ "$idle" = 2 ] || die "the pool did not warm up"

overload() {
    local out rps
    out=$(wrk -t2 -c64 -d"${SECONDS_PER_RUN}s" -s "$dir/post.lua" "$url/pools/demo/jobs")
    rps=$(printf '%s\n' "$out" | awk '/^Requests\/sec:/ {print $2}')
    [ -n "$rps" ] || { printf '%s\n' "$out" >&2; die "could not read wrk's output"; }
    printf '%s\n' "$rps"
}

say "== overload without subscribers"
base1=$(overload)
say "== $SUBSCRIBERS subscribers"
python3 bench/events_subscribers.py "$url" "$SUBSCRIBERS" "$dir/ready" > "$dir/subs.out" &
subs=$!
for _ in $(seq 600); do [ -f "$dir/ready" ] && break; sleep 0.1; done
[ -f "$dir/ready" ] || die "the subscribers did not all connect"
say "== overload with $SUBSCRIBERS subscribers"
with=$(overload)
sleep 1.5   # the last jobs:rejected counts reach the subscribers
kill -TERM "$subs"; wait "$subs" || true; subs=""
read_line=$(cat "$dir/subs.out")
frames=$(printf '%s' "$read_line" | sed -n 's/.*frames=\([0-9]*\).*/\1/p')
lagged=$(printf '%s' "$read_line" | sed -n 's/.*lagged=\([0-9]*\).*/\1/p')
[ "${frames:-0}" -gt 0 ] || die "the subscribers got no event: $read_line"
say "== overload without subscribers, again"
base2=$(overload)

echo "events/0: rps=$base1 then rps=$base2"
echo "events/$SUBSCRIBERS: rps=$with frames=$frames lagged=$lagged"
ratio=$(python3 -c "print(f'{$with / (($base1 + $base2) / 2):.3f}')")
echo "events/ratio: $ratio"
python3 -c "import sys; sys.exit(0 if $ratio >= 0.8 else 1)" \
    || die "$SUBSCRIBERS subscribers cost more than 20% of the throughput (ratio $ratio)"
