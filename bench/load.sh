#!/usr/bin/env bash
# Load test of the real `kennel serve` binary, on loopback only, bounded in
# count and time (docs/RELIABILITY.md):
#
# 1. starts target/release/kennel with a small pool (2 demo workers, a queue
#    of 4) on 127.0.0.1 and a free port, with a bearer token;
# 2. checks that a job without the token is 401 and /healthz is open;
# 3. sends ROUNDS rounds of COUNT jobs, CONCURRENCY at a time, far beyond
#    what the queue holds (bench/load_client.py): every answer must be 200
#    with the job's own reply, or 503 `queue-depth` with Retry-After;
# 4. runs wrk for WRK_SECONDS against the same route (bench/load.lua): only
#    200 and 503-with-Retry-After may come back;
# 5. samples the server's resident memory all along: it must stay under
#    RSS_LIMIT_MB and must not grow from round to round;
# 6. sends SIGTERM: the server must exit 0 and no worker process (by pid and
#    by process group) may remain; its log may show no panic.
#
# Usage: bench/load.sh            (environment: KENNEL_LOAD_ROUNDS, _COUNT,
#                                  _CONCURRENCY, _WRK_SECONDS, _RSS_LIMIT_MB)
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${KENNEL_LOAD_ROUNDS:-3}
COUNT=${KENNEL_LOAD_COUNT:-2000}
CONCURRENCY=${KENNEL_LOAD_CONCURRENCY:-48}
WRK_SECONDS=${KENNEL_LOAD_WRK_SECONDS:-5}
RSS_LIMIT_MB=${KENNEL_LOAD_RSS_LIMIT_MB:-200}
SLEEP_MS=20

. bench/common.sh

say "== building target/release/kennel"
cargo build --release --quiet -p kennel-server --bin kennel
BIN=target/release/kennel

if ! command -v wrk >/dev/null 2>&1; then
    say "== installing wrk"
    apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null 2>&1 && apt-get install -y wrk >/dev/null 2>&1; } || true
fi

dir=$(mktemp -d)
cat > "$dir/kennel.toml" <<TOML
[server]
listen = "127.0.0.1:0"
token_env = "KENNEL_LOAD_TOKEN"
body_limit = "64KiB"
shutdown_grace = "5s"

[[pool]]
name = "load"
argv = ["@kennel", "worker", "demo", "--warmup", "50ms"]
startup = "parallel"
sizing = { kind = "fixed", workers = 2 }
max_waiting = 4
job_timeout = "10s"
warmup_timeout = "10s"
job_grace = "5s"
TOML

KENNEL_LOAD_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
export KENNEL_LOAD_TOKEN
RUST_LOG=warn "$BIN" serve --config "$dir/kennel.toml" > "$dir/stdout" 2> "$dir/stderr" &
server=$!

