"""`spindle diff` as a user runs it: a subprocess, its exit status, its output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

GRADES = Path("examples/grades")


def spindle(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spindle.cli.main", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_json_diff_of_the_reference_example() -> None:
    result = spindle("diff", "--json", str(GRADES / "v1.sql"), str(GRADES / "v2.sql"))
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["program_diff"]["modified_views"] == ["avg_grade", "avg_grade_enriched"]
    assert body["program_diff"]["added_views"] == ["avg_grade_all_courses"]
    assert body["program_diff_error"] is None
    for key in (
        "added_input_connectors",
        "removed_input_connectors",
        "modified_input_connectors",
        "added_output_connectors",
        "removed_output_connectors",
        "modified_output_connectors",
    ):
        assert body[key] == []
    assert body["changes"]["avg_grade_enriched"] == {
        "kind": "view",
        "status": "modified",
        "reasons": ["upstream:avg_grade"],
        "category": "breaking",
    }
    assert body["bootstrap"] == {"allowed": True, "error_code": None, "message": None}
    assert len(body["change_id"]) == 12


def test_readable_diff_shows_table_and_query_text_diff() -> None:
    result = spindle("diff", str(GRADES / "v1.sql"), str(GRADES / "v2.sql"))
    assert result.returncode == 0
    assert "avg_grade_all_courses" in result.stdout
    assert "upstream:avg_grade" in result.stdout
    assert "-  class_date >= date '2025-09-01' and class_date <= date '2025-12-15'" in result.stdout
    assert "+  class_date >= date '2025-09-01' and class_date <= date '2026-06-10'" in result.stdout


def test_no_change_exits_zero() -> None:
    result = spindle("diff", str(GRADES / "v1.sql"), str(GRADES / "v1.sql"))
    assert result.returncode == 0
    assert "No changes" in result.stdout


@pytest.mark.parametrize("as_json", [True, False])
def test_invalid_program_exits_1_with_error_body_and_no_traceback(
    tmp_path: Path, as_json: bool
) -> None:
    bad = tmp_path / "bad.sql"
    bad.write_text("create table t (a int);\ncreate view v as\n  select a frm t;\n")
    args = ["diff", *(["--json"] if as_json else []), str(GRADES / "v1.sql"), str(bad)]
    result = spindle(*args)
    assert result.returncode == 1
    assert "Traceback" not in result.stdout + result.stderr
    if as_json:
        body = json.loads(result.stdout)
        assert body["error_code"] == "InvalidProgram"
        assert (body["details"]["line"], body["details"]["column"]) == (3, 16)
    else:
        assert "InvalidProgram" in result.stderr and "line 3, column 16" in result.stderr


def test_missing_file_is_a_clear_error() -> None:
    result = spindle("diff", "--json", "nope.sql", str(GRADES / "v1.sql"))
    assert result.returncode == 1
    assert json.loads(result.stdout)["error_code"] == "FileUnreadable"
