"""Benchmark: `spindle diff` on generated programs of 100, 1,000 and 10,000 views.

Each view joins two earlier relations and aggregates; the new program changes one view in the
middle. Prints the wall time of the real CLI (a subprocess, as a user runs it: median and
fastest of --runs; one run at 10,000 views) and of the in-process plan analyzed serially (what
the operator does, from a cold cache; fastest of 3), plus the growth ratios between sizes
(linear growth is a ratio of about 10).

    python bench/plan.py [--sizes 100,1000,10000]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import sqlglot
import sqlglot.parser

from spindle.cli import analysis
from spindle.plan import make_plan
from spindle.program import facts, parse_program

TABLES = 5


def generate(views: int, *, changed: int | None = None) -> str:
    lines = [
        f"create table t{i} (id bigint, k int, amount decimal(10, 2)) "
        "with ('materialized' = 'true');"
        for i in range(TABLES)
    ]
    names = [f"t{i}" for i in range(TABLES)]
    for i in range(views):
        left, right = names[(i * 7) % len(names)], names[(i * 13 + 1) % len(names)]
        threshold = 1 if i == changed else 0
        lines.append(
            f"create view v{i} as select l.id, l.k, sum(r.amount) as amount "
            f"from {left} l join {right} r on l.id = r.id where l.k > {threshold} "
            "group by l.id, l.k;"
        )
        names.append(f"v{i}")
    return "\n".join(lines) + "\n"


def timed(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - start


def spindle_diff(old: Path, new: Path) -> float:
    """Wall time of one `spindle diff --json` process, as a user runs it."""
    command = [sys.executable, "-m", "spindle.cli.main", "diff", "--json", str(old), str(new)]
    return timed(lambda: subprocess.run(command, check=True, capture_output=True))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--runs", type=int, default=5, help="CLI runs per size (median, min)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    compiled = sqlglot.parser.__file__.endswith(".so")
    print(
        f"sqlglot {sqlglot.__version__} ({'compiled' if compiled else 'pure Python'}), "
        f"{analysis.worker_count()} analysis workers in the CLI, {args.runs} CLI runs per size"
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            old, new = Path(tmp, f"old{size}.sql"), Path(tmp, f"new{size}.sql")
            old.write_text(generate(size))
            new.write_text(generate(size, changed=size // 2))
            runs = sorted(spindle_diff(old, new) for _ in range(args.runs if size <= 1000 else 1))
            old_text, new_text = old.read_text(), new.read_text()
            in_process = float("inf")
            for _ in range(3 if size <= 1000 else 1):  # each from a cold cache
                facts.forget_all()
                start = time.perf_counter()
                plan = make_plan(old=parse_program(old_text), new=parse_program(new_text))
                in_process = min(in_process, time.perf_counter() - start)
            modified = len(plan.diff.program_diff.modified_views)
            rows.append((size, statistics.median(runs), runs[0], in_process, modified))
    print(
        f"{'views':>7} {'spindle diff median (s)':>24} {'min (s)':>8} "
        f"{'in-process serial, min (s)':>27} {'modified':>9}"
    )
    for size, median, fastest, in_process, modified in rows:
        print(f"{size:>7} {median:>24.3f} {fastest:>8.3f} {in_process:>27.3f} {modified:>9}")
    for (a, cli_a, _, in_a, _), (b, cli_b, _, in_b, _) in itertools.pairwise(rows):
        print(
            f"growth {a}->{b} views (x{b / a:.0f}): cli x{cli_b / cli_a:.2f}, "
            f"in-process x{in_b / in_a:.2f}"
        )


if __name__ == "__main__":
    main()
