#!/usr/bin/env python3
"""Writes the tables of docs/BENCHMARKS.md from one run of bench/run.sh.

Reads, for each round of the run (LOGDIR/round-N), the medians criterion
saved and the lines the memory bench and bench/http.sh printed. Each figure
shown is the median over the rounds; each ratio is taken within a round,
then the median over the rounds. It replaces what stands between the markers

    <!-- bench:begin -->  ...  <!-- bench:end -->

in docs/BENCHMARKS.md. Everything outside the markers is kept.

Usage: bench/tables.py LOGDIR
"""

import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
ROUNDS = []
DOC = ROOT / "docs" / "BENCHMARKS.md"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def middle(values):
    values = sorted(values)
    n = len(values)
    return values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def median_ns_in(rnd, *parts):
    """The median time of one criterion measurement in one round, in ns."""
    path = rnd.joinpath("criterion", *parts, "new", "estimates.json")
    return json.loads(path.read_text())["median"]["point_estimate"]


def per_iter(*parts):
    """Criterion's throughput element count for this measurement."""
    path = ROUNDS[0].joinpath("criterion", *parts, "new", "benchmark.json")
    throughput = json.loads(path.read_text()).get("throughput") or {}
    return throughput.get("Elements", 1)


def median_ns(*parts):
    return middle([median_ns_in(r, *parts) for r in ROUNDS])


def rate(*parts):
    """Elements per second, in millions (median over the rounds)."""
    return per_iter(*parts) / median_ns(*parts) * 1e3


def us_per(*parts):
    """Microseconds per element (median over the rounds)."""
    return median_ns(*parts) / per_iter(*parts) / 1e3


def ratio(num, den, inverse=False):
    """num / den of times within each round, median over the rounds; for
    rates (inverse) den / num."""
    rs = []
    for r in ROUNDS:
        a, b = median_ns_in(r, *num), median_ns_in(r, *den)
        rs.append(b / a if inverse else a / b)
    return middle(rs)


def mark(ok):
    return "yes" if ok else "**no**"


