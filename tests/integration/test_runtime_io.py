"""Runtime behaviour a user relies on beyond the grades example: Delta table inputs resume from
their version, and `spindle local stop` stops a running pipeline gracefully (commit, exit 0)."""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from spindle.errors import SpindleError
from spindle.local.home import LocalPipeline
from spindle.program import parse_program
from tests.integration.test_grades import Cli
from tests.waiting import wait_for

CLI = [sys.executable, "-m", "spindle.cli.main"]


def manifest(tmp_path: Path, sql: str, name: str, **spec: Any) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "spindle.dev/v1alpha1",
                "kind": "Pipeline",
                "metadata": {"name": name},
                "spec": {"sql": sql, **spec},
            }
        )
    )
    return path


def test_delta_table_input_ingests_each_new_version_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spark: Any
) -> None:
    source = tmp_path / "source"
    spark.createDataFrame([(1, 10), (2, 20)], "id long, v int").write.format("delta").save(
        str(source)
    )
    connectors = json.dumps(
        [
            {
                "name": "lake",
                "transport": {"name": "delta_table_input", "config": {"uri": str(source)}},
            }
        ]
    )
    sql = (
        f"create table t (id bigint, v int) with ('materialized' = 'true', "
        f"'connectors' = '{connectors}');\n"
        "create materialized view s as select count(*) as n, sum(v) as total from t;"
    )
    cli = Cli(tmp_path / "home", capsys)
    cli("local", "apply", "-f", str(manifest(tmp_path, sql, "lake")))
    cli("local", "run", "lake", "--until-idle")
    assert cli.json("query", "lake", "SELECT n, total FROM s") == [{"n": 2, "total": 30}]
    spark.createDataFrame([(3, 30)], "id long, v int").write.format("delta").mode("append").save(
        str(source)
    )
    cli("local", "run", "lake", "--until-idle")
    assert cli.json("query", "lake", "SELECT n, total FROM s") == [{"n": 3, "total": 60}]
    latest = LocalPipeline(tmp_path / "home", "lake").store().latest()
    assert latest is not None and latest.connectors["t.lake"].offset == 1


LOOP_CONNECTORS = [{"name": "src", "transport": {"name": "file_input"}, "format": {"name": "json"}}]


def _loop_sql(inputs: Path, view: str = "count(*) as n") -> str:
    connectors = json.loads(json.dumps(LOOP_CONNECTORS))
    connectors[0]["transport"]["config"] = {"path": str(inputs)}
    return (
        f"create table t (id bigint) with ('materialized' = 'true', "
        f"'connectors' = '{json.dumps(connectors)}');\n"
        f"create materialized view c as select {view} from t;"
    )


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path.cwd())}
    return subprocess.run(
        [*CLI, *args, "--home", str(home)], capture_output=True, text=True, env=env, timeout=300
    )


def _running_loop(tmp_path: Path) -> tuple[subprocess.Popen[str], LocalPipeline]:
    """`spindle local run loop` in a process of its own, once it committed a step of 2 rows."""
    inputs, home = tmp_path / "in", tmp_path / "home"
    inputs.mkdir()
    applied = _cli(home, "local", "apply", "-f", str(manifest(tmp_path, _loop_sql(inputs), "loop")))
    assert applied.returncode == 0, applied.stderr
    runner = subprocess.Popen(
        [*CLI, "local", "run", "loop", "--home", str(home)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path.cwd())},
    )
    pipeline = LocalPipeline(home, "loop")
    deadline = time.monotonic() + 180
    while pipeline.store().latest() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    (inputs / "1.json").write_text('{"id": 1}\n{"id": 2}\n')
    while time.monotonic() < deadline:
        latest = pipeline.store().latest()
        if latest is not None and latest.state["t"].rows == 2:
            break
        time.sleep(0.5)
    return runner, pipeline


@pytest.mark.parametrize("how", ["local stop", "Ctrl-C"])
def test_stop_finishes_the_step_commits_and_exits_zero(
    tmp_path: Path, spark: Any, how: str
) -> None:
    runner, pipeline = _running_loop(tmp_path)
    if how == "local stop":
        stopped = _cli(pipeline.home, "local", "stop", "loop")
        assert stopped.returncode == 0, stopped.stderr
    else:  # PySpark's own handler cancelled the jobs from inside the call waiting for them
        runner.send_signal(signal.SIGINT)
    _, err = runner.communicate(timeout=300)
    assert runner.returncode == 0, err
    assert "Stopped at checkpoint" in err and "Traceback" not in err and "Py4J" not in err
    assert pipeline.running_pid() is None
    latest = pipeline.store().latest()
    assert latest is not None and latest.state["t"].rows == 2


def test_a_changed_program_stops_a_local_run_at_a_checkpoint_for_approval(
    tmp_path: Path, spark: Any
) -> None:
    runner, pipeline = _running_loop(tmp_path)
    before = pipeline.store().latest()
    changed = manifest(tmp_path, _loop_sql(tmp_path / "in", "count(*) as n, sum(id) as s"), "loop")
    applied = _cli(pipeline.home, "local", "apply", "-f", str(changed))
    assert applied.returncode == 0, applied.stderr
    _, err = runner.communicate(timeout=300)  # it stops by itself: nobody else would
    assert runner.returncode == 0, err
    assert "ProgramChanged" in err and "Stopped at checkpoint" in err, err
    status = json.loads(_cli(pipeline.home, "local", "status", "loop", "--json").stdout)
    assert status["phase"] == "AwaitingApproval", status
    assert pipeline.store().latest() == before  # no step ran the old program after the change


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        # what no check of the program layer looks for: operands of types that do not mix,
        # a call with the wrong number of arguments (each was UnsupportedSql)
        ("select id, v + array(1) as s from t", "TypeMismatch"),
        ("select id, round(v, 1, 2) as r from t", "WrongArgumentCount"),
        # a grouping the program layer leaves to Spark (the columns it reads are all grouped,
        # the expression is not): Spark's refusal has the check's reason
        ("select id * v as p, count(*) as n from t group by id + v", "UngroupedColumn"),
        # a column the program layer's check cannot see (the derived table's second column
        # is unnamed), so Spark's analyzer finds it: its reason is still the check's
        ("select cnt from (select id, count(*) from t group by id) x", "UnknownColumn"),
        # a column Delta cannot store, whose type only Spark knows: it was an InternalError
        ("select id, current_date() - date '2024-01-01' as days from t", "UnsupportedType"),
    ],
)
def test_sql_spark_refuses_fails_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spark: Any, query: str, reason: str
) -> None:
    sql = (
        "create table t (id bigint, v int) with ('materialized' = 'true');\n"
        "create view ok as select id from t;\n"
        f"create view bad as\n  {query};"
    )
    cli = Cli(tmp_path / "home", capsys)
    cli("local", "apply", "-f", str(manifest(tmp_path, sql, "bad")))
    capsys.readouterr()
    from spindle.cli.main import main

    assert main(["local", "run", "bad", "--until-idle", "--home", str(tmp_path / "home")]) == 1
    err = capsys.readouterr().err
    assert f"error {reason}:" in err and "'bad' (line 3, column 13)" in err
    assert " pos " not in err, "Spark's position in the SQL written for it is not the program's"
    assert LocalPipeline(tmp_path / "home", "bad").store().latest() is None
    assert json.loads(cli("local", "status", "bad", "--json"))["phase"] == "Failed"


def test_a_view_whose_columns_spark_names_alike_is_refused_not_stored(spark: Any) -> None:
    """Two columns of one name (case-insensitively) are evaluated by Spark, but no view can
    store them: the program layer refuses those it can see (`program.columns`), the runtime
    any other, as the user's error rather than a Spindle bug."""
    from spindle.runtime.maintain import Views

    program = parse_program("create table t (id bigint);\ncreate view v as select id from t;")
    views = Views(spark, program, str)
    with pytest.raises(SpindleError) as raised:
        views.query(program.views["v"], "select 1 as id, 2 as ID")
    error = raised.value
    assert error.reason == "DuplicateColumn" and "has two columns named 'ID'" in error.message
    assert (error.details["line"], error.details["column"]) == (2, 13)


def test_starting_from_another_pipelines_checkpoint_bootstraps_without_touching_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spark: Any
) -> None:
    import shutil

    cli = Cli(tmp_path / "home", capsys)
    grades = Path("examples/grades")
    cli("local", "apply", "-f", str(grades / "pipeline-v1.yaml"))
    cli("local", "execute", "grades", "insert into students values (1, 'Alice'), (2, 'Bob')")
    cli(
        "local",
        "execute",
        "grades",
        "insert into grades values (1, 'algebra', 97, "
        "'2025-09-15'), (2, 'algebra', 85, '2026-02-01')",
    )
    cli("local", "run", "grades", "--until-idle")
    source = LocalPipeline(tmp_path / "home", "grades")
    origin = source.store().latest()
    assert origin is not None
    document = yaml.safe_load((grades / "pipeline-v2.yaml").read_text())
    document["metadata"]["name"] = "grades-copy"
    root, _ = source.storage_root()
    document["spec"]["storage"] = {
        "uri": (tmp_path / "home" / "storage").as_uri(),
        "startFrom": f"{root}#{origin.id}",
    }
    copy = tmp_path / "copy.yaml"
    copy.write_text(yaml.safe_dump(document))
    status = cli.json("local", "apply", "-f", str(copy))
    assert status["phase"] == "AwaitingApproval"
    assert status["pendingChange"]["diff"]["program_diff"]["added_views"] == [
        "avg_grade_all_courses"
    ]
    cli("local", "approve", "grades-copy", status["pendingChange"]["id"])
    cli("local", "run", "grades-copy", "--until-idle")
    assert cli.json(
        "query", "grades-copy", "SELECT * FROM avg_grade_all_courses ORDER BY student_id"
    ) == [{"student_id": 1, "avg": "97.00"}, {"student_id": 2, "avg": "85.00"}]
    # the source runs on: its tables move past the versions the copy adopted
    cli("local", "execute", "grades", "insert into grades values (2, 'art', 60, '2026-03-01')")
    cli("local", "run", "grades", "--until-idle")
    moved = source.store().latest()
    assert moved is not None and moved != origin
    source_logs = sorted(Path(root.removeprefix("file://")).glob("state/**/_delta_log/*.json"))
    assert source_logs
    # a step maintains the adopted views (written at version 1 of the source's tables) in copies
    late = "insert into grades values (1, 'algebra', 77, '2025-10-01')"
    cli("local", "execute", "grades-copy", late)
    cli("local", "run", "grades-copy", "--until-idle")
    assert cli.json(
        "query", "grades-copy", "SELECT * FROM avg_grade_all_courses ORDER BY student_id"
    ) == [{"student_id": 1, "avg": "87.00"}, {"student_id": 2, "avg": "85.00"}]
    # the source pipeline was only read: its tables were not rolled back to the adopted versions
    assert source.store().latest() == moved
    assert sorted(Path(root.removeprefix("file://")).glob("state/**/_delta_log/*.json")) == (
        source_logs
    )
    assert cli.json("query", "grades", "SELECT count(*) AS n FROM grades") == [{"n": 3}]
    shutil.rmtree(tmp_path / "home" / "pipelines" / "grades-copy")


