"""bench/keyed.sh's driver: kennel's keyed dispatch and Ray Serve's model
multiplexing on the same traces, the same model code (model.py), in one run.
Prints one JSON object per measured run on stdout, progress on stderr.

Every run is bounded: a fixed number of jobs, a timeout per job, and every
process it starts is stopped before the next run.
"""

import argparse
import collections
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
import traces  # noqa: E402

POOL = "models"


def percentile(values, p):
    values = sorted(values)
    k = (len(values) - 1) * p
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def closed_loop(clients, keys, call):
    """`clients` threads sharing one iterator over `keys`: each takes the
    next job, runs it (`call(key, request)`), and takes the next when it is
    answered. Returns the latency of each job in seconds and the wall time."""
    lock = threading.Lock()
    jobs = iter(enumerate(keys))
    latencies = []
    errors = []

    def client():
        while True:
            with lock:
                job = next(jobs, None)
            if job is None or errors:
                return
            i, key = job
            start = time.monotonic()
            try:
                reply = call(key, {"key": key, "i": i})
                if reply.get("key") != key:
                    raise RuntimeError(f"job {i} of key {key!r} answered by key {reply.get('key')!r}")
            except Exception as e:  # noqa: BLE001
                errors.append(f"job {i} ({key}): {e!r}")
                return
            end = time.monotonic()
            with lock:
                latencies.append(end - start)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - started
    if errors:
        raise RuntimeError(f"{len(errors)} job(s) failed: {errors[0]}")
    return latencies, wall


def read_loads(path):
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def keep(args, name, path):
    """Copies a run's loads log into --keep's folder (named after the run)."""
    if args.keep and path.exists():
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(args.keep) / (name.replace(" ", "-") + ".loads.jsonl"))


def summary(keys, latencies, wall, loads):
    """The figures of one run: loads (per 1,000 jobs), loads that began while
    another process was loading the same key, latency and wall time."""
    jobs = len(keys)
    overlapping = 0
    for a in loads:
        if any(b["key"] == a["key"] and b["pid"] != a["pid"] and b["start"] <= a["start"] < b["end"] for b in loads):
            overlapping += 1
    per_key = collections.Counter(load["key"] for load in loads)
    demand = collections.Counter(keys)
    return {
        "jobs": jobs,
        "loads": len(loads),
        "loads_per_1000": round(len(loads) * 1000 / jobs, 1),
        "loads_while_loading_elsewhere": overlapping,
        "p50_ms": round(percentile(latencies, 0.5) * 1000, 1),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 1),
        "max_ms": round(max(latencies) * 1000, 1),
        "wall_s": round(wall, 2),
        "processes": len({load["pid"] for load in loads}),
        # The keys by demand, each with its loads: [key, jobs, loads].
        "per_key": [[k, n, per_key.get(k, 0)] for k, n in demand.most_common()],
    }


# -- kennel ------------------------------------------------------------------


def kennel_config(python, workers, keys_per_worker, loads, extra):
    return "\n".join([
        "[server]",
        'listen = "127.0.0.1:0"',
        "",
        "[[pool]]",
        f'name = "{POOL}"',
        f'argv = ["{python}", "{HERE / "worker.py"}"]',
        f'env = {{ PYTHONPATH = "{ROOT / "sdk" / "python"}", BENCH_KEYED_LOADS = "{loads}" }}',
        'startup = "parallel"',
        f'sizing = {{ kind = "fixed", workers = {workers} }}',
        f"keys_per_worker = {keys_per_worker}",
        "max_waiting = 1024",
        'job_timeout = "5m"',
        *extra,
        "",
    ])


def get_json(host, port, path):
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request("GET", path)
        return json.loads(conn.getresponse().read())
    finally:
        conn.close()


def key_metrics(host, port):
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    out = {}
    for m in re.finditer(r'^(kennel_key_\w+(?<!_bucket))\{[^}]*pool="' + POOL + r'"[^}]*\} (\S+)$', text, re.M):
        out[m.group(1)] = float(m.group(2))
    return out


def told(keys, workers, keys_per_worker):
    """The pool line that keeps the trace's most asked keys warm from the
    start: as many as the workers hold, less one place per two workers
    left for the others (fewer leaves too many keys to reload, more leaves
    too few places to load the rest without long waits)."""
    n = workers * keys_per_worker - workers // 2
    top = [k for k, _ in collections.Counter(keys).most_common(n)]
    return "min_workers_per_key = { " + ", ".join(f"{k} = 1" for k in top) + " }"


def run_kennel(args, keys, workers, keys_per_worker, clients, extra=()):
    with tempfile.TemporaryDirectory(prefix="keyed-") as tmp:
        loads = Path(tmp) / "loads.jsonl"
        cfg = Path(tmp) / "kennel.toml"
        pool = [*args.pool, *extra]
        cfg.write_text(kennel_config(sys.executable, workers, keys_per_worker, loads, pool))
        out = open(Path(tmp) / "stdout", "w+")
        err = open(Path(tmp) / "stderr", "w+")
        server = subprocess.Popen([args.kennel, "serve", "--config", str(cfg)], stdout=out, stderr=err,
                                  env={**os.environ, "RUST_LOG": "error"})
        try:
            url = None
            for _ in range(600):
                out.seek(0)
                m = re.search(r"kennel listening on http://(127\.0\.0\.1):(\d+)", out.read())
                if m:
                    url = (m.group(1), int(m.group(2)))
                    break
                if server.poll() is not None:
                    err.seek(0)
                    raise RuntimeError(f"kennel serve ended at start: {err.read()[-800:]}")
                time.sleep(0.1)
            if url is None:
                raise RuntimeError("kennel serve did not start")
            host, port = url
            for _ in range(600):
                stats = get_json(host, port, f"/pools/{POOL}/stats")
                if stats["idle"] == stats["size"] and stats["starting"] == 0:
                    break
                time.sleep(0.1)
            else:
                raise RuntimeError(f"the pool did not warm up: {stats}")
            local = threading.local()

            def call(key, request):
                if not hasattr(local, "conn"):
                    local.conn = http.client.HTTPConnection(host, port, timeout=600)
                local.conn.request("POST", f"/pools/{POOL}/jobs", json.dumps(request),
                                   {"Content-Type": "application/json", "Kennel-Key": key})
                resp = local.conn.getresponse()
                body = resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"{resp.status}: {body[:300]!r}")
                return json.loads(body)

            latencies, wall = closed_loop(clients, keys, call)
            result = summary(keys, latencies, wall, read_loads(loads))
            keep(args, f"{len(keys)} {workers}x{keys_per_worker} kennel", loads)
            # The pool's own counts of keyed jobs (kennel_key_*_total).
            result["metrics"] = key_metrics(host, port)
            return result
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


