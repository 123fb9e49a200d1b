"""bench/keyed.sh's kennel worker (sdk/python): holds the models of the keys
the pool loads into it (model.load / unload), answers each job with its key's
model (model.run). A job whose key this worker does not hold fails."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import model  # noqa: E402
from kennel_worker import serve  # noqa: E402

held = {}


def load_key(key):
    held[key] = model.load(key)


def unload_key(key):
    held.pop(key, None)


def handle(request):
    m = held.get(request.get("key"))
    if m is None:
        raise RuntimeError(f"key {request.get('key')!r} is not loaded here (held: {sorted(held)})")
    return model.run(m, request)


if __name__ == "__main__":
    serve(handle, load_key=load_key, unload_key=unload_key)