def test_delta_input_reads_only_the_commits_after_its_offset(tmp_path: Path, spark: Any) -> None:
    from delta.tables import DeltaTable
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType

    from spindle.errors import SpindleError
    from spindle.runtime.connectors import DeltaInput

    ddl = "id long, v int"
    schema = StructType([StructField("id", LongType()), StructField("v", IntegerType())])

    def rows(frame: Any) -> list[tuple[Any, ...]]:
        return sorted(tuple(r) for r in frame.collect())

    plain = str(tmp_path / "plain")  # partitioned: values come from the log, not the files
    spark.createDataFrame([(1, 10), (2, 20)], ddl).write.format("delta").partitionBy("v").save(
        plain
    )
    spark.createDataFrame([(3, 30), (4, 10)], ddl).write.format("delta").mode("append").save(plain)
    source = DeltaInput("t.c", plain, schema)
    frame, offset = source.poll(spark, 0)
    assert offset == 1 and frame is not None and frame.columns == ["id", "v", "__o"]
    assert rows(frame.drop("__o")) == [(3, 30), (4, 10)]
    DeltaTable.forPath(spark, plain).optimize().executeCompaction()  # rewrites no rows
    frame, offset = source.poll(spark, 1)
    assert offset == 2 and frame is not None and rows(frame.drop("__o")) == []
    DeltaTable.forPath(spark, plain).delete("id = 1")
    with pytest.raises(SpindleError) as refused:
        source.poll(spark, 2)
    assert refused.value.reason == "DeltaInputNotAppendOnly"
    assert "delta.enableChangeDataFeed" in refused.value.message

    fed = str(tmp_path / "fed")
    spark.createDataFrame([(1, 10), (2, 20)], ddl).write.format("delta").option(
        "delta.enableChangeDataFeed", "true"
    ).save(fed)
    spark.createDataFrame([(3, 30)], ddl).write.format("delta").mode("append").save(fed)
    DeltaTable.forPath(spark, fed).delete("id = 1")
    frame, offset = DeltaInput("t.c", fed, schema).poll(spark, 0)
    assert offset == 2 and frame is not None and frame.columns == ["id", "v", "__w", "__o"]
    assert rows(frame.drop("__o")) == [(1, 10, -1), (3, 30, 1)]
    # order: commit version, then a commit's deletes before its inserts
    assert rows(frame.select("id", "__o")) == [(1, 2 * 2 + 0), (3, 1 * 2 + 1)]


def connectors(transport: str, path: Path) -> str:
    """One connector's JSON: a transport at `path` (file transports read and write JSON)."""
    config = {"path": str(path)}
    found: dict[str, Any] = {"name": "c", "transport": {"name": transport, "config": config}}
    if transport != "delta_table_output":
        found["format"] = {"name": "json"}
    return json.dumps([found])


def connected_to(tmp_path: Path, transport: str, path: str) -> str:
    """The WITH clause of a materialized relation with one connector, `c`, at tmp_path/path
    (JSON, for a file input)."""
    key = "uri" if transport == "delta_table_output" else "path"
    found = [{"name": "c", "transport": {"name": transport, "config": {key: str(tmp_path / path)}}}]
    if transport == "file_input":
        found[0]["format"] = {"name": "json"}
    return f"with ('materialized' = 'true', 'connectors' = '{json.dumps(found)}')"


def runtime_for(
    tmp_path: Path, sql: str, *, root: str | None = None, s3: Any = None, version: str | None = None
) -> tuple[Any, Any, Any]:
    """A runtime on the suite's Spark for `sql`, with its state under tmp_path/s (or `root`,
    on the S3 server `s3` names): the runtime, its checkpoint store and the parsed program."""
    from spindle.api import PipelineSpec
    from spindle.checkpoint import PipelineRef
    from spindle.checkpoint.store import open_store
    from spindle.program import parse_program
    from spindle.runtime.factory import open_runtime

    root = root or (tmp_path / "s").as_uri()
    store = open_store(root, s3=s3)
    storage = {"uri": root}
    if s3 is not None:
        storage.update(endpoint=s3.endpoint, region=s3.region)
    runtime = open_runtime(
        pipeline=PipelineRef(namespace="default", name="p"),
        spec=PipelineSpec.model_validate(
            {"sql": sql, "storage": storage, **({"runtimeVersion": version} if version else {})}
        ),
        store=store,
        s3=s3,
        report=lambda event, **fields: None,
    )
    return runtime, store, parse_program(sql)


def block(directory: Path) -> Callable[[], None]:
    """Put a file where an output's directory is (so writing under it fails); returns the undo."""
    kept = directory.with_name(directory.name + ".kept")
    directory.rename(kept)
    directory.write_text("a file where the output's directory should be\n")

    def unblock() -> None:
        directory.unlink()
        kept.rename(directory)

    return unblock


def test_an_output_that_cannot_be_written_fails_the_step_and_the_next_step_delivers_it_once(
    tmp_path: Path, spark: Any
) -> None:
    """A step writes state and outputs in the background while it maintains later views; a
    write that fails fails the step before its commit, and the step does not return while
    another of its writes still runs (the next step rolls them back, then does the step again)."""
    from spindle.runtime.storage import delta_version

    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    sql = (
        "create table events (id bigint, k int, amount int) with "
        f"('connectors' = '{connectors('file_input', inputs)}');\n"
        "create view totals as select k, sum(amount) as total from events group by k;\n"
        "create materialized view big with "
        f"('connectors' = '{connectors('file_output', out)}') as "
        "select k, total from totals where total > 10;\n"
    )
    runtime, store, program = runtime_for(tmp_path, sql)

    def batch(name: str, rows: list[tuple[int, int, int]]) -> None:
        lines = [json.dumps({"id": i, "k": k, "amount": a}) for i, k, a in rows]
        (inputs / f"{name}.json").write_text("\n".join(lines) + "\n")

    def delivered() -> list[tuple[int, int, int]]:
        files = sorted(out.glob("*.jsonl"))
        rows = [json.loads(line) for f in files for line in f.read_text().splitlines()]
        return sorted((r["k"], r["total"], r["weight"]) for r in rows)

    first, _ = runtime.step(program, runtime.initialize(program))
    batch("a", [(1, 1, 20), (2, 2, 5)])
    first, _ = runtime.step(program, first)
    assert delivered() == [(1, 20, 1)]

    batch("b", [(3, 2, 30), (4, 1, 1)])
    unblock = block(out)
    with pytest.raises(SpindleError) as refused:
        runtime.step(program, first)
    assert refused.value.reason == "OutputUnwritable"
    assert refused.value.details == {"connector": "big.c", "uri": str(out)}
    assert f"Output connector big.c cannot write to {out}: " in refused.value.message
    assert store.latest().sequence == first.sequence
    events = runtime.uri(first.state["events"].path)
    assert delta_version(spark, events) > first.state["events"].version  # written, not running

    unblock()
    second, stats = runtime.step(program, first)
    assert stats.rows_ingested == 2 and second.sequence == first.sequence + 1
    assert second.state["events"].rows == 4
    assert delivered() == sorted([(1, 20, 1), (1, 20, -1), (1, 21, 1), (2, 35, 1)])
    stored = runtime.views(program).contents("totals", second.state["totals"])
    assert sorted(tuple(r) for r in stored.collect()) == [(1, 21), (2, 35)]


def test_a_bootstrap_after_a_failed_step_replaces_the_delta_output_the_step_wrote_to(
    tmp_path: Path, spark: Any
) -> None:
    """A failed step may have written its changes to a Delta output before failing. The
    bootstrap that follows commits that step's sequence number: its write to the output must
    not be skipped as the step's own replay would be (Delta's idempotent writes)."""
    from spindle.plan.plan import make_plan

    inputs, out, lake = tmp_path / "in", tmp_path / "out", tmp_path / "lake"
    inputs.mkdir()
    sql = (
        "create table events (id bigint, k int, amount int) with ('materialized' = 'true', "
        f"'connectors' = '{connectors('file_input', inputs)}');\n"
        "create materialized view totals with "
        f"('connectors' = '{connectors('delta_table_output', lake)}') as "
        "select k, sum(amount) as total from events group by k;\n"
        "create materialized view big with "
        f"('connectors' = '{connectors('file_output', out)}') as "
        "select k, total from totals where total > 10;\n"
    )
    runtime, store, program = runtime_for(tmp_path, sql)
    (inputs / "a.json").write_text('{"id": 1, "k": 1, "amount": 20}\n')
    first, _ = runtime.step(program, runtime.initialize(program))

    (inputs / "b.json").write_text('{"id": 2, "k": 1, "amount": 5}\n')
    unblock = block(out)
    with pytest.raises(SpindleError, match=r"Output connector big\.c cannot write"):
        runtime.step(program, first)
    written = spark.read.format("delta").load(str(lake))
    assert sorted(tuple(r) for r in written.select("k", "total", "weight").collect()) == [
        (1, 20, -1),  # the failed step's change reached the output
        (1, 20, 1),
        (1, 25, 1),
    ]

    plan = make_plan(old=program, new=program, restate=("totals",))
    with pytest.raises(SpindleError) as refused:  # a bootstrap's output is refused the same way
        runtime.bootstrap(plan, first)
    assert refused.value.reason == "OutputUnwritable"
    assert refused.value.details["connector"] == "big.c"
    assert store.latest().id == first.id

    unblock()
    bootstrapped = runtime.bootstrap(plan, first)
    assert bootstrapped.sequence == first.sequence + 1  # the failed step's sequence
    written = spark.read.format("delta").load(str(lake))
    assert sorted(tuple(r) for r in written.select("k", "total", "weight").collect()) == [
        (1, 20, 1)  # the stored state the bootstrap read: the failed step's input is not in it
    ]


