"""The two traces of bench/keyed.sh, as lists of keys (one per job)."""

import bisect
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
