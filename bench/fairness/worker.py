"""bench/fairness.sh's worker for the keyed scene (sdk/python): loading a key
takes LOAD_MS, a job SLEEP_MS, as a model's load and its inference would."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python"))

from kennel_worker import serve  # noqa: E402

LOAD_S = int(os.environ.get("LOAD_MS", "300")) / 1000
held = set()


def load_key(key):
    time.sleep(LOAD_S)
    held.add(key)


def unload_key(key):
    held.discard(key)


def handle(request):
    time.sleep(request.get("sleep_ms", 100) / 1000)
    return {"ok": True}


if __name__ == "__main__":
    serve(handle, load_key=load_key, unload_key=unload_key)
