"""Benchmark: bootstrapping versus recomputing, on one generated pipeline, in one run.

A pipeline of 5 tables (parquet file inputs, --rows rows in all, 2M by default) and 20 views:
per table a root view (filtered aggregate), mid views joining two roots, leaf views on mids.
Printed, all measured in this run on this machine:
  full      recompute from scratch: ingest every row and evaluate every view
  leaf      bootstrap after modifying one leaf view
  root      bootstrap after modifying one root view (its descendants are modified too)
  by hand   a hand-written PySpark job computing only that leaf from the same stored state
and the ratios leaf/full (target <= 10%) and leaf/by-hand (target <= 1.5x).

    python bench/bootstrap.py [--rows 2000000]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from pyspark.sql import functions as F

from spindle.checkpoint import PipelineRef
from spindle.checkpoint.store import open_store
from spindle.plan import make_plan
from spindle.program import parse_program
from spindle.runtime.engine import Runtime
from spindle.runtime.session import spark_session

TABLES = 5


def program(data: Path, *, leaf_threshold: int = 0, root_threshold: int = 0) -> str:
    parts = []
    for t in range(TABLES):
        source = (
            '[{"name": "src", "format": {"name": "parquet"}, "transport": '
            f'{{"name": "file_input", "config": {{"path": "{data / f"t{t}"}"}}}}}}]'
        )
        parts.append(
            f"create table t{t} (id bigint, k int, amount bigint) with "
            f"('materialized' = 'true', 'connectors' = '{source}');"
        )
    for t in range(TABLES):  # 5 roots
        threshold = root_threshold if t == 0 else 0
        parts.append(
            f"create view root{t} as select k, sum(amount) as total, count(*) as n "
            f"from t{t} where amount > {threshold} group by k;"
        )
    for m in range(10):  # 10 mids
        a, b = m % TABLES, (m + 1) % TABLES
        parts.append(
            f"create view mid{m} as select x.k, x.total + y.total as total, x.n + y.n as n "
            f"from root{a} x join root{b} y on x.k = y.k;"
        )
    for leaf in range(5):  # 5 leaves
        threshold = leaf_threshold if leaf == 0 else 0
        parts.append(
            f"create materialized view leaf{leaf} as select k, total, n from mid{leaf * 2} "
            f"where n > {threshold};"
        )
    return "\n".join(parts)


def timed(label: str, fn):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - start
    print(f"  {label:<52} {elapsed:8.2f} s", flush=True)
    return result, elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=2_000_000)
    args = parser.parse_args()
    spark = spark_session(app="spindle-bench", extra={"spark.sql.shuffle.partitions": "8"})
    work = Path(tempfile.mkdtemp(prefix="spindle-bench-"))
    data = work / "data"
    per_table = args.rows // TABLES
    print(f"Generating {TABLES} tables x {per_table:,} rows (parquet) under {data}")
    for t in range(TABLES):
        spark.range(per_table).select(
            F.col("id"),
            (F.col("id") % 1000).cast("int").alias("k"),
            ((F.col("id") * (t + 7)) % 997).alias("amount"),
        ).repartition(4).write.mode("overwrite").parquet(str(data / f"t{t}"))

    v1 = parse_program(program(data))
    store = open_store((work / "state").as_uri())
    runtime = Runtime(
        spark=spark, store=store, root=store.uri, pipeline=PipelineRef(namespace="b", name="b")
    )
    print("Timings:")

    def full() -> object:
        first = runtime.initialize(v1)
        return runtime.step(v1, first)[0]

    checkpoint, t_full = timed("full recompute (ingest all rows, all 20 views)", full)
    v2 = parse_program(program(data, leaf_threshold=1))
    leaf_plan = make_plan(old=v1, new=v2)
    assert leaf_plan.views_to_evaluate == ("leaf0",)
    checkpoint, t_leaf = timed(
        "bootstrap, one leaf view modified", lambda: runtime.bootstrap(leaf_plan, checkpoint)
    )
    v3 = parse_program(program(data, leaf_threshold=1, root_threshold=1))
    root_plan = make_plan(old=v2, new=v3)
    checkpoint, t_root = timed(
        f"bootstrap, one root view modified ({len(root_plan.views_to_evaluate)} views)",
        lambda: runtime.bootstrap(root_plan, checkpoint),
    )
    mid = checkpoint.state["mid0"]  # type: ignore[attr-defined]

    def by_hand() -> None:
        source = (
            spark.read.format("delta")
            .option("versionAsOf", mid.version)
            .load(f"{store.uri}/{mid.path}")
        )
        source.where(F.col("n") > 1).select("k", "total", "n").write.format("delta").mode(
            "overwrite"
        ).save(str(work / "by_hand_leaf0"))

    _, t_hand = timed("hand-written PySpark job for that leaf only", by_hand)
    print("Ratios:")
    print(f"  leaf bootstrap / full recompute   {t_leaf / t_full:6.1%}   (target <= 10%)")
    print(f"  root bootstrap / full recompute   {t_root / t_full:6.1%}")
    print(f"  leaf bootstrap / hand-written job {t_leaf / t_hand:6.2f}x  (target <= 1.5x)")


if __name__ == "__main__":
    main()
