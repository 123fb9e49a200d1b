"""The real-model benchmark's driver (bench/model.sh runs it): RapidOCR over
generated receipts, as a user would run it without kennel and through kennel,
in one run, rounds interleaved. Prints one JSON object per measured run on
stdout (and a table at the end on stderr).

Every run is bounded: a fixed number of jobs, a timeout per job, and every
process it starts is stopped before the next run.
"""

import argparse
import http.client
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import ocr  # noqa: E402

ROOT = HERE.parent.parent


def percentile(values, p):
    values = sorted(values)
    if not values:
        return None
    k = (len(values) - 1) * p
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def children(ppid, needle):
    """The pids of ppid's children whose command line holds `needle`."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent != ppid:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        if needle in cmd:
            out.append(int(entry))
    return out


class RssWatch:
    """Samples the resident memory of `ppid`'s workers every 0.5 s: the
    mean over workers of each one's largest sample."""

    def __init__(self, ppid, needle):
        self.ppid, self.needle = ppid, needle
        self.peak = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.wait(0.5):
            self.sample()

    def sample(self):
        for pid in children(self.ppid, self.needle):
            rss = rss_mib(pid)
            if rss:
                self.peak[pid] = max(self.peak.get(pid, 0), rss)

    def finish(self):
        self.sample()
        self.stop.set()
        self.thread.join()
        return statistics.mean(self.peak.values()) if self.peak else None


def closed_loop(clients, paths, call):
    """`clients` threads, each calling `call(path)` for the next image until
    all of `paths` are done; `call` returns the worker's own seconds for the
    image. Returns [(start, end, own seconds)] per job."""
    lock = threading.Lock()
    queue = list(paths)
    spans = []
    errors = []

    def client():
        while True:
            with lock:
                if not queue:
                    return
                path = queue.pop()
            start = time.monotonic()
            try:
                own = call(path)
            except Exception as e:  # noqa: BLE001
                errors.append(repr(e))
                return
            end = time.monotonic()
            with lock:
                spans.append((start, end, own))

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"{len(errors)} job(s) failed: {errors[0]}")
    return spans


def summary(spans, extra=None):
    t0 = min(s for s, _, _ in spans)
    t1 = max(e for _, e, _ in spans)
    lat = [e - s for s, e, _ in spans]
    own = [o for _, _, o in spans if o is not None]
    out = {
        "jobs": len(spans),
        "images_per_s": len(spans) / (t1 - t0),
        "p50_ms": percentile(lat, 0.5) * 1000,
        "p95_ms": percentile(lat, 0.95) * 1000,
        "own_p50_ms": percentile(own, 0.5) * 1000 if own else None,
    }
    out.update(extra or {})
    return out


def images(directory, n):
    paths = sorted(str(p.resolve()) for p in Path(directory).glob("*.png"))
    return [paths[i % len(paths)] for i in range(n)]


# -- peers -------------------------------------------------------------------


