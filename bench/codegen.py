"""Benchmark: what Spark's cache of compiled classes saves a steady step.

Every step plans the same change queries, and Spark compiles the Java code it generates for
them unless the code is in its cache of compiled classes (`spark.sql.codegen.cache.maxEntries`).
This bench runs bench/steady.py's pipeline (2 tables, 3 views) with Spark's default cache (100
classes, the baseline) and with Spindle's (`session.CODEGEN_CACHE_ENTRIES`), each in processes
of its own (the setting is fixed for a JVM's life), in alternating rounds so load from elsewhere
on the machine falls on both alike. Each round: a history of --rows rows, --warm steps, then
--steps 100-row steps measured. Printed per setting: the median step, compilations and seconds
spent compiling per step (Spark's CodegenMetrics), peak JVM RSS; then the ratio of the steps.

    python bench/codegen.py [--rows 100000] [--warm 5] [--steps 15] [--rounds 2]
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

from spindle.runtime.session import CODEGEN_CACHE_ENTRIES

SPARK_DEFAULT = 100


def child(entries: int, *, rows: int, warm: int, steps: int) -> dict[str, Any]:
    """One round in this process: its step seconds, compilations and compile seconds."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import steady
    from spindle.runtime.session import spark_session

    spark = spark_session(
        app="spindle-codegen",
        extra={
            "spark.sql.shuffle.partitions": "8",
            "spark.sql.codegen.cache.maxEntries": str(entries),
        },
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
        count, seconds = compiled()
        timings = [history.step(spark, 100, f"step{index}") for index in range(steps)]
        count_after, seconds_after = compiled()
        return {
            "steps": timings,
            "compiles": (count_after - count) / steps,
            "compile_seconds": (seconds_after - seconds) / steps,
            "rss_mb": steady.jvm_peak_rss_mb(spark),
        }
    finally:
        shutil.rmtree(history.work, ignore_errors=True)
        spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--warm", type=int, default=5)
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    shape = {"rows": args.rows, "warm": args.warm, "steps": args.steps}
    if args.child is not None:
        print("RESULT " + json.dumps(child(args.child, **shape)), flush=True)
        return
    settings = {"Spark's default": SPARK_DEFAULT, "Spindle's": CODEGEN_CACHE_ENTRIES}
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in settings}
    for round_ in range(args.rounds):
        for name, entries in settings.items():
            command = [sys.executable, __file__, "--child", str(entries)]
            command += [f"--{k}={v}" for k, v in shape.items()]
            out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            line = next(x for x in out.splitlines() if x.startswith("RESULT "))
            results[name].append(json.loads(line[len("RESULT ") :]))
            print(f"round {round_ + 1}: {name} cache done", flush=True)
    print(f"\n{args.rows:,} rows of history, {args.steps} 100-row steps x {args.rounds} rounds")
    medians = {}
    for name, entries in settings.items():
        rounds = results[name]
        medians[name] = statistics.median(s for r in rounds for s in r["steps"])
        compiles = statistics.mean(r["compiles"] for r in rounds)
        compiling = statistics.mean(r["compile_seconds"] for r in rounds)
        rss = max(r["rss_mb"] for r in rounds)
        print(
            f"  {name + ' cache':24s} ({entries:>5} classes): step {medians[name]:.2f} s, "
            f"{compiles:5.1f} compilations ({compiling:.2f} s) a step, peak JVM RSS {rss:,.0f} MiB"
        )
    ratio = medians["Spindle's"] / medians["Spark's default"]
    print(f"  step with Spindle's cache / with Spark's default   {ratio:.2f}x")


if __name__ == "__main__":
    main()
