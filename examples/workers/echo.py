#!/usr/bin/env python3
"""A kennel worker in Python, standard library only.

It speaks the JSON-lines protocol of docs/PROTOCOL.md: it writes
{"ready":true} once warm, then reads one JSON request per line on stdin and
writes one JSON reply per line on stdout. It echoes each request back, except
{"op":"error","message":...}, which it answers with an error reply. It exits
when stdin ends.

Run it by hand to try it:

    $ python3 examples/workers/echo.py
    {"ready":true}
    {"hello":"world"}            <- typed
    {"hello":"world"}
"""

import json
import sys

# Keep the real stdout for the protocol, and send anything else that prints
# (a library's banner, a stray print()) to stderr, which kennel logs.
PROTOCOL_OUT = sys.stdout
sys.stdout = sys.stderr


def send(message):
    """Writes one JSON line on the protocol stream."""
    PROTOCOL_OUT.write(json.dumps(message, separators=(",", ":")) + "\n")
    PROTOCOL_OUT.flush()


def handle(request):
    """Answers one request; an exception becomes an error reply."""
    if isinstance(request, dict) and request.get("op") == "error":
        raise ValueError(request.get("message", "asked to fail"))
    return request


def main():
    # A real worker loads its model or opens its session here: the warm-up.
    print("echo worker warming up", file=sys.stderr)
    send({"ready": True})
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except json.JSONDecodeError as err:
            send({"error": True, "message": f"bad request: {err}"})
            continue
        try:
            reply = handle(request)
        except Exception as err:  # noqa: BLE001 - every failure is a reply
            send({"error": True, "message": str(err)})
            continue
        send(reply)
    # stdin ended: kennel is closing the worker. Exit cleanly.


if __name__ == "__main__":
    main()
