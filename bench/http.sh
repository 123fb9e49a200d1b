#!/usr/bin/env bash
# Requests per second and latency through `kennel serve` on loopback, with a
# pool of two Rust echo workers (examples/workers/echo_worker.rs), driven by
# wrk: one connection (latency), then 32 (throughput). In the same run, at
# one connection, the floor (crates/kennel-bench/examples/http_floor.rs: the
# same HTTP stack and the same echo worker behind a mutex, no pool, no JSON)
# with the same wrk command, the floor with the pool (the same example with
# --pool: the floor's route running the job through a kennel pool, as the
# direct pool does; again with --current-thread, on a runtime with no idle
# thread for hyper to wake, as kennel serve avoids waking it), the HTTP
# exchange alone (the same example with
# --bare: the route answers the body, no job), the raw floor and the raw
# HTTP exchange alone (crates/kennel-bench/examples/http_raw.rs, without
# and with --bare: blocking std sockets and pipes, a thread per connection,
# no async runtime), and the direct pool (examples/pool_echo.rs: the same
# job through a kennel pool, no HTTP).
# KENNEL_HTTP_ROUNDS rounds of the eight, interleaved. Bounded: a fixed
# number of seconds per run, the servers killed at the end.
#
# Prints one line per run, for bench/run.sh:
#   http/c1: rps=... p50_us=... p99_us=... non2xx=... cpu_us=...
#   http/floor-c1: rps=... p50_us=... p99_us=... non2xx=... cpu_us=...
#   http/floor-pool-c1: rps=... p50_us=... p99_us=... non2xx=... cpu_us=...
#   http/floor-pool-ct-c1: rps=... p50_us=... p99_us=... non2xx=... cpu_us=...
#   http/bare-c1: rps=... p50_us=... p99_us=... non2xx=... cpu_us=...
#   http/raw-c1: rps=... p50_us=... p99_us=... non2xx=... cpu_us=...
#   http/raw-bare-c1: rps=... p50_us=... p99_us=... non2xx=... cpu_us=...
#   http/pool-direct: p50_us=... p99_us=... mean_us=...
# and, with more than one round, the medians over the rounds last.
#
# Usage: bench/http.sh   (environment: KENNEL_HTTP_SECONDS, default 10;
#                         KENNEL_HTTP_ROUNDS, default 1; KENNEL_BIN, another
#                         build of kennel to measure)
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_RUN=${KENNEL_HTTP_SECONDS:-10}
ROUNDS=${KENNEL_HTTP_ROUNDS:-1}

. bench/common.sh

need_wrk

