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
    ],
)
def test_connectors_spindle_runs_parse_clean(sql: str) -> None:
    program = parse_program(sql)
    assert program.unrunnable == ()
    assert all("did you mean" not in w for w in program.warnings), program.warnings


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
