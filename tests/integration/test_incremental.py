"""The correctness oracle for incremental maintenance: randomized programs from the supported
query set (and some that recompute), fed random batches, through the incremental engine and
through a whole recomputation by Spark. After every step, every view's contents and the changes
its output received must equal what recomputing gives."""

from __future__ import annotations

import json
import random
import subprocess
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from spindle.checkpoint import PipelineRef
from spindle.checkpoint.store import open_store
from spindle.plan.maintenance import Mode, maintenance
from spindle.program import parse_program
from spindle.runtime import maintain
from spindle.runtime.compaction import Compaction
from spindle.runtime.engine import Runtime
from spindle.runtime.maintain import Views
from tests import soak

TABLES = (
    "create table t1 (id bigint, k int, v int, price decimal(7, 2));\n"
    "create table t2 (k int not null primary key, label varchar, w int);\n"
)

# (name, query, what it reads): the pool programs are drawn from. {c} is a random constant.
VIEWS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("filtered", "select id, k, v * 2 as v2 from t1 where v > {c}", ("t1",)),
    (
        "joined",
        "select a.id, a.k, b.label, a.v + b.w as s from t1 a join t2 b on a.k = b.k",
        ("t1", "t2"),
    ),
    ("crossed", "select a.k, b.label from t1 a, t2 b where a.k = b.k and a.v > {c}", ("t1", "t2")),
    (
        "by_k",
        "select k, count(*) as n, sum(v) as total, avg(price) as mean, min(v) as lo, "
        "max(v) as hi, count(price) as priced from t1 group by k",
        ("t1",),
    ),
    ("overall", "select count(*) as n, sum(v) as total, max(price) as top from t1", ("t1",)),
    (  # most steps' changes are filtered out: a global group the change does not touch
        "rare",
        "select count(*) as n, sum(v) as total, avg(price) as mean from t1 where v > {c} + 45",
        ("t1",),
    ),
    ("pairs", "select k, count(v, price) as both_set from t1 group by k", ("t1",)),
    ("keys", "select distinct k from t1", ("t1",)),
    ("both", "select k, v from t1 union all select k, w from t2 where w > {c}", ("t1", "t2")),
    (
        "shifted",
        "select k + 1 as k1, sum(v) as total from t1 where v % 3 <> 0 group by k + 1",
        ("t1",),
    ),
    ("big_groups", "select k, total from by_k where total > {c}", ("by_k",)),
    (
        "extremes",
        "select max(total) as best, min(n) as fewest, count(*) as groups from by_k",
        ("by_k",),
    ),
    ("labels", "select label, count(*) as c, sum(s) as s from joined group by label", ("joined",)),
    ("label_keys", "select distinct label from joined where s > {c}", ("joined",)),
    (
        "ranked",
        "select k, v, row_number() over (partition by k order by id) as rn from t1",
        ("t1",),
    ),
    (
        "left",
        "select a.id, b.label, b.w from t1 a left join t2 b on a.k = b.k where a.v > {c}",
        ("t1", "t2"),
    ),
    (
        "left_counts",
        "select b.label, count(a.id) as n, max(a.v) as hi from t2 b "
        "left outer join t1 a on a.k = b.k and a.v > {c} group by b.label",
        ("t1", "t2"),
    ),
    ("right", "select a.id, b.label from t1 a right join t2 b on a.k = b.k", ("t1", "t2")),
)


RECOMPUTED = {"ranked", "right", "pairs"}
"""The pool's views outside the incremental set (a window function, a RIGHT JOIN, a COUNT of
several arguments)."""


COLUMN_LISTS = {"keys": " (kk)", "shifted": " (bucket, total)"}
"""Views of the pool that name their columns in a list (`program.column_lists`)."""


