"""Benchmark: what one of Spindle's Spark settings saves a steady step, against the default.

Each comparison runs bench/steady.py's pipeline (2 tables, 3 views, on a local directory) in
processes of its own: one with Spark's and Delta's defaults for the settings compared (the
baseline), one with Spindle's session as it is. A JVM fixes some of these settings for its
life, so each run is a new process; the two alternate, round after round, so load from
elsewhere on the machine falls on both alike. Each round: a history of --rows rows, --warm
100-row steps not counted, then --steps 100-row steps measured. Printed for each: the median
step, Spark's compilations and the seconds spent compiling a step (its CodegenMetrics),
processes and threads the machine started a step (/proc/stat: run it on a quiet machine),
peak JVM RSS; then the ratio of the medians.

  codegen         Spark's cache of compiled classes (`spark.sql.codegen.cache.maxEntries`):
                  its default of 100 classes against `session.CODEGEN_CACHE_ENTRIES`
  local-commits   how Delta commits a version, and writes its checksum, on a local directory:
                  Delta's HDFSLogStore and Spark's FileContext checkpoint manager (the
                  defaults) against LocalLogStore and the FileSystem one

    python bench/settings.py codegen|local-commits [--rows 100000] [--warm 5] [--steps 15]
        [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

DEFAULTS: dict[str, dict[str, str]] = {
    "codegen": {"spark.sql.codegen.cache.maxEntries": "100"},
    "local-commits": {
        "spark.delta.logStore.file.impl": "io.delta.storage.HDFSLogStore",
        "spark.sql.streaming.checkpointFileManagerClass": (
            "org.apache.spark.sql.execution.streaming.checkpointing."
            "FileContextBasedCheckpointFileManager"
        ),
    },
}
"""For each comparison, the settings that put Spark's and Delta's defaults back."""


def started() -> int:
    """Processes and threads the machine has started since it booted."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("processes "):
            return int(line.split()[1])
    return 0


def child(settings: dict[str, str], *, rows: int, warm: int, steps: int) -> dict[str, Any]:
    """One round in this process: its step seconds, compilations and processes started."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import steady
    from spindle.runtime.session import spark_session

    spark = spark_session(
        app="spindle-settings", extra={"spark.sql.shuffle.partitions": "8", **settings}
    )
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics  # type: ignore[union-attr]

    def compiled() -> tuple[int, float]:
        histogram = metrics.METRIC_COMPILATION_TIME()  # milliseconds per compilation
        count = int(histogram.getCount())
        return count, histogram.getSnapshot().getMean() * count / 1000

    history = steady.load(spark, rows)
    try:
        for index in range(warm):
            history.step(spark, 100, f"warm{index}")
        (count, seconds), processes = compiled(), started()
        timings = [history.step(spark, 100, f"step{index}") for index in range(steps)]
        (count_after, seconds_after), processes_after = compiled(), started()
        return {
            "steps": timings,
            "compiles": (count_after - count) / steps,
            "compile_seconds": (seconds_after - seconds) / steps,
            "processes": (processes_after - processes) / steps,
            "rss_mb": steady.jvm_peak_rss_mb(spark),
        }
    finally:
        shutil.rmtree(history.work, ignore_errors=True)
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("comparison", choices=sorted(DEFAULTS))
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--warm", type=int, default=5)
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    shape = {"rows": args.rows, "warm": args.warm, "steps": args.steps}
    if args.child is not None:
        result = child(json.loads(args.child), **shape)
        print("RESULT " + json.dumps(result), flush=True)
        return
    runs = {"defaults": DEFAULTS[args.comparison], "Spindle's": {}}
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in runs}
    for round_ in range(args.rounds):
        for name, settings in runs.items():
            command = [sys.executable, __file__, args.comparison, "--child", json.dumps(settings)]
            command += [f"--{k}={v}" for k, v in shape.items()]
            out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            line = next(x for x in out.splitlines() if x.startswith("RESULT "))
            results[name].append(json.loads(line[len("RESULT ") :]))
            print(f"round {round_ + 1}: {name} done", flush=True)
    print(
        f"\n{args.comparison}: {args.rows:,} rows of history, "
        f"{args.steps} 100-row steps x {args.rounds} rounds"
    )
    medians = {}
    for name in runs:
        rounds = results[name]
        medians[name] = statistics.median(s for r in rounds for s in r["steps"])
        compiles = statistics.mean(r["compiles"] for r in rounds)
        compiling = statistics.mean(r["compile_seconds"] for r in rounds)
        processes = statistics.mean(r["processes"] for r in rounds)
        rss = max(r["rss_mb"] for r in rounds)
        print(
            f"  {name:10s} step {medians[name]:.2f} s, {compiles:5.1f} compilations "
            f"({compiling:.2f} s), {processes:5.0f} processes and threads started a step, "
            f"peak JVM RSS {rss:,.0f} MiB"
        )
    ratio = medians["Spindle's"] / medians["defaults"]
    print(f"  step with Spindle's settings / with the defaults   {ratio:.2f}x")


if __name__ == "__main__":
    main()
