"""A JSON-RPC worker that writes unasked and duplicate messages around each
reply, to show that kennel takes as a job's reply only the response with
its id. argv[1] is the framing: json-rpc or content-length.

For each request it writes, in this order: a response to an id nobody
asked (the request's id + 1000), a second copy of its previous reply (late,
for the request before), a ready line, a line that is not JSON (json-rpc
only), a progress notification for another token, then the reply
{"n": params.n}, and right after it a copy of that reply, which arrives
while kennel may already wait for the next one.
"""
import json
import sys

FRAMING = sys.argv[1]
OUT = sys.stdout.buffer
IN = sys.stdin.buffer


def send(message):
    body = message if isinstance(message, bytes) else json.dumps(message).encode()
    if FRAMING == "content-length":
        OUT.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    else:
        OUT.write(body + b"\n")


def read():
    if FRAMING == "content-length":
        length = None
        while True:
            line = IN.readline()
            if not line:
                return None
            line = line.strip()
            if not line:
                if length is not None:
                    break
                continue
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        return json.loads(IN.read(length))
    while True:
        line = IN.readline()
        if not line:
            return None
        if line.strip():
            return json.loads(line)


previous = None
while True:
    message = read()
    if message is None:
        break
    if "id" not in message:
        continue  # a notification
    rid = message["id"]
    params = message.get("params") or {}
    send({"jsonrpc": "2.0", "id": rid + 1000, "result": {"n": -1, "unasked": True}})
    if previous is not None:
        send(previous)
    send({"ready": True})
    if FRAMING == "json-rpc":
        send(b"not json at all")
    send({"jsonrpc": "2.0", "method": "notifications/progress",
          "params": {"progressToken": "someone-else", "progress": 1}})
    reply = {"jsonrpc": "2.0", "id": rid, "result": {"n": params.get("n")}}
    send(reply)
    send(reply)
    OUT.flush()
    previous = reply
