"""The worker the tests start: one program for every framing (KENNEL_FRAMING).

The operation is the request's "op" in json-lines and the method in the
JSON-RPC framings.
"""

import os
import sys
import time

try:  # the installed package if there is one, else the source next to the tests
    import kennel_worker  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from kennel_worker import WorkerError, cancelled, raise_if_cancelled, report, serve  # noqa: E402


def load():
    print("warming up: a stray print during load")
    if os.environ.get("TEST_LOAD_FAILS"):
        raise WorkerError("no model here", status=503)
    return {"model": "tiny", "pid": os.getpid()}


# The keys loaded (load_key), with the state of each.
held = {}


def load_key(key):
    if key == "unknown":
        raise WorkerError(f"no key named {key}", status=404)
    if key == "crash":
        raise ValueError("loading broke")
    held[key] = f"state of {key}"


def unload_key(key):
    del held[key]  # a KeyError for a key never loaded: an error reply


def handle(request, job):
    params = request if isinstance(request, dict) else {}
    op = job.method if job.method is not None else params.get("op", "echo")
    if op == "echo":
        return request
    if op == "pid":
        return {"pid": os.getpid()}
    if op == "held":  # the keys loaded
        return {"held": held}
    if op == "keys":  # what the handler sees of the request
        return {"keys": sorted(params)}
    if op == "error":
        raise WorkerError("text is too long", status=422, code="too_long", limit=5)
    if op == "rpc_code":
        raise WorkerError("no such tool", rpc_code=-32602)
    if op == "crash":
        raise ValueError("something broke")
    if op == "nan":
        return {"value": float("nan")}
    if op == "print":
        print("stray print from the handler")
        os.write(1, b"raw write on fd 1\n")
        return {"printed": True}
    if op == "progress":
        for step in range(1, params.get("steps", 3) + 1):
            report(step, total=params.get("steps", 3), message=f"step {step}")
        return {"done": True}
    if op == "spin":  # loops until cancelled, checking the flag
        report(0, message="spinning")
        deadline = time.monotonic() + 30
        while not cancelled() and time.monotonic() < deadline:
            time.sleep(0.002)
        return {"spun": "to the end"}
    if op == "spin_raise":  # the same with raise_if_cancelled()
        report(0, message="spinning")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            raise_if_cancelled()
            job.wait_cancelled(0.01)
        return {"spun": "to the end"}
    raise WorkerError(f"unknown op {op!r}", rpc_code=-32601)


hooks = {} if os.environ.get("TEST_NO_KEY_HOOKS") else {"load_key": load_key, "unload_key": unload_key}
serve(handle, load=load, name="test-worker", version="1.2.3", **hooks)