def test_an_input_that_cannot_be_read_fails_the_step_with_its_reason_and_is_ingested_later(
    tmp_path: Path, spark: Any, s3: Any
) -> None:
    """An input whose storage refuses the listing (a file where its directory should be, a
    bucket that does not exist) fails the step with `InputUnreadable`, naming the connector and
    the location, instead of an internal error; nothing is committed, and once it can be read
    the next step ingests it. A location that does not exist yet is only an input with nothing
    new."""
    blocked = tmp_path / "blocked"
    inputs = blocked / "in"
    missing = f"s3a://{s3.bucket('present')}-absent/in"  # a bucket that does not exist
    sql = (
        "create table events (id bigint, k int) with "
        f"('connectors' = '{connectors('file_input', inputs)}');\n"
        "create table lake (id bigint, k int) with "
        f"('connectors' = '{connectors('delta_table_input', tmp_path / 'lake')}');\n"
        "create materialized view counts as select k, count(*) as n from events group by k;\n"
    )
    runtime, store, program = runtime_for(tmp_path, sql)
    first, stats = runtime.step(program, runtime.initialize(program))  # neither exists yet
    assert stats.rows_ingested == 0

    blocked.write_text("a file where the input's parent directory should be\n")
    with pytest.raises(SpindleError) as refused:
        runtime.step(program, first)
    assert refused.value.reason == "InputUnreadable"
    assert refused.value.details == {"connector": "events.c", "uri": str(inputs)}
    assert f"Input connector events.c cannot read {inputs}: NotADirectoryError" in (
        refused.value.message
    )
    assert store.latest().id == first.id

    blocked.unlink()
    inputs.mkdir(parents=True)
    (inputs / "a.json").write_text('{"id": 1, "k": 7}\n{"id": 2, "k": 7}\n')
    second, stats = runtime.step(program, first)
    assert stats.rows_ingested == 2
    stored = runtime.views(program).contents("counts", second.state["counts"])
    assert [tuple(r) for r in stored.collect()] == [(7, 2)]

    for table, location in (("events", inputs), ("lake", tmp_path / "lake")):
        elsewhere = sql.replace(f'{location}"', f'{missing}"')
        runtime, store, program = runtime_for(tmp_path / table, elsewhere)
        with pytest.raises(SpindleError) as refused:
            runtime.step(program, runtime.initialize(program))
        assert refused.value.reason == "InputUnreadable", table
        assert refused.value.details == {"connector": f"{table}.c", "uri": missing}
        assert f"Input connector {table}.c cannot read {missing}: " in refused.value.message


def test_a_step_storage_refuses_is_retried_until_it_succeeds_or_the_retries_are_spent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spark: Any
) -> None:
    """A driver retries a step its storage refused (`spec.retry`), from the last checkpoint,
    after a growing wait, saying so; the input it could not read is ingested once readable, and
    the run goes on without a restart. A stop during a wait ends the run at once, at the last
    checkpoint. With the retries spent, the run fails with the reason, saying how many times
    the step failed."""
    blocked = tmp_path / "blocked"
    inputs = blocked / "in"
    sql = (
        "create table t (id bigint, k int) with "
        f"('connectors' = '{connectors('file_input', inputs)}');\n"
        "create materialized view counts as select k, count(*) as n from t group by k;\n"
    )
    home = tmp_path / "home"
    cli = Cli(home, capsys)

    def run_until(line: str, then: Callable[[subprocess.Popen[str]], None], **retry: int) -> str:
        """`spindle local run` with `spec.retry` = retry: `then` when `line` is printed; its
        stderr."""
        cli("local", "apply", "-f", str(manifest(tmp_path, sql, "retried", retry=retry)))
        path = [str(Path.cwd()), os.environ.get("PYTHONPATH", "")]
        runner = subprocess.Popen(
            [*CLI, "local", "run", "retried", "--until-idle", "--home", str(home)],
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(path)},
        )
        assert runner.stderr is not None
        printed = []
        for printed_line in runner.stderr:
            printed.append(printed_line)
            if line in printed_line:
                then(runner)
                break
        printed.append(runner.communicate(timeout=300)[1])
        err = "".join(printed)
        assert runner.returncode == 0, err
        return err

    # `blocked` is a link to a file, then at once (os.replace) a link to a directory
    a_file, ready = tmp_path / "a-file", tmp_path / "ready"
    a_file.write_text("a file where the input's parent directory should be\n")
    (ready / "in").mkdir(parents=True)
    (ready / "in" / "a.json").write_text('{"id": 1, "k": 7}\n{"id": 2, "k": 7}\n')
    blocked.symlink_to(a_file)

    def readable(_: subprocess.Popen[str]) -> None:
        retrying = wait_for(  # as `spindle local status` shows it, from another process
            "the status to show the retry",
            lambda: (
                (s := cli.json("local", "status", "retried"))["conditions"][0]["reason"]
                == "StepRetrying"
                and s
            ),
            timeout=60,
        )
        assert retrying["phase"] == "Running", retrying
        assert retrying["conditions"][0]["status"] == "False"
        assert retrying["conditions"][0]["message"].startswith("Step 1 failed (InputUnreadable)")
        (tmp_path / "swap").symlink_to(ready)
        os.replace(tmp_path / "swap", blocked)

    err = run_until("Retry 1 of 3 in 10 s", readable, attempts=3, initialDelaySeconds=10)
    assert f"Step 1 failed (InputUnreadable): Input connector t.c cannot read {inputs}" in err
    assert "Recovered after 1 retry: checkpoint 00000001-" in err
    assert "Retry 2 of" not in err
    assert LocalPipeline(home, "retried").driver().retrying is None  # recovered, then stopped
    assert cli.json("query", "retried", "SELECT k, n FROM counts") == [{"k": 7, "n": 2}]
    first = LocalPipeline(home, "retried").store().latest()
    assert first is not None

    # stopped while it waits to retry: it ends at once, at the last checkpoint
    unblock = block(blocked)
    waited = time.monotonic()
    err = run_until(
        "Retry 1 of 3 in 600 s",
        lambda runner: runner.terminate(),
        attempts=3,
        initialDelaySeconds=600,
        maxDelaySeconds=600,
    )
    assert time.monotonic() - waited < 300
    assert f"Stopped at checkpoint {first.id}." in err
    assert LocalPipeline(home, "retried").store().latest() == first

    # the retries spent: the run fails with the reason, after the first attempt and 1 retry
    cli(
        "local",
        "apply",
        "-f",
        str(manifest(tmp_path, sql, "retried", retry={"attempts": 1, "initialDelaySeconds": 0})),
    )
    capsys.readouterr()
    from spindle.cli.main import main

    assert main(["local", "run", "retried", "--until-idle", "--home", str(home)]) == 1
    err = capsys.readouterr().err
    assert "Retry 1 of 1 in 0 s" in err
    assert "Retry 2 of" not in err
    status = cli.json("local", "status", "retried")
    assert status["phase"] == "Failed"
    ready = status["conditions"][0]
    assert ready["reason"] == "InputUnreadable"
    assert (
        "The step failed 2 times: its first attempt and 1 retry (spec.retry.attempts)."
        in (ready["message"])
    )
    unblock()
    assert main(["local", "run", "retried", "--until-idle", "--home", str(home)]) == 0


def counted(tmp_path: Path, inputs: Path, **backend: Any) -> tuple[Any, Any, Any]:
    """`runtime_for` a table fed by JSON files in `inputs` and a count per key over it."""
    inputs.mkdir()
    sql = (
        f"create table t (id bigint, k int) with ('connectors' = "
        f"'{connectors('file_input', inputs)}');\n"
        "create materialized view counts as select k, count(*) as n from t group by k;\n"
    )
    return runtime_for(tmp_path, sql, **backend)


def spoil_checksums(spark: Any, uri: str) -> Callable[[], None]:
    """Make every file of the Delta table at `uri` read back with a bad checksum (Hadoop's
    `.crc` beside each local file: storage returning bad bytes); returns the undo."""
    from urllib.parse import urlparse

    checksums = {}
    for found in spark.read.format("delta").load(uri).inputFiles():
        stored = Path(urlparse(found).path)
        checksum = stored.with_name(f".{stored.name}.crc")
        checksums[checksum] = intact = checksum.read_bytes()
        checksum.write_bytes(intact[:8] + bytes(b ^ 0xFF for b in intact[8:]))
    assert checksums

    def undo() -> None:
        for checksum, intact in checksums.items():
            checksum.write_bytes(intact)

    return undo