def program_text(rng: random.Random, root: Path, source: Path) -> tuple[str, list[str]]:
    """Every view of the pool, with random constants, each with a file output."""
    chosen = [name for name, _, _ in VIEWS]
    lake = json.dumps(
        [
            {
                "name": "lake",
                "transport": {"name": "delta_table_input", "config": {"uri": str(source)}},
            }
        ]
    )
    cdc = json.dumps(
        [
            {
                "name": "cdc",
                "transport": {"name": "file_input", "config": {"path": str(root / "cdc")}},
                "format": {"name": "json", "config": {"update_format": "insert_delete"}},
            }
        ]
    )
    text = TABLES.replace(
        "price decimal(7, 2));", f"price decimal(7, 2)) with ('connectors' = '{lake}');"
    ).replace("w int);", f"w int) with ('connectors' = '{cdc}');")
    for name, query, _ in VIEWS:
        output = json.dumps(
            [
                {
                    "name": "out",
                    "transport": {
                        "name": "file_output",
                        "config": {"path": str(root / "outputs" / name)},
                    },
                    "format": {"name": "json"},
                }
            ]
        )
        text += (
            f"create materialized view {name}{COLUMN_LISTS.get(name, '')} "
            f"with ('connectors' = '{output}') as "
            f"{query.format(c=rng.randint(0, 60))};\n"
        )
    return text, chosen


def batch(rng: random.Random, step: int) -> dict[str, list[dict[str, Any]]]:
    """Rows to insert into t1 (through its Delta source); changes to t2, whose key is k:
    upserts (often of a key it holds) and deletes by key, in `insert_delete` lines."""
    t1 = [
        {
            "id": step * 1000 + i,
            "k": rng.choice([0, 1, 2, 3, None]),
            "v": rng.choice([rng.randint(-5, 80), None]) if rng.random() < 0.9 else None,
            "price": rng.choice([None, Decimal(rng.randint(0, 10000)) / 100]),
        }
        for i in range(rng.randint(0, 12))
    ]
    t2 = [
        {"delete": {"k": rng.choice([0, 1, 2, 5])}}
        if rng.random() < 0.3
        else {
            "insert": {
                "k": rng.choice([0, 1, 2, 5]),
                "label": rng.choice(["a", "b", "c"]),
                "w": rng.randint(0, 90),
            }
        }
        for _ in range(rng.randint(1, 4))
    ]
    return {"t1": t1, "t2": t2}


def upserted(table: dict[int, tuple[Any, ...]], changes: list[dict[str, Any]]) -> None:
    """Apply `insert_delete` changes to a primary-key table (k -> row), in order."""
    for change in changes:
        if "insert" in change:
            row = change["insert"]
            table[row["k"]] = (row["k"], row["label"], row["w"])
        else:
            table.pop(change["delete"]["k"], None)


def contents(frame: Any) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(row) for row in frame.collect())


def changes_written(root: Path, view: str, seen: set[Path]) -> Counter[tuple[Any, ...]]:
    """Rows the view's output received since last asked, as a multiset with signed counts."""
    found: Counter[tuple[Any, ...]] = Counter()
    for path in sorted((root / "outputs" / view).glob("*.jsonl")):
        if path in seen:
            continue
        seen.add(path)
        for line in path.read_text().splitlines():
            record = json.loads(line)
            weight = record.pop("weight")
            # NULLs as `as_records` has them: Spark's toJSON leaves them out, outputs write null
            kept = {key: value for key, value in record.items() if value is not None}
            found[tuple(sorted(kept.items()))] += weight
    return found


def as_records(frame: Any) -> Counter[tuple[Any, ...]]:
    rows = [json.loads(j) for j in frame.toJSON().collect()]
    return Counter(tuple(sorted(r.items())) for r in rows)


SEEDS = range(1, 1 + soak.count(ci=1, soak=4))
STEPS = soak.count(ci=3, soak=10)


