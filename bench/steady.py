"""Benchmark: the steady state. A step costs what its batch costs, not what the history costs.

The pipeline (issue #14): two file-input tables, an aggregate view over the big one, a join of
the aggregate with the small one, and a filtered view with a file output. For each history size
H, in one run on one Spark session:

  load      the step that ingests all H rows (the aggregate, join and filter evaluated over it)
  step      a 100-row step on top of H (median of --repeat rounds, after --warm rounds that
            are not counted: a new JVM's just-in-time compilers take tens of steps to settle,
            and a driver runs for hours; the compilers' seconds per counted round are printed)
  batch     10k-row steps on top of H: throughput in rows/s
The steps of every size run in interleaved rounds, so load from elsewhere on the machine falls
on all sizes alike. At the largest H also:
  full      recomputing every view from the stored tables (what every step cost before #14)
  by hand   a hand-written incremental PySpark job on the same layout: append the 100 new rows
            to the stored history (as Spindle keeps it: what a bootstrap re-reads), aggregate
            them, MERGE them into the stored groups, join and filter only the touched groups.
            Also printed: the same job without the append (`by hand, no history`), which is
            the comparison earlier runs of this bench made
With --drift N, instead: N 100-row steps on the smallest history, one after another (a driver
that has run for a while): the median step and the JVM's collector time per step over the first
25 steps and the last 25, and their ratio (a step must not get slower the longer a pipeline
runs).
Printed ratios: step@largest / step@smallest (target <= 1.5x), step / full at the largest
(target <= 10%), step / by hand (target <= 1.5x). Peak JVM memory is the RSS high-water mark of
the Spark JVM (VmHWM), not Python's.

    python bench/steady.py [--sizes 100000,1000000,4000000,16000000] [--repeat 3] [--warm 10]
    python bench/steady.py --sizes 100000 --drift 200
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
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


def by_hand(spark: SparkSession, work: Path, data: Path, tag: str, *, history: bool) -> None:
    """The incremental job a person would write for this pipeline, on a Delta layout; with
    `history` it keeps its input's history, as Spindle does. Its new rows are under work/hand
    (outside the pipeline's input directory)."""
    from delta.tables import DeltaTable

    new = spark.read.parquet(str(work / "hand" / "events" / tag))
    if history:
        new.write.format("delta").mode("append").save(str(work / "hand_events"))
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


@dataclass
class History:
    """One history size's pipeline, its runtime and its latest checkpoint."""

    rows: int
    work: Path
    data: Path
    pipeline: Program
    runtime: Runtime
    checkpoint: Manifest
    next_id: int
    seconds: dict[str, list[float]] = field(default_factory=dict)

    def step(self, spark: SparkSession, count: int, tag: str) -> float:
        """Write `count` new rows and run one step over them; its seconds."""
        write_rows(spark, self.data, start=self.next_id, count=count, tag=tag)
        self.next_id += count
        (self.checkpoint, stats), seconds = timed(self.runtime.step, self.pipeline, self.checkpoint)
        assert stats.rows_ingested == count, stats
        return seconds

    def median(self, kind: str) -> float:
        return statistics.median(self.seconds[kind])


def load(spark: SparkSession, rows: int) -> History:
    """A pipeline whose first step ingests `rows` rows of history (timed as `load`)."""
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
    checkpoint = runtime.initialize(pipeline)
    (checkpoint, _), seconds = timed(runtime.step, pipeline, checkpoint)
    history = History(rows, work, data, pipeline, runtime, checkpoint, rows)
    history.seconds["load"] = [seconds]
    return history


def full_recompute(spark: SparkSession, history: History) -> float:
    """Every view evaluated over the stored tables and written whole (a step before #14)."""
    views = Views(spark, history.pipeline, history.runtime.uri)

    def full() -> None:
        state = dict(history.checkpoint.state)
        for name, view in history.pipeline.views.items():
            frame, _ = views.evaluate(view, state)
            path = f"full/{name}"
            frame.write.format("delta").mode("overwrite").save(history.runtime.uri(path))

    return timed(full)[1]


def jit_seconds(spark: SparkSession) -> float:
    """The JVM's just-in-time compilers' time so far (HotSpot's C1 and C2 threads)."""
    management = spark.sparkContext._jvm.java.lang.management.ManagementFactory  # type: ignore[union-attr]
    return float(management.getCompilationMXBean().getTotalCompilationTime()) / 1000


def measure(spark: SparkSession, histories: list[History], *, repeat: int, warm: int) -> None:
    small, large = histories[0], histories[-1]
    stored = {n: large.runtime.uri(r.path) for n, r in large.checkpoint.state.items()}
    spark.read.format("delta").load(stored["totals"]).select("k", "total", "n").write.format(
        "delta"
    ).save(str(large.work / "hand_totals"))
    spark.read.format("delta").load(stored["events"]).write.format("delta").save(
        str(large.work / "hand_events")
    )

    def hand(tag: str, *, history: bool) -> float:
        write_rows(spark, large.work / "hand", start=large.next_id, count=100, tag=tag)
        large.next_id += 100
        return timed(lambda: by_hand(spark, large.work, large.data, tag, history=history))[1]

    # Rounds interleave the sizes (and the hand-written job), so a change in the machine's load
    # during the run falls on every figure alike. The first `warm` rounds are not counted: a
    # driver runs steps for hours, and a new JVM's compilers take tens of steps to settle.
    for index in range(warm + repeat):
        if index == warm:
            jit = jit_seconds(spark)
        for history in histories:
            seconds = history.step(spark, 100, f"small{index}")
            if index >= warm:
                history.seconds.setdefault("step", []).append(seconds)
        for kind, tag, keeps in (("hand", "hand", True), ("hand, no history", "plain", False)):
            seconds = hand(f"{tag}{index}", history=keeps)
            if index >= warm:
                large.seconds.setdefault(kind, []).append(seconds)
    jit = (jit_seconds(spark) - jit) / repeat
    for index in range(repeat):
        for history in histories:
            seconds = history.step(spark, 10_000, f"batch{index}")
            history.seconds.setdefault("batch", []).append(seconds)
    large.seconds["full"] = [full_recompute(spark, large)]

    print(f"{'history':>12} {'load step':>10} {'100-row step':>13} {'10k rows/s':>11}  rounds")
    for h in histories:
        rounds = " ".join(f"{s:.2f}" for s in h.seconds["step"])
        print(
            f"{h.rows:>12,} {h.median('load'):>9.2f}s {h.median('step'):>12.2f}s "
            f"{10_000 / h.median('batch'):>11,.0f}  [{rounds}]"
        )
    print(f"full recompute at {large.rows:,}: {large.median('full'):.2f} s")
    print(f"JVM compilers (JIT), counted rounds: {jit:.2f} s a round ({warm} rounds not counted)")
    for kind in ("hand", "hand, no history"):
        rounds = " ".join(f"{s:.2f}" for s in large.seconds[kind])
        print(
            f"{'by ' + kind:<20} incremental job at {large.rows:,}: {large.median(kind):.2f} s "
            f"[{rounds}]"
        )
    print("Ratios:")
    growth = large.median("step") / small.median("step")
    print(f"  step@{large.rows:,} / step@{small.rows:,}  {growth:6.2f}x  (<= 1.5x)")
    step, full, by_hand_job = large.median("step"), large.median("full"), large.median("hand")
    print(f"  step / full recompute         {step / full:6.1%}  (<= 10%)")
    print(f"  step / hand-written job       {step / by_hand_job:6.2f}x  (<= 1.5x)")
    no_history = large.median("hand, no history")
    print(f"  step / the job, no history    {step / no_history:6.2f}x  (earlier runs' comparison)")
    print(f"Peak JVM RSS: {jvm_peak_rss_mb(spark):,.0f} MiB")


def gc_seconds(spark: SparkSession) -> float:
    """The JVM's collector time so far, all collectors."""
    management = spark.sparkContext._jvm.java.lang.management.ManagementFactory  # type: ignore[union-attr]
    return float(sum(b.getCollectionTime() for b in management.getGarbageCollectorMXBeans())) / 1000


def drift(spark: SparkSession, history: History, *, steps: int) -> None:
    """`steps` 100-row steps in a row: the first 25 against the last 25."""
    window = 25
    seconds, collected = [], []
    for index in range(steps):
        before = gc_seconds(spark)
        seconds.append(history.step(spark, 100, f"drift{index}"))
        collected.append(gc_seconds(spark) - before)
        if (index + 1) % window == 0:
            recent = statistics.median(seconds[-window:])
            print(
                f"  steps {index + 2 - window:>4}-{index + 1:<4} median {recent:.2f} s"
                f"  JVM collector {statistics.mean(collected[-window:]):.2f} s/step",
                flush=True,
            )
    first, last = statistics.median(seconds[:window]), statistics.median(seconds[-window:])
    print(f"{steps} steps at {history.rows:,} rows of history:")
    print(f"  first {window} steps: median {first:.2f} s; last {window}: {last:.2f} s")
    print(f"  last / first  {last / first:6.2f}x  (a step must not grow with the steps run)")
    print(f"Peak JVM RSS: {jvm_peak_rss_mb(spark):,.0f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100000,1000000,4000000,16000000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warm", type=int, default=10, help="rounds run before the counted ones")
    parser.add_argument("--drift", type=int, default=0, help="steps in a row (drift mode)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    spark = spark_session(app="spindle-steady", extra={"spark.sql.shuffle.partitions": "8"})
    histories: list[History] = []
    try:
        if args.drift:
            histories.append(load(spark, sizes[0]))
            drift(spark, histories[0], steps=max(args.drift, 50))
            return
        for rows in sizes:
            histories.append(load(spark, rows))
        measure(spark, histories, repeat=args.repeat, warm=args.warm)
    finally:  # the histories are gigabytes
        for history in histories:
            shutil.rmtree(history.work, ignore_errors=True)


if __name__ == "__main__":
    main()