# Every process below `pid`, from the parent links in /proc.
descendants() {
    local frontier="$1" found="" next p
    while [ -n "$frontier" ]; do
        next=""
        for f in $frontier; do
            for s in /proc/[0-9]*/stat; do
                p=${s#/proc/}; p=${p%/stat}
                if [ "$(awk '{print $4}' "$s" 2>/dev/null)" = "$f" ]; then
                    found="$found $p"; next="$next $p"
                fi
            done
        done
        frontier=$next
    done
    echo "$found"
}

# Whether `pid` runs (a zombie does not count).
alive() {
    local state
    state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
    [ -n "$state" ] && [ "$state" != "Z" ] && [ "$state" != "X" ]
}

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

workers=""
cleanup() {
    [ -n "${sampler:-}" ] && kill "$sampler" 2>/dev/null || true
    if alive "$server"; then kill -KILL "$server" 2>/dev/null || true; fi
    for w in $workers; do alive "$w" && kill -KILL "$w" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap cleanup EXIT

for _ in $(seq 300); do
    grep -q "^kennel listening on" "$dir/stdout" 2>/dev/null && break
    alive "$server" || { cat "$dir/stderr" >&2; die "the server did not start"; }
    sleep 0.1
done
url=$(sed -n 's/^kennel listening on \(http:\/\/127\.0\.0\.1:[0-9]*\)$/\1/p' "$dir/stdout")
[ -n "$url" ] || die "no loopback address in: $(head -1 "$dir/stdout")"
port=${url##*:}
say "== server $server on $url"

auth=(-H "Authorization: Bearer $KENNEL_LOAD_TOKEN")
for _ in $(seq 300); do
    idle=$(curl -s "${auth[@]}" "$url/pools/load/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("idle", 0))' 2>/dev/null || echo 0)
    [ "$idle" = 2 ] && break
    sleep 0.1
done
[ "$idle" = 2 ] || die "the pool did not warm up"

# Without the token: 401 with a JSON error; /healthz stays open.
code=$(curl -s -o "$dir/body" -w '%{http_code}' -X POST "$url/pools/load/jobs" -d '{}')
[ "$code" = 401 ] && grep -q '"unauthorized"' "$dir/body" || die "a job without the token got $code: $(cat "$dir/body")"
code=$(curl -s -o "$dir/body" -w '%{http_code}' -X POST -H "Authorization: Bearer wrong" "$url/pools/load/jobs" -d '{}')
[ "$code" = 401 ] || die "a job with a wrong token got $code"
code=$(curl -s -o /dev/null -w '%{http_code}' "$url/healthz")
[ "$code" = 200 ] || die "/healthz got $code"

workers=$(descendants "$server")
[ -n "$workers" ] || die "no worker process found"

# Resident memory, sampled every 200 ms.
( while alive "$server"; do rss_kb "$server"; sleep 0.2; done ) > "$dir/rss" &
sampler=$!

results=()
round_rss=()
for round in $(seq "$ROUNDS"); do
    out=$(timeout 300 python3 bench/load_client.py 127.0.0.1 "$port" load "$KENNEL_LOAD_TOKEN" "$COUNT" "$CONCURRENCY" "$SLEEP_MS") \
        || die "round $round: $out"
    results+=("$out")
    round_rss+=("$(rss_kb "$server")")
    say "round $round: $out; rss $(( ${round_rss[-1]} / 1024 )) MiB"
done

wrk_line=""
if command -v wrk >/dev/null 2>&1; then
    wrk_out=$(timeout $((WRK_SECONDS + 60)) wrk -t2 -c64 -d"${WRK_SECONDS}s" --timeout 10s -s bench/load.lua "${auth[@]}" "$url/pools/load/jobs")
    wrk_line=$(printf '%s\n' "$wrk_out" | sed -n 's/^WRK //p')
    reqs=$(printf '%s\n' "$wrk_out" | sed -n 's/^Requests\/sec: *//p')
    say "wrk ${WRK_SECONDS}s: $wrk_line, $reqs requests/s"
    python3 - "$wrk_line" <<'PY' || die "wrk saw answers other than 200 and 503 with Retry-After: $wrk_line"
import json, sys
r = json.loads(sys.argv[1])
ok = set(r["statuses"]) <= {"200", "503"} and r["503_without_retry_after"] == 0 and r["socket_errors"] == 0
sys.exit(0 if ok else 1)
PY
else
    say "wrk is not installed: its phase is skipped"
fi

# The queue drains: nothing lent, nothing waiting.
for _ in $(seq 100); do
    stats=$(curl -s "${auth[@]}" "$url/pools/load/stats")
    echo "$stats" | python3 -c 'import json,sys; s=json.load(sys.stdin); sys.exit(0 if s["lent"]==0 and s["waiting"]==0 else 1)' && break
    sleep 0.1
done
workers="$workers $(descendants "$server")"

max_rss=$(sort -n "$dir/rss" | tail -1)
first=${round_rss[0]}; last=${round_rss[-1]}
say "rss: max $((max_rss / 1024)) MiB, after round 1 $((first / 1024)) MiB, after round $ROUNDS $((last / 1024)) MiB"
[ "$max_rss" -lt $((RSS_LIMIT_MB * 1024)) ] || die "resident memory reached $((max_rss / 1024)) MiB"
# Bounded: the last round may not hold more than the first plus 8 MiB or 25%.
allowed=$(( first + (first / 4 > 8192 ? first / 4 : 8192) ))
[ "$last" -le "$allowed" ] || die "memory grew from $first kB to $last kB over the rounds"

say "== SIGTERM"
kill -TERM "$server"
for _ in $(seq 300); do alive "$server" || break; sleep 0.1; done
alive "$server" && die "the server still runs 30 s after SIGTERM"
set +e; wait "$server"; status=$?; set -e
[ "$status" = 0 ] || die "the server exited with $status"
for _ in $(seq 100); do
    left=""
    for w in $workers; do alive "$w" && left="$left $w"; done
    # Anything left in a worker's process group.
    for s in /proc/[0-9]*/stat; do
        g=$(awk '{print $5}' "$s" 2>/dev/null) || continue
        for w in $workers; do [ "$g" = "$w" ] && left="$left ${s#/proc/}"; done
    done
    [ -z "$left" ] && break
    sleep 0.1
done
[ -z "$left" ] || die "worker processes left after SIGTERM:$left"

# No panic anywhere in the server, also in tasks the runtime caught.
if grep -q "panicked" "$dir/stderr"; then die "the server panicked: $(grep -m1 -A2 panicked "$dir/stderr")"; fi

nworkers=$(echo $workers | tr ' ' '\n' | sort -u | wc -l)
printf '\nload.sh: passed\n'
printf '  rounds: %s x %s jobs, %s at a time (each job sleeps %s ms)\n' "$ROUNDS" "$COUNT" "$CONCURRENCY" "$SLEEP_MS"
for r in "${results[@]}"; do printf '    %s\n' "$r"; done
[ -n "$wrk_line" ] && printf '  wrk -t2 -c64 -d%ss: %s, %s requests/s\n' "$WRK_SECONDS" "$wrk_line" "$reqs"
printf '  server rss: max %s MiB; after round 1 %s MiB, after round %s %s MiB\n' "$((max_rss / 1024))" "$((first / 1024))" "$ROUNDS" "$((last / 1024))"
printf '  SIGTERM: exit 0, %s worker processes, none left\n' "$nworkers"
