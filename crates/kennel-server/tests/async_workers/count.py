"""A JSON-lines worker that counts what it runs, for the asynchronous jobs'
tests (tests/async_jobs.rs): for each request {"n": N, "ms": M} it appends
N to the file $COUNT_FILE (one line each, before it works), sleeps M ms,
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
    time.sleep(job.get("ms", 0) / 1000)
    sys.stdout.write(json.dumps({"n": job["n"], "pid": os.getpid()}) + "\n")
    sys.stdout.flush()
