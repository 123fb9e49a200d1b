#!/usr/bin/env python3
"""A kennel worker in Python with a costly warm-up and CPU-bound jobs.

Warm-up: a sieve of Eratosthenes up to --limit (default 2,000,000), built
once per worker; this is the cost a pool pays once and then shares across
many jobs. Standard library only.

Requests (one JSON object per line):

    {"op": "stats", "lo": 0, "hi": 1000}   -> {"count": 168, "sum": 76127}
    {"op": "factor", "n": 600851475143}     -> {"factors": [71, 839, 1471, 6857]}

Anything else gets an error reply. See docs/PROTOCOL.md.
"""

import json
import sys
import time

PROTOCOL_OUT = sys.stdout
sys.stdout = sys.stderr  # stray prints go to the log, not the protocol


def send(message):
    PROTOCOL_OUT.write(json.dumps(message, separators=(",", ":")) + "\n")
    PROTOCOL_OUT.flush()


def sieve(limit):
    """A bytearray where is_prime[n] == 1 for each prime n <= limit."""
    is_prime = bytearray([1]) * (limit + 1)
    is_prime[0:2] = b"\x00\x00"
    for n in range(2, int(limit**0.5) + 1):
        if is_prime[n]:
            is_prime[n * n :: n] = bytes(len(range(n * n, limit + 1, n)))
    return is_prime


class Primes:
    def __init__(self, limit):
        self.limit = limit
        self.is_prime = sieve(limit)
        self.primes = [n for n in range(limit + 1) if self.is_prime[n]]

    def stats(self, lo, hi):
        if not (0 <= lo <= hi <= self.limit + 1):
            raise ValueError(f"range must be within 0..{self.limit + 1}")
        count = 0
        total = 0
        is_prime = self.is_prime
        for n in range(lo, hi):  # deliberately a plain loop: real CPU work
            if is_prime[n]:
                count += 1
                total += n
        return {"count": count, "sum": total}

    def factor(self, n):
        if n < 2:
            raise ValueError("n must be at least 2")
        factors = []
        for p in self.primes:
            if p * p > n:
                break
            while n % p == 0:
                factors.append(p)
                n //= p
        if n > 1:
            if n > self.limit and n > self.primes[-1] ** 2:
                raise ValueError("n has a factor above the table's reach")
            factors.append(n)
        return {"factors": factors}


def main():
    limit = 2_000_000
    args = sys.argv[1:]
    if len(args) == 2 and args[0] == "--limit":
        limit = int(args[1])
    started = time.monotonic()
    table = Primes(limit)
    print(
        f"primes worker: {len(table.primes)} primes up to {limit} "
        f"in {time.monotonic() - started:.2f}s",
        file=sys.stderr,
    )
    send({"ready": True})
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            op = request.get("op")
            if op == "stats":
                reply = table.stats(int(request["lo"]), int(request["hi"]))
            elif op == "factor":
                reply = table.factor(int(request["n"]))
            else:
                raise ValueError(f"unknown op {op!r}")
        except Exception as err:  # noqa: BLE001 - every failure is a reply
            send({"error": True, "message": str(err)})
            continue
        send(reply)


if __name__ == "__main__":
    main()
