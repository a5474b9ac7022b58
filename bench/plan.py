"""Benchmark: `spindle diff` on generated programs of 100, 1,000 and 10,000 views.

Each view joins two earlier relations and aggregates; the new program changes one view in the
middle. Prints the wall time of the real CLI (a subprocess, as a user runs it) and of the
in-process plan, plus the growth ratios between sizes (linear growth is a ratio of about 10).

    python bench/plan.py [--sizes 100,1000,10000]
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from spindle.plan import make_plan
from spindle.program import parse_program

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,1000,10000")
    sizes = [int(s) for s in parser.parse_args().sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            old, new = Path(tmp, f"old{size}.sql"), Path(tmp, f"new{size}.sql")
            old.write_text(generate(size))
            new.write_text(generate(size, changed=size // 2))
            cli = timed(
                lambda old=old, new=new: subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "spindle.cli.main",
                        "diff",
                        "--json",
                        str(old),
                        str(new),
                    ],
                    check=True,
                    capture_output=True,
                )
            )
            from spindle.program import statements

            statements._analyze.cache_clear()
            old_text, new_text = old.read_text(), new.read_text()
            start = time.perf_counter()
            plan = make_plan(old=parse_program(old_text), new=parse_program(new_text))
            in_process = time.perf_counter() - start
            modified = len(plan.diff.program_diff.modified_views)
            rows.append((size, cli, in_process, modified))
    print(f"{'views':>7} {'spindle diff (s)':>17} {'in-process (s)':>15} {'modified':>9}")
    for size, cli, in_process, modified in rows:
        print(f"{size:>7} {cli:>17.3f} {in_process:>15.3f} {modified:>9}")
    for (a, cli_a, in_a, _), (b, cli_b, in_b, _) in itertools.pairwise(rows):
        print(
            f"growth {a}->{b} views (x{b / a:.0f}): cli x{cli_b / cli_a:.2f}, "
            f"in-process x{in_b / in_a:.2f}"
        )


if __name__ == "__main__":
    main()