@pytest.mark.slow  # about 5 minutes: runs beside the cluster's tests (see the Makefile)
@pytest.mark.parametrize("seed", SEEDS)
def test_incremental_equals_recompute_after_every_step(
    tmp_path: Path, spark: Any, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inserts into both tables; deletes from t1 (through its Delta source's change feed) from
    the second step on, so retractions flow from a table as well as out of aggregates; t2 has a
    primary key and receives upserts and deletes by key (JSON `insert_delete`), so replaced
    rows leave as -old +new; its contents must equal applying its changes in order. Group
    tables are rewritten whole on odd steps and MERGEd on even ones (both ways of storing).
    Relations compact every second small file, so the oracle also reads compacted state."""
    from delta.tables import DeltaTable

    rng = random.Random(seed)
    source = tmp_path / "source"
    spark.createDataFrame([], "id bigint, k int, v int, price decimal(7, 2)").write.format(
        "delta"
    ).option("delta.enableChangeDataFeed", "true").save(str(source))
    text, chosen = program_text(rng, tmp_path, source)
    program = parse_program(text)
    modes = {name: maintenance(program.views[name]).mode for name in chosen}
    assert {n for n, m in modes.items() if m is Mode.RECOMPUTE} == RECOMPUTED
    root = tmp_path / "pipeline"
    store = open_store(root.as_uri())
    reports: list[tuple[str, dict[str, Any]]] = []
    runtime = Runtime(
        spark=spark,
        store=store,
        root=root.as_uri(),
        pipeline=PipelineRef(namespace="t", name=str(seed)),
        report=lambda event, **fields: reports.append((event, fields)),
        compaction=Compaction(small_files=2),
    )
    manifest = runtime.initialize(program)
    sessions = _live_sessions(spark)
    seen: dict[str, set[Path]] = {name: set() for name in chosen}
    # the first checkpoint emits each view's rows over empty tables (a global aggregate's):
    # the outputs start from nothing
    before: dict[str, Counter[tuple[Any, ...]]] = {name: Counter() for name in chosen}
    ids: list[int] = []
    rewritten = maintain.SMALL_GROUPS
    t2: dict[int, tuple[Any, ...]] = {}
    for step in range(1, STEPS + 1):
        rows = batch(rng, step)
        if rows["t1"]:
            spark.createDataFrame(
                rows["t1"], "id bigint, k int, v int, price decimal(7, 2)"
            ).write.format("delta").mode("append").save(str(source))
            ids.extend(r["id"] for r in rows["t1"])
        gone = rng.sample(ids, k=min(len(ids), rng.randint(0, 4))) if step > 1 else []
        if gone:
            DeltaTable.forPath(spark, str(source)).delete(f"id IN ({', '.join(map(str, gone))})")
            ids = [i for i in ids if i not in gone]
        if rows["t2"]:
            inbox = tmp_path / "cdc"
            inbox.mkdir(parents=True, exist_ok=True)
            (inbox / f"{step:04d}.json").write_text(
                "".join(json.dumps(r) + "\n" for r in rows["t2"])
            )
            upserted(t2, rows["t2"])
        monkeypatch.setattr(maintain, "SMALL_GROUPS", rewritten if step % 2 else 0)
        started, temps = time.perf_counter(), _temporary_views(spark)
        manifest, stats = runtime.step(program, manifest)
        assert _temporary_views(spark) <= temps, "a step left temporary views in the session"
        print(
            f"step {step}: {stats.rows_ingested} rows in, {len(gone)} deleted, views changed "
            f"{stats.views_recomputed} in {time.perf_counter() - started:.1f}s",
            flush=True,
        )
        views = Views(spark, program, runtime.uri)
        views.register(manifest.state, tuple(program.tables))
        assert contents(views.contents("t2", manifest.state["t2"])) == Counter(t2.values()), (
            f"seed {seed} step {step}: t2 differs from its changes applied in order"
        )
        for name in chosen:
            reference = _recomputed(spark, views, program, manifest, name)
            stored = views.contents(name, manifest.state[name])
            assert as_records(stored) == as_records(reference), (
                f"seed {seed} step {step}: view {name} ({modes[name]}) differs from a recompute"
            )
            now = as_records(reference)
            wanted = Counter(now)
            wanted.subtract(before[name])
            written = changes_written(tmp_path, name, seen[name])
            assert +written == +wanted and -written == -wanted, (
                f"seed {seed} step {step}: view {name} ({modes[name]}) emitted other changes"
            )
            before[name] = now
    assert [e for e, _ in reports if e == "compacted"], "no relation was compacted"
    for name, listed in COLUMN_LISTS.items():  # stored under the listed names
        stored = views.contents(name, manifest.state[name]).columns
        assert f" ({', '.join(stored)})" == listed
    # caching a step's changes must not clone the session: a clone kept its temporary views and
    # the Delta snapshots they read for as long as the driver ran
    assert _live_sessions(spark) <= sessions, "steps left Spark sessions behind"


def _live_sessions(spark: Any) -> int:
    """Live JVM SparkSession objects (a class histogram collects garbage first)."""
    pid = spark.sparkContext._jvm.ProcessHandle.current().pid()
    histogram = subprocess.run(
        ["jcmd", str(pid), "GC.class_histogram"], capture_output=True, text=True, check=True
    ).stdout
    for line in histogram.splitlines():
        fields = line.split()
        if fields[-1:] == ["org.apache.spark.sql.classic.SparkSession"]:
            return int(fields[1])
    return 0


def _temporary_views(spark: Any) -> set[str]:
    return {t.name for t in spark.catalog.listTables() if t.isTemporary}


def _recomputed(spark: Any, views: Views, program: Any, manifest: Any, name: str) -> Any:
    """The view evaluated whole by Spark over the tables' contents (its dependencies
    recomputed the same way first)."""
    view = program.views[name]
    for dep in view.dependencies:
        if dep in program.views:
            _recomputed(spark, views, program, manifest, dep).createOrReplaceTempView(f"`{dep}`")
        else:
            views.contents(dep, manifest.state[dep]).createOrReplaceTempView(f"`{dep}`")
    schemas = {
        dep: {
            f.name: f.dataType.simpleString().upper() for f in spark.table(f"`{dep}`").schema.fields
        }
        for dep in view.dependencies
    }
    from spindle.runtime.translate import view_sql

    return spark.sql(view_sql(view, program, schemas).sql)


def test_a_global_aggregate_over_a_change_it_filters_out_keeps_its_values(
    tmp_path: Path, spark: Any
) -> None:
    """A step whose rows the WHERE drops touched the one group of a view without GROUP BY
    anyway: its running count became NULL (`NULL + 1`), the view showed (NULL, NULL), and
    every count after was one short. Spark gives (1, 200), then (2, 500), and (0, NULL) once
    every row is deleted."""
    from tests.integration.test_runtime_io import runtime_for

    inputs = tmp_path / "in"
    inputs.mkdir()
    source = {"name": "c", "transport": {"name": "file_input", "config": {"path": str(inputs)}}}
    source["format"] = {"name": "json", "config": {"update_format": "insert_delete"}}
    sql = (
        f"create table t (x int) with ('connectors' = '{json.dumps([source])}');\n"
        "create materialized view v as select count(*) as n, sum(x) as s from t where x > 100;\n"
    )
    runtime, _, program = runtime_for(tmp_path, sql)
    assert maintenance(program.views["v"]).mode is Mode.INCREMENTAL
    checkpoint = runtime.initialize(program)
    seen = []
    steps = [("insert", 200), ("insert", 5), ("insert", 300), ("delete", 200), ("delete", 300)]
    for step, (change, x) in enumerate(steps):
        (inputs / f"{step}.json").write_text(json.dumps({change: {"x": x}}) + "\n")
        checkpoint, _ = runtime.step(program, checkpoint)
        stored = Views(spark, program, runtime.uri).contents("v", checkpoint.state["v"])
        seen.append([tuple(row) for row in stored.collect()])
    assert seen == [[(1, 200)], [(1, 200)], [(2, 500)], [(1, 300)], [(0, None)]]
