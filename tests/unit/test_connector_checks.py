"""Connector entries of the transports Spindle runs are checked when the program is parsed
(`program.transports`). What the runtime would refuse at the first step is a problem of the
program: the spec's program is refused with it (`diff`, `plan`, `apply`, the operator), while a
checkpointed program that has it still reads. What the runtime would ignore warns."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from spindle.api import Phase
from spindle.cli.main import main
from spindle.errors import SpindleError
from spindle.lifecycle import conclude, decide
from spindle.program import parse_program
from tests.unit.test_lifecycle import V1, checkpoint, observe, spec


def table(entry: dict[str, Any]) -> str:
    return f"create table t (id bigint) with ('connectors' = '{json.dumps([entry])}');"


def view(entry: dict[str, Any]) -> str:
    return (
        "create table t (id bigint);\n"
        f"create view v with ('connectors' = '{json.dumps([entry])}') as select * from t;"
    )


def entry(transport: str = "file_input", config: Any = None, **keys: Any) -> dict[str, Any]:
    config = {"path": "/data"} if config is None else config
    return {"name": "f", "transport": {"name": transport, "config": config}, **keys}


DELTA_READS = (
    "Spindle reads a Delta table's latest version, then each commit after it (Feldera's "
    "snapshot_and_follow)"
)

REFUSED = [
    (  # Feldera's read modes that are not what Spindle does: the input would differ, silently
        table(entry("delta_table_input", config={"uri": "s3://b/t", "mode": "snapshot"})),
        f"mode 'snapshot' is not what Spindle does: {DELTA_READS}.",
        (1, 14),
    ),
    (  # not a string: refused, not a crash of the parse (a checkpoint holding it reads)
        table(entry("delta_table_input", config={"uri": "s3://b/t", "mode": ["follow"]})),
        "mode ['follow'] is not what Spindle does",
        (1, 14),
    ),
    (
        table(entry("delta_table_input", config={"uri": "s3://b/t", "filter": "x > 1"})),
        f"'filter' in its transport config would choose the rows read, and {DELTA_READS}, "
        "every row: filter in a view instead (CREATE VIEW ... WHERE ...).",
        (1, 14),
    ),
    (
        table(entry("delta_table_input", config={"uri": "s3://b/t", "version": 3})),
        f"'version' in its transport config would choose where reading starts, and {DELTA_READS}.",
        (1, 14),
    ),
    (
        view(entry("delta_table_output", config={"uri": "s3://b/o", "mode": "truncate"})),
        "mode 'truncate' is not what Spindle does: Spindle appends each step's changes to the "
        "table (Feldera's append).",
        (2, 13),
    ),
    (
        table(entry(config={"pth": "/data"})),
        "transport 'file_input' needs a non-empty 'path' in its config (it has 'pth': did you "
        "mean 'path'?).",
        (1, 14),
    ),
    (
        table(entry(config={})),
        "transport 'file_input' needs a non-empty 'path' in its config.",
        (1, 14),
    ),
    (
        table(entry("delta_table_input", config={"path": ""})),
        "transport 'delta_table_input' needs a non-empty 'uri' in its config.",
        (1, 14),
    ),
    (
        table(entry("file_output")),
        "uses 'file_output', but a table's connectors are inputs: use file_input, "
        "delta_table_input.",
        (1, 14),
    ),
    (
        view(entry()),
        "uses 'file_input', but a view's connectors are outputs: use file_output, "
        "delta_table_output.",
        (2, 13),
    ),
    (
        table(entry(late_arrival_seconds="abc")),
        "late_arrival_seconds must be a whole number, 0 or more (got 'abc')",
        (1, 14),
    ),
    (table(entry(late_arrival_seconds=True)), "late_arrival_seconds must be a whole", (1, 14)),
    # Hadoop read `file-2025-01-02T10` as a URI scheme: InternalError at the first step
    (
        view(entry("file_output", config={"path": "/data/out/file-2025-01-02T10:00"})),
        "its location /data/out/file-2025-01-02T10:00 has a ':' in 'file-2025-01-02T10:00', "
        "and Spark's file systems cannot write such a path (Hadoop reads what comes before a "
        "':' as a URI scheme): use '-' or '_' instead of ':' ('file-2025-01-02T10-00').",
        (2, 13),
    ),
    (
        view(entry("file_output", config={"uri": "s3a://b/run:1/out"})),
        "its location s3a://b/run:1/out has a ':' in 'run:1'",
        (2, 13),
    ),
    # a typo of a transport Spindle runs failed the first step, after approval
    (
        table(entry("file_inptu")),
        "uses transport 'file_inptu', which Spindle does not run (did you mean 'file_input'?).",
        (1, 14),
    ),
    # Feldera's others failed the driver's first step (UnsupportedConnector), after approval
    (
        table(entry("kafka_input", config={"topic": "t"})),
        "uses transport 'kafka_input', which Spindle does not run (use file_input, "
        "delta_table_input).",
        (1, 14),
    ),
    (
        view(entry("delta_table_ouput", config={"uri": "s3://b/o"})),
        "(did you mean 'delta_table_output'?)",
        (2, 13),
    ),
]


@pytest.mark.parametrize(("sql", "said", "at"), REFUSED)
def test_what_the_runtime_would_refuse_is_a_located_problem_of_the_program(
    sql: str, said: str, at: tuple[int, int]
) -> None:
    [problem] = parse_program(sql).unrunnable  # it parses: a checkpoint holding it still reads
    assert problem.reason == "InvalidConnectors"
    assert said in problem.message and "connector 'f'" in problem.message
    assert (problem.details["line"], problem.details["column"]) == at


COLON_FREE_PATHS = ("file:/data/out", "file:///data/out", "s3://b/out", "hdfs://nn:8020/out")

WARNED = [
    (  # appends to a file were never read, or read whole again once it left the window
        table(entry(config={"path": "/data", "follow": True})),
        "'follow': true in its transport config would read what is appended to a file: Spindle "
        "reads each new file of the location once, whole, and never again (write new data to "
        "new files); it is ignored",
    ),
    (
        table(entry(config={"path": "/data", "folow": True})),
        "Spindle does not read 'folow' of its transport config (did you mean 'follow'?); it is "
        "ignored",
    ),
    (
        table(entry("delta_table_input", config={"uri": "s3://b/t", "aws_region": "x"})),
        "Spindle does not read 'aws_region' of its transport config; it is ignored",
    ),
    (
        table(entry(config={"path": "/data", "max_files_per_step": 2})),
        "'max_files_per_step' is in its transport config, where Spindle does not read it: move "
        "it into the connector entry, beside 'transport'; it is ignored",
    ),
    (
        table(entry(max_files_per_stepp=2)),
        "Spindle does not read 'max_files_per_stepp' (did you mean 'max_files_per_step'?); it "
        "is ignored",
    ),
    (
        table(entry(max_files_per_step=0)),
        "max_files_per_step is not a whole number above 0 (got 0); it is ignored",
    ),
    (table(entry(bogus=1)), "Spindle does not read 'bogus'; it is ignored"),
    (
        table(entry(format={"name": "csv", "config": {"hedaer": False}})),
        "Spindle does not read 'hedaer' of its format config (did you mean 'header'?); it is "
        "ignored",
    ),
    (
        table(entry(format={"name": "csv", "config": {"quote": "|"}})),
        "Spindle does not read 'quote' of its format config; it is ignored",
    ),
]


@pytest.mark.parametrize(("sql", "said"), WARNED)
def test_what_the_runtime_would_ignore_warns(sql: str, said: str) -> None:
    program = parse_program(sql)
    assert program.unrunnable == () and program.warnings == (f"'t': connector 'f': {said}",)


def output(transport: str = "file_output", **keys: Any) -> dict[str, Any]:
    config = {"path": "/out"} if transport == "file_output" else {"uri": "s3://b/out"}
    return entry(transport, config=config, **keys)


def csv_output(**config: Any) -> str:
    return view(output(format={"name": "csv", "config": config}))


HEADER_LINE = "a file output's CSV files start with a header line"
CHANGES = (
    "an output writes each change as the view's row and a `weight` column (+1, -1), or, with "
    'update_format insert_delete (JSON), as {"insert": row} / {"delete": row}'
)
WRITES_ALL = "an output writes all of each step's changes in that step"
READS_ALL = "a Delta input reads, in a step, every commit since the version it last read"
MAX_FILES = "'max_files_per_step' limits how many new files a file input reads in a step"
LATE = "'late_arrival_seconds' says how late a file input's file may arrive and still be read"

WARNED_OF_OTHERS = [  # a file input's keys elsewhere: accepted without a word, and ignored
    (
        csv_output(header=False),
        f"'header' of its format config is read by file inputs only: {HEADER_LINE}",
    ),
    (
        csv_output(headers="false"),
        f"'headers' of its format config is read by file inputs only: {HEADER_LINE}",
    ),
    (  # not refused as an input's is: nothing reads it
        csv_output(delimiter="abc"),
        "'delimiter' of its format config is read by file inputs only: a file output's CSV "
        "files separate fields with ','",
    ),
    (
        csv_output(weight_column="w"),
        f"'weight_column' of its format config is read by file inputs only: {CHANGES}",
    ),
    (
        view(output(format={"name": "json", "config": {"op_column": "op"}})),
        f"'op_column' of its format config is read by file inputs only: {CHANGES}",
    ),
    (  # no typo of a key the output does not read either
        csv_output(hedaer=False),
        "Spindle does not read 'hedaer' of its format config",
    ),
    (
        view(output("delta_table_output", format={"name": "csv", "config": {"header": True}})),
        "'format' is not read by a Delta output, which writes the view's columns and a "
        "`weight` column (+1, -1) to the Delta table",
    ),
    (view(output(max_files_per_step=0)), f"{MAX_FILES}: {WRITES_ALL}"),
    (view(output("delta_table_output", late_arrival_seconds="abc")), f"{LATE}: {WRITES_ALL}"),
    (  # not "move it into the connector entry": it is not read there either
        view(entry("file_output", config={"path": "/out", "late_arrival_seconds": 5})),
        f"{LATE}: {WRITES_ALL}",
    ),
    (
        table(entry("delta_table_input", config={"uri": "s3://b/t"}, max_files_per_step=2)),
        f"{MAX_FILES}: {READS_ALL}",
    ),
    (
        table(entry("delta_table_input", config={"uri": "s3://b/t"}, format={"name": "json"})),
        "'format' is not read by a Delta input, which reads the Delta table's rows",
    ),
]


@pytest.mark.parametrize(("sql", "said"), WARNED_OF_OTHERS)
def test_a_file_inputs_keys_elsewhere_warn_saying_what_the_connector_does(
    sql: str, said: str
) -> None:
    """Outputs took an input's `header`, `delimiter` (even "abc"), `weight_column`,
    `max_files_per_step`, and a Delta output a `format`, without a word, and did otherwise."""
    program = parse_program(sql)
    relation = "v" if "create view v with" in sql else "t"
    assert program.unrunnable == ()
    assert program.warnings == (f"'{relation}': connector 'f': {said}; it is ignored",)


@pytest.mark.parametrize(
    "sql",
    [
        table(entry(max_files_per_step=3, late_arrival_seconds=0, format={"name": "json"})),
        table(entry("delta_table_input", config={"uri": "s3://b/t", "num_parsers": 2})),
        table(
            entry("delta_table_input", config={"uri": "s3://b/t", "mode": "snapshot_and_follow"})
        ),
        view(entry("delta_table_output", config={"uri": "s3://b/o", "mode": "append"})),
        table(entry("delta_table_input", config={"uri": "s3://b/t"}, late_arrival_ms=5)),
        table(entry(paused=True, max_batch_size=10, labels=["a"])),  # Feldera's keys
        view(entry("delta_table_output", config={"uri": "s3://b/o"})),
        table(entry(config={"path": "/data", "follow": False})),  # what Spindle does
        # a ':' of a scheme or an authority; a Delta table's URI; an input's directory, whose
        # files Hadoop is handed whole (the runtime refuses one named with a ':')
        *(view(entry("file_output", config={"path": p})) for p in COLON_FREE_PATHS),
        view(entry("delta_table_output", config={"uri": "s3://b/2025-01-02T10:00"})),
        table(entry("delta_table_input", config={"uri": "file:/data/t:1"})),
        table(entry(config={"path": "/data/in/2025-01-02T10:00"})),
    ],
)
def test_connectors_spindle_runs_parse_clean(sql: str) -> None:
    program = parse_program(sql)
    assert program.unrunnable == ()
    assert all("did you mean" not in w for w in program.warnings), program.warnings


@pytest.mark.parametrize(
    "sql",
    [
        view(output(format={"name": "json", "config": {"update_format": "insert_delete"}})),
        view(output(format={"name": "csv"}, max_batch_size=10, paused=False)),  # Feldera's
        view(output("delta_table_output", enable_output_buffer=True)),
    ],
)
def test_outputs_as_spindle_writes_them_parse_without_a_warning(sql: str) -> None:
    program = parse_program(sql)
    assert (program.unrunnable, program.warnings) == ((), ())


MISSING_PATH = table(entry(config={}))


def test_the_specs_program_is_refused_and_a_checkpointed_one_still_reads() -> None:
    refused = decide(observe(spec=spec(MISSING_PATH), checkpoint=checkpoint(V1)))
    assert (refused.phase, refused.reason) == (Phase.FAILED, "InvalidConnectors")
    assert (
        "needs a non-empty 'path'" in refused.message and "(line 1, column 14)" in refused.message
    )
    fixed = table(entry())
    kept = decide(observe(spec=spec(fixed), checkpoint=checkpoint(MISSING_PATH)))
    assert kept.reason != "CheckpointProgramUnreadable" and kept.phase is not Phase.FAILED


def test_diff_refuses_the_new_program_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad, good = tmp_path / "bad.sql", tmp_path / "good.sql"
    bad.write_text(MISSING_PATH)
    good.write_text(table(entry()))
    assert main(["diff", str(bad), str(good)]) == 0  # the old side ran as it was
    capsys.readouterr()
    assert main(["diff", str(good), str(bad)]) == 1
    assert "InvalidConnectors" in capsys.readouterr().err


def test_the_operator_posts_what_the_program_warns_of_once_per_generation() -> None:
    """`spindle diff` printed the warnings; a user of `kubectl apply` saw none of them."""
    typo = table(entry(format={"name": "csv", "config": {"hedaer": False}}))
    observed = observe(spec=spec(typo), checkpoint=None)
    decision = decide(observed)
    first = conclude(decision, observed, driver=None, now="t1")
    assert [(e.type, e.reason) for e in first.events] == [("Warning", "ProgramWarnings")]
    assert "did you mean 'header'?" in first.events[0].message
    again = conclude(decision, replace(observed, previous=first.status), driver=None, now="t2")
    assert again.events == ()
    edited = replace(observed, generation=observed.generation + 1, previous=first.status)
    assert [e.reason for e in conclude(decide(edited), edited, driver=None, now="t3").events] == [
        "ProgramWarnings"
    ]


def connected(relation: str, connector: str) -> str:
    """A table `relation` with one file input named `connector`."""
    connectors = json.dumps([{**entry(), "name": connector}])
    return f"create table {relation} (id int) with ('connectors' = '{connectors}');"


MISREAD = {  # read otherwise than written: refused for a program to run, a running one runs on
    "a dot in a connector's name": (
        connected('"w.a"', "b") + "\n" + connected("w", "a.b"),
        "Connectors of 'w': connector 'a.b' has a '.' in its name, so its key 'w.a.b' could be "
        "another relation's connector's. A connector's name may have any character but '.': "
        "rename it, for example 'a_b'. Fix it in the 'connectors' property",
        (2, 14),
    ),
    "a key given twice in an object": (
        '  create table t (id int) with (\'connectors\' = \'[{"name": "f", "transport": {"name": '
        '"file_input", "config": {"path": "/x", "path": "/y"}}}]\');',
        "Connectors of 't': the key 'path' is given twice in one object, and only the last "
        "value was read; keep one. Fix it in the 'connectors' property",
        (1, 16),
    ),
}


@pytest.mark.parametrize(("sql", "said", "at"), MISREAD.values(), ids=MISREAD.keys())
def test_a_connector_read_otherwise_than_written_is_refused_in_a_program_to_run(
    sql: str, said: str, at: tuple[int, int]
) -> None:
    """Two relations' connectors were one input, of which the runtime read one; the last of a
    key's values was read without a word."""
    program = parse_program(sql)
    program.refuse_unrunnable(references=False)  # one that ran runs as it did
    with pytest.raises(SpindleError) as raised:
        program.refuse_unrunnable()
    error = raised.value
    assert (error.reason, error.message) == (
        "InvalidConnectors",
        f"{said} (line {at[0]}, column {at[1]})",
    )
    assert (error.details["line"], error.details["column"]) == at


@pytest.mark.parametrize(
    ("connectors", "said"),
    [
        ([{**entry(), "name": ""}], "entry 0 has an invalid name"),
        ([entry(), entry(config={"path": "/other"})], "duplicate connector name 'f'"),
    ],
)
def test_an_empty_or_repeated_connector_name_is_refused(
    connectors: list[dict[str, Any]], said: str
) -> None:
    with pytest.raises(SpindleError) as raised:
        parse_program(f"create table t (id int) with ('connectors' = '{json.dumps(connectors)}');")
    error = raised.value
    assert error.reason == "InvalidConnectors" and said in error.message
    assert (error.details["line"], error.details["column"]) == (1, 14)


def test_a_slash_in_a_connectors_name_is_a_character_like_another() -> None:
    """The runtime reads a Delta output's writer with a `/` in the connector's key."""
    program = parse_program(table({**entry(), "name": "in/2025"}))
    program.refuse_unrunnable()
    assert [c.key for c in program.connectors] == ["t.in/2025"]