def run_cold(args):
    lat = []
    for path in images(args.images, args.cold)[: args.cold]:
        start = time.monotonic()
        subprocess.run([sys.executable, str(HERE / "cold.py"), path], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
        lat.append(time.monotonic() - start)
    return {
        "jobs": len(lat),
        "images_per_s": len(lat) / sum(lat),
        "p50_ms": percentile(lat, 0.5) * 1000,
        "p95_ms": percentile(lat, 0.95) * 1000,
    }


def _warm(_):
    time.sleep(1.0)
    return os.getpid()


def run_pool(args, workers):
    with ProcessPoolExecutor(max_workers=workers, initializer=ocr.load) as ex:
        # Start and load every process before measuring, as kennel's pools
        # are warm before their runs are measured.
        pids = set(ex.map(_warm, range(workers)))
        watch = RssWatch(os.getpid(), "")
        spans = closed_loop(args.clients, images(args.images, args.jobs),
                            lambda p: ex.submit(ocr.read, p).result(timeout=300)["seconds"])
        rss = watch.finish()
    return summary(spans, {"workers": workers, "processes": len(pids), "rss_mib": rss})


# -- kennel ------------------------------------------------------------------


def config(sizing, threads, pin, replace=False, sdk_budget=True):
    python = sys.executable
    lines = [
        "[server]",
        'listen = "127.0.0.1:0"',
        "",
        "[[pool]]",
        'name = "ocr"',
        f'argv = ["{python}", "{HERE / "worker.py"}"]',
        f'env = {{ PYTHONPATH = "{ROOT / "sdk" / "python"}"'
        + ("" if sdk_budget else ', BENCH_SDK_BUDGET = "off"') + " }",
        'startup = "parallel"',
        f"sizing = {sizing}",
        f'threads = "{threads}"' if threads in ("auto", "off") else f"threads = {threads}",
        "max_waiting = 64",
        'job_timeout = "5m"',
        'warmup_timeout = "5m"',
    ]
    if pin:
        lines.append("pin = true")
    if replace:
        # Each size at its own budget, the old worker serving meanwhile.
        lines += ["replace_on_resize = true", "max_surge = 1"]
    return "\n".join(lines) + "\n"


SIZINGS = {
    "fixed-1": '{ kind = "fixed", workers = 1 }',
    "fixed-2": '{ kind = "fixed", workers = 2 }',
    "hill-climbing": '{ kind = "hill-climbing", memory_per_worker = "512MiB" }',
}


def get_json(url, path):
    host, port = url.split("//")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", path)
    body = conn.getresponse().read()
    conn.close()
    return json.loads(body)


def run_http(args, sizing, threads, pin, replace=False, sdk_budget=True):
    n = args.hc_jobs if sizing == "hill-climbing" else args.jobs
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "kennel.toml"
        cfg.write_text(config(SIZINGS[sizing], threads, pin, replace, sdk_budget))
        out = open(Path(tmp) / "stdout", "w+")
        server = subprocess.Popen([args.kennel, "serve", "--config", str(cfg)], stdout=out,
                                  stderr=subprocess.DEVNULL, env={**os.environ, "RUST_LOG": "error"})
        events = None
        try:
            url = None
            for _ in range(600):
                out.seek(0)
                m = re.search(r"kennel listening on (http://127\.0\.0\.1:\d+)", out.read())
                if m:
                    url = m.group(1)
                    break
                if server.poll() is not None:
                    raise RuntimeError("kennel serve ended at start")
                time.sleep(0.1)
            if url is None:
                raise RuntimeError("kennel serve did not start")
            for _ in range(3000):
                stats = get_json(url, "/pools/ocr/stats")
                if stats["idle"] == stats["size"] and stats["starting"] == 0:
                    break
                time.sleep(0.1)
            else:
                raise RuntimeError(f"the pool did not warm up: {stats}")
            events = subprocess.Popen(["curl", "-sN", f"{url}/events?pool=ocr"],
                                      stdout=open(Path(tmp) / "events", "w"),
                                      stderr=subprocess.DEVNULL)
            sizes = []
            stop = threading.Event()

            def poll():
                while not stop.wait(0.25):
                    try:
                        sizes.append((time.monotonic(), get_json(url, "/pools/ocr/stats")["size"]))
                    except OSError:
                        pass

            poller = threading.Thread(target=poll, daemon=True)
            poller.start()
            watch = RssWatch(server.pid, "worker.py")
            host, port = url.split("//")[1].split(":")
            local = threading.local()

            def call(path):
                if not hasattr(local, "conn"):
                    local.conn = http.client.HTTPConnection(host, int(port), timeout=300)
                local.conn.request("POST", "/pools/ocr/jobs", json.dumps({"image": path}),
                                   {"Content-Type": "application/json"})
                resp = local.conn.getresponse()
                body = resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"{resp.status}: {body[:200]!r}")
                return json.loads(body).get("seconds")

            spans = closed_loop(args.clients, images(args.images, n), call)
            rss = watch.finish()
            stop.set()
            poller.join()
            result = summary(spans, {"rss_mib": rss})
            if sizing == "hill-climbing":
                result.update(learning(spans, sizes))
                time.sleep(0.3)
                result["events"] = sizing_events(Path(tmp) / "events")
            return result
        finally:
            if events is not None:
                events.terminate()
                events.wait()
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def learning(spans, sizes, first=60.0):
    """After the first minute of load: the rate, and the share of time at
    each size."""
    t0 = min(s for s, _, _ in spans)
    t1 = max(e for _, e, _ in spans)
    after = t0 + first
    done = [e for _, e, _ in spans if e > after]
    out = {"after_first_minute_s": max(0.0, t1 - after)}
    if t1 > after and done:
        out["images_per_s_after_first_minute"] = len(done) / (t1 - after)
    at = {}
    for (ta, size), (tb, _) in zip(sizes, sizes[1:]):
        lo, hi = max(ta, after), min(tb, t1)
        if hi > lo:
            at[size] = at.get(size, 0.0) + (hi - lo)
    total = sum(at.values())
    out["time_at_size_after_first_minute"] = {str(k): v / total for k, v in sorted(at.items())} if total else {}
    whole = {}
    for (ta, size), (tb, _) in zip(sizes, sizes[1:]):
        lo, hi = max(ta, t0), min(tb, t1)
        if hi > lo:
            whole[size] = whole.get(size, 0.0) + (hi - lo)
    total = sum(whole.values())
    out["time_at_size"] = {str(k): v / total for k, v in sorted(whole.items())} if total else {}
    return out


