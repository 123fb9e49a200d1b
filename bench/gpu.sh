#!/usr/bin/env bash
# GPUs per worker on a machine with NVIDIA GPUs (not in CI; the check of
# docs/concepts/gpus.md on real devices). A pool of `gpus_per_worker = 1`
# workers (bench/gpu/worker.py: a CUDA context and 1 GiB held through
# libcuda.so.1, no package needed), one per GPU, then:
#
#   1. per worker: its slot and pid, the CUDA_VISIBLE_DEVICES and KENNEL_GPU
#      it was given, the device CUDA shows it, and what nvidia-smi reports
#      for its pid (GPU UUID, memory);
#   2. a recycle (`max_jobs = 2`): the times of the retirement, of the old
#      worker's last listing by nvidia-smi, and of its replacement's start,
#      which must not come before the memory is gone.
#
# Usage: bench/gpu.sh [KENNEL_BINARY]   (default target/release/kennel,
#        built if cargo is here). Prints a report on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${1:-target/release/kennel}
if [ ! -x "$BIN" ]; then
    cargo build --release --quiet -p kennel-server --bin kennel
fi
command -v nvidia-smi >/dev/null || { echo "no nvidia-smi: this machine has no NVIDIA driver"; exit 1; }
GPUS=$(nvidia-smi -L | grep -c '^GPU ')
PORT=7979
DIR=$(mktemp -d)
trap 'kill "$SERVER" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$DIR"' EXIT

cat > "$DIR/kennel.toml" <<TOML
[server]
listen = "127.0.0.1:$PORT"

[[pool]]
name = "gpu"
argv = ["python3", "$PWD/bench/gpu/worker.py"]
startup = "parallel"
sizing = { kind = "fixed", workers = $GPUS }
gpus_per_worker = 1
max_jobs = 2
memory_check_every = "1s"
TOML

echo "== machine: $(nproc) cores; $GPUS GPU(s):"
nvidia-smi --query-gpu=index,uuid,name,memory.total,memory.used --format=csv,noheader | sed 's/^/   /'
"$BIN" check --config "$DIR/kennel.toml" | sed -n '/^pool gpu/,$p' | grep -E 'gpus|on GPU|capacity|valid'

"$BIN" serve --config "$DIR/kennel.toml" > "$DIR/serve.log" 2>&1 &
SERVER=$!
url="http://127.0.0.1:$PORT"
for _ in $(seq 1 300); do
    idle=$(curl -sf "$url/pools/gpu/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["idle"])' 2>/dev/null || echo 0)
    [ "$idle" = "$GPUS" ] && break
    sleep 0.2
done
[ "$idle" = "$GPUS" ] || { echo "the workers did not become ready:"; cat "$DIR/serve.log"; exit 1; }
sleep 1.5   # one memory sample: the rows carry each worker's GPU memory

echo "== 1. each worker, as kennel, the worker and nvidia-smi see it"
curl -sf "$url/pools/gpu/workers" > "$DIR/workers.json"
nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader > "$DIR/apps.csv"
python3 - "$DIR/workers.json" "$DIR/apps.csv" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["workers"]
apps = {}
for line in open(sys.argv[2]):
    pid, uuid, used = [f.strip() for f in line.split(",")]
    apps[int(pid)] = (uuid, used)
for w in rows:
    about, gpu = w.get("about") or {}, w.get("gpu") or {}
    smi = apps.get(w["pid"], ("not listed", "-"))
    print(f"   slot {w['slot']} pid {w['pid']}: kennel placed it on GPU {gpu.get('id')} ({gpu.get('uuid')}), "
          f"{gpu.get('memory_bytes')} bytes there by kennel's sample")
    print(f"     the worker was told CUDA_VISIBLE_DEVICES={about.get('cuda_visible_devices')} KENNEL_GPU={about.get('kennel_gpu')}; "
          f"CUDA shows it {about.get('devices_seen')} device: {about.get('device')} {about.get('device_uuid')}")
    print(f"     nvidia-smi for pid {w['pid']}: {smi[0]}, {smi[1]}")
    ok = gpu.get("uuid") == about.get("cuda_visible_devices") == about.get("device_uuid") == smi[0]
    print(f"     {'the same device everywhere' if ok else 'MISMATCH'}")
PY

echo "== 2. a recycle: the replacement starts only once the old worker's memory is gone"
old=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["workers"][0]["pid"])' "$DIR/workers.json")
curl -sN "$url/events?pool=gpu" > "$DIR/events.txt" &
EVENTS=$!
for _ in 1 2; do curl -sf -X POST "$url/pools/gpu/jobs" -d '{"op":"where"}' >/dev/null; done
gone=""
for _ in $(seq 1 200); do
    if ! nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -qx "$old"; then
        gone=$(date +%s.%N); break
    fi
    sleep 0.05
done
sleep 3
kill "$EVENTS" 2>/dev/null || true
python3 - "$DIR/events.txt" "$gone" <<'PY'
import json, sys
gone = float(sys.argv[2]) if sys.argv[2] else None
for line in open(sys.argv[1]):
    if not line.startswith("data:"):
        continue
    e = json.loads(line[5:])
    if e.get("event") in ("worker:retired", "worker:exited", "worker:starting", "worker:ready"):
        print(f"   {e.get('time')} {e['event']} slot {e.get('slot')} {e.get('reason', '')}")
import datetime
at = datetime.datetime.fromtimestamp(gone, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z" if gone else "never (within 10 s)"
print(f"   {at} the old worker's pid is no longer listed by nvidia-smi")
PY
