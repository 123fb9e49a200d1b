#!/usr/bin/env bash
# Runs every benchmark of docs/BENCHMARKS.md in one go and writes its tables
# (between the bench:begin and bench:end markers) from this run's results.
#
#   bench/run.sh           the full run (about 15 minutes a round)
#   bench/run.sh --quick   shorter measurements (about 6 minutes a round)
#
# KENNEL_BENCH_ROUNDS (default 1) repeats the whole set: the tables then
# show the median over the rounds of each figure, and of each ratio taken
# within a round, which holds up better on a machine shared with other work.
#
# Not part of .ci/run: it takes too long, and its figures mean something only
# on a quiet machine. Run it by hand, with nothing else running.
set -euo pipefail
cd "$(dirname "$0")/.."

QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1
ROUNDS=${KENNEL_BENCH_ROUNDS:-1}

logs=target/bench-logs
rm -rf "$logs" && mkdir -p "$logs"

criterion_args=()
http_seconds=10
if [ "$QUICK" = 1 ]; then
    export KENNEL_BENCH_CYCLES=262144
    criterion_args=(--warm-up-time 1 --measurement-time 3)
    http_seconds=3
fi

{
    echo "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); $(rustc --version); $(date -u +%Y-%m-%d); load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)."
} > "$logs/machine.txt"

cat > "$logs/commands.txt" <<EOF
$( [ "$QUICK" = 1 ] && echo "export KENNEL_BENCH_CYCLES=262144" )
cargo bench -p kennel-bench --bench lend${criterion_args:+ -- ${criterion_args[*]}}
cargo bench -p kennel-bench --bench process${criterion_args:+ -- ${criterion_args[*]}}
cargo bench -p kennel-bench --bench memory${criterion_args:+ -- ${criterion_args[*]}}
KENNEL_HTTP_SECONDS=$http_seconds bench/http.sh
# or all of it, and these tables ($ROUNDS round(s), medians over the rounds):
KENNEL_BENCH_ROUNDS=$ROUNDS bench/run.sh$( [ "$QUICK" = 1 ] && echo " --quick" )
EOF
sed -i '/^$/d' "$logs/commands.txt"

echo "== building"
cargo build --release --quiet -p kennel-process --example echo_worker
cargo bench -p kennel-bench --no-run --quiet 2>/dev/null || cargo bench -p kennel-bench --no-run

for round in $(seq "$ROUNDS"); do
    out="$logs/round-$round"
    mkdir -p "$out"
    for bench in lend process memory; do
        echo "== round $round/$ROUNDS: cargo bench -p kennel-bench --bench $bench"
        cargo bench -p kennel-bench --bench "$bench" -- "${criterion_args[@]}" > "$out/$bench.log" 2>&1
        grep -E '^(lend|echo|cpu|stats|memory)|time:' "$out/$bench.log" || true
    done
    echo "== round $round/$ROUNDS: bench/http.sh"
    KENNEL_HTTP_SECONDS=$http_seconds bench/http.sh 2>&1 | tee "$out/http.log"
    # Keep this round's medians before the next round overwrites them.
    for group in lend_return lend_cancel echo cpu stats; do
        (cd target/criterion && find "$group" -path '*/new/*' \( -name estimates.json -o -name benchmark.json \) \
            -exec install -D {} "../../$out/criterion/{}" \;)
    done
done

echo "== docs/BENCHMARKS.md"
python3 bench/tables.py "$logs"
