"""Incremental maintenance keeps the values a recomputation gives, for values at the edges of
their types: DECIMALs with many places, sums that overflow, infinities, and UNION ALL inputs
of different types.

Each case runs one view step by step (JSON `insert_delete` inputs) and after every step holds
its stored contents equal to Spark evaluating the view whole over the tables' contents. Each
case failed before its fix: a DECIMAL(18, 8) sum was kept at 7 places (0.00000001 + 0.00000001
stored as 0), an overflowed sum restarted from 0, a sum that had met an infinity stayed NaN
after the infinity was deleted, and a step changing one side of a UNION ALL of INT and BIGINT
failed to append its INT change to the BIGINT state. So did a change of a union's second
branch alone (named as that branch's columns, not the view's), and the delete of a row a table
did not hold (a -1 that aggregates counted, where the table's contents had no row).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from spindle.plan.maintenance import Mode, maintenance
from spindle.runtime.maintain import Views
from tests.integration.test_incremental import _recomputed
from tests.integration.test_runtime_io import runtime_for

Step = dict[str, list[tuple[str, dict[str, Any]]]]

CASES: dict[str, tuple[dict[str, str], str, list[Step]]] = {
    "decimal places": (
        {"t": "id int, g int, btc decimal(18, 8)"},
        "select g, sum(btc) as s, avg(btc) as a, count(*) as n from t group by g",
        [
            {"t": [("insert", {"id": 1, "g": 1, "btc": 0.00000001})]},
            {"t": [("insert", {"id": 2, "g": 1, "btc": 0.00000001})]},
            {"t": [("insert", {"id": 3, "g": 1, "btc": 1.23456789})]},
            {"t": [("delete", {"id": 1, "g": 1, "btc": 0.00000001})]},
        ],
    ),
    "the widest decimals": (
        {"t": "id int, amount decimal(38, 10)"},
        "select sum(amount) as s from t",
        [
            {"t": [("insert", {"id": 1, "amount": 0.0000000001})]},
            {"t": [("insert", {"id": 2, "amount": 1234567.0000000001})]},
        ],
    ),
    "an overflowed sum": (
        {"t": "id int, amount decimal(38, 2)"},
        "select sum(amount) as total, count(*) as n from t",
        [
            {"t": [("insert", {"id": 1, "amount": 6e35}), ("insert", {"id": 2, "amount": 6e35})]},
            {"t": [("delete", {"id": 2, "amount": 6e35})]},
            {"t": [("insert", {"id": 3, "amount": 1})]},
        ],
    ),
    "an infinity deleted": (
        {"t": "id int, x double"},
        "select sum(x) as s, avg(x) as a from t",
        [
            {"t": [("insert", {"id": 1, "x": 2.0}), ("insert", {"id": 2, "x": float("-inf")})]},
            {"t": [("delete", {"id": 2, "x": float("-inf")})]},
        ],
    ),
    "a union of two types": (
        {"t": "k int, i int", "u": "k int, b bigint"},
        "select k, i as x from t union all select k, b as x from u",
        [
            {"t": [("insert", {"k": 1, "i": 1})], "u": [("insert", {"k": 2, "b": 3000000000})]},
            {"t": [("insert", {"k": 3, "i": 4})]},
            {"u": [("delete", {"k": 2, "b": 3000000000})]},
        ],
    ),
    "a union whose second branch alone changes": (  # its change had that branch's names
        {"t": "k int, v int", "u": "k int, w int"},
        "select k, v from t union all select w, k from u",
        [
            {"t": [("insert", {"k": 1, "v": 100})], "u": [("insert", {"k": 2, "w": 200})]},
            {"u": [("insert", {"k": 3, "w": 300})]},
        ],
    ),
    **{  # the delete was kept as a -1 that views counted and recomputation did not
        f"a delete of a row the table does not hold, {kind}": (
            {"t": "x int"},
            query,
            [
                {"t": [("delete", {"x": 1})]},
                {"t": [("insert", {"x": 1})]},
                {"t": [("insert", {"x": 1}), ("delete", {"x": 1}), ("delete", {"x": 1})]},
                {"t": [("insert", {"x": 1}), ("insert", {"x": 2})]},
            ],
        )
        for kind, query in (
            ("grouped", "select x, count(*) as n from t group by x"),
            ("in a global aggregate", "select count(*) as n, sum(x) as s from t"),
            ("distinct", "select distinct x from t"),
        )
    },
}


@pytest.mark.parametrize("case", CASES)
def test_incremental_values_equal_a_recomputation(tmp_path: Path, spark: Any, case: str) -> None:
    tables, query, steps = CASES[case]
    _stepped(tmp_path, spark, case, tables, query, steps, mode=Mode.INCREMENTAL)


RECOMPUTED: dict[str, tuple[str, list[str]]] = {
    "ROLLUP": (
        "select g, count(*) as n from t group by rollup(g)",
        ["(1, 1)", "(2, 1)", "(None, 2)"],
    ),
    "GROUPING SETS": (
        "select g, count(*) as n from t group by grouping sets ((g), ())",
        ["(1, 1)", "(2, 1)", "(None, 2)"],
    ),
    "a time window": (
        "select window(ts, '1 hour').start as h, count(*) as n from t "
        "group by window(ts, '1 hour').start",
        ["(datetime.datetime(2024, 1, 1, 10, 0), 2)"],
    ),
}


@pytest.mark.parametrize("case", RECOMPUTED)
def test_groupings_the_plan_recomputes_run(tmp_path: Path, spark: Any, case: str) -> None:
    """ROLLUP, CUBE, GROUPING SETS and time windows are recomputed (the plan once kept ROLLUP(g)
    incrementally, whose change SQL Spark cannot run)."""
    query, rows = RECOMPUTED[case]
    steps: list[Step] = [
        {"t": [("insert", {"id": 1, "g": 1, "ts": "2024-01-01 10:05:00"})]},
        {"t": [("insert", {"id": 2, "g": 2, "ts": "2024-01-01 10:55:00"})]},
        {"t": [("insert", {"id": 3, "g": 2, "ts": "2024-01-01 12:00:00"})]},
        {"t": [("delete", {"id": 3, "g": 2, "ts": "2024-01-01 12:00:00"})]},
    ]
    table = {"t": "id int, g int, ts timestamp"}
    stored = _stepped(tmp_path, spark, case, table, query, steps, mode=Mode.RECOMPUTE)
    assert sorted(stored.elements()) == sorted(rows)


def _stepped(
    tmp_path: Path,
    spark: Any,
    case: str,
    tables: dict[str, str],
    query: str,
    steps: list[Step],
    *,
    mode: Mode,
) -> Counter[str]:
    """Step a view `v` of `query` through `steps`, holding it equal to a recomputation after
    each; its stored rows at the end."""
    sql = ""
    for name, columns in tables.items():
        source = {
            "name": "c",
            "transport": {"name": "file_input", "config": {"path": str(tmp_path / "in" / name)}},
            "format": {"name": "json", "config": {"update_format": "insert_delete"}},
        }
        (tmp_path / "in" / name).mkdir(parents=True)
        sql += f"create table {name} ({columns}) with ('connectors' = '{json.dumps([source])}');\n"
    sql += f"create materialized view v as {query};\n"
    runtime, _, program = runtime_for(tmp_path, sql)
    assert maintenance(program.views["v"]).mode is mode
    checkpoint = runtime.initialize(program)
    for number, step in enumerate(steps, start=1):
        for name, changes in step.items():
            lines = "".join(json.dumps({kind: row}) + "\n" for kind, row in changes)
            (tmp_path / "in" / name / f"{number:04d}.json").write_text(lines)
        checkpoint, _ = runtime.step(program, checkpoint)
        views = Views(spark, program, runtime.uri)
        views.register(checkpoint.state, tuple(program.tables))
        stored = views.contents("v", checkpoint.state["v"])
        whole = _recomputed(spark, views, program, checkpoint, "v")
        assert _rows(stored) == _rows(whole), f"{case}, step {number}"
    return _rows(stored)


def _rows(frame: Any) -> Counter[str]:
    """Rows as their exact text (a NaN equals a NaN, a DECIMAL keeps its places)."""
    return Counter(repr(tuple(row)) for row in frame.collect())