def test_a_compaction_that_fails_leaves_the_step_committed_and_the_next_write_compacts(
    tmp_path: Path, spark: Any
) -> None:
    """Compaction is upkeep: when storage fails it (here a stored file reads back with a bad
    checksum), the step still commits what it wrote and says why compaction failed, and once
    the file reads again the relation's next write compacts. A stored file that is gone is
    lost data, not upkeep: the step fails with `StateFileMissing`, naming the relation, and
    commits nothing."""
    import shutil
    from urllib.parse import urlparse

    from spindle.runtime.compaction import Compaction

    inputs = tmp_path / "in"
    runtime, store, program = counted(tmp_path, inputs)
    reports: list[tuple[str, dict[str, Any]]] = []
    runtime.report = lambda event, **fields: reports.append((event, fields))
    runtime.compaction = Compaction(small_files=1)  # every write compacts
    checkpoint = runtime.initialize(program)

    def step(rows: str) -> list[tuple[str, dict[str, Any]]]:
        nonlocal checkpoint
        (inputs / f"{len(list(inputs.iterdir()))}.json").write_text(rows)
        reports.clear()
        checkpoint, stats = runtime.step(program, checkpoint)
        assert stats.rows_ingested > 0
        return [(event, fields) for event, fields in reports if fields.get("relation") == "t"]

    def counts() -> list[tuple[Any, ...]]:
        stored = runtime.views(program).contents("counts", checkpoint.state["counts"])
        return sorted(tuple(r) for r in stored.collect())

    step('{"id": 1, "k": 7}\n')
    undo = spoil_checksums(spark, runtime.uri(checkpoint.state["t"].path))
    written = checkpoint.state["t"].version + 1  # the next step's write of t
    [(event, fields)] = step('{"id": 2, "k": 7}\n')
    assert event == "compaction-failed", reports
    assert fields["error"].startswith("ChecksumException: "), fields
    assert checkpoint.state["t"].version == written
    assert store.latest().id == checkpoint.id
    assert counts() == [(7, 2)]  # maintained from the change: the stored file is not read

    undo()
    [(event, fields)] = step('{"id": 3, "k": 8}\n')
    assert (event, fields["files"]) == ("compacted", 3), reports  # with the failed one's
    assert checkpoint.state["t"].version == written + 2  # its write, then its compaction
    assert counts() == [(7, 2), (8, 1)]

    [found] = spark.read.format("delta").load(runtime.uri(checkpoint.state["t"].path)).inputFiles()
    lost = Path(urlparse(found).path)
    kept = shutil.copy(lost, tmp_path / "kept.parquet")
    lost.unlink()
    before = store.latest()
    with pytest.raises(SpindleError) as missing:
        step('{"id": 4, "k": 8}\n')
    assert missing.value.reason == "StateFileMissing"
    assert missing.value.details["relation"] == "t"
    assert "Restore it from a backup" in missing.value.message
    assert store.latest() == before
    shutil.copy(kept, lost)
    step('{"id": 5, "k": 8}\n')  # the failed step again: what its intent planned (id 4)...
    assert counts() == [(7, 2), (8, 2)]
    checkpoint, _ = runtime.step(program, checkpoint)  # ... then what arrived after it
    assert counts() == [(7, 2), (8, 3)]


def test_state_storage_that_refuses_a_read_fails_the_step_as_storage_refused(
    tmp_path: Path, spark: Any
) -> None:
    """A view's stored state that reads back with a bad checksum (storage returning bad
    bytes) fails the step with `StorageRefused`, a reason a driver retries, naming the cause
    and the pipeline's root, not an internal error; nothing is committed, and once the
    state reads again the same step succeeds."""

    inputs = tmp_path / "in"
    runtime, store, program = counted(tmp_path, inputs)
    checkpoint = runtime.initialize(program)
    (inputs / "a.json").write_text('{"id": 1, "k": 7}\n')
    checkpoint, _ = runtime.step(program, checkpoint)
    undo = spoil_checksums(spark, runtime.uri(checkpoint.state["counts"].path))  # re-read
    (inputs / "b.json").write_text('{"id": 2, "k": 7}\n')
    with pytest.raises(SpindleError) as refused:
        runtime.step(program, checkpoint)
    assert refused.value.reason == "StorageRefused"
    assert refused.value.message.startswith("Storage refused a read or write: ChecksumException")
    assert refused.value.details == {"uri": runtime.root}
    assert store.latest() == checkpoint

    undo()
    checkpoint, stats = runtime.step(program, checkpoint)
    assert stats.rows_ingested == 1
    stored_counts = runtime.views(program).contents("counts", checkpoint.state["counts"])
    assert [tuple(r) for r in stored_counts.collect()] == [(7, 2)]


@pytest.mark.parametrize("backend", ["file", "s3"])
def test_a_stored_file_that_is_gone_fails_the_step_as_state_file_missing(
    tmp_path: Path, spark: Any, backend: str, request: pytest.FixtureRequest
) -> None:
    """A file of a view's stored state deleted outside Spindle (a bucket lifecycle rule, a
    manual cleanup) is lost data: the step that reads it fails with `StateFileMissing`, naming
    the relation and the file, not an internal error and not a refusal a driver would retry;
    nothing is committed, and once the file is restored the same step succeeds. On a local
    directory and on the real S3 server (whose client says a missing object its own way)."""
    from urllib.parse import urlparse

    inputs, where = tmp_path / "in", {}
    if backend == "s3":
        from spindle.checkpoint.objects import S3Options

        s3 = request.getfixturevalue("s3")
        options = S3Options(s3.endpoint, s3.region, s3.access_key, s3.secret_key)
        where = {"root": f"s3://{s3.bucket('lost')}/p", "s3": options}
    runtime, store, program = counted(tmp_path, inputs, **where)
    checkpoint = runtime.initialize(program)
    (inputs / "a.json").write_text('{"id": 1, "k": 7}\n')
    checkpoint, _ = runtime.step(program, checkpoint)
    uri = runtime.uri(checkpoint.state["counts"].path)
    (stored,) = spark.read.format("delta").load(uri).inputFiles()
    kept, restore = lose(store, urlparse(stored))
    (inputs / "b.json").write_text('{"id": 2, "k": 7}\n')
    with pytest.raises(SpindleError) as missing:
        runtime.step(program, checkpoint)
    assert missing.value.reason == "StateFileMissing", missing.value.message
    assert missing.value.message.startswith(
        f"A file of counts's stored state at {checkpoint.state['counts'].path} is missing"
    )
    assert Path(urlparse(stored).path).name in missing.value.message
    assert missing.value.details == {"relation": "counts", "path": checkpoint.state["counts"].path}
    assert store.latest() == checkpoint

    restore(kept)
    checkpoint, stats = runtime.step(program, checkpoint)
    assert stats.rows_ingested == 1
    stored_counts = runtime.views(program).contents("counts", checkpoint.state["counts"])
    assert [tuple(r) for r in stored_counts.collect()] == [(7, 2)]


def test_a_bootstrap_that_finds_a_stored_file_gone_fails_as_state_file_missing(
    tmp_path: Path, spark: Any
) -> None:
    """A bootstrap reads stored state too (here a restatement of counts reads the
    materialized table t): a file of it gone is `StateFileMissing`, naming the table; the
    checkpoint is untouched, and once the file is restored the same bootstrap succeeds."""
    from urllib.parse import urlparse

    from spindle.plan.plan import make_plan

    inputs = tmp_path / "in"
    inputs.mkdir()
    sql = (
        f"create table t (id bigint, k int) with ('materialized' = 'true', 'connectors' = "
        f"'{connectors('file_input', inputs)}');\n"
        "create materialized view counts as select k, count(*) as n from t group by k;\n"
    )
    runtime, store, program = runtime_for(tmp_path, sql)
    checkpoint = runtime.initialize(program)
    (inputs / "a.json").write_text('{"id": 1, "k": 7}\n{"id": 2, "k": 7}\n')
    checkpoint, _ = runtime.step(program, checkpoint)
    table = checkpoint.state["t"]
    stored, *_ = spark.read.format("delta").load(runtime.uri(table.path)).inputFiles()
    kept, restore = lose(store, urlparse(stored))
    plan = make_plan(old=program, new=program, restate=("counts",))
    with pytest.raises(SpindleError) as missing:
        runtime.bootstrap(plan, checkpoint)
    assert missing.value.reason == "StateFileMissing", missing.value.message
    assert missing.value.details == {"relation": "t", "path": table.path}
    assert store.latest() == checkpoint

    restore(kept)
    bootstrapped = runtime.bootstrap(plan, checkpoint)
    counts = runtime.views(program).contents("counts", bootstrapped.state["counts"])
    assert [tuple(r) for r in counts.collect()] == [(7, 2)]


def test_a_bootstrap_that_fails_on_a_later_view_leaves_every_output_as_it_was(
    tmp_path: Path, spark: Any
) -> None:
    """The outputs of each view were replaced as soon as it was evaluated: a later view's
    failure left a sink holding the new program's snapshot, which never committed, in place
    of the changes the last checkpoint had delivered."""
    from spindle.plan.plan import make_plan
    from spindle.program import parse_program

    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    table = (
        "create table t (id bigint, d int) with ('materialized' = 'true', 'connectors' = "
        f"'{connectors('file_input', inputs)}');\n"
    )
    sink = f"with ('connectors' = '{connectors('file_output', out)}')"
    sql = f"{table}create view a {sink} as select id from t;\n"
    runtime, store, program = runtime_for(tmp_path, sql, version="v2")  # ANSI: 1 / 0 fails
    checkpoint = runtime.initialize(program)
    (inputs / "a.json").write_text('{"id": 1, "d": 0}\n')
    checkpoint, _ = runtime.step(program, checkpoint)
    delivered = sorted(p.name for p in out.iterdir())
    assert delivered
    failing = parse_program(
        f"{table}create view a {sink} as select id, d from t;\n"
        "create view b as select id / d as r from t;\n"
    )
    plan = make_plan(old=program, new=failing, old_runtime="v2", runtime="v2")
    assert plan.views_to_evaluate == ("a", "b")
    with pytest.raises(SpindleError):
        runtime.bootstrap(plan, checkpoint)
    assert sorted(p.name for p in out.iterdir()) == delivered
    assert store.latest() == checkpoint


