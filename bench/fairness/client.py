"""bench/fairness.sh's callers, over plain HTTP/1.1 (one connection per job).

    client.py URL POOL SCENE [options]

A steady caller B sends one job every --every seconds, --jobs of them, and
reports its latencies (send to answer) and how many were refused. With
--flood N, a second caller A keeps N jobs in flight meanwhile (a job
refused with 429 or 503 is sent again after its Retry-After, at most 1 s),
until B is done; --flood-keys K gives A's jobs K keys (`Kennel-Key`).
Prints one JSON line.
"""

import argparse
import http.client
import json
import threading
import time
import urllib.parse


def post(url, path, body, headers):
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json", **headers})
        r = conn.getresponse()
        r.read()
        return r.status, r.getheader("Retry-After")
    finally:
        conn.close()


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("pool")
    ap.add_argument("scene")
    ap.add_argument("--jobs", type=int, default=30)
    ap.add_argument("--every", type=float, default=1.0)
    ap.add_argument("--sleep-ms", type=int, default=100)
    ap.add_argument("--token-a", default="")
    ap.add_argument("--token-b", default="")
    ap.add_argument("--flood", type=int, default=0)
    ap.add_argument("--flood-total", type=int, default=1000)
    ap.add_argument("--flood-keys", type=int, default=0)
    ap.add_argument("--key-b", default="")
    ap.add_argument("--priority-a", default="")
    ap.add_argument("--priority-b", default="")
    a = ap.parse_args()
    path = f"/pools/{a.pool}/jobs"
    body = {"sleep_ms": a.sleep_ms}

    def headers(token, priority, key):
        h = {}
        if token:
            h["Authorization"] = f"Bearer {token}"
        if priority:
            h["Kennel-Priority"] = priority
        if key:
            h["Kennel-Key"] = key
        return h

    stop = threading.Event()
    flood_done = [0]
    flood_refusals = [0]
    next_job = [0]
    lock = threading.Lock()

    def flooder():
        while not stop.is_set():
            with lock:
                n = next_job[0]
                if n >= a.flood_total:
                    return
                next_job[0] += 1
            key = f"a{n % a.flood_keys}" if a.flood_keys else ""
            h = headers(a.token_a, a.priority_a, key)
            while not stop.is_set():
                status, retry = post(a.url, path, body, h)
                if status in (429, 503):
                    with lock:
                        flood_refusals[0] += 1
                    stop.wait(min(float(retry or 1), 1.0))
                    continue
                with lock:
                    flood_done[0] += 1
                break

    floods = [threading.Thread(target=flooder, daemon=True) for _ in range(a.flood)]
    for t in floods:
        t.start()
    if a.flood:
        time.sleep(2)  # the flood fills the queue first

    # B's first job, not counted: it loads B's key on a keyed pool.
    post(a.url, path, body, headers(a.token_b, a.priority_b, a.key_b))

    latencies, refused, failed = [], [0], [0]

    def one():
        t0 = time.monotonic()
        status, _ = post(a.url, path, body, headers(a.token_b, a.priority_b, a.key_b))
        took = (time.monotonic() - t0) * 1000
        with lock:
            if status == 200:
                latencies.append(took)
            elif status in (429, 503):
                refused[0] += 1
            else:
                failed[0] += 1

    start = time.monotonic()
    sends = []
    for i in range(a.jobs):
        time.sleep(max(0.0, start + i * a.every - time.monotonic()))
        t = threading.Thread(target=one)
        t.start()
        sends.append(t)
    for t in sends:
        t.join()
    stop.set()
    for t in floods:
        t.join()
    print(json.dumps({
        "scene": a.scene,
        "b_jobs": a.jobs,
        "b_ok": len(latencies),
        "b_refused": refused[0],
        "b_failed": failed[0],
        "b_p50_ms": round(pct(latencies, 0.5) or 0, 1),
        "b_p99_ms": round(pct(latencies, 0.99) or 0, 1),
        "a_done": flood_done[0],
        "a_refusals": flood_refusals[0],
    }), flush=True)


if __name__ == "__main__":
    main()