# -- Ray Serve ---------------------------------------------------------------


class Ray:
    """Ray started once per script run (on first use) and stopped at its end."""

    def __init__(self, args):
        self.args = args
        self.version = None

    def run(self, keys, workers, keys_per_worker, clients):
        import ray_side

        if self.version is None:
            self.version = ray_side.start()
        with tempfile.TemporaryDirectory(prefix="keyed-ray-") as tmp:
            loads = Path(tmp) / "loads.jsonl"
            handle, max_ongoing = ray_side.deploy(workers, keys_per_worker, str(loads), self.args.ray_max_ongoing)
            try:
                latencies, wall = closed_loop(clients, keys, ray_side.caller(handle))
                result = summary(keys, latencies, wall, read_loads(loads))
                keep(self.args, f"{len(keys)} {workers}x{keys_per_worker} ray", loads)
            finally:
                ray_side.undeploy()
            result["ray"] = self.version
            result["max_ongoing_requests"] = max_ongoing
            return result

    def close(self):
        if self.version is not None:
            import ray_side

            ray_side.stop()


# -- driver ------------------------------------------------------------------


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kennel", required=True)
    p.add_argument("--quick", action="store_true", help="100 and 200 jobs instead of 1,000 and 2,000")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--only", default="", help="a regex over the run names (e.g. 'trace1', 'ray')")
    p.add_argument("--ray-max-ongoing", type=int, default=None,
                   help="requests a Ray replica takes at once (default: Ray's; 1: one at a time, as a kennel worker)")
    p.add_argument("--pool", action="append", default=[], metavar="TOML",
                   help="a line added to kennel's pool table, e.g. 'max_key_wait = \"2s\"' (repeatable)")
    p.add_argument("--keep", metavar="DIR", help="keep each run's loads log in DIR (with --rounds, the last round's)")
    args = p.parse_args()
    # Results only on stdout: Ray's processes write to file descriptor 1,
    # which goes to stderr from here on.
    results = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w")
    n1, n2 = (100, 200) if args.quick else (1000, 2000)
    plans = [
        ("trace1", traces.interleaved(n1), 2, 1, 4),
        ("trace2", traces.zipf(n2), 8, 3, 8),
    ]
    ray = Ray(args)
    systems = [
        ("kennel", lambda *a: run_kennel(args, *a)),
        # kennel told the trace's most asked keys in advance (trace 2): a
        # reference for what knowing the demand ahead is worth.
        ("kennel-told", lambda keys, w, k, c: run_kennel(args, keys, w, k, c, [told(keys, w, k)])),
        ("ray", ray.run),
    ]
    try:
        for rnd in range(1, args.rounds + 1):
            for trace, keys, workers, kpw, clients in plans:
                for system, fn in systems:
                    name = f"{trace} {system}"
                    if args.only and not re.search(args.only, name):
                        continue
                    if system == "kennel-told" and trace != "trace2":
                        continue
                    print(f"[round {rnd}] {name}: {len(keys)} jobs, {workers} workers x {kpw} keys, "
                          f"{clients} clients ...", file=sys.stderr, flush=True)
                    before = loadavg()
                    result = fn(keys, workers, kpw, clients)
                    head = {"round": rnd, "name": name, "trace": trace, "system": system, "workers": workers,
                            "keys_per_worker": kpw, "clients": clients}
                    if system.startswith("kennel") and args.pool:
                        head["pool"] = args.pool
                    if trace == "trace1":
                        # The fewest loads any dispatch can do here.
                        floor = traces.fewest_loads(keys, clients, workers)
                        head["floor_loads_per_1000"] = round(floor * 1000 / len(keys), 1)
                    else:
                        # What counting every past job gives, with no timing.
                        counted = traces.counted_loads(keys, workers * kpw)
                        head["counted_loads_per_1000"] = round(counted * 1000 / len(keys), 1)
                        # ... and what knowing each key's share ahead gives.
                        known = traces.known_loads(keys, workers * kpw)
                        head["known_loads_per_1000"] = round(known * 1000 / len(keys), 1)
                    result = {**head, **result, "load_before": before, "load_after": loadavg()}
                    print(json.dumps(result), file=results, flush=True)
                    print(f"[round {rnd}] {name}: {result['loads_per_1000']} loads/1000 "
                          f"({result['loads_while_loading_elsewhere']} while loading elsewhere), "
                          f"p50 {result['p50_ms']:.0f} ms, p99 {result['p99_ms']:.0f} ms, "
                          f"wall {result['wall_s']:.1f} s (load {before} -> {result['load_after']})",
                          file=sys.stderr, flush=True)
    finally:
        ray.close()


if __name__ == "__main__":
    main()
