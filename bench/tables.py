#!/usr/bin/env python3
"""Writes the tables of docs/BENCHMARKS.md from one run of bench/run.sh.

Reads the medians criterion saved under target/criterion, and the lines the
memory bench and bench/http.sh printed (in the run's log directory), and
replaces what stands between the markers

    <!-- bench:begin -->  ...  <!-- bench:end -->

in docs/BENCHMARKS.md. Everything outside the markers is kept.

Usage: bench/tables.py LOGDIR
"""

import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
CRITERION = ROOT / "target" / "criterion"
DOC = ROOT / "docs" / "BENCHMARKS.md"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def median_ns(*parts):
    """The median time of one criterion measurement, in ns."""
    path = CRITERION.joinpath(*parts, "new", "estimates.json")
    return json.loads(path.read_text())["median"]["point_estimate"]


def per_iter(*parts):
    """Criterion's throughput element count for this measurement."""
    path = CRITERION.joinpath(*parts, "new", "benchmark.json")
    throughput = json.loads(path.read_text()).get("throughput") or {}
    return throughput.get("Elements", 1)


def rate(*parts):
    """Elements per second, in millions."""
    return per_iter(*parts) / median_ns(*parts) * 1e3


def us_per(*parts):
    """Microseconds per element."""
    return median_ns(*parts) / per_iter(*parts) / 1e3


def mark(ok):
    return "yes" if ok else "**no**"


def lend_table(group, shapes):
    rows = [
        "| size / tasks | kennel | deadpool | bb8 | floor | kennel / deadpool (target ≥ 1.5) | kennel / bb8 (target ≥ 1.0) | kennel / floor |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for shape in shapes:
        key = shape.replace("/", "_")
        r = {p: rate(group, p, key) for p in ("kennel", "deadpool", "bb8", "floor")}
        d, b, f = r["kennel"] / r["deadpool"], r["kennel"] / r["bb8"], r["kennel"] / r["floor"]
        rows.append(
            f"| {shape} | {r['kennel']:.2f} | {r['deadpool']:.2f} | {r['bb8']:.2f} | {r['floor']:.2f} "
            f"| {d:.2f} ({mark(d >= 1.5)}) | {b:.2f} ({mark(b >= 1.0)}) | {f:.2f} |"
        )
    return rows


def lines(logdir, name, prefix):
    path = pathlib.Path(logdir) / name
    out = {}
    for line in path.read_text().splitlines():
        if line.startswith(prefix):
            key, _, rest = line.partition(": ")
            out[key] = rest
    return out


def main():
    logdir = pathlib.Path(sys.argv[1])
    machine = (logdir / "machine.txt").read_text().strip()
    commands = (logdir / "commands.txt").read_text().strip()
    out = [BEGIN, "", "<!-- Written by bench/tables.py from one run of bench/run.sh; edits here are overwritten. -->", "",
           machine, "", "Reproduce (nothing else should run meanwhile):", "", "```sh", commands, "```", ""]

    cycles = per_iter("lend_return", "kennel", "1_1")
    out += ["### Lend + return", "",
            "Millions of lend+return cycles per second (median of criterion's samples; "
            f"each sample is {cycles:,} cycles split over the tasks). Higher is better.", ""]
    out += lend_table("lend_return", ["1/1", "2/8", "8/32", "16/32"])
    out += ["", "### Lend + return with cancellation", "",
            "Each job holds its worker across one `yield_now`, so jobs wait; every fourth lend "
            "is dropped if it has no worker by its second poll. Millions of lends (kept or "
            "dropped) per second.", ""]
    out += lend_table("lend_cancel", ["2/8", "8/32", "16/32"])

    echo = {p: us_per("echo", p) for p in ("kennel", "coprocess", "floor")}
    ratio = echo["kennel"] / echo["floor"]
    out += ["", "### Coprocess echo", "",
            "One echo job to the Rust echo worker, one after the other; microseconds per job "
            "(median). Lower is better.", "",
            "| kennel pool + Coprocess | Coprocess alone | floor: bare pipe with tokio | kennel / floor (target ≤ 1.3) | Coprocess alone / floor |",
            "| ---: | ---: | ---: | ---: | ---: |",
            f"| {echo['kennel']:.1f} | {echo['coprocess']:.1f} | {echo['floor']:.1f} | {ratio:.2f} ({mark(ratio <= 1.3)}) | {echo['coprocess'] / echo['floor']:.2f} |"]

    out += ["", "### A small CPU job off the runtime", "",
            "Sum of the square roots of 0..1000 (about 1 µs of work), sent from 1 or 8 tasks at "
            "once; microseconds per job (median of 20,000 jobs). kennel: a pool of as many "
            "`ThreadWorker`s as tasks; rayon: a pool of 2 threads and a oneshot. Lower is better.", "",
            "| tasks | kennel ThreadWorker | spawn_blocking | rayon | kennel / spawn_blocking (target ≤ 1.0) | kennel / rayon |",
            "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    for tasks in ("1", "8"):
        c = {p: us_per("cpu", p, tasks) for p in ("kennel", "spawn_blocking", "rayon")}
        r = c["kennel"] / c["spawn_blocking"]
        out.append(f"| {tasks} | {c['kennel']:.1f} | {c['spawn_blocking']:.1f} | {c['rayon']:.1f} "
                   f"| {r:.2f} ({mark(r <= 1.0)}) | {c['kennel'] / c['rayon']:.2f} |")

    mem = lines(logdir, "memory.log", "memory/")
    bytes_of = {k: int(re.match(r"(\d+)", v).group(1)) for k, v in mem.items()}
    s10, s1000 = median_ns("stats", "10"), median_ns("stats", "1000")
    out += ["", "### Memory and stats", "",
            "| figure | value | target |", "| --- | ---: | --- |",
            f"| bytes per waiting job: the `lend()` future (boxed) and the pool's share, 100,000 waiting | {bytes_of['memory/future']} | ≤ 640 ({mark(bytes_of['memory/future'] <= 640)}) |",
            f"| bytes per waiting job as a spawned tokio task, 100,000 waiting | {bytes_of['memory/task']} | (tokio's task adds its own) |",
            f"| `stats()` with 10 workers, ns | {s10:.1f} | |",
            f"| `stats()` with 1,000 workers, ns | {s1000:.1f} | independent of workers: ratio {s1000 / s10:.2f} ({mark(s1000 / s10 <= 1.5)}) |"]

    http = lines(logdir, "http.log", "http/")
    fields = {k: dict(kv.split("=") for kv in v.split()) for k, v in http.items()}
    direct = echo["kennel"]
    c1 = fields["http/c1"]
    out += ["", "### HTTP: `kennel serve` on loopback", "",
            "A pool of 2 Rust echo workers behind `kennel serve`, driven by wrk with the same "
            "request body as the echo bench.", "",
            "| connections | requests/s | p50 µs | p99 µs | non-2xx |", "| ---: | ---: | ---: | ---: | ---: |"]
    for c in ("c1", "c32"):
        f = fields[f"http/{c}"]
        out.append(f"| {c[1:]} | {float(f['rps']):.0f} | {f['p50_us']} | {f['p99_us']} | {f['non2xx']} |")
    overhead = float(c1["p50_us"]) - direct
    out += ["", f"The server's own overhead at one connection: p50 {c1['p50_us']} µs through HTTP "
            f"against {direct:.1f} µs for the same job through the pool directly (the echo bench), "
            f"so about **{overhead:.0f} µs** per request for loopback TCP, HTTP, routing and JSON "
            "(wrk's side included).", "", END]

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
