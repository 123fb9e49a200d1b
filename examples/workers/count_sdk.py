#!/usr/bin/env python3
"""A worker with the Python SDK that shows a warm-up, progress, errors and cancellation.

Request {"to": 5, "step_seconds": 0.2} -> progress 1..5, then {"counted": 5}.
A "to" over the limit is an error reply with a status and fields. Run it by
hand with `PYTHONPATH=sdk/python python3 examples/workers/count_sdk.py`
(or after `pip install ./sdk/python`); see docs/PROTOCOL.md.
"""
from kennel_worker import WorkerError, current_job, report, serve

LIMIT = 1000


def load():
    print("warming up")  # goes to stderr: the SDK keeps stdout for the protocol
    return {"limit": LIMIT}  # extra fields on the ready line


def handle(request):
    to = int(request.get("to", 3))
    if to > LIMIT:
        raise WorkerError(f"cannot count to {to}", status=422, code="too_far", limit=LIMIT)
    for n in range(1, to + 1):
        if current_job().wait_cancelled(float(request.get("step_seconds", 0.1))):
            return None  # cancelled: the SDK answers {"error":true,"message":"cancelled","cancelled":true}
        report(n, total=to)
    return {"counted": to}


serve(handle, load=load)
