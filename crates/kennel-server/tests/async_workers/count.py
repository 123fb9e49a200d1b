"""A JSON-lines worker that counts what it runs, for the asynchronous jobs'
tests (tests/async_jobs.rs): for each request {"n": N, "ms": M, "steps":
S} it appends N to the file $COUNT_FILE (one line each, before it works),
then S times writes a progress line and sleeps M ms (once without steps),
and replies {"n": N, "pid": its pid}.
"""

import json
import os
import sys
import time

count = open(os.environ["COUNT_FILE"], "a")
sys.stdout.write('{"ready": true}\n')
sys.stdout.flush()
for line in sys.stdin:
    job = json.loads(line)
    count.write(f"{job['n']}\n")
    count.flush()
    steps = job.get("steps", 0)
    for i in range(steps):
        sys.stdout.write(json.dumps({"progress": i + 1, "total": steps}) + "\n")
        sys.stdout.flush()
        time.sleep(job.get("ms", 0) / 1000)
    if not steps:
        time.sleep(job.get("ms", 0) / 1000)
    sys.stdout.write(json.dumps({"n": job["n"], "pid": os.getpid()}) + "\n")
    sys.stdout.flush()
