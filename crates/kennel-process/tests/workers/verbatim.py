"""A worker whose replies are spelled oddly on purpose: keys out of order,
a float written 1.50, spaces. argv[1] is json-lines or json-rpc."""
import json
import sys

FRAMING = sys.argv[1]
REPLY = '{"zeta": 1,  "alpha": [1.50, 2E3, "\\u00e9"], "mid": {"b": null, "a": true}}'
out = sys.stdout
if FRAMING == "json-lines":
    out.write('{"ready":true}\n')
    out.flush()
for line in sys.stdin:
    if not line.strip():
        continue
    if FRAMING == "json-lines":
        out.write(REPLY + "\n")
    else:
        rid = json.loads(line)["id"]
        out.write('{"jsonrpc":"2.0","id":%d,"result":%s}\n' % (rid, REPLY))
    out.flush()
