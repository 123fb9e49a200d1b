"""A JSON-RPC worker that talks back during a call, for the relay's test
(tests/relay.rs): on "ask" it writes a log notification, then asks the
client "roots/list" (id "w1") and, once answered, replies with the roots
it was given; with the request's progress token it first reports progress.
Handshake and ping answered; other calls echo their params.
"""

import json
import sys


def write(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


asking = None  # the id of the call waiting for the client's answer
for line in sys.stdin:
    message = json.loads(line)
    method, rid = message.get("method"), message.get("id")
    params = message.get("params") or {}
    if method == "initialize":
        write({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": "2025-11-25",
               "capabilities": {}, "serverInfo": {"name": "asks", "version": "1"}}})
    elif method == "ask":
        token = (params.get("_meta") or {}).get("progressToken")
        if token is not None:
            write({"jsonrpc": "2.0", "method": "notifications/progress",
                   "params": {"progressToken": token, "progress": 1, "total": 2}})
        write({"jsonrpc": "2.0", "method": "notifications/message",
               "params": {"level": "info", "data": "asking"}})
        write({"jsonrpc": "2.0", "id": "w1", "method": "roots/list"})
        asking = rid
    elif method is None and rid == "w1" and asking is not None:
        write({"jsonrpc": "2.0", "id": asking, "result": {"given": message.get("result")}})
        asking = None
    elif method == "ping":
        write({"jsonrpc": "2.0", "id": rid, "result": {}})
    elif rid is not None and method is not None:
        write({"jsonrpc": "2.0", "id": rid, "result": params})
