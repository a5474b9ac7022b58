"""Connectors that must not share a location (`program.locations`): two outputs, or an input and
an output of one pipeline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import pytest

from spindle.errors import SpindleError
from spindle.program import parse_program
from tests.unit.test_columns import diff_refusal


def connectors(*located: tuple[str, str]) -> str:
    """A 'connectors' property of (transport, location) pairs, named c0, c1, ..."""
    entries = [
        {
            "name": f"c{i}",
            "transport": {"name": transport, "config": {key: where}},
            **({"format": {"name": "csv"}} if transport.startswith("file") else {}),
        }
        for i, (transport, where) in enumerate(located)
        for key in ("uri" if transport.startswith("delta") else "path",)
    ]
    return json.dumps(entries)


def program(inputs: list[tuple[str, str]], outputs: list[list[tuple[str, str]]]) -> str:
    """A table `t` with `inputs`, and a view `v<i>` over it per list of `outputs`."""
    table = "create table t (id int)"
    if inputs:
        table += f" with ('connectors' = '{connectors(*inputs)}')"
    views = [
        f"create view v{i} with ('connectors' = '{connectors(*located)}') as select id from t"
        for i, located in enumerate(outputs)
    ]
    return ";\n".join([table, *views]) + ";\n"


F_IN, F_OUT, D_IN, D_OUT = "file_input", "file_output", "delta_table_input", "delta_table_output"


class Case(NamedTuple):
    inputs: list[tuple[str, str]]
    outputs: list[list[tuple[str, str]]]
    conflict: str | None
    """The connector refused and what its message says, or None."""


CASES = {
    "two views, one file location": Case(
        [],
        [[(F_OUT, "/d/out")], [(F_OUT, "/d/out")]],
        "v1.c0 writes /d/out, where connector v0.c0 writes: one output would overwrite",
    ),
    "two outputs of one view": Case(
        [],
        [[(F_OUT, "/d/out"), (D_OUT, "/d/out/")]],
        "v0.c1 writes /d/out/, where connector v0.c0 writes (/d/out)",
    ),
    "one output inside another": Case([], [[(F_OUT, "/d")], [(F_OUT, "/d/x/y")]], "v1.c0"),
    "s3 and s3a name one bucket": Case(
        [], [[(D_OUT, "s3://b/o")], [(D_OUT, "s3a://b/o")]], "v1.c0"
    ),
    "file: and a plain path": Case([], [[(F_OUT, "file:///d/o")], [(F_OUT, "/d/./o")]], "v1.c0"),
    "an input reading an output": Case(
        [(F_IN, "/d/loop")],
        [[(F_OUT, "/d/loop")]],
        "v0.c0 writes /d/loop, where connector "
        "t.c0 reads: the pipeline would ingest its own output again",
    ),
    "a Delta input reading an output's table": Case(
        [(D_IN, "s3://b/t")], [[(D_OUT, "s3://b/t")]], "v0.c0"
    ),
    "distinct locations": Case(
        [(F_IN, "/d/in")], [[(F_OUT, "/d/out")], [(F_OUT, "/d/out2")], [(D_OUT, "/d/in2")]], None
    ),
    "two inputs share one": Case([(F_IN, "/d/in"), (F_IN, "/d/in")], [[(F_OUT, "/o")]], None),
    "a transport Spindle does not run": Case(  # refused as such (InvalidConnectors)
        [], [[("kafka_output", "/d/o")], [(F_OUT, "/d/o")]], None
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_location_two_connectors_must_not_share_is_refused(case: Case) -> None:
    parsed = parse_program(program(case.inputs, case.outputs))  # it parses: checkpoints read
    if case.conflict is None:
        refused = {p.reason for p in parsed.unrunnable}
        assert refused == ({"InvalidConnectors"} if "kafka" in str(case) else set())
        return
    with pytest.raises(SpindleError) as raised:
        parsed.refuse_unrunnable()
    error = raised.value
    assert error.reason == "LocationConflict"
    assert f"Connector {case.conflict}" in error.message
    line = 2 + int(case.conflict[1])  # view v<i> is declared on line i + 2
    assert error.message.endswith(
        f"Give one of them a location of its own (line {line}, column 13)"
    )


def test_each_conflict_is_listed_once_at_the_later_connector() -> None:
    sql = program([(F_IN, "/a")], [[(F_OUT, "/a")], [(F_OUT, "/a")], [(F_OUT, "/b")]])
    problems = parse_program(sql).unrunnable
    assert [p.details["connector"] for p in problems] == ["v0.c0", "v1.c0"]
    assert [p.details["line"] for p in problems] == [2, 3]


def test_diff_refuses_a_shared_location_on_the_new_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = program([], [[(F_OUT, "/d/a")], [(F_OUT, "/d/b")]])
    bad = program([], [[(F_OUT, "/d/a")], [(F_OUT, "/d/a")]])
    err = diff_refusal(tmp_path, capsys, good=good, bad=bad)
    assert "LocationConflict" in err and "line 3, column 13" in err
