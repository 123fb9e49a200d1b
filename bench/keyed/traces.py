"""The two traces of bench/keyed.sh, as lists of keys (one per job)."""

import bisect
import collections
import random


def interleaved(jobs):
    """Trace 1: three keys, A B A C A B A C ..."""
    cycle = ("A", "B", "A", "C")
    return [cycle[i % 4] for i in range(jobs)]


def zipf(jobs, keys=50, s=1.1, seed=1):
    """Trace 2: `keys` keys drawn Zipf(s) over ranks 1..keys (rank r has
    weight 1/r^s) from random.Random(seed); rank r is the key "kNN"."""
    rng = random.Random(seed)
    cumulative = []
    total = 0.0
    for r in range(1, keys + 1):
        total += 1.0 / r**s
        cumulative.append(total)
    out = []
    for _ in range(jobs):
        rank = bisect.bisect_right(cumulative, rng.random() * total) + 1
        out.append(f"k{min(rank, keys):02d}")
    return out


def switch_floor(trace, clients):
    """The fewest loads that serve `trace` on two workers holding one key
    each, from `clients` closed-loop clients sharing one iterator over it
    (trace 1's setting). One worker keeps the most asked key; the other
    loads the key a job waits for only once every client waits (a switch
    sooner serves fewer jobs, and one later serves none: nothing runs while
    every client waits). Jobs of a loaded key are answered before the next
    is drawn; only the order of the draws counts, not their times."""
    kept = collections.Counter(trace).most_common(1)[0][0]
    held = None
    loads = 1  # the kept key
    waiting = []
    jobs = iter(trace)
    free = clients
    while True:
        for key in jobs:
            if key == kept or key == held:
                continue
            waiting.append(key)
            free -= 1
            if free == 0:
                break
        if not waiting:
            return loads
        held = waiting[0]
        loads += 1
        free += sum(1 for k in waiting if k == held)
        waiting = [k for k in waiting if k != held]


def counted_loads(trace, places):
    """The loads of a cache of `places` keys that serves `trace` one job at
    a time and, when full, lets go of the key with the fewest jobs so far
    (every past job counted, a key let go keeping its count; on a tie, the
    least recently used). A reference for trace 2: what learning the
    demand from the jobs seen costs with no timing to respect (no job
    waits, no load overlaps another); not a floor."""
    return _fewest_go(trace, places, ahead=False)


def known_loads(trace, places):
    """The loads of the cache of `counted_loads` told ahead how many jobs
    each key has in the whole of `trace`: when full, it lets go of the key
    with the fewest (on a tie, the least recently used). With jobs drawn
    independently, keeping the most likely keys and turning over the rest
    is the best a cache can do that knows the odds but not the order; a
    reference for trace 2, what the demand known in advance is worth."""
    return _fewest_go(trace, places, ahead=True)


def _fewest_go(trace, places, ahead):
    """The loads of `places` keys letting go of the key with the fewest
    jobs: in the whole trace (`ahead`), else so far."""
    jobs = collections.Counter(trace if ahead else ())
    held = {}  # key -> index of its last job
    loads = 0
    for i, key in enumerate(trace):
        if not ahead:
            jobs[key] += 1
        if key not in held:
            loads += 1
            if len(held) >= places:
                gone = min(held, key=lambda k: (jobs[k], held[k]))
                del held[gone]
        held[key] = i
    return loads
