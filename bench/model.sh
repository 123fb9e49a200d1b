#!/usr/bin/env bash
# A real model served as a user would, against what that user would do
# without kennel: RapidOCR's ONNX models (PyPI `rapidocr-onnxruntime`) over 50
# generated receipt images. Not in CI (it downloads onnxruntime and takes
# many minutes). Measured in one run, rounds interleaved, every other round
# in reverse order:
#
#   cold                 one process per image (load, read, exit)
#   ppe-1, ppe-2, ...    ProcessPoolExecutor(initializer=load) at 1 and 2
#                        workers and max_workers=os.cpu_count()
#   http ...             `kennel serve`, 4 HTTP clients, Fixed(1), Fixed(2)
#                        and hill-climbing, threads = "auto" and "off", and
#                        hill-climbing with replace_on_resize = true and
#                        max_surge = 1; Fixed(2) with the SDK's thread
#                        budget off (the runtimes at their defaults)
#   run ...              the same pools through `kennel run`
#
# The worker (bench/model/ocr.py) has no thread code: under kennel the SDK
# applies the budget. Each result has the worker's own time per image
# (own_p50_ms) beside its rate.
#
# Prints one JSON line per run on stdout (images/s, p50/p95 latency, worker
# RSS, for hill-climbing its time at each size), progress on stderr.
#
# Usage: bench/model.sh [--rounds N] [--pin] [--run-all] [--only REGEX] > target/model-results.jsonl
#        (the rest of run.py's options: --jobs 50 --hc-jobs 150 --cold 10 --clients 4)
set -euo pipefail
cd "$(dirname "$0")/.."

. bench/common.sh
VENV=target/model-venv
if ! "$VENV/bin/python" -c "import rapidocr_onnxruntime, PIL" >/dev/null 2>&1; then
    say "== installing rapidocr-onnxruntime and pillow into $VENV"
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet "rapidocr-onnxruntime==1.4.4" "onnxruntime==1.32.0" pillow
fi
"$VENV/bin/python" -m pip show rapidocr-onnxruntime onnxruntime 2>/dev/null \
    | awk '/^(Name|Version):/ {printf "%s ", $2} END {print ""}' >&2

say "== building target/release/kennel"
cargo build --release --quiet -p kennel-server --bin kennel

IMAGES=target/model-images
if [ "$(ls "$IMAGES"/*.png 2>/dev/null | wc -l)" -lt 50 ]; then
    say "== generating 50 receipt images into $IMAGES"
    "$VENV/bin/python" bench/model/images.py "$IMAGES" 50
fi

say "== machine: $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
exec "$VENV/bin/python" bench/model/run.py --kennel target/release/kennel --images "$IMAGES" "$@"