def sizing_events(path):
    out = []
    event = None
    for line in Path(path).read_text().splitlines():
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: ") and event in ("sizing:trial", "sizing:step"):
            data = json.loads(line[6:])
            out.append({k: data.get(k) for k in ("event", "from", "tried", "to", "verdict", "figures")})
    return out


def run_cli(args, sizing, threads, pin):
    n = args.hc_jobs if sizing == "hill-climbing" else args.jobs
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "kennel.toml"
        cfg.write_text(config(SIZINGS[sizing], threads, pin))
        jobs = Path(tmp) / "jobs.jsonl"
        jobs.write_text("".join(json.dumps({"image": p}) + "\n" for p in images(args.images, n)))
        proc = subprocess.Popen([args.kennel, "run", "--config", str(cfg), "--quiet",
                                 "--concurrency", str(args.clients), "--output",
                                 str(Path(tmp) / "out.jsonl"), str(jobs)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "RUST_LOG": "error"})
        watch = RssWatch(proc.pid, "worker.py")
        _, err = proc.communicate(timeout=3600)
        rss = watch.finish()
        m = re.search(r"(\d+) jobs: (\d+) ok, (\d+) failed in ([0-9.]+)s \(([0-9.]+) jobs/s after a ([0-9.]+)s warm-up\)", err)
        if proc.returncode != 0 or not m:
            raise RuntimeError(f"kennel run failed ({proc.returncode}): {err[-500:]}")
        own = [json.loads(line).get("seconds") for line in (Path(tmp) / "out.jsonl").open()]
        own = [o for o in own if o is not None]
        return {"jobs": int(m.group(2)), "images_per_s": float(m.group(5)),
                "wall_s": float(m.group(4)), "warmup_s": float(m.group(6)), "rss_mib": rss,
                "own_p50_ms": percentile(own, 0.5) * 1000 if own else None}


def scenarios(args):
    out = [("cold", lambda: run_cold(args))]
    cpus = os.cpu_count()
    for n in sorted({1, 2, cpus}):
        label = f"ppe-{n}" + (" (cpu_count)" if n == cpus else "")
        out.append((label, lambda n=n: run_pool(args, n)))
    combos = [(s, t, False) for s in ("fixed-1", "fixed-2", "hill-climbing") for t in ("auto", "off")]
    if args.pin:
        combos += [("fixed-2", "auto", True), ("hill-climbing", "auto", True)]
    for s, t, pin in combos:
        tag = f"{s} threads={t}" + (" pin" if pin else "")
        out.append((f"http {tag}", lambda s=s, t=t, pin=pin: run_http(args, s, t, pin)))
    # The SDK's budget off: each worker's runtimes at their defaults.
    out.append(("http fixed-2 threads=auto sdk-budget=off",
                lambda: run_http(args, "fixed-2", "auto", False, sdk_budget=False)))
    # Each size at its own thread budget: running workers replaced on a resize.
    out.append(("http hill-climbing threads=auto replace_on_resize max_surge=1",
                lambda: run_http(args, "hill-climbing", "auto", False, True)))
    for s, t, pin in combos:
        if args.run_all or (s, t) in (("fixed-1", "auto"), ("fixed-2", "auto"), ("fixed-2", "off"), ("hill-climbing", "auto")):
            tag = f"{s} threads={t}" + (" pin" if pin else "")
            out.append((f"run {tag}", lambda s=s, t=t, pin=pin: run_cli(args, s, t, pin)))
    return out


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kennel", required=True)
    p.add_argument("--images", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--jobs", type=int, default=50)
    p.add_argument("--hc-jobs", type=int, default=150)
    p.add_argument("--cold", type=int, default=10)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--pin", action="store_true")
    p.add_argument("--run-all", action="store_true")
    p.add_argument("--only", default="")
    args = p.parse_args()
    runs = scenarios(args)
    if args.only:
        runs = [(n, f) for n, f in runs if re.search(args.only, n)]
    for rnd in range(1, args.rounds + 1):
        # Alternating order: no contender always runs first, or after the
        # same neighbour.
        for name, fn in runs if rnd % 2 else reversed(runs):
            before = loadavg()
            started = time.monotonic()
            result = fn()
            result.update({"round": rnd, "name": name, "load_before": before,
                           "load_after": loadavg(), "seconds": time.monotonic() - started})
            print(json.dumps(result), flush=True)
            print(f"[round {rnd}] {name}: {result['images_per_s']:.2f} images/s "
                  f"(load {before} -> {result['load_after']})", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
