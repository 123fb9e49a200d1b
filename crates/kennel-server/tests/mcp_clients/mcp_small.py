"""A small MCP server over stdio (newline-delimited JSON-RPC), with no
dependency: it starts in milliseconds, for the gateway's tests that open
thousands of sessions (tests/mcp_transport.rs).

- initialize: answers with its pid in serverInfo.version.
- tools/list: the tools "pid" and "sleep".
- tools/call "pid": its pid. "sleep" {"seconds": s}: answers after s
  seconds, or at once with an error when a notifications/cancelled for it
  comes first.
- ping: {}. Other notifications are read and dropped.
"""

import json
import os
import select
import sys
import time


def write(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def text(value):
    return {"content": [{"type": "text", "text": str(value)}]}


sleeping = None  # (id, until)
buffered = b""

while True:
    timeout = None if sleeping is None else max(0.0, sleeping[1] - time.monotonic())
    ready, _, _ = select.select([sys.stdin], [], [], timeout)
    if not ready:
        write({"jsonrpc": "2.0", "id": sleeping[0], "result": text("slept")})
        sleeping = None
        continue
    chunk = os.read(sys.stdin.fileno(), 65536)
    if not chunk:
        break
    buffered += chunk
    while b"\n" in buffered:
        line, buffered = buffered.split(b"\n", 1)
        if not line.strip():
            continue
        message = json.loads(line)
        method, rid = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            write({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "mcp-small", "version": str(os.getpid())},
            }})
        elif method == "tools/list":
            write({"jsonrpc": "2.0", "id": rid, "result": {"tools": [
                {"name": "pid", "inputSchema": {"type": "object"}},
                {"name": "sleep", "inputSchema": {"type": "object"}},
            ]}})
        elif method == "tools/call" and params.get("name") == "sleep":
            seconds = float((params.get("arguments") or {}).get("seconds", 1))
            sleeping = (rid, time.monotonic() + seconds)
        elif method == "tools/call":
            write({"jsonrpc": "2.0", "id": rid, "result": text(os.getpid())})
        elif method == "notifications/cancelled":
            if sleeping is not None and params.get("requestId") == sleeping[0]:
                write({"jsonrpc": "2.0", "id": sleeping[0],
                       "error": {"code": -32800, "message": "cancelled"}})
                sleeping = None
        elif method == "ping":
            write({"jsonrpc": "2.0", "id": rid, "result": {}})
        elif rid is not None:
            write({"jsonrpc": "2.0", "id": rid,
                   "error": {"code": -32601, "message": f"no method {method}"}})
