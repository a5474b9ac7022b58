"""Golden fixtures: every case under tests/golden/plan is old.sql + new.sql → expected.json.

expected.json holds the Feldera-shaped diff, the per-object changes (reasons, category) and the
bootstrap verdict: everything `spindle diff --json` prints except the change id (a hash, tested
for stability elsewhere).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spindle.plan import make_plan
from spindle.program import parse_program

REFERENCE_DIFF = {
    "added_input_connectors": [],
    "added_output_connectors": [],
    "modified_input_connectors": [],
    "modified_output_connectors": [],
    "program_diff": {
        "added_tables": [],
        "added_views": ["avg_grade_all_courses"],
        "modified_tables": [],
        "modified_views": ["avg_grade", "avg_grade_enriched"],
        "removed_tables": [],
        "removed_views": [],
    },
    "program_diff_error": None,
    "removed_input_connectors": [],
    "removed_output_connectors": [],
}
"""The diff printed in feldera-bootstrapping.md for the grades example."""

CASES = Path(__file__).parent.parent / "golden" / "plan"
NAMES = sorted(p.name for p in CASES.iterdir() if (p / "expected.json").exists())


def test_there_are_enough_cases() -> None:
    assert len(NAMES) >= 30


@pytest.mark.parametrize("name", NAMES)
def test_golden_plan(name: str) -> None:
    case = CASES / name
    plan = make_plan(
        old=parse_program((case / "old.sql").read_text()),
        new=parse_program((case / "new.sql").read_text()),
    )
    actual = plan.to_json()
    change_id = actual.pop("change_id")
    assert len(change_id) == 12 and int(change_id, 16) >= 0
    assert actual == json.loads((case / "expected.json").read_text())


def test_reference_example_matches_feldera_exactly() -> None:
    """The diff printed in feldera-bootstrapping.md, key for key."""
    plan = make_plan(
        old=parse_program(Path("examples/grades/v1.sql").read_text()),
        new=parse_program(Path("examples/grades/v2.sql").read_text()),
    )
    assert plan.diff.to_json() == REFERENCE_DIFF


ROWS_TABLE = (
    "create table t (a int, b int, j varchar, s array<struct<x: int>>) "
    "with ('materialized' = 'true');\n"
)
GENERATOR_CALLS = {
    "explode": "explode(sequence(1, b))",
    "explode_outer": "explode_outer(sequence(1, b))",
    "posexplode": "posexplode(sequence(1, b))",
    "posexplode_outer": "posexplode_outer(sequence(1, b))",
    "inline": "inline(s)",
    "inline_outer": "inline_outer(s)",
    "stack": "stack(2, a, b)",
    "json_tuple": "json_tuple(j, 'x')",
}


def _category(old: str, new: str) -> str | None:
    plan = make_plan(
        old=parse_program(f"{ROWS_TABLE}create view v as {old};"),
        new=parse_program(f"{ROWS_TABLE}create view v as {new};"),
    )
    change = plan.changes["v"]
    assert change.reasons == ("query",)
    return change.category.value if change.category else None


def test_every_generator_is_a_case() -> None:
    from spindle.program.ordinals import GENERATORS

    assert set(GENERATOR_CALLS) == GENERATORS


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("select 1 as one from t", "select 1 as one, count(*) as n from t"),
        ("select a from t", "select a, max(b) over (partition by a) as m from t"),
        (
            "select a, count(*) as n from t group by all",
            "select a, count(*) as n, b from t group by all",
        ),
        *(("select a from t", f"select a, {call} from t") for call in GENERATOR_CALLS.values()),
    ],
)
def test_an_appended_column_that_changes_the_rows_is_breaking(old: str, new: str) -> None:
    """An aggregate where the query did not aggregate (one row for all), a generator (several
    rows for one), a window function, or GROUP BY ALL (grouped by the new column too) changes
    the view's rows: `non_breaking` said only a column was added."""
    assert _category(old, new) == "breaking"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("select a from t", "select a, b * 2 as b2 from t"),
        (
            "select a, count(*) as n from t group by a",
            "select a, count(*) as n, sum(b) as s from t group by a",
        ),
        ("select count(*) as n from t", "select count(*) as n, max(b) as m from t"),
        ("select a from t", "select a, (select max(b) from t) as m from t"),
    ],
)
def test_an_appended_column_that_keeps_the_rows_is_non_breaking(old: str, new: str) -> None:
    """A value of each row, another aggregate of rows already grouped, a scalar subquery."""
    assert _category(old, new) == "non_breaking"
