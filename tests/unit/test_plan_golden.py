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