def test_a_query_over_stored_state_that_is_gone_is_state_file_missing(
    tmp_path: Path, spark: Any
) -> None:
    """`spindle query` reads the checkpoint's stored state as a step does: a file of it, or its
    whole folder, deleted outside Spindle is `StateFileMissing` naming the relation, as the
    step says it, not an internal error nor a query the user got wrong."""
    import shutil
    from urllib.parse import urlparse

    inputs = tmp_path / "in"
    runtime, store, program = counted(tmp_path, inputs)
    checkpoint = runtime.initialize(program)
    (inputs / "a.json").write_text('{"id": 1, "k": 7}\n')
    checkpoint, _ = runtime.step(program, checkpoint)
    record, sql = checkpoint.state["counts"], "select k, n from counts"
    (stored,) = spark.read.format("delta").load(runtime.uri(record.path)).inputFiles()
    kept, restore = lose(store, urlparse(stored))
    with pytest.raises(SpindleError) as missing:
        runtime.query(program, checkpoint, sql)
    assert missing.value.reason == "StateFileMissing", missing.value.message
    assert missing.value.details == {"relation": "counts", "path": record.path}
    assert missing.value.message.endswith("then query again.")
    restore(kept)
    assert runtime.query(program, checkpoint, sql).rows == ({"k": 7, "n": 1},)
    shutil.rmtree(urlparse(runtime.uri(record.path)).path)
    with pytest.raises(SpindleError) as missing:
        runtime.query(program, checkpoint, sql)
    assert missing.value.reason == "StateFileMissing", missing.value.message
    assert missing.value.details == {"relation": "counts", "path": record.path}


def lose(store: Any, stored: Any) -> tuple[bytes, Callable[[bytes], None]]:
    """Delete the stored file at the parsed URI `stored` (local or on S3) as something outside
    Spindle would: its bytes and the function that puts them back."""
    if stored.scheme == "file":
        path = Path(stored.path)
        kept = path.read_bytes()
        path.unlink()
        return kept, path.write_bytes
    client, bucket, key = store.objects.s3, stored.netloc, stored.path.lstrip("/")
    kept = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    client.delete_object(Bucket=bucket, Key=key)
    return kept, lambda body: client.put_object(Bucket=bucket, Key=key, Body=body)


