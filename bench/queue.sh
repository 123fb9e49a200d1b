#!/usr/bin/env bash
# Pools on many hosts fed by one JetStream work queue, on loopback:
#
# 1. jobs/s with 1, 2 and 3 `kennel serve` instances reading one durable
#    consumer, each with 4 demo workers on sleep-bound jobs (100 ms), so
#    that the 2-core machine is not the limit: 200 jobs per instance,
#    published at once, timed from the first publish to the last answer;
# 2. the end-to-end cost per job of the queue path against direct HTTP at
#    one connection (wrk -c1), on a job that does almost nothing, and the
#    queue alone (publish, run, answer; one job after another).
#
# Prints one line per run:
#   queue/instances=N: jobs=... seconds=... jobs_per_s=... duplicates=...
#   queue/scaling: x2=... x3=...
#   queue/c1: direct_us=... queued_us=... overhead_us=... nats_roundtrip_us=...
#
# Usage: bench/queue.sh   (environment: KENNEL_QUEUE_SECONDS for wrk, default 10)
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_RUN=${KENNEL_QUEUE_SECONDS:-10}
. bench/common.sh

command -v nats-server >/dev/null 2>&1 || die "nats-server is missing (.ci/run installs it)"
command -v wrk >/dev/null 2>&1 || apt-get install -y wrk >/dev/null 2>&1 || die "wrk is missing"

say "== building target/release/kennel and the queue client"
cargo build --release --quiet -p kennel-server --bin kennel
cargo build --release --quiet -p kennel-bench --example queue_client
BIN=$(pwd)/target/release/kennel
CLIENT=$(pwd)/target/release/examples/queue_client

dir=$(mktemp -d)
pids=()
cleanup() {
    # The servers first, gracefully (they need NATS to drain), then NATS.
    for p in "${pids[@]:1}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]:1}"; do wait "$p" 2>/dev/null || true; done
    kill -TERM "${pids[0]}" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

port=$(free_port)
nats-server -js -a 127.0.0.1 -p "$port" -sd "$dir/store" >"$dir/nats.log" 2>&1 &
pids+=($!)
NATS="nats://127.0.0.1:$port"
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done

# start NAME CONFIG: runs kennel serve and waits for its address, left in
# $URL (not in a subshell, so that its pid reaches $pids and is stopped).
start() {
    local name=$1 config=$2
    printf '[server]\nlisten = "127.0.0.1:0"\nrun_dir = "%s/run-%s"\n\n%s' "$dir" "$name" "$config" >"$dir/$name.toml"
    RUST_LOG=error "$BIN" serve --config "$dir/$name.toml" >"$dir/$name.out" 2>"$dir/$name.err" &
    pids+=($!)
    for _ in $(seq 300); do
        grep -q "^kennel listening on" "$dir/$name.out" 2>/dev/null && break
        sleep 0.1
    done
    URL=$(sed -n 's/^kennel listening on \(http:\/\/.*\)$/\1/p' "$dir/$name.out" | head -1)
}

queued() { # POOL WORKERS STREAM SUBJECT
    cat <<TOML
[[pool]]
name = "$1"
argv = ["$BIN", "worker", "demo", "--warmup", "0s"]
startup = "parallel"
sizing = { kind = "fixed", workers = $2 }
job_timeout = "1m"

[pool.queue]
nats = "$NATS"
stream = "$3"
subject = "$4"
TOML
}

declare -A rate
for n in 1 2 3; do
    first=${#pids[@]}
    for i in $(seq "$n"); do
        start "s$n-$i" "$(queued q 4 "SCALE$n" "bench.scale$n")"
        url=$URL
        [ -n "$url" ] || die "instance $i of $n did not start: $(cat "$dir/s$n-$i.err")"
        for _ in $(seq 100); do
            [ "$(curl -s "$url/pools/q/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["idle"])')" = 4 ] && break
            sleep 0.1
        done
    done
    line=$("$CLIENT" drain "$NATS" "bench.scale$n" $((200 * n)) '{"sleep_ms": 100}')
    echo "queue/instances=$n: $line"
    rate[$n]=$(printf '%s\n' "$line" | sed -n 's/.*jobs_per_s=\([0-9.]*\).*/\1/p')
    for p in "${pids[@]:$first}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]:$first}"; do wait "$p" 2>/dev/null || true; done
done
python3 -c "import sys; r1,r2,r3=map(float,sys.argv[1:]); print(f'queue/scaling: x2={r2/r1:.2f} x3={r3/r1:.2f}')" "${rate[1]}" "${rate[2]}" "${rate[3]}"

# One connection: the same tiny job by direct HTTP and through the queue.
start c1 "$(queued q 1 C1 bench.c1)
[[pool]]
name = \"direct\"
argv = [\"$BIN\", \"worker\", \"demo\", \"--warmup\", \"0s\"]
startup = \"parallel\"
sizing = { kind = \"fixed\", workers = 1 }
"
url=$URL
[ -n "$url" ] || die "the one-connection instance did not start: $(cat "$dir/c1.err")"
cat > "$dir/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"iterations": 1}'
LUA
per_job_us() { # PATH: µs per job at one connection, from wrk's requests/s
    local out
    out=$(wrk -t1 -c1 -d"${SECONDS_PER_RUN}s" -s "$dir/post.lua" "$url$1")
    printf '%s\n' "$out" | grep -q "Non-2xx" && { printf '%s\n' "$out" >&2; die "errors on $1"; }
    printf '%s\n' "$out" | awk '/^Requests\/sec:/ {printf "%.0f", 1e6 / $2}'
}
curl -sf -X POST -d '{"iterations": 1}' "$url/pools/q/jobs" >/dev/null || die "a queued job failed"
direct=$(per_job_us /pools/direct/jobs)
queued_us=$(per_job_us /pools/q/jobs)
rt=$("$CLIENT" roundtrip "$NATS" bench.c1 2000 '{"iterations": 1}' | sed -n 's/.*mean_us=\([0-9]*\).*/\1/p')
echo "queue/c1: direct_us=$direct queued_us=$queued_us overhead_us=$((queued_us - direct)) nats_roundtrip_us=$rt"
