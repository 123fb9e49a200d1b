"""The client side of bench/mcp.sh: one MCP gateway (kennel's /mcp/{pool} or
supergateway) in front of @modelcontextprotocol/server-everything, measured
with the official MCP Python SDK (`mcp`: streamable_http_client and
ClientSession) and, for the cut sessions, a raw HTTP client on `socket`.

Usage: mcp_client.py run --gateway NAME --url URL --pid PID [--workers-url URL
           --workers N] [--attach N] [--cut N] [--parallel N] [--only REGEX]
       mcp_client.py pids PID      (the pids under PID whose command line
                                    holds server-everything, for clean-up)

Prints one JSON line per measurement on stdout, progress on stderr.
"""

import argparse
import json
import os
import re
import socket
import statistics
import sys
import time
import urllib.parse
import urllib.request

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

LONG = "trigger-long-running-operation"
PROTOCOL = "2025-11-25"


def say(*args):
    print(*args, file=sys.stderr, flush=True)


# Processes, read from /proc.


def _stat(pid):
    """(comm, ppid) of a pid, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    comm = text[text.index("(") + 1 : text.rindex(")")]
    return comm, int(text[text.rindex(")") + 2 :].split()[1])


def descendants(root):
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st:
                children.setdefault(st[1], []).append(int(name))
    out, todo = [], [root]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def everything(root):
    """The server-everything processes under `root`: its descendants whose
    command line holds server-everything, less the shells that wrap one
    (supergateway spawns its command with `shell: true`)."""
    out = []
    for pid in descendants(root):
        st = _stat(pid)
        if st and st[0] not in ("sh", "bash", "dash") and "server-everything" in _cmdline(pid):
            out.append(pid)
    return out


def rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


# Waiting for the gateway to be back to its resting state between sessions.


def kennel_ready(workers_url):
    """The pool's workers that are up and free: a pid, no job, not retiring."""
    with urllib.request.urlopen(workers_url, timeout=5) as r:
        rows = json.load(r)["workers"]
    return [w for w in rows if w.get("pid") and str(w.get("state", "")).lower() in READY_STATES]


def generations(workers_url):
    with urllib.request.urlopen(workers_url, timeout=5) as r:
        return sum(w.get("generation", 0) for w in json.load(r)["workers"])


READY_STATES = {"idle", "ready", "free", "available"}


def settle(args, timeout=30.0):
    """kennel: every worker of the pool up and free again. supergateway: no
    server-everything process left from the sessions before (it starts one
    per session). Returns the seconds waited."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if args.workers_url:
            if len(kennel_ready(args.workers_url)) >= args.workers and len(everything(args.pid)) == args.workers:
                break
        elif not everything(args.pid):
            break
        time.sleep(0.02)
    else:
        say(f"   settle: not settled after {timeout:.0f} s")
    return time.perf_counter() - t0


# 1. attach: initialize + tools/list over a fresh transport, then close.


async def attach_once(url):
    t0 = time.perf_counter()
    async with streamable_http_client(url) as (read, write, *_):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            t1 = time.perf_counter()
    t2 = time.perf_counter()
    assert any(t.name == LONG for t in tools.tools), [t.name for t in tools.tools]
    return t1 - t0, t2 - t1


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def attach(args):
    times, closes, waits = [], [], []
    settle(args)
    anyio.run(attach_once, args.url)  # one untimed: imports, first connection
    for i in range(args.attach):
        waits.append(settle(args))
        t, c = anyio.run(attach_once, args.url)
        times.append(t * 1000)
        closes.append(c * 1000)
    return {
        "sessions": args.attach,
        "p50_ms": round(pct(times, 50), 1),
        "p90_ms": round(pct(times, 90), 1),
        "min_ms": round(min(times), 1),
        "max_ms": round(max(times), 1),
        "close_p50_ms": round(pct(closes, 50), 1),
        "settle_p50_ms": round(pct([w * 1000 for w in waits], 50), 1),
    }


# 3. parallel: N sessions, each one call of 2 s, against one alone.


async def parallel_run(url, n):
    """Opens n sessions (initialize), then starts one call on each at once.
    Returns (seconds from the start to the last call's answer, seconds from
    the start of the calls to the last call's answer)."""
    initialized = []
    go = anyio.Event()
    done = []
    t_start = time.perf_counter()

    async def one():
        async with streamable_http_client(url) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                initialized.append(1)
                await go.wait()
                r = await session.call_tool(LONG, {"duration": 2, "steps": 1})
                assert "completed" in r.content[0].text, r
                done.append(time.perf_counter())

    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(one)
        while len(initialized) < n:
            await anyio.sleep(0.005)
        t_calls = time.perf_counter()
        go.set()
    return max(done) - t_start, max(done) - t_calls


def parallel(args):
    settle(args)
    one_total, one_calls = anyio.run(parallel_run, args.url, 1)
    settle(args)
    n_total, n_calls = anyio.run(parallel_run, args.url, args.parallel)
    return {
        "sessions": args.parallel,
        "one_call_s": round(one_calls, 3),
        "parallel_calls_s": round(n_calls, 3),
        "ratio": round(n_calls / one_calls, 3),
        "one_session_s": round(one_total, 3),
        "parallel_sessions_s": round(n_total, 3),
        "sessions_ratio": round(n_total / one_total, 3),
    }


# 2. cut: sessions whose long call is cut by a reset (SO_LINGER 0).


class Raw:
    def __init__(self, url):
        u = urllib.parse.urlsplit(url)
        self.host, self.port, self.path = u.hostname, u.port, u.path

    def request(self, body, session=None):
        data = json.dumps(body).encode()
        head = [
            f"POST {self.path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            "Content-Type: application/json",
            "Accept: application/json, text/event-stream",
            f"Content-Length: {len(data)}",
            "Connection: close",
        ]
        if session:
            head += [f"Mcp-Session-Id: {session}", f"MCP-Protocol-Version: {PROTOCOL}"]
        s = socket.create_connection((self.host, self.port), timeout=30)
        s.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + data)
        return s

    def call(self, body, session=None):
        """A request and its answer: (status, headers, body). The body is
        read to its end (Content-Length or the last chunk), or, for an SSE
        stream, until the JSON-RPC answer to the request's id, as the SDK's
        client does (supergateway keeps the stream open some seconds after)."""
        want = body.get("id")
        with self.request(body, session) as s:
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += _recv(s)
            head, _, rest = buf.partition(b"\r\n\r\n")
            lines = head.decode(errors="replace").split("\r\n")
            status = int(lines[0].split()[1])
            headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
            chunked = headers.get("transfer-encoding", "").lower() == "chunked"
            length = None if chunked else int(headers.get("content-length", "-1"))
            sse = headers.get("content-type", "").startswith("text/event-stream")
            while True:
                data, done = _dechunk(rest) if chunked else (rest, len(rest) >= length >= 0)
                if done or (sse and _answered(data, want)):
                    return status, headers, data
                c = s.recv(65536)
                if not c:
                    return status, headers, data
                rest += c


