"""Benchmark: a driver's start with Spark's class archive (`runtime.class_archive`) against one
without it (the baseline), measured in the same run.

Each round starts two processes, one with `SPINDLE_CLASS_ARCHIVE=off` and one with the archive
(made first, if missing, and not timed), in turns so load from elsewhere falls on both alike.
Each starts a default local session and writes and reads a small Delta table: what a driver
does before its first step. Printed for each: the median seconds from the process's start to
the table read, and the CPU seconds its JVM used; then the ratios of the medians.

    python bench/startup.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import json, os, sys, time
from spindle.runtime.session import spark_session
spark = spark_session()
path = sys.argv[1]
spark.range(100).write.format("delta").mode("overwrite").save(path)
assert spark.read.format("delta").load(path).count() == 100
seconds = time.time() - float(sys.argv[2])
pid = spark.sparkContext._gateway.proc.pid
ticks = [int(v) for v in open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[11:13]]
print(json.dumps({"seconds": seconds, "cpu": sum(ticks) / os.sysconf("SC_CLK_TCK")}))
spark.stop()
"""


def once(mode: str, table: Path) -> dict[str, float]:
    import time

    env = {**os.environ, "SPINDLE_CLASS_ARCHIVE": mode}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(table), str(time.time())],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from spindle.runtime.session import ensure_class_archive

    if not ensure_class_archive():
        raise SystemExit("no class archive could be made: see the .failed file it names")
    runs: dict[str, list[dict[str, float]]] = {"off": [], "auto": []}
    with tempfile.TemporaryDirectory(prefix="spindle-startup-") as work:
        for round_ in range(args.rounds):
            for mode in ("off", "auto") if round_ % 2 == 0 else ("auto", "off"):
                runs[mode].append(once(mode, Path(work) / f"{mode}-{round_}"))
    medians = {
        mode: {k: statistics.median(r[k] for r in results) for k in ("seconds", "cpu")}
        for mode, results in runs.items()
    }
    for mode, label in (("off", "without the archive (baseline)"), ("auto", "with the archive")):
        m = medians[mode]
        print(f"{label:32} start {m['seconds']:6.2f} s   JVM CPU {m['cpu']:6.2f} s")
    start, cpu = (medians["auto"][k] / medians["off"][k] for k in ("seconds", "cpu"))
    print(f"ratio (with / without): start {start:.2f}x, JVM CPU {cpu:.2f}x ({args.rounds} rounds)")


if __name__ == "__main__":
    main()