def test_a_query_spark_cannot_analyze_prints_no_java_stack_trace(
    spark: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    from pyspark.errors import AnalysisException

    capfd.readouterr()
    with pytest.raises(AnalysisException):
        spark.sql("select nope from range(1)").collect()
    err = capfd.readouterr().err  # Spindle says the error itself, with its first line
    assert "UNRESOLVED_COLUMN" not in err and "\tat org.apache.spark" not in err, err


def test_an_input_with_nothing_to_read_says_so_once_and_reads_what_arrives(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped input path used to wait silently forever: the run says, once per connector,
    which input has read nothing and whether its path exists; rows that arrive are read."""
    empty, missing = tmp_path / "empty", tmp_path / "inbxo"
    empty.mkdir()
    connectors = [
        {
            "name": name,
            "transport": {"name": "file_input", "config": {"path": str(path)}},
            "format": {"name": "json"},
        }
        for name, path in (("empty", empty), ("typo", missing))
    ]
    sql = (
        f"create table t (id bigint) with ('connectors' = '{json.dumps(connectors)}');\n"
        "create materialized view c as select count(*) as n from t;"
    )
    cli = Cli(tmp_path / "home", capsys)
    cli("local", "apply", "-f", str(manifest(tmp_path, sql, "waits")))
    said = cli("local", "run", "waits", "--until-idle") + cli.err
    assert said.count(f"Input t.typo: {missing} does not exist yet;") == 1
    assert said.count(f"Input t.empty: {empty} has nothing to read yet;") == 1
    (empty / "1.json").write_text('{"id": 1}\n')
    said = cli("local", "run", "waits", "--until-idle") + cli.err
    assert "t.empty" not in said and said.count("Input t.typo:") == 1
    assert cli.json("query", "waits", "SELECT n FROM c") == [{"n": 1}]


def test_spark_leaves_no_warehouse_directory_where_it_is_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown function makes Spark look the catalog up, which created `spark-warehouse/` in
    the working directory: a user's project, or a driver pod's root."""
    sql = "create table t (id bigint) with ('materialized' = 'true');"
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    cli = Cli(home, capsys)
    cli("local", "apply", "-f", str(manifest(tmp_path, sql, "tidy")))
    cli("local", "run", "tidy", "--until-idle")
    env = {**os.environ, "PYTHONPATH": str(Path.cwd() / "operator")}
    query = [*CLI, "query", "tidy", "select avgg(id) from t", "--no-server", "--home", str(home)]
    ran = subprocess.run(query, cwd=project, capture_output=True, text=True, env=env, timeout=300)
    assert ran.returncode == 1 and "UNRESOLVED_ROUTINE" in ran.stderr, ran.stderr
    assert list(project.iterdir()) == []


def test_the_first_checkpoint_records_a_restatement_asked_before_it(tmp_path: Path) -> None:
    """It computes every view, so a request made before it is served (`spindle.dev/restate`
    set on a pipeline that has not started yet), and its children keep it as served."""
    runtime, _, program = counted(tmp_path, tmp_path / "in")
    first = runtime.initialize(program, restated="counts@1")
    second, _ = runtime.step(program, first)
    assert (first.restated, second.restated) == ("counts@1", "counts@1")


def test_a_column_named_in_double_quotes_keeps_its_capitals_in_state_and_outputs(
    tmp_path: Path, spark: Any
) -> None:
    """`s AS "Name"` was stored, and delivered to outputs, as `name` (Feldera and Spark's own
    SQL keep `Name`); an incremental view keeps it through its steps."""
    from spindle.runtime.maintain import Views

    inputs, out = tmp_path / "in", tmp_path / "out"
    inputs.mkdir()
    sql = (
        f"create table t (s varchar) with ('connectors' = '{connectors('file_input', inputs)}');\n"
        f"create materialized view v with ('connectors' = '{connectors('file_output', out)}') "
        'as select s as "Name", count(*) as "Total" from t group by s;\n'
    )
    runtime, _, program = runtime_for(tmp_path, sql)
    checkpoint = runtime.initialize(program)
    for step in range(2):
        (inputs / f"{step}.json").write_text('{"s": "a"}\n')
        checkpoint, _ = runtime.step(program, checkpoint)
    stored = Views(spark, program, runtime.uri).contents("v", checkpoint.state["v"])
    assert stored.columns == ["Name", "Total"] and [tuple(r) for r in stored.collect()] == [
        ("a", 2)
    ]
    records = [json.loads(line) for f in sorted(out.glob("*.jsonl")) for line in f.open()]
    assert records and all({"Name", "Total"} <= set(record) for record in records)


def test_a_local_run_says_its_own_lines_not_sparks_start_up(tmp_path: Path) -> None:
    """`spindle local run` printed eight lines of Spark's start-up before its own: its default
    log profile, the log level, the native library, and that the machine's name resolves to
    a loopback address so Spark listened on another interface."""
    home = ["--home", str(tmp_path / "home"), "--no-server"]
    cli = [sys.executable, "-m", "spindle.cli.main"]
    manifest = "examples/grades/pipeline-v1.yaml"
    subprocess.run([*cli, "local", "apply", "-f", manifest, *home], check=True, capture_output=True)
    ran = subprocess.run(
        [*cli, "local", "run", "grades", "--until-idle", *home],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"},
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr
    for noise in ("log4j profile", "default log level", "NativeCodeLoader", "SPARK_LOCAL_IP"):
        assert noise not in ran.stderr
    assert "Stopped at checkpoint 0000" in ran.stderr


@pytest.mark.parametrize("output", ["file_output", "delta_table_output"])
def test_a_failed_steps_output_does_not_reach_consumers_twice_after_a_bootstrap(
    tmp_path: Path, spark: Any, output: str
) -> None:
    """Outputs are written while a step runs: a step that failed on one input's bad record
    had already written another view's changes. A new program (the fix) was bootstrapped at
    that sequence, leaving them, and the next step ingested the same input again, so a
    consumer of `v_a` read x = 1 twice. The bootstrap removes what the failed step wrote (a
    file output's files; a Delta output's commit, restored away)."""
    from spindle.plan import make_plan
    from spindle.program import parse_program

    def connected(transport: str, path: str) -> str:
        key = "uri" if transport == "delta_table_output" else "path"
        found = [
            {"name": "c", "transport": {"name": transport, "config": {key: str(tmp_path / path)}}}
        ]
        if transport != "delta_table_output":
            found[0]["format"] = {"name": "json"}
        return f"with ('materialized' = 'true', 'connectors' = '{json.dumps(found)}')"

    def program_text(b_query: str) -> str:
        return (
            f"create table t_a (x int) {connected('file_input', 'a')};\n"
            f"create table t_b (y int) {connected('file_input', 'b')};\n"
            f"create materialized view v_a {connected(output, out_a)} as "
            "select x from t_a;\n"
            f"create materialized view v_b {connected(output, 'out_b')} as {b_query};\n"
        )

    out_a = "out_a" if output == "delta_table_output" else "out[a]"  # not a glob of it
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    runtime, _, program = runtime_for(tmp_path, program_text("select y from t_b"))
    checkpoint = runtime.initialize(program)
    (tmp_path / "a" / "1.json").write_text('{"x": 1}\n')
    (tmp_path / "b" / "1.json").write_text('{"y": 1}\n{"y": "bad"}\n')
    with pytest.raises(SpindleError) as failed:
        runtime.step(program, checkpoint)
    assert failed.value.reason == "InvalidInputRecord"
    (tmp_path / "b" / "1.json").write_text('{"y": 1}\n')  # fixed in place
    fixed = parse_program(program_text("select y + 0 as y from t_b"))
    checkpoint = runtime.bootstrap(make_plan(old=program, new=fixed), checkpoint)
    checkpoint, _ = runtime.step(fixed, checkpoint)
    received: Counter[int] = Counter()
    if output == "delta_table_output":
        for row in spark.read.format("delta").load(str(tmp_path / out_a)).collect():
            received[row["x"]] += row["weight"]
    for path in [p for p in (tmp_path / out_a).iterdir() if p.suffix == ".jsonl"]:
        for line in path.read_text().splitlines():
            record = json.loads(line)
            received[record["x"]] += record["weight"]
    assert +received == Counter({1: 1})


@pytest.mark.slow  # 135 s under CI's load: runs beside the cluster's tests
def test_a_step_replayed_after_an_abandoned_bootstrap_undid_its_delta_commit_delivers_it(
    tmp_path: Path, spark: Any
) -> None:
    """A bootstrap undoes a failed step's Delta output commit (RESTORE), but Delta keeps the
    commit's writer and sequence (`txnAppId`/`txnVersion`). When that bootstrap then failed
    and the SQL went back, the replayed step wrote the same writer and sequence again, Delta
    skipped it as already written, and the consumer never received x = 1. A replay after an
    undo writes as a new writer (recorded before the undo, so a crash between keeps it), to
    the outputs undone only: `kept`, which another writer committed to after the step, is
    left by the bootstrap, and the replay's write to it is skipped (x = 1 once there too)."""
    from spindle.plan import make_plan
    from spindle.program import parse_program

    def connected(transport: str, path: str) -> str:
        return connected_to(tmp_path, transport, path)

    sql = (
        f"create table t_a (x int) {connected('file_input', 'a')};\n"
        f"create table t_b (y int) {connected('file_input', 'b')};\n"
        f"create materialized view v_a {connected('delta_table_output', 'out')} as "
        "select x from t_a;\n"
        f"create materialized view v_c {connected('delta_table_output', 'kept')} as "
        "select x from t_a;\n"
    )
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    runtime, store, program = runtime_for(tmp_path, sql, version="v2")  # ANSI: 1 / 0 fails
    checkpoint = runtime.initialize(program)
    (tmp_path / "a" / "0.json").write_text('{"x": 0}\n')
    (tmp_path / "b" / "0.json").write_text('{"y": 0}\n')
    checkpoint, _ = runtime.step(program, checkpoint)
    (tmp_path / "a" / "1.json").write_text('{"x": 1}\n')
    (tmp_path / "b" / "1.json").write_text('{"y": 1}\n{"y": "bad"}\n')
    with pytest.raises(SpindleError):
        runtime.step(program, checkpoint)  # x = 1 is committed to `out` and to `kept`
    kept = str(tmp_path / "kept")
    another = spark.createDataFrame([(9, 1)], spark.read.format("delta").load(kept).schema)
    another.write.format("delta").mode("append").save(kept)  # so the bootstrap leaves it
    failing = parse_program(f"{sql}create view boom as select 1 / y as r from t_b;\n")
    plan = make_plan(old=program, new=failing, old_runtime="v2", runtime="v2")
    with pytest.raises(SpindleError):
        runtime.bootstrap(plan, checkpoint)  # undoes the commit, then fails: abandoned
    assert store.latest() == checkpoint
    (tmp_path / "b" / "1.json").write_text('{"y": 1}\n')
    checkpoint, _ = runtime.step(program, checkpoint)  # the step's replay, old SQL
    checkpoint, _ = runtime.step(program, checkpoint)  # and one more: an idle step
    for name, expected in (("out", {0: 1, 1: 1}), ("kept", {0: 1, 1: 1, 9: 1})):
        received: Counter[int] = Counter()
        for row in spark.read.format("delta").load(str(tmp_path / name)).collect():
            received[row["x"]] += row["weight"]
        assert +received == Counter(expected), name


@pytest.mark.slow  # about 2 minutes a case under CI's load: runs beside the cluster's tests
@pytest.mark.parametrize(("mode", "then"), [("replace", "step"), ("append", "retry")])
def test_what_an_abandoned_bootstrap_wrote_to_delta_outputs_is_undone(
    tmp_path: Path, spark: Any, mode: str, then: str
) -> None:
    """A bootstrap replaced (or appended to) Delta outputs, `out` and the new view's `fresh`,
    then failed on a later output (its location is a file). A bootstrap of another change
    undoes its commits before it writes, and fails the same way. Then either the SQL went
    back, and the old program's next step, in a new runtime as a new driver is, undoes the
    second's commit to `out` (the old program has no `fresh`): `out` holds the old program's
    rows only; or the first change is applied again, and once it can write it writes again
    what the second undid (Delta would skip its writer's second commit for that sequence)."""
    from spindle.plan import make_plan
    from spindle.program import parse_program
    from spindle.runtime import storage

    def connected(transport: str, path: str) -> str:
        return connected_to(tmp_path, transport, path)

    def contents(name: str) -> Counter[int]:
        received: Counter[int] = Counter()
        for row in spark.read.format("delta").load(str(tmp_path / name)).collect():
            received[row["x"]] += row["weight"]
        return +received

    table = f"create table t_a (x int) {connected('file_input', 'a')};\n"
    out = connected("delta_table_output", "out")
    sql = f"{table}create materialized view v_a {out} as select x from t_a;\n"
    (tmp_path / "a").mkdir()
    (tmp_path / "blocked").write_text("a file where the Delta table should be")
    runtime, store, program = runtime_for(tmp_path, sql)
    runtime.outputs_on_bootstrap = mode
    checkpoint = runtime.initialize(program)
    (tmp_path / "a" / "0.json").write_text('{"x": 0}\n')
    checkpoint, _ = runtime.step(program, checkpoint)
    plans = {}
    for shift in (100, 200):  # two changes, each abandoned after writing `out` and `fresh`
        changed = parse_program(
            f"{table}create materialized view v_a {out} as select x + {shift} as x from t_a;\n"
            f"create materialized view v_n {connected('delta_table_output', 'fresh')} as "
            "select x from t_a;\n"
            f"create materialized view v_z {connected('delta_table_output', 'blocked')} as "
            "select x from t_a;\n"
        )
        plans[shift] = make_plan(old=program, new=changed)
        with pytest.raises(SpindleError) as failed:
            runtime.bootstrap(plans[shift], checkpoint)
        assert failed.value.reason == "OutputUnwritable"
        assert store.latest() == checkpoint
    # the second undid the first's (another change's) commits before it wrote
    assert contents("out") == Counter({200: 1} | ({0: 1} if mode == "append" else {}))
    assert contents("fresh") == Counter({0: 1})
    if then == "retry":
        (tmp_path / "blocked").unlink()
        checkpoint = runtime.bootstrap(plans[100], checkpoint)
        assert store.latest() == checkpoint
        assert contents("out") == Counter({100: 1} | ({0: 1} if mode == "append" else {}))
        assert contents("fresh") == Counter({0: 1})
        return
    latest = storage.delta_version(spark, str(tmp_path / "out"))
    said: list[str] = []
    again, _, _ = runtime_for(tmp_path, sql)
    again.report = lambda event, **fields: said.append(f"{event} {fields.get('path')}")
    (tmp_path / "a" / "1.json").write_text('{"x": 1}\n')
    checkpoint, _ = again.step(program, checkpoint)
    assert contents("out") == Counter({0: 1, 1: 1})
    assert [s for s in said if s.startswith("output-discarded")] == [
        f"output-discarded {tmp_path / 'out'} (version {latest})"
    ]


def test_whose_commits_an_abandoned_bootstrap_check_undoes(tmp_path: Path, spark: Any) -> None:
    """Before a step or a bootstrap of sequence 3, the table's latest commits go when they are
    bootstrap writers' of this pipeline for sequence 3, whichever view or connector wrote them
    (a change that renamed the view kept the table), but for the asking bootstrap's own
    change; another pipeline's, or one for an earlier sequence, stop the walk."""
    from spindle.runtime.connectors import DeltaOutput

    rows = spark.createDataFrame([(1, 1)], "x int, weight bigint")

    def table(name: str, *writers: tuple[str, int]) -> str:
        uri = str(tmp_path / name)
        DeltaOutput("v_a.c", uri, "ns/p/v_a.c").emit(spark, rows, sequence=2)  # committed
        for writer, sequence in writers:
            DeltaOutput("v_a.c", uri, writer).emit(spark, rows, sequence=sequence)
        return uri

    def undone(uri: str, bootstrap: str | None = None) -> list[str]:
        output = DeltaOutput("v_a.c", uri, "ns/p/v_a.c")
        return output.discard_abandoned(spark, sequence=3, bootstrap=bootstrap)

    renamed = table("renamed", ("ns/p/v_b.c/bootstrap/c1", 3), ("ns/p/v_a.c/bootstrap/c2", 3))
    assert undone(renamed) == [f"{renamed} (versions 1-2)"]
    assert spark.read.format("delta").load(renamed).count() == 1
    own = table("own", ("ns/p/v_a.c/bootstrap/c1", 3), ("ns/p/v_a.c/bootstrap/c2", 3))
    assert undone(own, "c1") == [f"{own} (version 2)"]  # c1's retry keeps its own
    others = table("others", ("ns/p/v_a.c/bootstrap/c1", 3), ("ns/p2/v_a.c/bootstrap/c2", 3))
    assert undone(others) == []  # another pipeline's commit after it
    earlier = table("earlier", ("ns/p/v_a.c/bootstrap/c1", 2))
    assert undone(earlier) == []  # a committed bootstrap's, for sequence 2
    slashed = table("slashed", ("ns/p/v_a.out/eu/bootstrap/c1", 3))  # a key with a "/"
    assert undone(slashed) == [f"{slashed} (version 1)"]
    odd = str(tmp_path / "odd")  # this output's own steps' writer, whatever its key holds
    DeltaOutput("v_a.x/bootstrap/y", odd, "ns/p/v_a.x/bootstrap/y").emit(spark, rows, sequence=3)
    steps = DeltaOutput("v_a.x/bootstrap/y", odd, "ns/p/v_a.x/bootstrap/y")
    assert steps.discard_abandoned(spark, sequence=3) == []


def test_a_table_an_abandoned_bootstrap_created_takes_the_next_writes_columns(
    tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Delta output created by a bootstrap since abandoned is emptied by the undo, and the
    old program's step then writes its rows with its own columns, not the abandoned
    program's, also when a later abandoned bootstrap took the columns and was undone in
    turn. A table another writer committed to after the undo keeps its columns (rows that
    do not fit them are `OutputSchemaMismatch`), even when their commit lands while Spindle
    gives the table the step's columns: that is put back."""
    from spindle.runtime.connectors import DeltaOutput

    theirs = spark.createDataFrame([("a", 1)], "x string, weight bigint")
    rows = spark.createDataFrame([(1, 1)], "x int, weight bigint")

    def emptied(name: str) -> tuple[str, DeltaOutput]:
        uri = str(tmp_path / name)
        DeltaOutput("v.c", uri, "ns/p/v.c/bootstrap/c1").emit(spark, theirs, sequence=3)
        steps = DeltaOutput("v.c", uri, "ns/p/v.c")
        assert steps.discard_abandoned(spark, sequence=3) == [f"{uri} (version 0)"]
        return uri, steps

    def written(uri: str) -> tuple[list[tuple[Any, ...]], Any]:
        table = spark.read.format("delta").load(uri)
        return sorted(tuple(r) for r in table.collect()), table.schema

    uri, steps = emptied("created")
    steps.emit(spark, rows, sequence=3)
    assert written(uri) == ([(1, 1)], rows.schema)
    steps.emit(spark, rows, sequence=4)  # then appended, as any step's
    assert written(uri) == ([(1, 1), (1, 1)], rows.schema)

    uri, steps = emptied("twice")  # c2 gives it its columns, and is abandoned too
    doubles = spark.createDataFrame([(1.5, 1)], "x double, weight bigint")
    DeltaOutput("v.c", uri, "ns/p/v.c/bootstrap/c2").emit(spark, doubles, sequence=3)
    assert written(uri) == ([(1.5, 1)], doubles.schema)
    assert steps.discard_abandoned(spark, sequence=3) == [f"{uri} (version 3)"]
    steps.emit(spark, rows, sequence=3)
    assert written(uri) == ([(1, 1)], rows.schema)

    uri, steps = emptied("written-since")
    theirs.write.format("delta").mode("append").save(uri)  # another writer's commit
    with pytest.raises(SpindleError) as refused:  # int into their string column
        steps.emit(spark, rows, sequence=3)
    assert refused.value.reason == "OutputSchemaMismatch"
    assert written(uri) == ([("a", 1)], theirs.schema)

    uri, steps = emptied("written-meanwhile")
    checked = DeltaOutput._emptied

    def racing(self: DeltaOutput, spark: Any, latest: int) -> bool:
        found = checked(self, spark, latest)
        theirs.write.format("delta").mode("append").save(self.uri)  # after the check
        return found

    monkeypatch.setattr(DeltaOutput, "_emptied", racing)
    with pytest.raises(SpindleError) as refused:
        steps.emit(spark, rows, sequence=3)
    assert refused.value.reason == "OutputSchemaMismatch"
    assert written(uri) == ([("a", 1)], theirs.schema)  # put back: their row, their columns
    since = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=1)
    assert steps.finish_undo(spark, since=since) is None  # nothing left to put back


def test_a_replay_after_an_undo_writes_once_whatever_the_undo_reached(
    tmp_path: Path, spark: Any
) -> None:
    """A replay of a step whose Delta output commit a bootstrap set out to undo (the commit's
    table version and writer recorded first) writes the step's rows exactly once: after the
    undo, as a new writer; after a crash that cut the undo short, whether or not another
    writer committed since, as the commit's own writer, which Delta skips. Without the
    record, as the steps' writer."""
    from spindle.runtime.connectors import DeltaOutput

    rows = spark.createDataFrame([(1, 1)], "x int, weight bigint")
    other = spark.createDataFrame([(2, 1)], "x int, weight bigint")

    def written(uri: str) -> list[tuple[Any, ...]]:
        return sorted(tuple(r) for r in spark.read.format("delta").load(uri).collect())

    def table(name: str, *, first: bool = False) -> tuple[str, int]:
        """A table whose latest commit is step 3's (its first, with `first`): its version."""
        uri = str(tmp_path / name)
        if not first:
            other.write.format("delta").save(uri)
        DeltaOutput("v.c", uri, "ns/p/v.c").emit(spark, rows, sequence=3)
        return uri, 0 if first else 1

    undone: list[tuple[int, str]] = []

    def undoing(version: int, writer: str) -> None:
        undone.append((version, writer))

    for first in (False, True):  # undone by a RESTORE, or (its first commit) by emptying it
        uri, version = table(f"undone-{first}", first=first)
        undone.clear()
        assert DeltaOutput("v.c", uri, "ns/p/v.c").discard(spark, sequence=3, undoing=undoing)
        assert undone == [(version, "ns/p/v.c")] and (1, 1) not in written(uri)
        replay = DeltaOutput("v.c", uri, "ns/p/v.c", undone=undone[0])
        replay.emit(spark, rows, sequence=3)
        replay.emit(spark, rows, sequence=3)  # its own replay: skipped
        assert written(uri).count((1, 1)) == 1, first

    uri, version = table("cut-short")  # recorded, then a crash before the RESTORE
    DeltaOutput("v.c", uri, "ns/p/v.c", undone=(version, "ns/p/v.c")).emit(spark, rows, sequence=3)
    assert written(uri) == [(1, 1), (2, 1)]

    uri, version = table("committed-after")  # recorded, a crash, then another writer
    other.write.format("delta").mode("append").save(uri)
    DeltaOutput("v.c", uri, "ns/p/v.c", undone=(version, "ns/p/v.c")).emit(spark, rows, sequence=3)
    assert written(uri) == [(1, 1), (2, 1), (2, 1)]

    uri, _ = table("kept")  # not undone (a bootstrap's commit after it): the old writer
    bootstrap = DeltaOutput("v.c", uri, "ns/p/v.c/bootstrap/abc")
    bootstrap.emit(spark, other, sequence=3)
    assert DeltaOutput("v.c", uri, "ns/p/v.c").discard(spark, sequence=3, undoing=print) == []
    DeltaOutput("v.c", uri, "ns/p/v.c").emit(spark, rows, sequence=3)
    assert written(uri) == [(1, 1), (2, 1), (2, 1)]


@pytest.mark.slow  # 305 s under CI's load (eleven tables): runs beside the cluster's tests
def test_an_undo_that_takes_another_writers_commit_puts_the_table_back(
    tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another writer's commit that lands between the check that a step's commit is the
    table's latest and the RESTORE (or the emptying) that undoes it is taken by the undo: the
    table is put back as it was, with that commit's rows and the step's, and nothing is
    undone; the step's replay then writes as the step's writer, which Delta skips. A second
    commit of theirs, between the undo and the putting back, is lost: that is
    `OutputChangedDuringUndo`, naming the versions. A driver that stops between the undo and
    the putting back leaves it to the next (`finish_undo`), which puts the table back unless
    commits followed the undo: it says what the table is without then."""
    from spindle.runtime import storage
    from spindle.runtime.connectors import CLOCK_SKEW, DeltaOutput

    rows = spark.createDataFrame([(1, 1)], "x int, weight bigint")
    other = spark.createDataFrame([(2, 1)], "x int, weight bigint")
    theirs = spark.createDataFrame([(9, 1)], "x int, weight bigint")

    def written(uri: str) -> list[tuple[Any, ...]]:
        return sorted(tuple(r) for r in spark.read.format("delta").load(uri).collect())

    def table(name: str, *, first: bool = False) -> str:
        uri = str(tmp_path / name)
        if not first:
            other.write.format("delta").save(uri)
        DeltaOutput("v.c", uri, "ns/p/v.c").emit(spark, rows, sequence=3)
        return uri

    undone: list[tuple[int, str]] = []
    for first in (False, True):  # undone by a RESTORE, or (its first commit) by emptying it
        uri = table(f"raced-{first}", first=first)
        undone.clear()

        def undoing(version: int, writer: str, uri: str = uri) -> None:
            undone.append((version, writer))
            theirs.write.format("delta").mode("append").save(uri)  # before the undo

        output = DeltaOutput("v.c", uri, "ns/p/v.c")
        assert output.discard(spark, sequence=3, undoing=undoing) == []
        expected = sorted([(1, 1), (9, 1)] + ([] if first else [(2, 1)]))
        assert written(uri) == expected, first
        DeltaOutput("v.c", uri, "ns/p/v.c", undone=undone[0]).emit(spark, rows, sequence=3)
        assert written(uri) == expected, first  # the replay: skipped, its rows are there

    restore = storage.restore

    def raced(uri: str, *, putting_back: Callable[[str, int], None]) -> SpindleError:
        """Theirs lands before the undo, and `putting_back` runs before the putting back."""

        def racing(spark: Any, uri: str, version: int, **note: str) -> bool:
            if version > 0:  # the putting back (the undo restores version 0)
                putting_back(uri, version)
            return restore(spark, uri, version, **note)

        monkeypatch.setattr(storage, "restore", racing)
        with pytest.raises(SpindleError) as lost:
            DeltaOutput("v.c", uri, "ns/p/v.c").discard(
                spark,
                sequence=3,
                undoing=lambda *_: theirs.write.format("delta").mode("append").save(uri),
            )
        assert lost.value.reason == "OutputChangedDuringUndo"
        return lost.value

    uri = table("raced-twice")  # theirs again before the putting back, which takes it
    lost = raced(uri, putting_back=lambda u, _: theirs.write.format("delta").mode("append").save(u))
    assert lost.details["lost"] == "4-4" and "the rows of version 4 " in lost.message
    assert written(uri) == [(1, 1), (2, 1), (9, 1)]  # the first of theirs is back, not the second
    since = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=1)  # checkpoint's
    assert DeltaOutput("v.c", uri, "ns/p/v.c").finish_undo(spark, since=since) is None  # said

    def file_gone(uri: str, version: int) -> None:  # a data file of it: RESTORE refuses
        added = [a["add"]["path"] for a in storage.commit_actions(spark, uri, version) or []
                 if "add" in a]  # fmt: skip
        os.remove(os.path.join(uri, added[0]))

    uri = table("put-back-refused")  # the putting back fails: theirs stay out, and it says so
    assert raced(uri, putting_back=file_gone).details["lost"] == "2-2"

    class Stopped(BaseException):
        """The driver's pod is gone (what `except Exception` does not catch)."""

    def stopped(uri: str, version: int) -> None:
        raise Stopped

    for first in (False, True):  # the driver stops before the putting back: the next finishes
        uri = table(f"stopped-{first}", first=first)
        with pytest.raises(Stopped):
            raced(uri, putting_back=stopped)
        assert written(uri) == ([] if first else [(2, 1)]), first  # theirs and the step's out
        monkeypatch.setattr(storage, "restore", restore)
        output = DeltaOutput("v.c", uri, "ns/p/v.c")
        read = 1 if first else 2
        put_back = ("output-put-back", f"{uri} (version {read})")
        assert output.finish_undo(spark, since=since) == put_back, first
        expected = sorted([(1, 1), (9, 1)] + ([] if first else [(2, 1)]))
        assert written(uri) == expected, first
        assert output.finish_undo(spark, since=since) is None  # done: RESTORE to what it read
        assert output.discard(spark, sequence=3, undoing=print) == []
        assert written(uri) == expected, first

    uri = table("stopped-then-written")  # theirs after the undo: putting back would take them
    with pytest.raises(Stopped):
        raced(uri, putting_back=stopped)
    monkeypatch.setattr(storage, "restore", restore)
    theirs.write.format("delta").mode("append").save(uri)
    output = DeltaOutput("v.c", uri, "ns/p/v.c")
    unfinished = ("output-undo-unfinished", f"{uri} (version 2)")
    assert output.finish_undo(spark, since=since) == unfinished
    assert written(uri) == [(2, 1), (9, 1)]  # left as it is: the first of theirs is out
    later = datetime.datetime.now(datetime.UTC) + CLOCK_SKEW + datetime.timedelta(seconds=1)
    assert output.finish_undo(spark, since=later) is None  # the undo predates the checkpoint


def test_only_an_undo_that_read_past_what_it_undid_is_finished(tmp_path: Path, spark: Any) -> None:
    """An undo that read only what it undid (several abandoned commits) is done; an undo
    marked before marks named the last version undone (`spindle-undo:0`) is not finished, and
    neither is another writer's commit whose `userMetadata` merely looks like a mark."""
    from spindle.runtime.connectors import DeltaOutput

    rows = spark.createDataFrame([(1, 1)], "x int, weight bigint")
    since = datetime.datetime.now(datetime.UTC)

    def table(name: str) -> tuple[str, DeltaOutput]:
        uri = str(tmp_path / name)
        for change in ("c1", "c2"):
            DeltaOutput("v.c", uri, f"ns/p/v.c/bootstrap/{change}").emit(spark, rows, sequence=3)
        return uri, DeltaOutput("v.c", uri, "ns/p/v.c")

    uri, output = table("two")  # emptied: versions 0 and 1, read at 1
    assert output.discard_abandoned(spark, sequence=3) == [f"{uri} (versions 0-1)"]
    assert output.finish_undo(spark, since=since) is None
    assert spark.read.format("delta").load(uri).count() == 0
    for name, note in (("old-mark", "spindle-undo:0"), ("foreign", "see spindle-undo:0-0")):
        uri, output = table(name)
        rows.write.format("delta").mode("append").option("userMetadata", note).save(uri)
        assert output.finish_undo(spark, since=since) is None, name
        assert spark.read.format("delta").load(uri).count() == 3, name


def test_a_step_maintains_an_adopted_aggregate_from_its_copy(tmp_path: Path, spark: Any) -> None:
    """An adopted group table is copied into the pipeline's own path (version 0 there), and the
    step read the copy at the source's version: DELTA_VERSION_NOT_FOUND, or another attempt's
    rows once the numbers met."""
    from spindle.checkpoint import PipelineRef
    from spindle.checkpoint.origin import starting_checkpoint
    from spindle.runtime.maintain import Views

    inputs = tmp_path / "in"
    inputs.mkdir()
    source = [{"name": "src", "format": {"name": "json"}, "transport": {"name": "file_input",
               "config": {"path": str(inputs)}}}]  # fmt: skip
    sql = (
        f"create table events (id bigint, k int, amount int) with ('connectors' = "
        f"'{json.dumps(source)}');\n"
        "create materialized view totals as "
        "select k, sum(amount) as total, count(*) as n from events group by k;\n"
    )

    def feed(step: int) -> None:
        rows = [{"id": step * 10 + j, "k": j % 2, "amount": j} for j in range(4)]
        (inputs / f"{step:03d}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))

    first, first_store, program = runtime_for(tmp_path, sql, root=(tmp_path / "a").as_uri())
    checkpoint = first.initialize(program)
    for step in range(3):
        feed(step)
        checkpoint, _ = first.step(program, checkpoint)
    assert checkpoint.state["totals"].version > 0
    copy, copy_store, _ = runtime_for(tmp_path, sql, root=(tmp_path / "b").as_uri())
    adopted = starting_checkpoint(
        copy_store,
        start_from=f"{first_store.uri}#{checkpoint.id}",
        pipeline=PipelineRef(namespace="default", name="p"),
        s3=None,
        adopt=True,
    )
    assert adopted is not None and adopted.state["totals"].adopted
    feed(3)
    stepped, _ = copy.step(program, adopted)
    totals = Views(spark, program, copy.uri).contents("totals", stepped.state["totals"])
    assert sorted(tuple(r) for r in totals.collect()) == [(0, 8, 8), (1, 16, 8)]


def test_a_delta_output_whose_table_has_other_columns_is_refused_and_left_as_it_was(
    tmp_path: Path, spark: Any
) -> None:
    """The output merged schemas: pointed at someone else's table, it added the view's
    columns to theirs (and wrote its rows with theirs NULL), where the docs promise
    `OutputSchemaMismatch`."""
    inputs, lake = tmp_path / "in", tmp_path / "lake"
    inputs.mkdir()
    spark.createDataFrame([(7, "theirs")], "cust_id int, name string").write.format("delta").save(
        str(lake)
    )
    sql = (
        "create table t (id int) with ('materialized' = 'true', "
        f"'connectors' = '{connectors('file_input', inputs)}');\n"
        "create materialized view v with "
        f"('connectors' = '{connectors('delta_table_output', lake)}') as select id from t;\n"
    )
    runtime, store, program = runtime_for(tmp_path, sql)
    first = runtime.initialize(program)
    (inputs / "a.json").write_text('{"id": 1}\n')
    with pytest.raises(SpindleError) as refused:
        runtime.step(program, first)
    assert refused.value.reason == "OutputSchemaMismatch"
    assert "v.c" in refused.value.message and store.latest().id == first.id
    table = spark.read.format("delta").load(str(lake))
    assert table.columns == ["cust_id", "name"] and [tuple(r) for r in table.collect()] == [
        (7, "theirs")
    ]


def test_a_delta_output_takes_the_columns_a_view_gains_and_refuses_a_rename(
    tmp_path: Path, spark: Any
) -> None:
    """A view that gains a column (an `append` or `silent` bootstrap) adds it to its table;
    one that renames a column, or someone else's table, is refused, the table left as it was."""
    from spindle.runtime.connectors import DeltaOutput

    uri = str(tmp_path / "lake")
    output = DeltaOutput("v.c", uri, "ns/p/v.c")
    # `split` gives an array of non-null strings; Delta stores its table's types nullable
    first = spark.sql("SELECT 1 AS id, split('a,b', ',') AS tags, 1 AS weight")
    output.emit(spark, first, sequence=1)
    grown = spark.sql("SELECT 2 AS id, split('c', ',') AS tags, 'b' AS s, 1 AS weight")
    output.emit(spark, grown, sequence=2)
    table = spark.read.format("delta").load(uri)
    assert table.columns == ["id", "tags", "weight", "s"]
    renamed = spark.sql("SELECT 3 AS id, split('d', ',') AS tags, 'c' AS label, 1 AS weight")
    with pytest.raises(SpindleError) as refused:
        output.emit(spark, renamed, sequence=3)
    assert refused.value.reason == "OutputSchemaMismatch"
    table = spark.read.format("delta").load(uri)
    assert table.columns == ["id", "tags", "weight", "s"] and table.count() == 2


def test_a_pipeline_made_again_over_new_storage_writes_its_delta_output_from_its_first_step(
    tmp_path: Path, spark: Any
) -> None:
    """Delta skips a write whose writer and sequence (`txnAppId`, `txnVersion`) it has. A
    pipeline deleted and created again under the same name over new storage starts its
    sequence again: writing as the same writer, its first steps' changes were skipped without
    a word. It writes as another incarnation. A first start that failed and runs again (its
    SQL fixed, its view renamed) undoes what it wrote first: the first rows differ, and were
    skipped too (or, under another view's name, kept beside the new ones)."""
    inputs, lake = tmp_path / "in", tmp_path / "lake"
    inputs.mkdir()
    source = connected_to(tmp_path, "file_input", "in")
    table = f"create table events (id bigint, k int) {source};\n"
    output = connected_to(tmp_path, "delta_table_output", "lake")
    counted = f"create materialized view totals {output} as select count(*) as n from events;\n"
    failing = "create view broken as select cast(raise_error('boom') as int) as x;\n"

    def written() -> list[tuple[int, int]]:
        rows = spark.read.format("delta").load(str(lake)).select("n", "weight").collect()
        return sorted((r.n, r.weight) for r in rows)

    earlier = counted.replace("totals", "counts").replace("(*)", "(*) + 10")
    runtime, store, program = runtime_for(tmp_path, table + earlier)
    runtime.initialize(program)  # a first start killed before its commit
    store.objects.delete(["latest", *(i.key for i in store.objects.scan("checkpoints/"))])
    assert written() == [(10, 1)] and store.latest() is None
    runtime, store, program = runtime_for(tmp_path, table + counted + failing)
    with pytest.raises(Exception, match="boom"):  # fails before any output is written
        runtime.initialize(program)
    assert written() == [(10, 1)]
    runtime, store, program = runtime_for(tmp_path, table + counted)  # fixed, and renamed
    first = runtime.initialize(program)
    assert written() == [(0, 1)]  # the earlier attempt's row undone, this one's written
    (inputs / "a.json").write_text('{"id": 1, "k": 1}\n')
    runtime.step(program, first)
    assert written() == [(0, -1), (0, 1), (1, 1)]

    again = tmp_path / "again"  # the pipeline made again, over new storage
    runtime, store, program = runtime_for(tmp_path, table + counted, root=again.as_uri())
    first = runtime.initialize(program)
    (inputs / "b.json").write_text('{"id": 2, "k": 1}\n')
    runtime.step(program, first)
    assert written() == [(0, -1), (0, -1), (0, 1), (0, 1), (1, 1), (2, 1)]
