"""The model both sides serve (bench/keyed.sh): the same code under kennel's
worker (worker.py) and Ray Serve's deployment (ray_side.py).

- `load(key)` takes LOAD_S (1 s) and returns the key's model; each load
  appends one line to the file named by BENCH_KEYED_LOADS:
  `{"key", "pid", "start", "end"}` (CLOCK_MONOTONIC seconds, the same clock
  in every process), which is how the benchmark counts loads on both sides.
- `run(model, request)` takes JOB_S (20 ms) and answers the request, or
  raises if the request's key is not the model's (a job answered by a worker
  without its key's state).
"""

import json
import os
import time

LOAD_S = 1.0
JOB_S = 0.020


class Model:
    __slots__ = ("key", "loaded_at")

    def __init__(self, key):
        self.key = key
        self.loaded_at = time.monotonic()


def load(key):
    start = time.monotonic()
    time.sleep(LOAD_S)
    end = time.monotonic()
    path = os.environ.get("BENCH_KEYED_LOADS")
    if path:
        line = json.dumps({"key": key, "pid": os.getpid(), "start": start, "end": end}) + "\n"
        # One write of a short line to a file opened for appending: the
        # lines of concurrent processes do not interleave.
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    return Model(key)


def run(model, request):
    if request.get("key") != model.key:
        raise RuntimeError(f"job for key {request.get('key')!r} reached the model of {model.key!r}")
    time.sleep(JOB_S)
    return {"key": model.key, "pid": os.getpid(), "i": request.get("i")}
