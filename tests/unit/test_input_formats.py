"""Input formats are validated from the connector alone: what each config means, and every
config a user can get wrong refused with `InvalidConnectors` naming the connector."""

from __future__ import annotations

import json
from typing import Any

import pytest

from spindle.api import Phase
from spindle.errors import SpindleError
from spindle.lifecycle import decide
from spindle.program import Connector, Direction, parse_program
from spindle.program.formats import (
    InputFormat,
    input_format,
    invalid_record,
    output_update_format,
)
from tests.unit.test_lifecycle import checkpoint, observe, spec

COLUMNS = ("id", "v")


def connector(fmt: dict[str, Any] | None, *, direction: Direction = Direction.INPUT) -> Connector:
    """A file input `t.src` (or a file output `v.out`) with format `fmt`."""
    kind = "input" if direction is Direction.INPUT else "output"
    transport = f"file_{kind}"
    config: dict[str, Any] = {"transport": {"name": transport, "config": {"path": f"/{kind}"}}}
    if fmt is not None:
        config["format"] = fmt
    relation, name = ("t", "src") if direction is Direction.INPUT else ("v", "out")
    return Connector(
        relation=relation,
        name=name,
        direction=direction,
        transport=transport,
        config=config,
        comparable="",
    )


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        (None, InputFormat(name="json")),
        ({"name": "JSON", "config": {"update_format": "raw"}}, InputFormat(name="json")),
        (
            {"name": "json", "config": {"update_format": "insert_delete"}},
            InputFormat(name="json", update_format="insert_delete"),
        ),
        (
            {"name": "csv", "config": {"weight_column": "w", "header": "false"}},
            InputFormat(name="csv", weight_column="w", header=False, header_checked=False),
        ),
        ({"name": "csv"}, InputFormat(name="csv", header=True, header_checked=True)),
        (
            {"name": "csv", "config": {"header": True}},
            InputFormat(name="csv", header=True, header_checked=False),
        ),
        (  # Feldera's name for it
            {"name": "csv", "config": {"headers": False}},
            InputFormat(name="csv", header=False, header_checked=False),
        ),
        (
            {"name": "csv", "config": {"headers": "true", "header": "TRUE"}},
            InputFormat(name="csv", header=True, header_checked=False),
        ),
        ({"name": "csv", "config": {"delimiter": "|"}}, InputFormat(name="csv", delimiter="|")),
        (
            {"name": "parquet", "config": {"op_column": "op"}},
            InputFormat(name="parquet", op_column="op"),
        ),
    ],
)
def test_what_a_format_config_means(fmt: dict[str, Any] | None, expected: InputFormat) -> None:
    assert input_format(connector(fmt), columns=COLUMNS) == expected


def test_which_formats_carry_deletes() -> None:
    assert not InputFormat(name="json").carries_deletes
    assert InputFormat(name="json", update_format="insert_delete").carries_deletes
    assert InputFormat(name="csv", weight_column="w").change_column == "w"
    assert InputFormat(name="parquet", op_column="op").carries_deletes


@pytest.mark.parametrize(
    ("fmt", "says"),
    [
        ({"name": "avro"}, "format 'avro' is not supported"),
        ({"name": "json", "config": {"update_format": "debezium"}}, "'debezium' is not supported"),
        ({"name": "csv", "config": {"update_format": "insert_delete"}}, "applies to json only"),
        ({"name": "json", "config": {"weight_column": "w"}}, "applies to csv and parquet"),
        ({"name": "csv", "config": {"weight_column": "w", "op_column": "o"}}, "not both"),
        ({"name": "csv", "config": {"weight_column": 3}}, "must be a column name"),
        ({"name": "parquet", "config": {"op_column": "V"}}, "is a column of the table"),
        ({"name": "csv", "config": {"header": "yes"}}, "header must be true or false"),
        ({"name": "csv", "config": {"headers": 1}}, "headers must be true or false (got 1)"),
        ({"name": "csv", "config": {"header": True, "headers": False}}, "disagree; set one"),
        ({"name": "csv", "config": {"delimiter": ";;"}}, "one ASCII character (got ';;')"),
        ({"name": "csv", "config": {"delimiter": "é"}}, "one ASCII character (got 'é')"),
        ({"name": "csv", "config": {"delimiter": 9}}, "one ASCII character (got 9)"),
        ({"name": "csv", "config": {"delimiter": '"'}}, "cannot be '\"': CSV uses it already"),
    ],
)
def test_a_wrong_format_config_is_refused(fmt: dict[str, Any], says: str) -> None:
    with pytest.raises(SpindleError) as refused:
        input_format(connector(fmt), columns=COLUMNS)
    assert refused.value.reason == "InvalidConnectors"
    assert says in refused.value.message
    assert refused.value.details["connector"] == "t.src"


