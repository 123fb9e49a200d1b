#!/usr/bin/env bash
# Wait for a worker while workers are recycled: 4 Python workers that take
# 2 s to warm up, ~75% load, jobs of 20-50 ms; no recycling, max_jobs with
# max_surge = 0 (retire, then start) and max_jobs with max_surge = 1, in
# one run (release build). The table goes to docs/BENCHMARKS.md.
#
#   bench/recycle.sh [SECONDS per run, default 60]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v python3 >/dev/null || { echo "python3 is needed" >&2; exit 1; }
cargo build --quiet --release -p kennel-bench --example recycle
exec target/release/examples/recycle "${1:-60}"
