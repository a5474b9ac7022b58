"""Benchmark: the local CLI, cold (a new JVM per command) and warm (the home's Spark server).

One process tree: this script prepares the grades example in a temporary home (apply, two
batches, one run to a checkpoint), then times, as a user types them:

  query   `spindle query grades "SELECT * FROM avg_grade_enriched ORDER BY ..."`
  status  `spindle local status grades`
cold with `--no-server`, warm with the home's server up (started, and warmed by one query,
before timing). Each figure is the median of --repeat runs. Printed ratios: cold / warm.
Targets: warm <= 2 s, and at least 10x faster than cold. The server is stopped at the end.

    python bench/cli.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "grades"
QUERY = "SELECT * FROM avg_grade_enriched ORDER BY student_name, class"
STUDENTS = "insert into students values (1, 'Alice'), (2, 'Bob')"
GRADES = (
    "insert into grades values (1, 'algebra', 97, '2025-09-15'), (2, 'physics', 93, '2025-12-05')"
)


def spindle(home: Path, *args: str) -> float:
    """Run one command; its wall time in seconds (it must succeed)."""
    # as a user runs it: Python caches bytecode (a sandbox may switch that off for everything)
    dropped = ("SPINDLE_NO_SERVER", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "spindle.cli.main", *args, "--home", str(home)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"spindle {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return elapsed


def median(home: Path, repeat: int, *args: str) -> float:
    return statistics.median(spindle(home, *args) for _ in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="spindle-bench-cli-") as directory:
        home = Path(directory) / "home"
        spindle(home, "local", "apply", "-f", str(EXAMPLE / "pipeline-v1.yaml"), "--no-server")
        spindle(home, "local", "execute", "grades", STUDENTS, "--no-server")
        spindle(home, "local", "execute", "grades", GRADES, "--no-server")
        spindle(home, "local", "run", "grades", "--until-idle", "--no-server")
        commands = {"query": ("query", "grades", QUERY), "status": ("local", "status", "grades")}
        cold = {name: median(home, args.repeat, *c, "--no-server") for name, c in commands.items()}
        try:
            started = spindle(home, *commands["query"])  # starts the server
            warm = {name: median(home, args.repeat, *c) for name, c in commands.items()}
        finally:
            spindle(home, "local", "server", "stop")
    print(f"server start + first query: {started:.2f} s")
    print("target: warm <= 2 s and >= 10x faster than cold")
    print(f"{'command':<8} {'cold s':>8} {'warm s':>8} {'cold/warm':>10}")
    for name in commands:
        ratio = cold[name] / warm[name]
        verdict = "ok" if warm[name] <= 2.0 and ratio >= 10 else "MISSED"
        print(f"{name:<8} {cold[name]:>8.3f} {warm[name]:>8.3f} {ratio:>9.1f}x   {verdict}")


if __name__ == "__main__":
    main()
