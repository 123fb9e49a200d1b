"""A small language server in the content-length framing (or json-rpc with
argv[1] == "json-rpc"), to show what kennel sends a language server and
what it answers one.

- `initialize` is answered with the params it came with (`processId` and
  all).
- Each notification is recorded; the request `notes` answers the list of
  their methods and params, in order.
- The request `ask` with `{"requests": [[method, params], ...]}` sends each
  of those requests to kennel first, then answers the list of the
  responses kennel wrote (each `{"result": …}` or `{"error": …}`).
- `shutdown` is answered with null; `exit` then ends it with code 0, and
  with code 1 without a `shutdown` before it (as LSP says). The end of its
  stdin ends it with code 3.
"""
import json
import sys

FRAMING = sys.argv[1] if len(sys.argv) > 1 else "content-length"
OUT = sys.stdout.buffer
IN = sys.stdin.buffer


def send(message):
    body = json.dumps(message).encode()
    if FRAMING == "content-length":
        OUT.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    else:
        OUT.write(body + b"\n")
    OUT.flush()


def read():
    if FRAMING != "content-length":
        line = IN.readline()
        return json.loads(line) if line.strip() else None
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


notes = []
shut_down = False
while True:
    message = read()
    if message is None:
        sys.exit(3)
    method = message.get("method")
    params = message.get("params")
    if "id" not in message:
        if method == "exit":
            sys.exit(0 if shut_down else 1)
        notes.append([method, params])
        continue
    rid = message["id"]
    if method == "initialize":
        result = params
    elif method == "notes":
        result = notes
    elif method == "shutdown":
        shut_down = True
        result = None
    elif method == "ask":
        result = []
        for n, (asked, asked_params) in enumerate(params["requests"]):
            mine = "server-%d" % n
            send({"jsonrpc": "2.0", "id": mine, "method": asked, "params": asked_params})
            answer = read()
            assert answer.get("id") == mine, answer
            answer.pop("jsonrpc", None)
            answer.pop("id", None)
            result.append(answer)
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": method}})
        continue
    send({"jsonrpc": "2.0", "id": rid, "result": result})
