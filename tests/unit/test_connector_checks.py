"""Connector entries of the transports Spindle runs are checked when the program is parsed
(`program.transports`): a mistake is `InvalidConnectors` at its relation's line, at `diff`,
`plan` and `apply`, instead of at the first step or never."""

from __future__ import annotations

import json
from typing import Any

import pytest

from spindle.errors import SpindleError
from spindle.program import parse_program


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


REFUSED = [
    (
        table(entry(config={"pth": "/data"})),
        "transport 'file_input' needs 'path' in its config (it has 'pth': did you mean 'path'?)",
        (1, 14),
    ),
    (table(entry(config={})), "transport 'file_input' needs 'path' in its config.", (1, 14)),
    (
        table(entry("delta_table_input", config={"path": ""})),
        "transport 'delta_table_input' needs 'uri' in its config",
        (1, 14),
    ),
    (
        table(entry("file_output")),
        "uses 'file_output', but a table's connectors are inputs: use file_input, "
        "delta_table_input",
        (1, 14),
    ),
    (
        view(entry()),
        "uses 'file_input', but a view's connectors are outputs: use file_output, "
        "delta_table_output",
        (2, 13),
    ),
    (
        table(entry(config={"path": "/data", "max_files_per_step": 2})),
        "has 'max_files_per_step' in its transport config, where it is not read: move it into "
        "the connector entry, beside 'transport'",
        (1, 14),
    ),
    (
        table(entry(max_files_per_stepp=2)),
        "has 'max_files_per_stepp', which Spindle does not read (did you mean "
        "'max_files_per_step'?)",
        (1, 14),
    ),
    (
        table(entry(late_arrival_seconds="abc")),
        "late_arrival_seconds must be a whole number, 0 or more (got 'abc')",
        (1, 14),
    ),
    (
        table(entry(max_files_per_step=0)),
        "max_files_per_step must be a whole number, 1 or",
        (1, 14),
    ),
    (table(entry(late_arrival_seconds=True)), "late_arrival_seconds must be a whole", (1, 14)),
]


@pytest.mark.parametrize(("sql", "said", "at"), REFUSED)
def test_a_connector_mistake_is_refused_where_its_relation_is_declared(
    sql: str, said: str, at: tuple[int, int]
) -> None:
    with pytest.raises(SpindleError) as refused:
        parse_program(sql)
    assert refused.value.reason == "InvalidConnectors"
    assert said in refused.value.message and "connector 'f'" in refused.value.message
    assert (refused.value.details["line"], refused.value.details["column"]) == at


@pytest.mark.parametrize(
    "sql",
    [
        table(entry(max_files_per_step=3, late_arrival_seconds=0, format={"name": "json"})),
        table(entry("delta_table_input", config={"uri": "s3://b/t", "mode": "snapshot"})),
        table(entry("kafka_input", config={"topic": "x"})),  # not run here: diffs as Feldera's
        table(entry(paused=True, max_batch_size=10, labels=["a"])),  # Feldera's keys
        view(entry("delta_table_output", config={"uri": "s3://b/o"})),
    ],
)
def test_connectors_spindle_runs_or_leaves_alone_parse(sql: str) -> None:
    assert parse_program(sql).warnings == ()


def test_a_key_spindle_does_not_read_is_ignored_with_a_warning() -> None:
    program = parse_program(table(entry(bogus=1)))
    assert program.warnings == ("'t': connector 'f': Spindle does not read 'bogus'; it is ignored",)
