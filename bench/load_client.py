#!/usr/bin/env python3
"""A bounded load client for bench/load.sh (standard library only).

Sends COUNT job requests, CONCURRENCY at a time, to one pool of a kennel
server on loopback, each a demo job that sleeps SLEEP_MS and sums
`iterations` square roots (a number unique to the request). It checks every
answer:

- 200: the demo worker's reply for this very request (`done`, `iterations`);
- 503: `Retry-After` present, body `{"error": "rejected", "reason": "queue-depth"}`;
- anything else, or a connection that fails or times out, is a failure.

It prints one JSON line of counts and latencies and exits 1 on any failure.
"""

import http.client
import json
import sys
import threading
import time


def main():
    host, port, pool, token = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    count, concurrency, sleep_ms = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
    if host not in ("127.0.0.1", "::1", "localhost"):
        sys.exit("loopback only")
    lock = threading.Lock()
    state = {"next": 0, "ok": 0, "rejected": 0, "failures": [], "ok_ms": [], "rejected_ms": []}

    def take():
        with lock:
            n = state["next"]
            if n >= count:
                return None
            state["next"] = n + 1
            return n

    def fail(what):
        with lock:
            state["failures"].append(what)

    def client():
        while True:
            n = take()
            if n is None:
                return
            body = json.dumps({"sleep_ms": sleep_ms, "iterations": 1000 + n})
            started = time.monotonic()
            try:
                conn = http.client.HTTPConnection(host, port, timeout=30)
                conn.request(
                    "POST",
                    f"/pools/{pool}/jobs",
                    body=body,
                    headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
                )
                resp = conn.getresponse()
                raw = resp.read()
                status, retry = resp.status, resp.getheader("Retry-After")
                conn.close()
            except Exception as e:  # a lost request
                fail(f"job {n}: {type(e).__name__}: {e}")
                continue
            took = (time.monotonic() - started) * 1000
            try:
                reply = json.loads(raw)
            except ValueError:
                fail(f"job {n}: {status} with a body that is not JSON: {raw[:80]!r}")
                continue
            if status == 200:
                if reply.get("done") is True and reply.get("iterations") == 1000 + n:
                    with lock:
                        state["ok"] += 1
                        state["ok_ms"].append(took)
                else:
                    fail(f"job {n}: 200 with another job's reply: {reply}")
            elif status == 503:
                if retry is None:
                    fail(f"job {n}: 503 without Retry-After")
                elif reply.get("error") != "rejected" or reply.get("reason") != "queue-depth":
                    fail(f"job {n}: 503 {reply}")
                else:
                    with lock:
                        state["rejected"] += 1
                        state["rejected_ms"].append(took)
            else:
                fail(f"job {n}: {status} {reply}")

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began

    def pct(xs, p):
        xs = sorted(xs)
        return round(xs[min(len(xs) - 1, int(p * len(xs)))], 1) if xs else None

    summary = {
        "sent": count,
        "ok": state["ok"],
        "rejected_503": state["rejected"],
        "failed": len(state["failures"]),
        "seconds": round(elapsed, 2),
        "ok_ms_p50": pct(state["ok_ms"], 0.5),
        "ok_ms_p99": pct(state["ok_ms"], 0.99),
        "rejected_ms_p99": pct(state["rejected_ms"], 0.99),
    }
    print(json.dumps(summary))
    for f in state["failures"][:10]:
        print("failure:", f, file=sys.stderr)
    ok = not state["failures"] and state["ok"] > 0 and state["rejected"] > 0
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