say "== building target/release/kennel and the echo worker"
# KENNEL_BIN: another build of kennel to measure (e.g. an earlier commit's).
[ -n "${KENNEL_BIN:-}" ] || cargo build --release --quiet -p kennel-server --bin kennel
cargo build --release --quiet -p kennel-process --example echo_worker
cargo build --release --quiet -p kennel-bench --example http_floor --example http_raw --example pool_echo
BIN=${KENNEL_BIN:-target/release/kennel}
WORKER=$(pwd)/target/release/examples/echo_worker
FLOOR=target/release/examples/http_floor
RAW=target/release/examples/http_raw
POOL_ECHO=target/release/examples/pool_echo

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
"$FLOOR" "$WORKER" > "$dir/floor.stdout" 2> "$dir/floor.stderr" &
floor=$!
"$FLOOR" --pool "$WORKER" > "$dir/floor-pool.stdout" 2> "$dir/floor-pool.stderr" &
floor_pool=$!
"$FLOOR" --current-thread --pool "$WORKER" > "$dir/floor-pool-ct.stdout" 2> "$dir/floor-pool-ct.stderr" &
floor_pool_ct=$!
"$FLOOR" --bare "$WORKER" > "$dir/bare.stdout" 2> "$dir/bare.stderr" &
bare=$!
"$RAW" "$WORKER" > "$dir/raw.stdout" 2> "$dir/raw.stderr" &
raw=$!
"$RAW" --bare "$WORKER" > "$dir/raw-bare.stdout" 2> "$dir/raw-bare.stderr" &
raw_bare=$!
cleanup() {
    kill -TERM "$server" "$floor" "$floor_pool" "$floor_pool_ct" "$bare" "$raw" "$raw_bare" 2>/dev/null || true
    wait "$server" "$floor" "$floor_pool" "$floor_pool_ct" "$bare" "$raw" "$raw_bare" 2>/dev/null || true
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

# The address a floor printed once its worker was ready.
floor_address() { # name pid
    for _ in $(seq 100); do
        grep -q "^floor listening on" "$dir/$1.stdout" 2>/dev/null && break
        kill -0 "$2" 2>/dev/null || { cat "$dir/$1.stderr" >&2; die "the $1 did not start"; }
        sleep 0.1
    done
    local url
    url=$(sed -n 's/^floor listening on \(http:\/\/127\.0\.0\.1:[0-9]*\)$/\1/p' "$dir/$1.stdout")
    [ -n "$url" ] || die "the $1 printed no address"
    echo "$url"
}
floor_url=$(floor_address floor "$floor")
floor_pool_url=$(floor_address floor-pool "$floor_pool")
floor_pool_ct_url=$(floor_address floor-pool-ct "$floor_pool_ct")
bare_url=$(floor_address bare "$bare")
raw_url=$(floor_address raw "$raw")
raw_bare_url=$(floor_address raw-bare "$raw_bare")

# The server's CPU time so far, user and system, in clock ticks: all its
# threads, those that ended included.
cpu_ticks() { # pid
    awk '{print $14 + $15}' "/proc/$1/stat"
}

# One wrk run: the line for bench/run.sh, with the server's CPU time a
# request (the echo worker's, a process of its own, not counted).
run_wrk() { # name connections url server-pid
    local name=$1 c=$2 url=$3 pid=$4 threads out rps p50 p99 non2xx before after requests cpu
    threads=$(( c < 2 ? 1 : 2 ))
    before=$(cpu_ticks "$pid")
    out=$(wrk -t"$threads" -c"$c" -d"${SECONDS_PER_RUN}s" --latency -s "$dir/post.lua" "$url/pools/echo/jobs")
    after=$(cpu_ticks "$pid")
    rps=$(printf '%s\n' "$out" | awk '/^Requests\/sec:/ {print $2}')
    p50=$(printf '%s\n' "$out" | awk '$1 == "50%" {print $2}')
    p99=$(printf '%s\n' "$out" | awk '$1 == "99%" {print $2}')
    non2xx=$(printf '%s\n' "$out" | awk '/Non-2xx/ {print $NF}')
    requests=$(printf '%s\n' "$out" | awk '/requests in/ {print $1}')
    [ -n "$rps" ] && [ -n "$p99" ] && [ -n "$requests" ] || { printf '%s\n' "$out" >&2; die "could not read wrk's output"; }
    cpu=$(python3 -c "import os, sys; print(round((int(sys.argv[2]) - int(sys.argv[1])) / os.sysconf('SC_CLK_TCK') / int(sys.argv[3]) * 1e6, 1))" "$before" "$after" "$requests")
    echo "$name: rps=$rps p50_us=$(to_us "$p50") p99_us=$(to_us "$p99") non2xx=${non2xx:-0} cpu_us=$cpu"
}

results=$dir/results
: > "$results"
for round in $(seq "$ROUNDS"); do
    say "== round $round/$ROUNDS ($(cut -d' ' -f1-3 /proc/loadavg))"
    run_wrk http/c1 1 "$url" "$server" | tee -a "$results"
    run_wrk http/floor-c1 1 "$floor_url" "$floor" | tee -a "$results"
    run_wrk http/floor-pool-c1 1 "$floor_pool_url" "$floor_pool" | tee -a "$results"
    run_wrk http/floor-pool-ct-c1 1 "$floor_pool_ct_url" "$floor_pool_ct" | tee -a "$results"
    run_wrk http/bare-c1 1 "$bare_url" "$bare" | tee -a "$results"
    run_wrk http/raw-c1 1 "$raw_url" "$raw" | tee -a "$results"
    run_wrk http/raw-bare-c1 1 "$raw_bare_url" "$raw_bare" | tee -a "$results"
    # As many jobs as wrk sends in its seconds, about.
    "$POOL_ECHO" "$WORKER" $(( SECONDS_PER_RUN * 5000 )) | sed 's|^pool/direct:|http/pool-direct:|' | tee -a "$results"
    run_wrk http/c32 32 "$url" "$server" | tee -a "$results"
done
if [ "$ROUNDS" -gt 1 ]; then
    python3 - "$results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, fields = line.split(": ", 1)
    runs.setdefault(name, []).append(dict(kv.split("=") for kv in fields.split()))
med = {n: {k: statistics.median(float(r[k]) for r in rs) for k in rs[0]} for n, rs in runs.items()}
k, f, d = med["http/c1"]["p50_us"], med["http/floor-c1"]["p50_us"], med["http/pool-direct"]["p50_us"]
fp, b = med["http/floor-pool-c1"]["p50_us"], med["http/bare-c1"]["p50_us"]
r, rb = med["http/raw-c1"]["p50_us"], med["http/raw-bare-c1"]["p50_us"]
fpc = med["http/floor-pool-ct-c1"]["p50_us"]
def over(a, b):
    return statistics.median(float(x["p50_us"]) - float(y["p50_us"]) for x, y in zip(runs[a], runs[b]))
ratios = [float(a["p50_us"]) / float(b["p50_us"]) for a, b in zip(runs["http/c1"], runs["http/floor-c1"])]
print(f"medians over {len(runs['http/c1'])} rounds: p50 kennel {k:.0f} us, floor {f:.0f} us, "
      f"floor with the pool {fp:.0f} us (on one thread {fpc:.0f} us), HTTP alone {b:.0f} us, raw floor {r:.0f} us, "
      f"raw HTTP alone {rb:.0f} us, direct pool {d:.1f} us; "
      f"kennel / floor {statistics.median(ratios):.2f}; over the direct pool: "
      f"kennel {over('http/c1', 'http/pool-direct'):.0f} us, "
      f"floor {over('http/floor-c1', 'http/pool-direct'):.0f} us, "
      f"floor with the pool {over('http/floor-pool-c1', 'http/pool-direct'):.0f} us "
      f"(on one thread {over('http/floor-pool-ct-c1', 'http/pool-direct'):.0f} us), "
      f"HTTP alone {over('http/bare-c1', 'http/pool-direct'):.0f} us, "
      f"raw floor {over('http/raw-c1', 'http/pool-direct'):.0f} us, "
      f"raw HTTP alone {over('http/raw-bare-c1', 'http/pool-direct'):.0f} us; "
      f"the server's CPU a request at one connection: " + ", ".join(
          f"{label} {med[name]['cpu_us']:.1f} us" for name, label in (
              ("http/c1", "kennel"), ("http/floor-c1", "floor"),
              ("http/floor-pool-c1", "floor with the pool"),
              ("http/floor-pool-ct-c1", "floor with the pool on one thread"), ("http/bare-c1", "HTTP alone"),
              ("http/raw-c1", "raw floor"), ("http/raw-bare-c1", "raw HTTP alone"))),
      file=sys.stderr)
PY
fi
