"""A worker that never answers: it reads its requests (and any cancel) and
writes nothing back. argv[1] is the framing; in json-lines it writes its
ready line first."""
import json
import sys

if sys.argv[1] == "json-lines":
    print(json.dumps({"ready": True}), flush=True)
for _ in sys.stdin.buffer:
    pass
