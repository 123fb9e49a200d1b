#!/usr/bin/env python3
"""A worker that holds keys: each loaded "model" is state of its own.

kennel loads a key before the first job of that key it hands this worker
(`load_key`), and unloads its least recently used key when it holds too
many (`unload_key`). A job `{"key": "a", ...}` is answered from the state
of its key, `{"key": "a", "state": "model-a", "pid": ...}`, and fails if
the key was not loaded: a job answered here was sent to a worker holding
its key. `{"op": "held"}` answers the keys it holds. A key that starts
with `missing` fails to load. Needs
`pip install ./sdk/python`; see docs/PROTOCOL.md, "Keys: load and unload".
`KEYED_LOAD_SECONDS` and `KEYED_JOB_SECONDS` make a load and a job take
that long (default 0).
In the JSON-RPC framings (`KENNEL_FRAMING`) the pool's `load_method` is
`kennel/load` and its `unload_method` `kennel/unload`.
"""
import os
import time

from kennel_worker import WorkerError, serve

# The keys this worker holds, and what it loaded for each.
models = {}

# How long a load and a job take, in seconds (a real model takes a while).
LOAD_SECONDS = float(os.environ.get("KEYED_LOAD_SECONDS", "0"))
JOB_SECONDS = float(os.environ.get("KEYED_JOB_SECONDS", "0"))


def load_key(key):
    if key.startswith("missing"):
        raise WorkerError(f"no model named {key!r}", status=404)
    time.sleep(LOAD_SECONDS)
    models[key] = f"model-{key}"


def unload_key(key):
    models.pop(key, None)


def handle(request):
    if not isinstance(request, dict):
        raise WorkerError("a job is an object: {\"key\": ...}", status=400)
    if request.get("op") == "held":  # which keys it holds
        return {"held": sorted(models)}
    key = request.get("key")
    if key not in models:
        raise WorkerError(f"key {key!r} is not loaded here (holds {sorted(models)})", status=409)
    time.sleep(JOB_SECONDS)
    return {"key": key, "state": models[key], "pid": os.getpid()}


serve(handle, load_key=load_key, unload_key=unload_key)
