"""Inputs that change rows, not only insert them, through the real runtime: primary-key tables
upsert (downstream views and outputs see -old +new), JSON `insert_delete` deletes, CSV and
Parquet weight or operation columns, and a bad record fails the step before anything is
ingested."""

from __future__ import annotations

import csv
import json
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from spindle.checkpoint import Manifest, PipelineRef
from spindle.checkpoint.store import open_store
from spindle.errors import SpindleError
from spindle.plan import make_plan
from spindle.program import Program, parse_program
from spindle.runtime import storage
from spindle.runtime.compaction import Compaction
from spindle.runtime.engine import Runtime
from spindle.runtime.maintain import Views


def connectors(*entries: dict[str, Any]) -> str:
    return json.dumps(list(entries))


def file_input(name: str, path: Path, fmt: str = "json", **config: Any) -> dict[str, Any]:
    return {
        "name": name,
        "transport": {"name": "file_input", "config": {"path": str(path)}},
        "format": {"name": fmt, "config": config},
    }


def insert_delete(path: Path) -> str:
    """A table's connectors: one JSON `insert_delete` file input named `cdc`."""
    return connectors(file_input("cdc", path, update_format="insert_delete"))


def fed_and_watched(table: str, view: str, *, inbox: Path, out: Path) -> str:
    """A program: `table` fed by `insert_delete` files from `inbox`, and `view` (name and
    query) with a file output to `out`."""
    name, query = view.split(" as ", 1)
    return (
        f"create table {table} with ('connectors' = '{insert_delete(inbox)}');\n"
        f"create materialized view {name} with ('connectors' = '{connectors(file_output(out))}') "
        f"as {query};"
    )


def file_output(path: Path) -> dict[str, Any]:
    return {
        "name": "out",
        "transport": {"name": "file_output", "config": {"path": str(path)}},
        "format": {"name": "json"},
    }


class Pipeline:
    """A program run step by step by the runtime, with readers for its state and outputs."""

    def __init__(self, spark: Any, tmp_path: Path, sql: str) -> None:
        self.spark, self.tmp = spark, tmp_path
        self.program: Program = parse_program(sql)
        root = tmp_path / "pipeline"
        self.runtime = Runtime(
            spark=spark,
            store=open_store(root.as_uri()),
            root=root.as_uri(),
            pipeline=PipelineRef(namespace="t", name=tmp_path.name),
        )
        self.manifest: Manifest = self.runtime.initialize(self.program)
        self.seen: set[Path] = set()

    def step(self) -> None:
        self.manifest, _ = self.runtime.step(self.program, self.manifest)

    def bootstrap(self, sql: str) -> None:
        """Change the program to `sql`, bootstrapped as an approved change is."""
        new = parse_program(sql)
        plan = make_plan(old=self.program, new=new, old_runtime=self.manifest.runtime_version)
        self.manifest, self.program = self.runtime.bootstrap(plan, self.manifest), new

    def rows(self, name: str) -> Counter[tuple[Any, ...]]:
        views = Views(self.spark, self.program, self.runtime.uri)
        frame = views.contents(name, self.manifest.state[name])
        return Counter(tuple(r) for r in frame.collect())

    def stored(self, name: str) -> int:
        """Rows physically stored for `name` (all of them, whatever their weight)."""
        record = self.manifest.state[name]
        uri = self.runtime.uri(record.path)
        return storage.read_delta(self.spark, uri, record.version, _empty()).count()

    def changes(self, outputs: Path) -> Counter[tuple[Any, ...]]:
        """What the output received since last asked: rows with signed counts."""
        found: Counter[tuple[Any, ...]] = Counter()
        for path in sorted(outputs.glob("*.jsonl")):
            if path in self.seen:
                continue
            self.seen.add(path)
            for line in path.read_text().splitlines():
                record = json.loads(line)
                weight = record.pop("weight")
                found[tuple(record.values())] += weight
        return found


def feldera_in_and_out(spark: Any, tmp_path: Path, query: str) -> tuple[Path, Path, Pipeline]:
    """A keyed table `t (id, v)` fed Feldera's insert/delete lines from `tmp_path/in`, and a
    view of `query` whose output writes them to `tmp_path/out`: the inbox, the outbox and the
    pipeline."""
    inbox, out = tmp_path / "in", tmp_path / "out"
    feldera = {
        **file_output(out),
        "format": {"name": "json", "config": {"update_format": "insert_delete"}},
    }
    sql = (
        f"create table t (id int not null primary key, v int) with "
        f"('connectors' = '{insert_delete(inbox)}');\n"
        f"create materialized view fed with ('connectors' = '{connectors(feldera)}') as {query};"
    )
    return inbox, out, Pipeline(spark, tmp_path, sql)


def test_a_json_output_can_write_felderas_insert_delete(tmp_path: Path, spark: Any) -> None:
    """`"update_format": "insert_delete"` on a JSON file output: Feldera's lines, an update
    as a delete of the old row and an insert of the new one."""
    inbox, out, pipeline = feldera_in_and_out(spark, tmp_path, "select id, v from t where v > 1")
    first = [{"insert": {"id": 1, "v": 5}}, {"insert": {"id": 2, "v": 7}}]
    write_lines(inbox / "1.jsonl", first, mtime=1_000_000)
    pipeline.step()
    write_lines(
        inbox / "2.jsonl",
        [{"insert": {"id": 1, "v": 6}}, {"delete": {"id": 2, "v": 7}}],
        mtime=1_000_100,
    )
    pipeline.step()
    second = [{"delete": {"id": 1, "v": 5}}, {"insert": {"id": 1, "v": 6}}]
    second.append({"delete": {"id": 2, "v": 7}})
    written = [
        sorted(json.dumps(json.loads(line)) for line in path.read_text().splitlines())
        for path in sorted(out.glob("*.jsonl"))
    ]
    assert written == [sorted(map(json.dumps, first)), sorted(map(json.dumps, second))]


def test_an_outputs_file_holds_a_rows_deletes_before_its_inserts(
    tmp_path: Path, spark: Any
) -> None:
    """A consumer applies an output file in order, by key (Feldera, a Spindle table with a
    PRIMARY KEY reading it): an update's insert written before its delete deleted the row. The
    two came from different partitions of the change, in no order (69 of 200 keys, measured
    with partitions left uncoalesced, as a larger change leaves them)."""
    inbox, out, pipeline = feldera_in_and_out(spark, tmp_path, "select id, v from t")
    keys = range(200)
    write_lines(inbox / "1.jsonl", [{"insert": {"id": i, "v": 0}} for i in keys], mtime=1_000_000)
    pipeline.step()
    write_lines(inbox / "2.jsonl", [{"insert": {"id": i, "v": 1}} for i in keys], mtime=1_000_100)
    coalescing = spark.conf.get("spark.sql.adaptive.coalescePartitions.enabled")
    spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")
    try:
        pipeline.step()
    finally:
        spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", coalescing)
    [update] = [p for p in sorted(out.glob("*.jsonl")) if p.name.startswith("00000002-")]
    kinds = [next(iter(json.loads(line))) for line in update.read_text().splitlines()]
    assert kinds == ["delete"] * len(keys) + ["insert"] * len(keys)


