#!/usr/bin/env python3
"""A kennel worker in Python, standard library only.

It speaks the JSON-lines protocol of docs/PROTOCOL.md: it writes
{"ready":true,"kennel_id":true} once warm, then reads one JSON request per
line on stdin and writes one JSON reply per line on stdout, with the
request's kennel_id (kennel's job id) echoed. It echoes each request back, except
{"op":"error","message":...}, which it answers with an error reply. It exits
when stdin ends.

Run it by hand to try it:

    $ python3 examples/workers/echo.py
    {"ready":true,"kennel_id":true}
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


def with_id(kennel_id, reply):
    """The reply with kennel's job id as its first key (an object only)."""
    if kennel_id is None or not isinstance(reply, dict):
        return reply
    return {"kennel_id": kennel_id, **reply}


def handle(request):
    """Answers one request; an exception becomes an error reply."""
    if isinstance(request, dict) and request.get("op") == "error":
        raise ValueError(request.get("message", "asked to fail"))
    return request


def main():
    # A real worker loads its model or opens its session here: the warm-up.
    print("echo worker warming up", file=sys.stderr)
    send({"ready": True, "kennel_id": True})  # it echoes kennel's job id
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except json.JSONDecodeError as err:
            send({"error": True, "message": f"bad request: {err}"})
            continue
        # kennel's job id is kennel's: out of the request, back in the reply,
        # so that the reply is taken only for its job.
        kennel_id = request.pop("kennel_id", None) if isinstance(request, dict) else None
        try:
            reply = handle(request)
        except Exception as err:  # noqa: BLE001 - every failure is a reply
            reply = {"error": True, "message": str(err)}
        send(with_id(kennel_id, reply))
    # stdin ended: kennel is closing the worker. Exit cleanly.


if __name__ == "__main__":
    main()
