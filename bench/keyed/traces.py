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


def fewest_loads(trace, clients, workers=2):
    """The fewest loads that serve `trace` on `workers` workers holding one
    key each, from `clients` closed-loop clients sharing one iterator over
    it (trace 1's setting), found by trying every choice. At any moment a
    dispatch may draw the next job (when a client is free: it runs at once
    if a worker holds its key, else it waits) or load the key of a waiting
    job onto any worker (its waiting jobs then run). Jobs and loads take
    no time here, which only widens the choices: no dispatch does better."""
    keys = sorted(set(trace))
    start = (0, (None,) * workers, (0,) * len(keys))
    loads = {start: 0}
    todo = collections.deque([start])  # 0-1 breadth first: draws cost 0
    while todo:
        state = todo.popleft()
        pos, held, waiting = state
        if pos == len(trace) and not any(waiting):
            return loads[state]
        steps = []
        if sum(waiting) < clients and pos < len(trace):
            key = trace[pos]
            w = list(waiting)
            if key not in held:
                w[keys.index(key)] += 1
            steps.append(((pos + 1, held, tuple(w)), 0))
        for k, n in enumerate(waiting):
            if n == 0:
                continue
            for i in range(workers):
                if held[i] != keys[k]:
                    h = held[:i] + (keys[k],) + held[i + 1:]
                    w = waiting[:k] + (0,) + waiting[k + 1:]
                    steps.append(((pos, h, w), 1))
        for after, cost in steps:
            if after not in loads or loads[after] > loads[state] + cost:
                loads[after] = loads[state] + cost
                (todo.appendleft if cost == 0 else todo.append)(after)
    raise ValueError("the trace cannot be served")


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
