"""Benchmark: a primary-key table's upsert step costs what its batch costs, not the table's size.

For each table size N, in one run on one Spark session, two pipelines of the same shape (a
table fed by Parquet files, and an aggregate view over it):

  keyed     the table has a PRIMARY KEY; a step upserts 100 rows: 50 replace rows of random
            keys the table holds, 50 insert new keys
  plain     no key; a step appends 100 new rows (the cheapest step there is: the baseline)

The steps of every size run in interleaved rounds (round 0 warms up and is not counted), so
load from elsewhere on the machine falls on every figure alike. Printed: the median step of
each, the keyed step's growth from the smallest size to the largest (target <= 1.5x, as for
the steady bench), and keyed / plain at each size.

    python bench/upserts.py [--sizes 100000,1000000,4000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spindle.checkpoint import Manifest, PipelineRef
from spindle.checkpoint.store import open_store
from spindle.program import Program, parse_program
from spindle.runtime.engine import Runtime
from spindle.runtime.session import spark_session


def program(data: Path, *, keyed: bool) -> Program:
    source = json.dumps(
        [
            {
                "name": "src",
                "format": {"name": "parquet"},
                "transport": {"name": "file_input", "config": {"path": str(data)}},
            }
        ]
    )
    key = " not null primary key" if keyed else ""
    return parse_program(
        f"create table t (id bigint{key}, v bigint) with ('connectors' = '{source}');\n"
        "create view s as select v % 10 as g, count(*) as n, sum(v) as total "
        "from t group by v % 10;\n"
    )


@dataclass
class Pipeline:
    rows: int
    keyed: bool
    work: Path
    pipeline: Program
    runtime: Runtime
    checkpoint: Manifest
    next_id: int
    seconds: list[float] = field(default_factory=list)

    def step(self, spark: SparkSession, round_: int) -> float:
        """100 rows: for a keyed table 50 of them replace rows of keys it holds."""
        fresh = spark.range(self.next_id, self.next_id + 100 - 50 * self.keyed)
        self.next_id += 100 - 50 * self.keyed
        batch: DataFrame = fresh.select("id", F.lit(round_).cast("bigint").alias("v"))
        if self.keyed:
            held = spark.range(50).select(
                ((F.col("id") * 7919 + round_ * 104729) % self.rows).alias("id"),
                F.lit(round_).cast("bigint").alias("v"),
            )
            batch = batch.unionByName(held)
        batch.coalesce(1).write.parquet(str(self.work / "data" / f"step{round_}"))
        start = time.perf_counter()
        self.checkpoint, _ = self.runtime.step(self.pipeline, self.checkpoint)
        return time.perf_counter() - start


def load(spark: SparkSession, rows: int, *, keyed: bool) -> Pipeline:
    work = Path(tempfile.mkdtemp(prefix=f"spindle-upserts-{rows}-"))
    spark.range(rows).select("id", (F.col("id") * 3).alias("v")).repartition(
        max(1, rows // 2_000_000)
    ).write.parquet(str(work / "data" / "history"))
    pipeline = program(work / "data", keyed=keyed)
    store = open_store((work / "state").as_uri())
    runtime = Runtime(
        spark=spark, store=store, root=store.uri, pipeline=PipelineRef(namespace="b", name="u")
    )
    checkpoint, _ = runtime.step(pipeline, runtime.initialize(pipeline))
    return Pipeline(rows, keyed, work, pipeline, runtime, checkpoint, next_id=rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100000,1000000,4000000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    spark = spark_session(app="spindle-upserts", extra={"spark.sql.shuffle.partitions": "8"})
    pipelines: list[Pipeline] = []
    try:
        for rows in (int(s) for s in args.sizes.split(",")):
            for keyed in (True, False):
                pipelines.append(load(spark, rows, keyed=keyed))
        for index in range(args.repeat + 1):
            for pipeline in pipelines:
                seconds = pipeline.step(spark, index + 1)
                if index:
                    pipeline.seconds.append(seconds)
        print(f"{'table rows':>12} {'upsert step':>12} {'append step':>12} {'upsert/append':>14}")
        upserting = [p for p in pipelines if p.keyed]
        plain = [p for p in pipelines if not p.keyed]
        for up, add in zip(upserting, plain, strict=True):
            u, a = statistics.median(up.seconds), statistics.median(add.seconds)
            print(f"{up.rows:>12,} {u:>11.2f}s {a:>11.2f}s {u / a:>13.2f}x")
        first, last = upserting[0], upserting[-1]
        growth = statistics.median(last.seconds) / statistics.median(first.seconds)
        print(f"upsert step@{last.rows:,} / step@{first.rows:,}  {growth:.2f}x  (<= 1.5x)")
    finally:
        for pipeline in pipelines:
            shutil.rmtree(pipeline.work, ignore_errors=True)


if __name__ == "__main__":
    main()