def lend_table(group, shapes, guard):
    """Rates of one lend group; with `guard`, the guard on lend + return:
    kennel's time per cycle at most 1.5 × deadpool's in the same round."""
    head = "kennel time / deadpool time (guard ≤ 1.5)" if guard else "kennel / deadpool"
    rows = [
        f"| size / tasks | kennel | kennel, timed | deadpool | bb8 | floor | {head} | kennel / bb8 | kennel / floor |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for shape in shapes:
        key = shape.replace("/", "_")
        r = {p: rate(group, p, key) for p in ("kennel", "kennel-timed", "deadpool", "bb8", "floor")}
        b, f = (ratio((group, "kennel", key), (group, p, key), inverse=True) for p in ("bb8", "floor"))
        if guard:
            t = ratio((group, "kennel", key), (group, "deadpool", key))
            d = f"{t:.2f} ({mark(t <= 1.5)})"
        else:
            d = f"{ratio((group, 'kennel', key), (group, 'deadpool', key), inverse=True):.2f}"
        rows.append(
            f"| {shape} | {r['kennel']:.2f} | {r['kennel-timed']:.2f} | {r['deadpool']:.2f} | {r['bb8']:.2f} | {r['floor']:.2f} "
            f"| {d} | {b:.2f} | {f:.2f} |"
        )
    return rows


def lines(rnd, name, prefix):
    out = {}
    for line in (rnd / name).read_text().splitlines():
        if line.startswith(prefix):
            key, _, rest = line.partition(": ")
            out[key] = rest
    return out


def main():
    logdir = pathlib.Path(sys.argv[1])
    ROUNDS.extend(sorted(logdir.glob("round-*")))
    machine = (logdir / "machine.txt").read_text().strip()
    commands = (logdir / "commands.txt").read_text().strip()
    out = [BEGIN, "", "<!-- Written by bench/tables.py from one run of bench/run.sh; edits here are overwritten. -->", "",
           machine, "", "Reproduce (nothing else should run meanwhile):", "", "```sh", commands, "```", ""]

    cycles = per_iter("lend_return", "kennel", "1_1")
    out += [f"Rounds: {len(ROUNDS)}. Figures are medians over the rounds; ratios are taken within each round, then the median over the rounds.", ""]
    out += ["### Lend + return", "",
            "Millions of lend+return cycles per second (median of criterion's samples; "
            f"each sample is {cycles:,} cycles split over the tasks). Higher is better. "
            "kennel: a pool as built by default; kennel, timed: the same with "
            "`max_queue_wait` set, so it times every job, as with a metrics recorder or a "
            "learning sizing. The guard compares times per cycle (the inverse of the rates).", ""]
    out += lend_table("lend_return", ["1/1", "2/8", "8/32", "16/32"], guard=True)
    out += ["", "### Lend + return with cancellation", "",
            "Each job holds its worker across one `yield_now`, so jobs wait; every fourth lend "
            "is dropped if it has no worker by its second poll. Millions of lends (kept or "
            "dropped) per second. No guard: it shows what a dropped lend costs.", ""]
    out += lend_table("lend_cancel", ["2/8", "8/32", "16/32"], guard=False)

    echo = {p: us_per("echo", p) for p in ("kennel", "coprocess", "floor")}
    er = ratio(("echo", "kennel"), ("echo", "floor"))
    cr = ratio(("echo", "coprocess"), ("echo", "floor"))
    out += ["", "### Coprocess echo", "",
            "One echo job to the Rust echo worker, one after the other; microseconds per job "
            "(median). Lower is better.", "",
            "| kennel pool + Coprocess | Coprocess alone | floor: bare pipe with tokio | kennel / floor (target ≤ 1.3) | Coprocess alone / floor |",
            "| ---: | ---: | ---: | ---: | ---: |",
            f"| {echo['kennel']:.1f} | {echo['coprocess']:.1f} | {echo['floor']:.1f} | {er:.2f} ({mark(er <= 1.3)}) | {cr:.2f} |"]

    out += ["", "### A small CPU job off the runtime", "",
            "Sum of the square roots of 0..1000 (about 1 µs of work), sent from 1 or 8 tasks at "
            "once; microseconds per job (median of 20,000 jobs). kennel: a pool of as many "
            "`ThreadWorker`s as tasks; rayon: a pool of 2 threads and a oneshot; floor: a thread "
            "per state, as many plain threads as tasks, each task sending to its own over a "
            "channel, no pool. Lower is better.", "",
            "| tasks | kennel ThreadWorker | spawn_blocking | rayon | floor: a thread per state | kennel / spawn_blocking (target ≤ 1.0) | kennel / rayon | kennel / floor | floor / spawn_blocking |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for tasks in ("1", "8"):
        c = {p: us_per("cpu", p, tasks) for p in ("kennel", "spawn_blocking", "rayon", "threads")}
        r = ratio(("cpu", "kennel", tasks), ("cpu", "spawn_blocking", tasks))
        rr = ratio(("cpu", "kennel", tasks), ("cpu", "rayon", tasks))
        rf = ratio(("cpu", "kennel", tasks), ("cpu", "threads", tasks))
        fs = ratio(("cpu", "threads", tasks), ("cpu", "spawn_blocking", tasks))
        out.append(f"| {tasks} | {c['kennel']:.1f} | {c['spawn_blocking']:.1f} | {c['rayon']:.1f} "
                   f"| {c['threads']:.1f} | {r:.2f} ({mark(r <= 1.0)}) | {rr:.2f} | {rf:.2f} | {fs:.2f} |")
    kc = us_per("cpu", "kennel-cores", "8")
    kcr = ratio(("cpu", "kennel-cores", "8"), ("cpu", "spawn_blocking", "8"))
    out += ["", f"From eight tasks, a pool of as many `ThreadWorker`s as cores (2): {kc:.1f} µs a job, "
            f"{kcr:.2f} × `spawn_blocking` (no target): each job waits for a worker, which reaches "
            "it through the async runtime."]

    bytes_of = {}
    for key in ("memory/future", "memory/task"):
        bytes_of[key] = int(middle([int(re.match(r"(\d+)", lines(r, "memory.log", "memory/")[key]).group(1)) for r in ROUNDS]))
    s10, s1000 = median_ns("stats", "10"), median_ns("stats", "1000")
    sr = ratio(("stats", "1000"), ("stats", "10"))
    out += ["", "### Memory and stats", "",
            "| figure | value | target |", "| --- | ---: | --- |",
            f"| bytes per waiting job: the `lend()` future (boxed) and the pool's share, 100,000 waiting | {bytes_of['memory/future']} | ≤ 640 ({mark(bytes_of['memory/future'] <= 640)}) |",
            f"| bytes per waiting job as a spawned tokio task, 100,000 waiting | {bytes_of['memory/task']} | (tokio's task adds its own) |",
            f"| `stats()` with 10 workers, ns | {s10:.1f} | |",
            f"| `stats()` with 1,000 workers, ns | {s1000:.1f} | under 10 µs, a scan of the slots ({mark(s1000 <= 10_000)}); ratio to 10 workers {sr:.2f} |"]

    per_round = []
    for r in ROUNDS:
        http = lines(r, "http.log", "http/")
        per_round.append({k: dict(kv.split("=") for kv in v.split()) for k, v in http.items()})
    fields = {k: {f: str(middle([float(p[k][f]) for p in per_round])) for f in per_round[0][k]} for k in per_round[0]}
    c1 = fields["http/c1"]
    floor = fields.get("http/floor-c1")
    pool = fields.get("http/pool-direct")
    # The direct pool of the same run (bench/http.sh), else the echo bench.
    direct = float(pool["p50_us"]) if pool else echo["kennel"]
    out += ["", "### HTTP: `kennel serve` on loopback", "",
            "A pool of 2 Rust echo workers behind `kennel serve`, driven by wrk with the same "
            "request body as the echo bench; the floor is the same HTTP stack and the same echo "
            "worker behind a mutex, no pool (`crates/kennel-bench/examples/http_floor.rs`), with "
            "the same wrk command; the direct pool is the same job through a kennel pool, no HTTP "
            "(`examples/pool_echo.rs`).", "",
            "| connections | requests/s | p50 µs | p99 µs | non-2xx | floor p50 µs | kennel / floor (guard ≤ 2 at 1 connection) |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for c in ("c1", "c32"):
        f = fields[f"http/{c}"]
        fl = fields.get(f"http/floor-{c}")
        within = [float(p[f"http/{c}"]["p50_us"]) / float(p[f"http/floor-{c}"]["p50_us"])
                  for p in per_round if f"http/floor-{c}" in p]
        fl_cols = (f"{float(fl['p50_us']):.0f} | {middle(within):.2f}"
                   + (f" ({mark(middle(within) <= 2.0)})" if c == "c1" else "")) if fl else "| "
        out.append(f"| {c[1:]} | {float(f['rps']):.0f} | {float(f['p50_us']):.0f} | {float(f['p99_us']):.0f} "
                   f"| {float(f['non2xx']):.0f} | {fl_cols} |")
    overhead = (middle([float(p["http/c1"]["p50_us"]) - float(p["http/pool-direct"]["p50_us"])
                        for p in per_round]) if pool else float(c1["p50_us"]) - direct)
    out += ["", f"The server's own overhead at one connection: p50 {float(c1['p50_us']):.0f} µs through HTTP "
            f"against {direct:.1f} µs for the same job through the pool directly, "
            f"so about {overhead:.0f} µs per request for loopback TCP, HTTP, routing and the job's "
            f"checks (wrk's side included; no target)."]
    others = [(name, label) for name, label in (
        ("http/floor-c1", "the floor"),
        ("http/floor-pool-c1", "the floor with the pool (`http_floor --pool`)"),
        ("http/floor-pool-ct-c1", "the floor with the pool on a current-thread runtime (`http_floor --current-thread --pool`)"),
        ("http/bare-c1", "the HTTP exchange alone, no job (`http_floor --bare`)"),
        ("http/raw-c1", "the raw floor, blocking sockets and pipes, no async runtime (`http_raw`)"),
        ("http/raw-bare-c1", "the raw HTTP exchange alone (`http_raw --bare`)"))
        if pool and all(name in p for p in per_round)]
    if others:
        over = "; ".join(
            f"{label} {float(fields[name]['p50_us']):.0f} µs, "
            f"{middle([float(p[name]['p50_us']) - float(p['http/pool-direct']['p50_us']) for p in per_round]):.1f} over"
            for name, label in others)
        out += ["", f"At one connection, p50 and the median over the rounds of each one's excess over "
                f"the direct pool: {over}."]
    out += ["", END]

    doc = DOC.read_text()
    block = "\n".join(out)
    if BEGIN in doc and END in doc:
        head, rest = doc.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        doc = head + block + tail
    else:
        doc = doc.rstrip("\n") + "\n\n## Lending, workers, memory and HTTP\n\n" + block + "\n"
    DOC.write_text(doc)
    print(block)


if __name__ == "__main__":
    main()