def _recv(s):
    c = s.recv(65536)
    if not c:
        raise RuntimeError("connection closed before the answer's headers")
    return c


def _dechunk(raw):
    """The body of a chunked message so far, and whether it is complete."""
    out, at = b"", 0
    while True:
        end = raw.find(b"\r\n", at)
        if end < 0:
            return out, False
        size = int(raw[at:end].split(b";")[0], 16)
        if size == 0:
            return out, True
        if len(raw) < end + 2 + size:
            return out + raw[end + 2 :], False
        out += raw[end + 2 : end + 2 + size]
        at = end + 2 + size + 2


def _answered(data, want):
    for line in data.split(b"\n"):
        if line.startswith(b"data:"):
            try:
                msg = json.loads(line[5:])
            except ValueError:
                continue
            if isinstance(msg, dict) and msg.get("id") == want and ("result" in msg or "error" in msg):
                return True
    return False


def cut_one(raw, hold):
    status, headers, body = raw.call(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "bench-cut", "version": "1"},
            },
        }
    )
    session = headers.get("mcp-session-id")
    if status != 200 or not session:
        raise RuntimeError(f"initialize: {status} {headers} {body[:300]!r}")
    status, headers, body = raw.call({"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    if status not in (200, 202):
        raise RuntimeError(f"notifications/initialized: {status} {body[:300]!r}")
    s = raw.request(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": LONG, "arguments": {"duration": 30, "steps": 1}},
        },
        session,
    )
    # The call is in flight; hold it, then reset the connection.
    s.settimeout(hold)
    try:
        got = s.recv(65536)
        if got and not got.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"tools/call: {got[:300]!r}")
        time.sleep(max(0.0, hold - 0.001))
    except socket.timeout:
        pass
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    s.close()


def cut(args):
    settle(args)
    raw = Raw(args.url)
    before = rss_mib(args.pid)
    gens_before = generations(args.workers_url) if args.workers_url else 0
    errors, first_error = 0, None
    t0 = time.perf_counter()
    for i in range(args.cut):
        try:
            cut_one(raw, args.hold)
        except Exception as e:  # noqa: BLE001 - counted and reported
            errors += 1
            first_error = first_error or repr(e)[:500]
        if (i + 1) % 20 == 0:
            say(f"   cut {i + 1}/{args.cut}")
    t_cut = time.perf_counter()
    out = {
        "sessions": args.cut,
        "errors": errors,
        "hold_s": args.hold,
        "cut_wall_s": round(t_cut - t0, 1),
        "gateway_rss_mib_before": round(before, 1),
    }
    for at in (1, 10):
        time.sleep(max(0.0, t_cut + at - time.perf_counter()))
        procs = everything(args.pid)
        out[f"procs_{at}s"] = len(procs)
        out[f"gateway_rss_mib_{at}s"] = round(rss_mib(args.pid), 1)
        out[f"procs_rss_mib_{at}s"] = round(sum(rss_mib(p) for p in procs), 1)
        if args.workers_url:
            out[f"idle_workers_{at}s"] = len(kennel_ready(args.workers_url))
    if args.workers_url:
        # Workers replaced since before the cuts (the sum of the slots'
        # generations): one per cut session when each one's worker is retired.
        out["replaced_10s"] = generations(args.workers_url) - gens_before
    if first_error:
        out["first_error"] = first_error
    return out


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--gateway", required=True)
    r.add_argument("--url", required=True)
    r.add_argument("--pid", type=int, required=True)
    r.add_argument("--workers-url")
    r.add_argument("--workers", type=int, default=0)
    r.add_argument("--attach", type=int, default=50)
    r.add_argument("--cut", type=int, default=60)
    r.add_argument("--hold", type=float, default=0.5)
    r.add_argument("--parallel", type=int, default=8)
    r.add_argument("--only", default="")
    q = sub.add_parser("pids")
    q.add_argument("pid", type=int)
    args = p.parse_args()
    if args.cmd == "pids":
        print(" ".join(map(str, everything(args.pid))))
        return
    for name, fn in (("attach", attach), ("parallel", parallel), ("cut", cut)):
        if not re.search(args.only, f"{args.gateway} {name}"):
            continue
        say(f"== {args.gateway}: {name}")
        row = {"gateway": args.gateway, "measure": name, **fn(args)}
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
