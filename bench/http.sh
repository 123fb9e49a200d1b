#!/usr/bin/env bash
# Requests per second and latency through `kennel serve` on loopback, with a
# pool of two Rust echo workers (examples/workers/echo_worker.rs), driven by
# wrk: one connection (latency), then 32 (throughput). Bounded: a fixed
# number of seconds per run, the server killed at the end.
#
# Prints one line per run, for bench/run.sh:
#   http/c1: rps=... p50_us=... p99_us=... non2xx=...
#
# Usage: bench/http.sh   (environment: KENNEL_HTTP_SECONDS, default 10)
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_RUN=${KENNEL_HTTP_SECONDS:-10}

say() { printf '%s\n' "$*" >&2; }
die() { say "http.sh: FAILED: $*"; exit 1; }

if ! command -v wrk >/dev/null 2>&1; then
    say "== installing wrk"
    apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null 2>&1 && apt-get install -y wrk >/dev/null 2>&1; } \
        || die "wrk is missing and could not be installed"
fi

say "== building target/release/kennel and the echo worker"
cargo build --release --quiet -p kennel-server --bin kennel
cargo build --release --quiet -p kennel-process --example echo_worker
BIN=target/release/kennel
WORKER=$(pwd)/target/release/examples/echo_worker

dir=$(mktemp -d)
cat > "$dir/kennel.toml" <<TOML
[server]
listen = "127.0.0.1:0"

[[pool]]
name = "echo"
argv = ["$WORKER"]
startup = "parallel"
sizing = { kind = "fixed", workers = 2 }
max_waiting = 256
TOML

cat > "$dir/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"n": 1, "text": "hello"}'
LUA

RUST_LOG=error "$BIN" serve --config "$dir/kennel.toml" > "$dir/stdout" 2> "$dir/stderr" &
server=$!
cleanup() {
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
[ -n "$url" ] || die "no loopback address in: $(head -1 "$dir/stdout")"
for _ in $(seq 300); do
    idle=$(curl -s "$url/pools/echo/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("idle", 0))' 2>/dev/null || echo 0)
    [ "$idle" = 2 ] && break
    sleep 0.1
done
[ "$idle" = 2 ] || die "the pool did not warm up"
curl -sf -X POST -H 'Content-Type: application/json' -d '{"n":1}' "$url/pools/echo/jobs" >/dev/null \
    || die "a job failed"

# wrk's latency figures to microseconds.
to_us() {
    python3 -c '
import re, sys
v = sys.argv[1]
m = re.fullmatch(r"([0-9.]+)(us|ms|s)", v)
print(round(float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[m.group(2)]))' "$1"
}

for c in 1 32; do
    threads=$(( c < 2 ? 1 : 2 ))
    out=$(wrk -t"$threads" -c"$c" -d"${SECONDS_PER_RUN}s" --latency -s "$dir/post.lua" "$url/pools/echo/jobs")
    rps=$(printf '%s\n' "$out" | awk '/^Requests\/sec:/ {print $2}')
    p50=$(printf '%s\n' "$out" | awk '$1 == "50%" {print $2}')
    p99=$(printf '%s\n' "$out" | awk '$1 == "99%" {print $2}')
    non2xx=$(printf '%s\n' "$out" | awk '/Non-2xx/ {print $NF}')
    [ -n "$rps" ] && [ -n "$p99" ] || { printf '%s\n' "$out" >&2; die "could not read wrk's output"; }
    echo "http/c$c: rps=$rps p50_us=$(to_us "$p50") p99_us=$(to_us "$p99") non2xx=${non2xx:-0}"
done
