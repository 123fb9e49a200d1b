#!/usr/bin/env bash
# Keyed dispatch against Ray Serve's model multiplexing, on the same traces
# and the same Python model code (bench/keyed/model.py: a load of 1 s, jobs
# of 20 ms), in one run, each trace on kennel and then on Ray. Not in CI (it
# installs Ray Serve into target/ray-venv and takes many minutes).
#
#   trace1   3 keys interleaved A B A C A B A C ..., 1,000 jobs, 2 workers
#            holding 1 key each, 4 clients
#   trace2   50 keys drawn Zipf(1.1) (random.Random(1)), 2,000 jobs,
#            8 workers holding 3 keys each, 8 clients
#
# Clients are closed-loop threads sharing one iterator over the trace.
# kennel: `kennel serve` with a fixed pool and `keys_per_worker`, jobs through
# POST /pools/models/jobs with a `Kennel-Key` header, the worker
# (bench/keyed/worker.py) loading keys through the SDK's load_key/unload_key.
# Ray: a deployment of that many replicas (Ray's default
# max_ongoing_requests unless --ray-max-ongoing N) with
# @serve.multiplexed(max_num_models_per_replica=K), jobs through a
# DeploymentHandle with .options(multiplexed_model_id=key).
# kennel-told (trace 2 only): kennel told the trace's most asked keys in
# advance (`min_workers_per_key` for all its places but one per two
# workers), a reference for what knowing the demand ahead is worth. Trace
# 1's lines carry floor_loads_per_1000: the fewest loads any dispatch can do
# there (bench/keyed/traces.py, fewest_loads: every choice tried). Trace 2's
# carry counted_loads_per_1000: the loads of a cache of as many places that
# keeps the keys with the most jobs so far, serving one job at a time
# (counted_loads): what learning the demand as it comes costs, timing aside;
# and known_loads_per_1000: the same cache told each key's number of jobs in
# the whole trace ahead (known_loads), what knowing the demand is worth.
#
# Each load appends a line to a file per run, which gives on both sides:
# loads per 1,000 jobs, loads that began while another process was loading
# the same key, and loads per key. Also p50/p99/max latency (ms) and wall
# time (s).
#
# Prints one JSON line per run on stdout, progress on stderr.
#
# Usage: bench/keyed.sh [--quick] [--rounds N] [--only REGEX] [--ray-max-ongoing N]
#                       [--pool 'max_key_wait = "2s"'] [--keep DIR] > target/keyed-results.jsonl
#        --quick: 100 and 200 jobs (for development); --only 'trace1|kennel':
#        the runs whose name ("trace1 kennel", "trace2 ray", ...) matches;
#        --pool: a line added to kennel's pool table (repeatable); --keep:
#        each run's loads log (key, pid, start, end per load) kept in DIR
set -euo pipefail
cd "$(dirname "$0")/.."

. bench/common.sh
RAY_VERSION=2.60.0
VENV=target/ray-venv
if ! "$VENV/bin/python" -c "import ray, ray.serve; assert ray.__version__ == '$RAY_VERSION'" >/dev/null 2>&1; then
    say "== installing ray[serve]==$RAY_VERSION into $VENV"
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet "ray[serve]==$RAY_VERSION"
fi

say "== building target/release/kennel"
cargo build --release --quiet -p kennel-server --bin kennel

say "== machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo); load average $(cut -d' ' -f1-3 /proc/loadavg); ray $RAY_VERSION"
export RAY_USAGE_STATS_ENABLED=0
exec "$VENV/bin/python" bench/keyed/run.py --kennel target/release/kennel "$@"