def test_a_bad_record_names_connector_file_and_line() -> None:
    error = invalid_record(
        connector="t.src", file="/in/a.jsonl", unit="line", number=3, problem="is odd"
    )
    assert error.reason == "InvalidInputRecord"
    assert error.message.startswith("Connector t.src: line 3 of /in/a.jsonl is odd.")
    assert error.details == {"connector": "t.src", "file": "/in/a.jsonl", "line": 3}


def test_a_wrong_file_input_format_is_refused_at_the_table() -> None:
    text = (
        "create table t (id int, v int) with ('connectors' = '"
        + json.dumps(
            [{"name": "src", **connector({"name": "csv", "config": {"op_column": "v"}}).config}]
        )
        + "');"
    )
    program = parse_program(text)  # it parses: a checkpoint's program that has it still reads
    with pytest.raises(SpindleError) as refused:
        program.refuse_unrunnable()
    assert refused.value.reason == "InvalidConnectors"
    assert "op_column 'v' is a column of the table" in refused.value.message
    assert refused.value.details["line"] == 1 and refused.value.details["connector"] == "t.src"


def test_formats_of_transports_spindle_does_not_read_are_not_judged_when_parsing() -> None:
    kafka = {"name": "k", "transport": {"name": "kafka_input"}, "format": {"name": "avro"}}
    parse_program(f"create table t (id int) with ('connectors' = '{json.dumps([kafka])}');")


def output(fmt: dict[str, Any]) -> Connector:
    return connector(fmt, direction=Direction.OUTPUT)


def test_an_output_writes_weights_or_feldera_insert_delete() -> None:
    assert output_update_format(output({"name": "json"})) is None
    assert output_update_format(output({"name": "csv", "config": {"header": True}})) is None
    insert_delete = {"name": "json", "config": {"update_format": "insert_delete"}}
    assert output_update_format(output(insert_delete)) == "insert_delete"


@pytest.mark.parametrize(
    ("fmt", "says"),
    [
        ({"name": "json", "config": {"update_format": "weighted"}}, "not supported for an output"),
        ({"name": "csv", "config": {"update_format": "insert_delete"}}, "applies to json only"),
    ],
)
def test_a_wrong_output_format_is_refused_at_the_view(fmt: dict[str, Any], says: str) -> None:
    """Refused for a program to run; one that ran before Spindle read the key still reads."""
    entry = {"name": "out", **output(fmt).config}
    text = (
        "create table t (id int);\n"
        f"create view v with ('connectors' = '{json.dumps([entry])}') as select id from t;"
    )
    program = parse_program(text)
    with pytest.raises(SpindleError) as refused:
        program.refuse_unrunnable()
    assert refused.value.reason == "InvalidConnectors" and says in refused.value.message
    assert (refused.value.details["line"], refused.value.details["column"]) == (2, 13)


def test_a_checkpointed_program_whose_format_config_was_ignored_still_reads() -> None:
    """An output `update_format` (or a CSV `delimiter`) Spindle ignored before it read the key:
    the program ran, so its checkpoint must stay readable; only a program to run is refused."""
    weighted = {"name": "json", "config": {"update_format": "weighted"}}
    entry = json.dumps([{"name": "out", **output(weighted).config}])
    table = "create table t (id int) with ('materialized' = 'true');\n"
    ran = f"{table}create view v with ('connectors' = '{entry}') as select id from t;"
    changed = f"{table}create view v as select id + 1 as id from t;"
    kept = decide(observe(spec=spec(changed), checkpoint=checkpoint(ran)))
    assert (kept.phase, kept.reason) == (Phase.AWAITING_APPROVAL, "AwaitingApproval")
    refused = decide(observe(spec=spec(ran)))
    assert (refused.phase, refused.reason) == (Phase.FAILED, "InvalidConnectors")
