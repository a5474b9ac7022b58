"""Benchmark: the steady state. A step costs what its batch costs, not what the history costs.

The pipeline (issue #14): two file-input tables, an aggregate view over the big one, a join of
the aggregate with the small one, and a filtered view with a file output. For each history size
H, in one run on one Spark session:

  load      the step that ingests all H rows (the aggregate, join and filter evaluated over it)
  step      a 100-row step on top of H (median of --repeat)
  batch     10k-row steps on top of H: throughput in rows/s
and at the largest H also:
  full      recomputing every view from the stored tables (what every step cost before #14)
  by hand   a hand-written incremental PySpark job on the same layout: aggregate the 100 new
            rows, MERGE them into the stored groups, join and filter only the touched groups
Printed ratios: step@largest / step@smallest (target <= 1.5x), step / full at the largest
(target <= 10%), step / by hand (target <= 1.5x). Peak JVM memory is the RSS high-water mark of
the Spark JVM (VmHWM), not Python's.

    python bench/steady.py [--sizes 100000,1000000,4000000,16000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from spindle.checkpoint import Manifest, PipelineRef
from spindle.checkpoint.store import open_store
from spindle.program import Program, parse_program
from spindle.runtime.engine import Runtime
from spindle.runtime.maintain import Views
from spindle.runtime.session import spark_session

GROUPS = 1000


def program(data: Path, out: Path) -> Program:
    def source(name: str) -> str:
        return json.dumps(
            [
                {
                    "name": "src",
                    "format": {"name": "parquet"},
                    "transport": {"name": "file_input", "config": {"path": str(data / name)}},
                }
            ]
        )

    sink = json.dumps(
        [
            {
                "name": "out",
                "format": {"name": "json"},
                "transport": {"name": "file_output", "config": {"path": str(out)}},
            }
        ]
    )
    return parse_program(
        f"create table events (id bigint, k int, amount bigint) with "
        f"('connectors' = '{source('events')}');\n"
        f"create table dims (k int, label varchar) with ('connectors' = '{source('dims')}');\n"
        "create view totals as select k, sum(amount) as total, count(*) as n "
        "from events group by k;\n"
        "create view enriched as select t.k, d.label, t.total, t.n "
        "from totals t join dims d on t.k = d.k;\n"
        f"create materialized view big with ('connectors' = '{sink}') as "
        "select k, label, total from enriched where total > 1000;\n"
    )


def write_rows(spark: SparkSession, data: Path, *, start: int, count: int, tag: str) -> None:
    spark.range(start, start + count).select(
        F.col("id"),
        (F.col("id") % GROUPS).cast("int").alias("k"),
        ((F.col("id") * 7) % 997).alias("amount"),
    ).repartition(max(1, count // 2_000_000)).write.mode("overwrite").parquet(
        str(data / "events" / tag)
    )


def timed(fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - start


def jvm_peak_rss_mb(spark: SparkSession) -> float:
    pid = spark.sparkContext._jvm.ProcessHandle.current().pid()  # type: ignore[union-attr]
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def by_hand(spark: SparkSession, work: Path, data: Path, tag: str) -> None:
    """The incremental job a person would write for this pipeline, on a Delta layout."""
    from delta.tables import DeltaTable

    new = spark.read.parquet(str(data / "events" / tag))
    partial = new.groupBy("k").agg(F.sum("amount").alias("total"), F.count("*").alias("n"))
    groups = DeltaTable.forPath(spark, str(work / "hand_totals"))
    groups.alias("t").merge(partial.alias("p"), "t.k = p.k").whenMatchedUpdate(
        set={"total": "t.total + p.total", "n": "t.n + p.n"}
    ).whenNotMatchedInsertAll().execute()
    touched = (
        spark.read.format("delta")
        .load(str(work / "hand_totals"))
        .join(partial.select("k"), "k", "left_semi")
    )
    dims = spark.read.parquet(str(data / "dims"))
    touched.join(dims, "k").where(F.col("total") > 1000).select("k", "label", "total").write.mode(
        "append"
    ).json(str(work / "hand_out"))


def run_size(spark: SparkSession, rows: int, repeat: int, *, largest: bool) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix=f"spindle-steady-{rows}-"))
    data = work / "data"
    spark.range(GROUPS).select(
        F.col("id").cast("int").alias("k"), F.concat(F.lit("g"), F.col("id")).alias("label")
    ).write.parquet(str(data / "dims"))
    write_rows(spark, data, start=0, count=rows, tag="history")
    pipeline = program(data, work / "out")
    store = open_store((work / "state").as_uri())
    runtime = Runtime(
        spark=spark, store=store, root=store.uri, pipeline=PipelineRef(namespace="b", name="s")
    )
    checkpoint: Manifest = runtime.initialize(pipeline)
    (checkpoint, _), load = timed(runtime.step, pipeline, checkpoint)
    result = {"load": load}
    next_id = rows
    steps = []
    for index in range(repeat + 1):  # the first small step warms caches: not counted
        write_rows(spark, data, start=next_id, count=100, tag=f"small{index}")
        next_id += 100
        (checkpoint, stats), seconds = timed(runtime.step, pipeline, checkpoint)
        assert stats.rows_ingested == 100, stats
        if index:
            steps.append(seconds)
    result["step"] = statistics.median(steps)
    batches = []
    for index in range(repeat):
        write_rows(spark, data, start=next_id, count=10_000, tag=f"batch{index}")
        next_id += 10_000
        (checkpoint, _), seconds = timed(runtime.step, pipeline, checkpoint)
        batches.append(seconds)
    result["batch_rows_per_s"] = 10_000 / statistics.median(batches)
    if largest:
        views = Views(spark, pipeline, runtime.uri)

        def full() -> None:
            state = dict(checkpoint.state)
            for name, view in pipeline.views.items():
                frame, _ = views.evaluate(view, state)
                path = f"full/{name}"
                frame.write.format("delta").mode("overwrite").save(runtime.uri(path))

        _, result["full"] = timed(full)
        spark.read.format("delta").load(runtime.uri(checkpoint.state["totals"].path)).select(
            "k", "total", "n"
        ).write.format("delta").save(str(work / "hand_totals"))
        hand = []
        for index in range(repeat + 1):
            write_rows(spark, data, start=next_id, count=100, tag=f"hand{index}")
            next_id += 100
            _, seconds = timed(lambda: by_hand(spark, work, data, f"hand{index}"))  # noqa: B023
            if index:
                hand.append(seconds)
        result["hand"] = statistics.median(hand)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100000,1000000,4000000,16000000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    spark = spark_session(app="spindle-steady", extra={"spark.sql.shuffle.partitions": "8"})
    results = {}
    print(f"{'history':>12} {'load step':>10} {'100-row step':>13} {'10k rows/s':>11}")
    for rows in sizes:
        results[rows] = run_size(spark, rows, args.repeat, largest=rows == sizes[-1])
        r = results[rows]
        print(
            f"{rows:>12,} {r['load']:>9.2f}s {r['step']:>12.2f}s {r['batch_rows_per_s']:>11,.0f}",
            flush=True,
        )
    small, large = results[sizes[0]], results[sizes[-1]]
    print(f"full recompute at {sizes[-1]:,}: {large['full']:.2f} s")
    print(f"hand-written incremental job at {sizes[-1]:,}: {large['hand']:.2f} s")
    print("Ratios:")
    growth = large["step"] / small["step"]
    print(f"  step@{sizes[-1]:,} / step@{sizes[0]:,}  {growth:6.2f}x  (<= 1.5x)")
    print(f"  step / full recompute         {large['step'] / large['full']:6.1%}  (<= 10%)")
    print(f"  step / hand-written job       {large['step'] / large['hand']:6.2f}x  (<= 1.5x)")
    print(f"Peak JVM RSS: {jvm_peak_rss_mb(spark):,.0f} MiB")


if __name__ == "__main__":
    main()
