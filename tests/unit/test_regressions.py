"""Inputs that once crashed the program layer (most found by the fuzzer, `tests/fuzz`): each
tests/golden/regressions/<case>/input.sql (the bytes of a file) → expected.json (the plan's
size, or the reason, position and message of the error), each within the 10 s an input may
take. `found_by` says what found it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from spindle.errors import SpindleError
from spindle.plan import make_plan
from spindle.program import parse_program
from spindle.program.source import program_text
from tests.fuzz.run import TIME_LIMIT

CASES = Path(__file__).parent.parent / "golden" / "regressions"
NAMES = sorted(p.name for p in CASES.iterdir() if (p / "expected.json").exists())


def outcome(data: bytes) -> dict[str, Any]:
    try:
        program = parse_program(program_text(data))
        program.refuse_unrunnable()  # as for a program to run: what the runtime would refuse
        diff = make_plan(old=None, new=program).to_json()["program_diff"]
    except SpindleError as error:
        return {
            "outcome": error.reason,
            "line": error.details.get("line"),
            "column": error.details.get("column"),
            "message": error.message,
        }
    return {
        "outcome": "plan",
        "added_tables": len(diff["added_tables"]),
        "added_views": len(diff["added_views"]),
        "functions": len(program.functions),
    }


def test_every_fix_has_a_case() -> None:
    assert len(NAMES) >= 14


@pytest.mark.parametrize("name", NAMES)
def test_regression(name: str) -> None:
    expected = json.loads((CASES / name / "expected.json").read_text())
    expected.pop("found_by")
    start = time.perf_counter()
    assert outcome((CASES / name / "input.sql").read_bytes()) == expected
    assert time.perf_counter() - start < TIME_LIMIT