def test_csv_text_goes_through_verbatim_as_rfc_4180_writes_it(tmp_path: Path, spark: Any) -> None:
    """A quote inside a quoted field is written twice, and a quoted field may hold a line
    break (RFC 4180, and Feldera's reader and writer). Spark's defaults read a doubled quote
    as two quotes, refused a quoted line break as a broken record, trimmed a value's spaces
    on output and escaped a quote with a backslash, which other CSV readers split at."""
    inbox, out = tmp_path / "in", tmp_path / "out"
    written = {**file_output(out), "format": {"name": "csv"}}
    sql = (
        f"create table t (id int, s varchar) with "
        f"('connectors' = '{connectors(file_input('in', inbox, 'csv'))}');\n"
        f"create materialized view v with ('connectors' = '{connectors(written)}') "
        "as select id, s from t;"
    )
    pipeline = Pipeline(spark, tmp_path, sql)
    lines = ["id,s", '1,"say ""hi"", ok"', '2,"two', 'lines"', '3,"  spaced  "', "4,plain"]
    write_lines(inbox / "1.csv", lines, mtime=1_000_000)
    pipeline.step()
    values = {1: 'say "hi", ok', 2: "two\nlines", 3: "  spaced  ", 4: "plain"}
    assert pipeline.rows("t") == Counter(values.items())
    [output] = out.glob("*.csv")
    with output.open(newline="") as readable:
        records = list(csv.reader(readable))
    assert records[0] == ["id", "s", "weight"]
    assert sorted(records[1:]) == sorted([str(k), v, "1"] for k, v in values.items())


def test_rows_an_output_cannot_hold_fail_the_step_without_a_retry(
    tmp_path: Path, spark: Any
) -> None:
    """A CSV output of an array column was OutputUnwritable, retried for a minute as if the
    storage had refused it, advising to make the location writable."""
    inbox, out = tmp_path / "in", tmp_path / "out"
    written = {**file_output(out), "format": {"name": "csv"}}
    sql = (
        f"create table t (id int) with ('connectors' = '{connectors(file_input('in', inbox))}');\n"
        f"create materialized view v with ('connectors' = '{connectors(written)}') "
        "as select id, array(id) as ids from t;"
    )
    pipeline = Pipeline(spark, tmp_path, sql)
    write_lines(inbox / "1.json", [{"id": 1}], mtime=1_000_000)
    with pytest.raises(SpindleError) as refused:
        pipeline.step()
    assert refused.value.reason == "OutputSchemaMismatch"  # not among the retried reasons
    assert "UNSUPPORTED_DATA_TYPE_FOR_DATASOURCE" in refused.value.message


def test_an_output_receives_the_rows_a_view_has_before_any_input(
    tmp_path: Path, spark: Any
) -> None:
    """A global aggregate has a row over empty tables (`count(*)` is 0), and a view of VALUES
    has its rows: the first checkpoint emits them. They were never emitted, so the first
    step's change retracted a row (0) that the output never received, and a view of VALUES
    reached its output never."""
    inbox, counted_out, codes_out = tmp_path / "in", tmp_path / "counted", tmp_path / "codes"
    sql = (
        f"create table t (x int) with ('connectors' = '{connectors(file_input('in', inbox))}');\n"
        f"create materialized view counted with ('connectors' = "
        f"'{connectors(file_output(counted_out))}') as select count(*) as n from t;\n"
        f"create materialized view codes (code, label) with ('connectors' = "
        f"'{connectors(file_output(codes_out))}') as values (1, 'one'), (2, 'two');\n"
    )
    pipeline = Pipeline(spark, tmp_path, sql)
    assert pipeline.changes(counted_out) == Counter({(0,): 1})
    assert pipeline.changes(codes_out) == Counter({(1, "one"): 1, (2, "two"): 1})
    write_lines(inbox / "1.json", [{"x": 1}, {"x": 2}], mtime=1_000_000)
    pipeline.step()
    assert pipeline.changes(counted_out) == Counter({(2,): 1, (0,): -1})


def _empty() -> Any:
    from pyspark.sql.types import StructType

    return StructType([])


def write_lines(path: Path, records: list[Any], *, mtime: float | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def test_primary_key_upserts_and_the_aggregate_sees_minus_old_plus_new(
    tmp_path: Path, spark: Any
) -> None:
    inbox, out = tmp_path / "in", tmp_path / "out"
    sql = fed_and_watched(
        "t (id int not null primary key, grp varchar, v int)",
        "sums as select grp, sum(v) as total, count(*) as n from t group by grp",
        inbox=inbox,
        out=out,
    )
    pipeline = Pipeline(spark, tmp_path, sql)
    write_lines(
        inbox / "1.jsonl",
        [
            {"insert": {"id": 1, "grp": "a", "v": 10}},
            {"insert": {"id": 2, "grp": "a", "v": 5}},
            {"insert": {"id": 3, "grp": "b", "v": 1}},
        ],
        mtime=1_000_000,
    )
    pipeline.step()
    assert pipeline.rows("sums") == Counter({("a", 15, 2): 1, ("b", 1, 1): 1})
    pipeline.changes(out)
    write_lines(
        inbox / "2.jsonl",
        [
            {"insert": {"id": 1, "grp": "b", "v": 7}},  # moves key 1 from a to b
            {"delete": {"id": 2}},  # a delete by key only
            {"delete": {"id": 99}},  # a key the table does not hold: nothing
            {"insert": {"id": 4, "grp": "c", "v": 1}},
            {"delete": {"id": 4, "grp": "c", "v": 1}},  # in the same batch: 4 never shows
            {"insert": {"id": 3, "grp": "b", "v": 2}},
            {"insert": {"id": 3, "grp": "b", "v": 3}},  # the last change of a key wins
        ],
        mtime=1_000_100,
    )
    pipeline.step()
    assert pipeline.rows("t") == Counter({(1, "b", 7): 1, (3, "b", 3): 1})
    assert pipeline.manifest.state["t"].rows == 2
    assert pipeline.rows("sums") == Counter({("b", 10, 2): 1})
    assert pipeline.changes(out) == Counter({("a", 15, 2): -1, ("b", 1, 1): -1, ("b", 10, 2): 1})


def test_a_keys_changes_apply_in_file_order_then_line_order(tmp_path: Path, spark: Any) -> None:
    inbox = tmp_path / "in"
    sql = (
        "create table t (id int not null primary key, v int) with ("
        f"'connectors' = '{insert_delete(inbox)}');"
    )
    pipeline = Pipeline(spark, tmp_path, sql)
    # one step, two files: b.jsonl is older, so it applies first although its name sorts last
    write_lines(
        inbox / "b.jsonl",
        [{"insert": {"id": 1, "v": 1}}, {"insert": {"id": 2, "v": 1}}],
        mtime=1_000_000,
    )
    write_lines(
        inbox / "a.jsonl",
        [{"insert": {"id": 1, "v": 2}}, {"delete": {"id": 2}}, {"insert": {"id": 3, "v": 3}}],
        mtime=1_000_050,
    )
    pipeline.step()
    assert pipeline.rows("t") == Counter({(1, 2): 1, (3, 3): 1})
    # the table's ad-hoc inserts come after its connectors
    write_lines(inbox / "c.jsonl", [{"insert": {"id": 3, "v": 30}}], mtime=1_000_100)
    write_lines(tmp_path / "pipeline" / "inputs" / "t" / "x.jsonl", [{"id": 3, "v": 300}])
    pipeline.step()
    assert pipeline.rows("t") == Counter({(1, 2): 1, (3, 300): 1})


def test_json_insert_delete_deletes_rows_of_a_table_without_a_key(
    tmp_path: Path, spark: Any
) -> None:
    inbox, out = tmp_path / "in", tmp_path / "out"
    sql = fed_and_watched(
        "t (k varchar, v int)", "big as select k, v from t where v > 1", inbox=inbox, out=out
    )
    pipeline = Pipeline(spark, tmp_path, sql)
    write_lines(
        inbox / "1.jsonl",
        [
            {"insert": {"k": "x", "v": 5}},
            {"insert": {"k": "x", "v": 5}},
            {"insert": {"k": "y", "v": 9}},
        ],
        mtime=1_000_000,
    )
    pipeline.step()
    assert pipeline.rows("big") == Counter({("x", 5): 2, ("y", 9): 1})
    pipeline.changes(out)
    write_lines(
        inbox / "2.jsonl",
        ["", {"delete": {"k": "x", "v": 5}}, {"delete": {"k": "y", "v": 9}}],
        mtime=1_000_100,
    )
    pipeline.step()
    assert pipeline.rows("big") == Counter({("x", 5): 1})
    assert pipeline.changes(out) == Counter({("x", 5): -1, ("y", 9): -1})


def test_json_keys_match_unquoted_columns_whatever_their_capitals(
    tmp_path: Path, spark: Any
) -> None:
    """Feldera's JSON format: column names are case-insensitive, except those declared in
    double quotes. Spark's parser matched exactly: `{"Name": "x"}` was a row whose `name` is
    NULL, without a word. Plain rows and `insert_delete` records both."""
    plain, cdc = tmp_path / "plain", tmp_path / "cdc"
    sql = (
        "create table p (id int, name varchar, \"Tag\" varchar) with ('connectors' = "
        f"'{connectors(file_input('rows', plain))}');\n"
        f"create table c (id int, name varchar) with ('connectors' = '{insert_delete(cdc)}');\n"
        'create materialized view pv as select id, name, "Tag" from p;\n'
        "create materialized view cv as select id, name from c;"
    )
    pipeline = Pipeline(spark, tmp_path, sql)
    write_lines(
        plain / "1.jsonl",
        [
            {"ID": 1, "Name": "upper first", "Tag": "kept"},
            {"id": 2, "NAME": "all capitals", "tag": "quoted: only exactly"},
            {"id": 3, "name": "as declared", "Tag": None},
            {"id": 4, "Name": "two spellings", "NAME": "of one key"},
        ],
        mtime=1_000_000,
    )
    write_lines(
        cdc / "1.jsonl",
        [{"insert": {"Id": 7, "Name": "in"}}, {"insert": {"ID": 8, "NAME": "out"}}],
        mtime=1_000_000,
    )
    pipeline.step()
    assert pipeline.rows("pv") == Counter(
        {
            (1, "upper first", "kept"): 1,
            (2, "all capitals", None): 1,
            (3, "as declared", None): 1,
            (4, None, None): 1,  # which of the two? neither, as before
        }
    )
    write_lines(cdc / "2.jsonl", [{"delete": {"iD": 8, "nAmE": "out"}}], mtime=1_000_100)
    pipeline.step()
    assert pipeline.rows("cv") == Counter({(7, "in"): 1})


def test_csv_weight_column_and_parquet_operation_column(tmp_path: Path, spark: Any) -> None:
    csv_in, parquet_in = tmp_path / "csv", tmp_path / "parquet"
    sql = (
        "create table c (k varchar, v int) with ("
        f"'connectors' = '{connectors(file_input('w', csv_in, 'csv', weight_column='w'))}');\n"
        "create table p (id int not null primary key, v int) with ("
        f"'connectors' = '{connectors(file_input('op', parquet_in, 'parquet', op_column='op'))}'"
        ");\n"
        "create materialized view total as select sum(v) as s, count(*) as n from c;"
    )
    pipeline = Pipeline(spark, tmp_path, sql)
    write_lines(csv_in / "1.csv", ["k,v,w", "a,1,3", "b,2,1", "z,9,0"], mtime=1_000_000)
    frame = spark.createDataFrame(
        [(1, 10, "insert"), (2, 20, "insert"), (1, 11, "INSERT")], "id int, v int, op string"
    )
    frame.coalesce(1).write.parquet(str(parquet_in / "1"))
    pipeline.step()
    assert pipeline.rows("c") == Counter({("a", 1): 3, ("b", 2): 1})
    assert pipeline.rows("total") == Counter({(5, 4): 1})
    assert pipeline.rows("p") == Counter({(1, 11): 1, (2, 20): 1})
    write_lines(csv_in / "2.csv", ["k,v,w", "a,1,-2"], mtime=1_000_100)
    spark.createDataFrame([(2, None, "delete")], "id int, v int, op string").coalesce(
        1
    ).write.parquet(str(parquet_in / "2"))
    pipeline.step()
    assert pipeline.rows("c") == Counter({("a", 1): 1, ("b", 2): 1})
    assert pipeline.rows("total") == Counter({(3, 2): 1})
    assert pipeline.rows("p") == Counter({(1, 11): 1})


def test_a_bad_line_fails_the_step_with_its_file_and_line_before_anything_is_ingested(
    tmp_path: Path, spark: Any
) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    sql = (
        "create table a (id int, v int) with ("
        f"'connectors' = '{connectors(file_input('ok', good))}');\n"
        "create table t (id int not null primary key, v int) with ("
        f"'connectors' = '{insert_delete(bad)}');"
    )
    pipeline = Pipeline(spark, tmp_path, sql)
    before = pipeline.manifest
    write_lines(good / "1.jsonl", [{"id": 1, "v": 1}], mtime=1_000_000)
    write_lines(
        bad / "1.jsonl",
        [{"insert": {"id": 1, "v": 1}}, {"insert": {"id": 2, "v": 1}, "delete": {"id": 1}}],
        mtime=1_000_000,
    )
    with pytest.raises(SpindleError) as failed:
        pipeline.step()
    assert failed.value.reason == "InvalidInputRecord"
    assert f"line 2 of file:{bad / '1.jsonl'}" in failed.value.message
    assert 'both "insert" and "delete"' in failed.value.message
    assert failed.value.details["connector"] == "t.cdc"
    assert pipeline.runtime.store.latest() == before, "nothing of the step was committed"
    assert pipeline.rows("a") == Counter() and pipeline.rows("t") == Counter()
    # fixed (a new file replaces the bad one): the next step ingests both inputs
    (bad / "1.jsonl").unlink()
    write_lines(bad / "2.jsonl", [{"insert": {"id": 1, "v": 1}}], mtime=1_000_100)
    pipeline.step()
    assert pipeline.rows("a") == Counter({(1, 1): 1})
    assert pipeline.rows("t") == Counter({(1, 1): 1})


def test_a_corrupt_input_file_is_input_unreadable_naming_the_connector_and_the_file(
    tmp_path: Path, spark: Any
) -> None:
    """A file Spark cannot read as the step evaluates it (here not Parquet at all; also one
    half written, or gone after it was listed) is the input's refusal, `InputUnreadable`,
    which a driver retries, naming the connector and the file, not an internal error; nothing
    is committed, and once a whole file replaces it, it is ingested (after the failed step,
    done again as planned)."""
    inbox = tmp_path / "in"
    sql = (
        "create table p (id int, v int) with ("
        f"'connectors' = '{connectors(file_input('pq', inbox, 'parquet'))}');\n"
        "create materialized view total as select sum(v) as s from p;"
    )
    pipeline = Pipeline(spark, tmp_path, sql)
    before = pipeline.manifest
    inbox.mkdir()
    corrupt = inbox / "1.parquet"
    corrupt.write_bytes(b"PAR1 half a file, or none at all")
    with pytest.raises(SpindleError) as refused:
        pipeline.step()
    assert refused.value.reason == "InputUnreadable", refused.value.message
    message = refused.value.message
    assert message.startswith(f"Input connector p.pq cannot read its file file:{corrupt}: ")
    assert "is not a Parquet file" in message and "replace it" in message
    assert refused.value.details == {"connector": "p.pq", "uri": f"file:{corrupt}"}
    assert pipeline.runtime.store.latest() == before, "nothing of the step was committed"

    corrupt.unlink()  # a whole file takes its place
    frame = spark.createDataFrame([(1, 10), (2, 20)], "id int, v int")
    frame.coalesce(1).write.parquet(str(inbox / "2"))
    pipeline.step()  # the failed step again, as its intent planned: without the file now gone
    assert pipeline.rows("total") == Counter({(None,): 1})
    pipeline.step()
    assert pipeline.rows("total") == Counter({(30,): 1})


def test_an_input_file_gone_after_it_was_listed_is_input_unreadable_under_any_name(
    tmp_path: Path, spark: Any
) -> None:
    """A file listed by the step's poll and deleted before Spark read it (another process
    cleaning the inbox) is the input's refusal, which a retry gets past (it lists again), not
    lost state; its name is given as it is written, though Spark says it URL-encoded."""
    from spindle.runtime.connectors import make_input, unreadable_file
    from spindle.runtime.maintain import table_schema

    inbox = tmp_path / "in box %"
    sql = (
        "create table p (id int, v int) with ("
        f"'connectors' = '{connectors(file_input('c', inbox))}');"
    )
    table = parse_program(sql).tables["p"]
    source = make_input(table.connectors[0], table_schema(table))
    write_lines(inbox / "a b.json", [{"id": 1, "v": 1}], mtime=1_000_000)
    frame, _ = source.poll(spark, None)
    assert frame is not None
    (inbox / "a b.json").unlink()
    with pytest.raises(Exception) as gone:
        frame.collect()
    refused = unreadable_file(spark, [source], gone.value)
    assert refused is not None and refused.reason == "InputUnreadable"
    assert refused.message.startswith(
        f"Input connector p.c cannot read its file file:{inbox / 'a b.json'}: "
    ), refused.message


NOT_VALID = (
    "is not valid JSON for the table's columns (a value not of its column's type, or not a "
    "record at all"
)
MALFORMED = (
    f'{NOT_VALID}, or a record with no key that names a column: Feldera\'s {{"insert": '
    '{...}} lines need "update_format": "insert_delete" in the connector\'s format config): '
)
"""What a JSON record that does not parse says, quoting it (no row of NULLs is ingested)."""
CSV_MALFORMED = NOT_VALID.replace("JSON", "CSV") + "): "


def inbox_pipeline(
    spark: Any, tmp_path: Path, fmt: str, *, columns: str = "k varchar, v int", **config: Any
) -> tuple[Path, Pipeline]:
    """Table `c (k varchar, v int)` (or `columns`) fed by files of `fmt` in `tmp_path/in`,
    and its pipeline."""
    inbox = tmp_path / "in"
    sql = (
        f"create table c ({columns}) with ("
        f"'connectors' = '{connectors(file_input('in', inbox, fmt, **config))}');"
    )
    return inbox, Pipeline(spark, tmp_path, sql)


def test_a_csv_record_with_more_or_fewer_fields_is_read_as_always(
    tmp_path: Path, spark: Any
) -> None:
    inbox, pipeline = inbox_pipeline(spark, tmp_path, "csv")
    write_lines(inbox / "1.csv", ["k,v", "a,1,", "b", "c,3,extra", "d,"], mtime=1_000_000)
    pipeline.step()
    assert pipeline.rows("c") == Counter({("a", 1): 1, ("b", None): 1, ("c", 3): 1, ("d", None): 1})


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_a_file_whose_name_has_glob_characters_is_read_as_that_file(
    tmp_path: Path, spark: Any, fmt: str
) -> None:
    """Spark reads a path with `[` as a pattern: `b[12].json` read `b1.json` again and never
    its own rows, without a word, and a lone `export[1].json` failed every step as an
    internal error (the pattern matched no file)."""
    inbox, pipeline = inbox_pipeline(spark, tmp_path, fmt)
    head = ["k,v"] if fmt == "csv" else []
    row = (lambda k, v: f"{k},{v}") if fmt == "csv" else (lambda k, v: {"k": k, "v": v})
    write_lines(inbox / f"b1.{fmt}", [*head, row("one", 1)], mtime=1_000_000)
    write_lines(inbox / f"b[12].{fmt}", [*head, row("glob", 99)], mtime=1_000_000)
    pipeline.step()
    assert pipeline.rows("c") == Counter({("one", 1): 1, ("glob", 99): 1})
    write_lines(inbox / f"export[1]{{a,b}}*.{fmt}", [*head, row("alone", 7)], mtime=1_000_100)
    pipeline.step()
    assert pipeline.rows("c") == Counter({("one", 1): 1, ("glob", 99): 1, ("alone", 7): 1})


def test_a_file_whose_name_has_a_colon_is_refused_saying_to_rename_it(
    tmp_path: Path, spark: Any
) -> None:
    """Hadoop lists `2024-01-01T10:00:00.json` but cannot read it: the step was
    `InputUnreadable`, retried forever with the advice to wait for its writer."""
    inbox, pipeline = inbox_pipeline(spark, tmp_path, "json")
    write_lines(inbox / "2024-01-01T10:00:00.json", [{"k": "a", "v": 1}], mtime=1_000_000)
    with pytest.raises(SpindleError) as refused:
        pipeline.step()
    assert refused.value.reason == "InputFileNameUnsupported"
    assert "has a ':' in its name" in refused.value.message and "Rename it" in refused.value.message
    (inbox / "2024-01-01T10:00:00.json").rename(inbox / "2024-01-01T10-00-00.json")
    pipeline.step()
    assert pipeline.rows("c") == Counter({("a", 1): 1})


def test_a_file_of_no_rows_counts_none(tmp_path: Path, spark: Any) -> None:
    """A header-only CSV makes no Delta commit: the step read the previous commit's count as
    its own ("2 rows ingested"), and added it to the table's stored rows, which feed the
    bootstrap estimate."""
    inbox, pipeline = inbox_pipeline(spark, tmp_path, "csv")
    write_lines(inbox / "1.csv", ["k,v", "a,1", "b,2"], mtime=1_000_000)
    pipeline.manifest, first = pipeline.runtime.step(pipeline.program, pipeline.manifest)
    write_lines(inbox / "2.csv", ["k,v"], mtime=1_000_100)
    pipeline.manifest, second = pipeline.runtime.step(pipeline.program, pipeline.manifest)
    assert (first.rows_ingested, second.rows_ingested) == (2, 0)
    assert pipeline.manifest.state["c"].rows == 2
    # it read a file, so it was no idle step: `--until-idle` stopped there, before later files
    # (`max_files_per_step`) were read
    assert not second.idle
    _, third = pipeline.runtime.step(pipeline.program, pipeline.manifest)
    assert third.idle


@pytest.mark.parametrize(
    ("config", "lines", "rows"),
    [
        ({"header": "false"}, ["a,1", "b,2"], {("a", 1): 1, ("b", 2): 1}),
        ({"headers": False}, ["a,1", "b,2"], {("a", 1): 1, ("b", 2): 1}),  # Feldera's name
        ({}, ["K,V", "a,1"], {("a", 1): 1}),  # names compare case-insensitively
        ({"header": True}, ["key,value", "a,1"], {("a", 1): 1}),  # skipped, as Feldera does
        ({"headers": True}, ["a,0", "b,2"], {("b", 2): 1}),
        ({"delimiter": ";"}, ["k;v", "a,b;1"], {("a,b", 1): 1}),  # Feldera's delimiter
        ({"delimiter": "\t", "headers": False}, ["a\t1"], {("a", 1): 1}),
    ],
)
def test_a_csv_header_is_skipped_only_where_one_is_declared_or_found(
    tmp_path: Path, spark: Any, config: dict[str, Any], lines: list[str], rows: dict[Any, int]
) -> None:
    inbox, pipeline = inbox_pipeline(spark, tmp_path, "csv", **config)
    write_lines(inbox / "1.csv", lines, mtime=1_000_000)
    pipeline.step()
    assert pipeline.rows("c") == Counter(rows)


@pytest.mark.parametrize(
    ("lines", "found"),
    [
        (["a,1", "b,2"], "it reads `a, 1`, the columns are `k, v`"),  # no header: row 1 was lost
        (["v,k", "1,a"], "it reads `v, k`, the columns are `k, v`"),  # v was read into k
        (["k,v,extra", "a,1,x"], "it has 3 fields for 2 columns"),
    ],
)
def test_a_csv_file_whose_first_line_is_not_the_header_fails_when_it_is_left_unset(
    tmp_path: Path, spark: Any, lines: list[str], found: str
) -> None:
    inbox, pipeline = inbox_pipeline(spark, tmp_path, "csv")
    write_lines(inbox / "1.csv", lines, mtime=1_000_000)
    with pytest.raises(SpindleError) as failed:
        pipeline.step()
    assert failed.value.reason == "InvalidInputRecord", failed.value.message
    assert failed.value.message.startswith(
        f"Connector c.in: line 1 of file:{inbox / '1.csv'} is not a header naming the table's "
        f'columns in order ({found}); files without a header line need "header": false'
    )
    assert pipeline.rows("c") == Counter(), "nothing of the step was ingested"


@pytest.mark.parametrize(
    ("fmt", "config", "lines", "problem", "said"),
    [
        ("json", {"update_format": "insert_delete"}, ["", '{"upsert": {"k": "a"}}'], "line 2", ""),
        ("json", {"update_format": "insert_delete"}, ["{not json"], "line 1", NOT_VALID + ")."),
        (
            "json",
            {"update_format": "insert_delete"},
            ['{"insert": {"k": "a", "v": 1}}', '{"insert": {"k": "b", "v": "one"}}'],
            "line 2",
            NOT_VALID + ").",
        ),
        ("csv", {"op_column": "op"}, ["k,v,op", "a,1,insert", "b,2,upsert"], "record 2", ""),
        ("csv", {"weight_column": "w"}, ["k,v,w", "a,1,x"], "record 1", ""),
        ("json", {}, ['{"k": "a", "v": 1}', "{not json"], "line 2", MALFORMED + "'{not json'"),
        (
            "json",
            {},
            ['{"k": "a", "v": "one"}'],
            "line 1",
            MALFORMED + """'{"k": "a", "v": "one"}'""",
        ),
        # a CSV value not of its column's type was a NULL, silently
        ("csv", {}, ["k,v", "a,1", "b,one"], "line 3", CSV_MALFORMED + "'b,one'"),
        # the line a record is on counts every line: the header, blank lines
        ("json", {}, ['{"k": "a", "v": 1}', "", '{"k": "b", "v": "one"}'], "line 3", ""),
        # the other lines that do not parse are counted, the first of them named: one run
        # finds them all, not one per fix
        (
            "json",
            {},
            ['{"k": "a", "v": 1}', "{x", "", '{"v": "2"}', "[", '{"k": "b"}', "{", "{", "{", "{"],
            "line 2",
            "'{x'; 6 more lines of it do not parse either (4, 5, 7, 8, ...). Nothing of",
        ),
        (
            "json",
            {},
            ["{x", '{"v": true}'],
            "line 1",
            "'{x'; 1 more line of it does not parse either (2)",
        ),
        # Spark's parser read the first value of a line and dropped the rest without a word
        ("json", {}, ['{"k": "a", "v": 1}{"k": "b", "v": 2}'], "line 1", MALFORMED),
        ("json", {}, ['{"k": "a", "v": 1},{"k": "b", "v": 2}'], "line 1", MALFORMED),
        ("json", {}, ['{"k": "a", "v": 1}', '{"k": "b", "v": 2} and more'], "line 2", MALFORMED),
        (
            "json",
            {"update_format": "insert_delete"},
            ['{"insert": {"k": "a", "v": 1}} {"insert": {"k": "b", "v": 2}}'],
            "line 1",
            NOT_VALID + ").",
        ),
        # a record none of whose keys names a column was a row of NULLs: Feldera's lines on a
        # connector without `update_format` (a delete one more insert), keys spelt otherwise
        ("json", {}, ['{"insert": {"k": "a", "v": 1}}'], "line 1", MALFORMED),
        ("json", {}, ['{"k": "a", "v": 1}', '{"key": "b", "value": 2}'], "line 2", MALFORMED),
        ("json", {}, ["{}"], "line 1", MALFORMED),
        (
            "json",
            {"update_format": "insert_delete"},
            ['{"insert": {"k": "a", "v": 1}}', '{"delete": {"key": "a"}}'],
            "line 2",
            "has a row with no key that names a column (a row of NULLs)",
        ),
    ],
)
def test_a_bad_record_is_a_user_error_naming_it(
    tmp_path: Path,
    spark: Any,
    fmt: str,
    config: dict[str, str],
    lines: list[str],
    problem: str,
    said: str,
) -> None:
    inbox, pipeline = inbox_pipeline(spark, tmp_path, fmt, **config)
    message = invalid_record(pipeline, inbox / f"1.{fmt}", lines)
    assert f"{problem} of file:{inbox / f'1.{fmt}'}" in message
    assert said in message


def invalid_record(pipeline: Pipeline, path: Path, lines: list[str]) -> str:
    """The message of the `InvalidInputRecord` a step fails with on a file of `lines`; the
    step ingested nothing."""
    write_lines(path, lines, mtime=1_000_000)
    with pytest.raises(SpindleError) as failed:
        pipeline.step()
    assert failed.value.reason == "InvalidInputRecord", failed.value.message
    assert pipeline.rows("c") == Counter(), "nothing of the step was ingested"
    return failed.value.message


@pytest.mark.parametrize(
    ("fmt", "config", "lines", "problem", "column"),
    [
        ("json", {}, ['{"k": "a", "v": 1}', '{"v": 2}'], "line 2", "k"),
        ("json", {}, ['{"k": "a"}'], "line 1", "v"),
        ("json", {"update_format": "insert_delete"}, ['{"insert": {"v": 1}}'], "line 1", "k"),
        ("json", {"update_format": "insert_delete"}, ['{"delete": {"v": 1}}'], "line 1", "k"),
        ("csv", {}, ["k,v", "a,1", ",2"], "record 2", "k"),
        ("csv", {"op_column": "op"}, ["k,v,op", "a,,insert"], "record 1", "v"),
    ],
)
def test_a_row_without_a_value_for_a_not_null_column_is_a_user_error(
    tmp_path: Path,
    spark: Any,
    fmt: str,
    config: dict[str, str],
    lines: list[str],
    problem: str,
    column: str,
) -> None:
    """Such rows were ingested, NULL keys and all (and NULL keys upserted each other), where
    `spindle local execute` refuses them and Feldera rejects the record."""
    columns = "k varchar not null primary key, v int not null"
    inbox, pipeline = inbox_pipeline(spark, tmp_path, fmt, columns=columns, **config)
    message = invalid_record(pipeline, inbox / f"1.{fmt}", lines)
    said = f"{problem} of file:{inbox / f'1.{fmt}'} has no value for '{column}', which is NOT NULL"
    assert said in message, message


def test_a_delete_from_a_table_without_a_key_names_the_whole_row(
    tmp_path: Path, spark: Any
) -> None:
    """Without a primary key, a delete is of a whole row: one without a value for a NOT NULL
    column would retract a row that never was (a count one short for good)."""
    config = {"update_format": "insert_delete"}
    columns = "k varchar, v int not null"
    inbox, pipeline = inbox_pipeline(spark, tmp_path, "json", columns=columns, **config)
    message = invalid_record(pipeline, inbox / "1.json", ['{"delete": {"k": "a"}}'])
    assert "line 1 of" in message and "no value for 'v'" in message


def test_a_delete_names_a_row_of_a_primary_key_table_by_its_key(tmp_path: Path, spark: Any) -> None:
    columns = "k varchar not null primary key, v int not null"
    config = {"update_format": "insert_delete"}
    inbox, pipeline = inbox_pipeline(spark, tmp_path, "json", columns=columns, **config)
    write_lines(inbox / "1.json", ['{"insert": {"k": "a", "v": 1}}'], mtime=1_000_000)
    pipeline.step()
    write_lines(inbox / "2.json", ['{"delete": {"k": "a"}}'], mtime=1_000_001)
    pipeline.step()
    assert pipeline.rows("c") == Counter()


def test_appends_to_a_delta_source_upsert_in_commit_order_and_need_their_keys(
    tmp_path: Path, spark: Any
) -> None:
    """Commits that only add rows were read with one order for all, so which of two rows of
    a key won was arbitrary (a stale value could stay); and a row without a key or a NOT NULL
    value was ingested as it was."""
    source = str(tmp_path / "source")
    spark.createDataFrame([(1, "a")], "id int, v string").write.format("delta").save(source)
    lake = {"name": "lake", "transport": {"name": "delta_table_input", "config": {"uri": source}}}
    sql = (
        "create table t (id int primary key, v varchar not null) with ("
        f"'connectors' = '{connectors(lake)}');"
    )
    pipeline = Pipeline(spark, tmp_path, sql)
    pipeline.step()
    big = spark.range(2000).selectExpr("cast(id + 10 as int) as id", "'x' as v")
    big.union(spark.createDataFrame([(1, "b")], "id int, v string")).write.format("delta").mode(
        "append"
    ).save(source)
    spark.createDataFrame([(1, "c")], "id int, v string").write.format("delta").mode("append").save(
        source
    )
    pipeline.step()
    assert pipeline.rows("t")[(1, "c")] == 1 and pipeline.rows("t")[(1, "b")] == 0
    spark.createDataFrame([(5, None)], "id int, v string").write.format("delta").mode(
        "append"
    ).save(source)
    with pytest.raises(SpindleError) as refused:
        pipeline.step()
    assert refused.value.reason == "InvalidInputRecord"
    assert "has no value for 'v', which is NOT NULL" in refused.value.message


def test_a_delta_source_created_again_fails_the_step_instead_of_skipping_its_commits(
    tmp_path: Path, spark: Any
) -> None:
    """A source dropped and created again is at a version below the connector's offset: its
    steps waited without a word, then read only the new table's commits past the old offset
    (its first rows lost). The step fails saying to reset the connector."""
    import shutil

    source = str(tmp_path / "lake")
    rows = "id int, v string"
    for row in ((1, "a"), (2, "b"), (3, "c")):
        spark.createDataFrame([row], rows).write.format("delta").mode("append").save(source)
    lake = {"name": "lake", "transport": {"name": "delta_table_input", "config": {"uri": source}}}
    sql = f"create table t (id int, v varchar) with ('connectors' = '{connectors(lake)}');"
    pipeline = Pipeline(spark, tmp_path, sql)
    pipeline.step()
    shutil.rmtree(source)
    spark.createDataFrame([(10, "x")], rows).write.format("delta").save(source)
    before = pipeline.manifest
    with pytest.raises(SpindleError) as reset:
        pipeline.step()
    assert reset.value.reason == "DeltaInputReset"
    assert "is at version 0, and this connector read it up to version 2" in reset.value.message
    assert "Reset the connector (rename it)" in reset.value.message
    assert pipeline.runtime.store.latest() == before


def test_a_change_data_feed_turned_on_after_a_delete_says_to_reset_the_connector(
    tmp_path: Path, spark: Any
) -> None:
    """`DeltaInputNotAppendOnly` says to turn the feed on; one turned on after the DELETE has
    no changes for it, and the step failed as an internal error (`DELTA_MISSING_CHANGE_DATA`)."""
    source = str(tmp_path / "lake")
    spark.createDataFrame([(1,), (2,)], "id long").write.format("delta").save(source)
    lake = {"name": "lake", "transport": {"name": "delta_table_input", "config": {"uri": source}}}
    sql = f"create table t (id bigint) with ('connectors' = '{connectors(lake)}');"
    pipeline = Pipeline(spark, tmp_path, sql)
    pipeline.step()
    spark.sql(f"DELETE FROM delta.`{source}` WHERE id = 1")
    with pytest.raises(SpindleError) as first:
        pipeline.step()
    assert first.value.reason == "DeltaInputNotAppendOnly"
    spark.sql(f"ALTER TABLE delta.`{source}` SET TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    with pytest.raises(SpindleError) as later:
        pipeline.step()
    assert later.value.reason == "DeltaInputNotAppendOnly"
    assert "its change data feed was turned on only later" in later.value.message
    assert "Reset the connector (rename it)" in later.value.message


def test_a_delta_delete_needs_only_its_key(spark: Any) -> None:
    """A change data feed's delete or an update's old row carries the row as it was: one
    ingested before NOT NULL was checked failed every retry of the step that removed it."""
    from spindle.runtime.connectors import DeltaInput

    schema = "id int, v string, __w int, __o bigint"
    source = DeltaInput("t.lake", "/nowhere", spark.createDataFrame([], schema).schema)
    source = DeltaInput(source.connector, source.uri, source.schema, not_null=("v",), key=("id",))
    old_row = spark.createDataFrame([(5, None, -1, 0)], schema)
    assert source._complete(old_row).count() == 1
    for bad in ((5, None, 1, 0), (None, "x", -1, 0)):
        with pytest.raises(Exception, match="spindle-incomplete-record"):
            source._complete(spark.createDataFrame([bad], schema)).count()


def test_a_delta_update_and_delete_upsert_a_primary_key_table(tmp_path: Path, spark: Any) -> None:
    """An UPDATE's pre-image (-1) and post-image (+1) share a commit: the delete applies first,
    so the key keeps its new row."""
    from delta.tables import DeltaTable

    source = str(tmp_path / "source")
    spark.createDataFrame([(1, 10), (2, 20)], "id int, v int").write.format("delta").option(
        "delta.enableChangeDataFeed", "true"
    ).save(source)
    lake = {"name": "lake", "transport": {"name": "delta_table_input", "config": {"uri": source}}}
    sql = (
        "create table t (id int not null primary key, v int) with ("
        f"'connectors' = '{connectors(lake)}');\n"
        "create materialized view total as select sum(v) as s from t;"
    )
    pipeline = Pipeline(spark, tmp_path, sql)
    pipeline.step()
    assert pipeline.rows("t") == Counter({(1, 10): 1, (2, 20): 1})
    DeltaTable.forPath(spark, source).update("id = 1", {"v": "11"})
    DeltaTable.forPath(spark, source).delete("id = 2")
    pipeline.step()
    assert pipeline.rows("t") == Counter({(1, 11): 1})
    assert pipeline.rows("total") == Counter({(11,): 1})


def test_a_parquet_column_of_another_type_is_a_user_error_not_retried(
    tmp_path: Path, spark: Any
) -> None:
    """An INT64 column read as an INT was called a corrupt or half-written file, and the
    step was retried for a minute; no retry reads it otherwise."""
    inbox = tmp_path / "in"
    spark.sql("select cast(7 as bigint) as id").coalesce(1).write.parquet(str(inbox / "1"))
    sql = (
        "create table t (id int) with "
        f"('connectors' = '{connectors(file_input('in', inbox, 'parquet'))}');"
    )
    pipeline = Pipeline(spark, tmp_path, sql)
    with pytest.raises(SpindleError) as failed:
        pipeline.step()
    assert failed.value.reason == "InvalidInputRecord", failed.value.message
    assert "a column of file:" in failed.value.message
    said = "('id') holds BIGINT values (Parquet INT64), which the table's column of INT does not"
    assert f"{said} read: declare the column BIGINT" in failed.value.message, failed.value.message
    assert pipeline.rows("t") == Counter()


def test_a_parquet_decimal_is_advised_as_the_decimal_it_is(tmp_path: Path, spark: Any) -> None:
    """Parquet stores a DECIMAL(6, 3) as INT32: the advice came from that, and said INT."""
    inbox = tmp_path / "in"
    spark.sql("select cast(1.5 as decimal(6,3)) as v").coalesce(1).write.parquet(str(inbox / "1"))
    sql = (
        "create table t (v varchar) with "
        f"('connectors' = '{connectors(file_input('in', inbox, 'parquet'))}');"
    )
    with pytest.raises(SpindleError) as failed:
        Pipeline(spark, tmp_path, sql).step()
    said = "('v') holds DECIMAL(6, 3) values (Parquet INT32), which the table's column of VARCHAR"
    assert said in failed.value.message, failed.value.message
    assert "declare the column DECIMAL(6, 3)" in failed.value.message


@pytest.mark.parametrize(
    ("source_type", "table_columns", "refused"),
    [
        ("bigint", "id int, v varchar", "has it as BIGINT"),
        ("int", "id int, w varchar", "has no such column"),
        ("decimal(10, 2)", "id decimal(10, 1), v varchar", "DECIMAL(10,2)"),
        ("int", "id bigint, v varchar", None),  # every INT is a BIGINT
        ("short", "id decimal(5, 0), v varchar", None),
    ],
)
def test_a_delta_input_whose_columns_the_table_cannot_hold_is_refused_by_name(
    tmp_path: Path, spark: Any, source_type: str, table_columns: str, refused: str | None
) -> None:
    """The source's column of another type (BIGINT into INT) failed the step's append with
    Delta's DELTA_FAILED_TO_MERGE_FIELDS as an internal error; a type that holds every value
    of the source's is read as the table's."""
    source = str(tmp_path / "source")
    spark.sql(f"select cast(7 as {source_type}) as id, 'x' as v").write.format("delta").save(source)
    lake = {"name": "lake", "transport": {"name": "delta_table_input", "config": {"uri": source}}}
    sql = f"create table t ({table_columns}) with ('connectors' = '{connectors(lake)}');"
    pipeline = Pipeline(spark, tmp_path, sql)
    if refused is None:
        pipeline.step()
        assert pipeline.rows("t") == Counter({(7, "x"): 1})
        return
    with pytest.raises(SpindleError) as failed:
        pipeline.step()
    assert failed.value.reason == "DeltaInputSchemaMismatch", failed.value.message
    assert refused in failed.value.message and "Declare the column" in failed.value.message
    assert pipeline.rows("t") == Counter()


def test_a_delta_input_file_gone_from_the_source_is_input_unreadable_with_delta_advice(
    tmp_path: Path, spark: Any
) -> None:
    """A data file the source table's log still names, deleted (a VACUUM of the source, a
    cleanup), fails the step that reads it as the input's refusal, naming the connector and
    the file with what to do about a Delta source, not an internal error; nothing of the
    step is ingested, and once the file is back the step ingests it."""
    from urllib.parse import urlparse

    source = tmp_path / "source"
    spark.createDataFrame([(1, 10), (2, 20)], "id int, v int").coalesce(1).write.format(
        "delta"
    ).save(str(source))
    lake = {
        "name": "lake",
        "transport": {"name": "delta_table_input", "config": {"uri": str(source)}},
    }
    sql = (
        f"create table t (id int, v int) with ('connectors' = '{connectors(lake)}');\n"
        "create materialized view total as select sum(v) as s from t;"
    )
    pipeline = Pipeline(spark, tmp_path, sql)
    before = pipeline.manifest
    (stored,) = (
        Path(urlparse(f).path) for f in spark.read.format("delta").load(str(source)).inputFiles()
    )
    kept = stored.read_bytes()
    stored.unlink()
    with pytest.raises(SpindleError) as refused:
        pipeline.step()
    assert refused.value.reason == "InputUnreadable", refused.value.message
    message = refused.value.message
    assert message.startswith(
        f"Input connector t.lake cannot read the Delta table's file file:{stored}: "
    )
    assert "delta.deletedFileRetentionDuration" in message
    assert pipeline.runtime.store.latest() == before, "nothing of the step was committed"

    stored.write_bytes(kept)
    pipeline.step()
    assert pipeline.rows("total") == Counter({(30,): 1})


@pytest.mark.parametrize("keyed", [False, True], ids=["deletes", "primary key"])
def test_a_table_churning_through_the_same_live_rows_stays_that_size(
    tmp_path: Path, spark: Any, keyed: bool
) -> None:
    """Ten live rows, five replaced each step (deleted and inserted anew, or upserted by their
    primary key): the table and its linear view store their +1 and -1 rows until a compaction
    consolidates them, so what they store stays within a few steps' changes of what they hold,
    and they still hold exactly the live rows."""
    inbox, out = tmp_path / "in", tmp_path / "out"
    table = "t (k int not null primary key, v int)" if keyed else "t (k int, v int)"
    sql = fed_and_watched(table, "big as select k, v from t where v > 0", inbox=inbox, out=out)
    pipeline = Pipeline(spark, tmp_path, sql)
    reports: list[tuple[str, dict[str, Any]]] = []
    pipeline.runtime.compaction = Compaction(small_files=3)
    pipeline.runtime.report = lambda event, **fields: reports.append((event, fields))
    live = {k: k + 1 for k in range(10)}
    write_lines(
        inbox / "0.jsonl", [{"insert": {"k": k, "v": v}} for k, v in live.items()], mtime=1_000_000
    )
    pipeline.step()
    for step in range(1, 13):
        replaced = sorted(live)[:5]
        if keyed:  # the same keys, new values
            fresh = {k: 100 + step for k in replaced}
            records = [{"insert": {"k": k, "v": v}} for k, v in fresh.items()]
        else:  # the rows deleted, new keys inserted
            records = [{"delete": {"k": k, "v": live.pop(k)}} for k in replaced]
            fresh = {100 * step + i: step for i in range(5)}
            records += [{"insert": {"k": k, "v": v}} for k, v in fresh.items()]
        live.update(fresh)
        write_lines(inbox / f"{step}.jsonl", records, mtime=1_000_000 + 100 * step)
        pipeline.step()
    expected = Counter(live.items())
    assert pipeline.rows("t") == expected
    assert pipeline.rows("big") == expected
    consolidated = {f["relation"] for e, f in reports if e == "compacted" and f["consolidated"]}
    assert consolidated == {"t", "big"}, reports
    # unconsolidated, each would store 10 + 12 * 10 rows; a consolidation leaves at most 1.5x
    # the live rows, and at most 3 small files (10 rows each) are appended before the next
    for name in ("t", "big"):
        assert pipeline.stored(name) <= 15 + 3 * 10, name


def test_a_steady_step_compiles_only_code_it_has_not_compiled_before(
    tmp_path: Path, spark: Any
) -> None:
    """Each step plans the same change queries again; Spark's cache of compiled classes keeps
    their code from one step to the next (`session.CODEGEN_CACHE_ENTRIES`), so a steady step
    compiles almost nothing. With Spark's default cache (100 classes) this pipeline compiled
    about 110 classes every step (bench/settings.py codegen measures what that costs)."""
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics
    inbox, out = tmp_path / "events", tmp_path / "out"
    dims = connectors(file_input("d", tmp_path / "dims"))
    sql = (
        f"create table events (k int, v bigint) with ('connectors' = '{insert_delete(inbox)}');\n"
        f"create table dims (k int, label varchar) with ('connectors' = '{dims}');\n"
        "create view totals as select k, sum(v) as total, count(*) as n from events group by k;\n"
        "create view enriched as select t.k, d.label, t.total, t.n "
        "from totals t join dims d on t.k = d.k;\n"
        f"create materialized view big with ('connectors' = '{connectors(file_output(out))}') "
        "as select k, label, total from enriched where total > 10;"
    )
    write_lines(tmp_path / "dims" / "d.json", [{"k": k, "label": f"g{k}"} for k in range(20)])
    pipeline = Pipeline(spark, tmp_path, sql)
    pipeline.runtime.compaction = Compaction(small_files=1_000)  # its queries are not a step's
    compiled = []
    for step in range(7):
        batch = [{"insert": {"k": (step * 7 + i) % 20, "v": step + i}} for i in range(30)]
        batch.append({"delete": {"k": step % 20, "v": step}})
        write_lines(inbox / f"{step:03d}.json", batch, mtime=1_000_000 + step)
        before = metrics.METRIC_COMPILATION_TIME().getCount()
        pipeline.step()
        compiled.append(metrics.METRIC_COMPILATION_TIME().getCount() - before)
    assert pipeline.rows("big"), "the pipeline computed something"
    steady = compiled[4:]
    assert sum(steady) / len(steady) <= 10, f"classes compiled per step: {compiled}"


def test_a_keyed_table_that_gains_a_column_keeps_its_rows_not_its_history(
    tmp_path: Path, spark: Any
) -> None:
    """A table stored as a Z-set (a key's upserts, deletes) that only gains a nullable column
    keeps its rows through the bootstrap: its weights were dropped, and every insert and
    delete it had stored came back as a live row (a deleted key twice, the key's old value)."""
    inbox, _, pipeline = feldera_in_and_out(spark, tmp_path, "select count(*) as n from t")
    first = [{"insert": {"id": 1, "v": 1}}, {"insert": {"id": 2, "v": 2}}]
    write_lines(inbox / "1.jsonl", first, mtime=1_000_000)
    pipeline.step()
    write_lines(
        inbox / "2.jsonl", [{"insert": {"id": 1, "v": 10}}, {"delete": {"id": 2}}], mtime=1_000_100
    )
    pipeline.step()
    assert pipeline.rows("t") == Counter({(1, 10): 1}) and pipeline.rows("fed") == Counter(
        {(1,): 1}
    )
    grown = "v int, note varchar)"
    pipeline.bootstrap(pipeline.program.text.replace("v int)", grown))
    assert pipeline.rows("t") == Counter({(1, 10, None): 1})
    assert pipeline.rows("fed") == Counter({(1,): 1})
    write_lines(inbox / "3.jsonl", [{"insert": {"id": 3, "v": 3, "note": "x"}}], mtime=1_000_200)
    pipeline.step()
    assert pipeline.rows("t") == Counter({(1, 10, None): 1, (3, 3, "x"): 1})
    assert pipeline.rows("fed") == Counter({(2,): 1})


def test_a_first_start_that_failed_leaves_nothing_in_the_way_of_the_fixed_program(
    tmp_path: Path, spark: Any
) -> None:
    """A first start that failed (or was killed) after writing a table left it with its
    columns: the fixed program, with another type for one, failed every start with an
    internal error (Delta's DELTA_FAILED_TO_MERGE_FIELDS) until `state/` was deleted by hand."""
    Pipeline(spark, tmp_path, "create table t (id int, v int) with ('materialized' = 'true');")
    for path in (tmp_path / "pipeline").iterdir():  # as a first start ended before its commit
        if path.name != "state":
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    sql = "create table t (id bigint, v varchar) with ('materialized' = 'true');"
    fixed = Pipeline(spark, tmp_path, sql)
    record = fixed.manifest.state["t"]
    stored = storage.read_delta(spark, fixed.runtime.uri(record.path), record.version, _empty())
    assert [f.dataType.simpleString() for f in stored.schema.fields] == ["bigint", "string"]
    assert fixed.rows("t") == Counter()


def test_a_table_removed_and_added_again_does_not_ingest_its_old_inserts_again(
    tmp_path: Path, spark: Any
) -> None:
    """`spindle local execute` batches stay under `inputs/<table>/`: a change that removed the
    table dropped its offset, and one that added it again ingested them a second time."""
    from spindle.local.adhoc import write_batch

    keep = "create table keep (id int) with ('materialized' = 'true');\n"
    again = keep + "create table u (id int) with ('materialized' = 'true');\n"
    pipeline = Pipeline(spark, tmp_path, again)
    write_batch(pipeline.runtime.store.objects, "u", [{"id": 1}, {"id": 2}])
    pipeline.step()
    assert pipeline.rows("u") == Counter({(1,): 1, (2,): 1})
    pipeline.bootstrap(keep)
    pipeline.bootstrap(again)
    pipeline.step()
    assert pipeline.rows("u") == Counter()
    write_batch(pipeline.runtime.store.objects, "u", [{"id": 3}])
    pipeline.step()
    assert pipeline.rows("u") == Counter({(3,): 1})


def test_file_outputs_write_each_value_whole_and_replace_only_their_own_files(
    tmp_path: Path, spark: Any
) -> None:
    """JSON and CSV outputs wrote timestamps to the millisecond (`.123456` as `.123`), a JSON
    output left NULL fields out (a row of NULLs was `{"insert":{}}`, which an `insert_delete`
    input refuses), a view's own `__n` column was overwritten by a counter, and a bootstrap's
    `replace` deleted every file under the output's directory, a consumer's own too."""
    inbox, out = tmp_path / "in", tmp_path / "out"
    outputs = [
        {**file_output(out / "rows"), "name": "rows"},
        {
            **file_output(out / "feldera"),
            "name": "feldera",
            "format": {"name": "json", "config": {"update_format": "insert_delete"}},
        },
        {**file_output(out / "csv"), "name": "csv", "format": {"name": "csv"}},
    ]
    sql = (
        f"create table t (id int, s varchar, ts timestamp) with ('materialized' = 'true', "
        f"'connectors' = '{connectors(file_input('in', inbox))}');\n"
        f"create materialized view v with ('connectors' = '{connectors(*outputs)}') "
        "as select id, s, ts, id * 100 as __n from t;"
    )
    pipeline = Pipeline(spark, tmp_path, sql)
    for kept in ("rows/README.txt", "rows/archive/00000001-changes-0.jsonl"):
        (out / kept).parent.mkdir(parents=True, exist_ok=True)
        (out / kept).write_text("the consumer's\n")
    rows = [{"id": 1, "s": None, "ts": "2025-01-02T10:00:00.123456"}, {"id": None}]
    write_lines(inbox / "1.json", rows, mtime=1_000_000)
    pipeline.step()

    def lines(name: str) -> list[Any]:
        [written] = (out / name).glob("00000001-changes-*")
        return sorted((json.loads(line) for line in written.open()), key=json.dumps)

    stamp = "2025-01-02T10:00:00.123456Z"
    nulls = {"id": None, "s": None, "ts": None, "__n": None}
    assert lines("rows") == sorted(
        [{"id": 1, "s": None, "ts": stamp, "__n": 100, "weight": 1}, {**nulls, "weight": 1}],
        key=json.dumps,
    )
    assert {"insert": nulls} in lines("feldera")
    [written] = (out / "csv").glob("00000001-changes-*.csv")
    with written.open(newline="") as readable:
        assert ["1", "", stamp, "100", "1"] in list(csv.reader(readable))

    pipeline.bootstrap(pipeline.program.text.replace("id * 100", "id * 10"))
    left = sorted(p.relative_to(out / "rows").as_posix() for p in (out / "rows").rglob("[!.]*.*"))
    assert left == ["00000002-snapshot-0.jsonl", "README.txt", "archive/00000001-changes-0.jsonl"]


def test_relative_connector_paths_are_read_and_written_where_the_command_runs(
    tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A served command (`spindle local run` through the warm server) runs in the client's
    directory, its Spark in the one the server started in: a relative output's changes were
    written there, listed here, and lost, with the step committed."""
    monkeypatch.chdir(tmp_path)  # the session's Spark runs in the repository's root
    sql = (
        f"create table t (id int) with "
        f"('connectors' = '{connectors(file_input('in', Path('in')))}');\n"
        f"create materialized view v with "
        f"('connectors' = '{connectors(file_output(Path('out')))}') as select id from t;"
    )
    pipeline = Pipeline(spark, tmp_path, sql)
    write_lines(tmp_path / "in" / "1.json", [{"id": 1}], mtime=1_000_000)
    pipeline.step()
    write_lines(tmp_path / "in" / "2.json", [{"id": 2}], mtime=1_000_100)
    pipeline.step()
    assert pipeline.changes(tmp_path / "out") == Counter({(1,): 1, (2,): 1})
