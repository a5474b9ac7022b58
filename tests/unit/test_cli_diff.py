"""`spindle diff` as a user runs it: a subprocess, its exit status, its output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlglot import exp

GRADES = Path("examples/grades")


def spindle(*args: str, workers: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **({"SPINDLE_WORKERS": str(workers)} if workers else {})}
    return subprocess.run(
        [sys.executable, "-m", "spindle.cli.main", *args],
        capture_output=True,
        text=True,
        check=False,
        env=env,
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


def test_no_change_still_prints_the_programs_warnings(tmp_path: Path) -> None:
    """The readable diff returned on "No changes" before its warnings (ProgramWarnings): a
    property Spindle ignores went unsaid unless something else changed too."""
    v1 = (GRADES / "v1.sql").read_text()
    typo = v1.replace("'materialized' = 'true'", "'materialized' = 'true', 'colour' = 'blue'", 1)
    assert typo != v1
    (tmp_path / "new.sql").write_text(typo)
    result = spindle("diff", str(GRADES / "v1.sql"), str(tmp_path / "new.sql"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "No changes: the programs are equivalent.",
        "warning: 'students': Spindle does not read property 'colour'; it is ignored",
    ]


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


def test_a_new_program_with_no_statement_is_refused_as_the_operator_refuses_it(
    tmp_path: Path,
) -> None:
    """A file blanked by accident (only comments) planned the removal of every table and view,
    with a change id to approve."""
    blank = tmp_path / "blank.sql"
    blank.write_text("-- just a comment\n")
    result = spindle("diff", "--json", str(GRADES / "v1.sql"), str(blank))
    assert result.returncode == 1
    body = json.loads(result.stdout)
    assert body["error_code"] == "InvalidProgram"
    assert body["message"].startswith(f"{blank}: It declares no table and no view")


def test_missing_file_is_a_clear_error() -> None:
    result = spindle("diff", "--json", "nope.sql", str(GRADES / "v1.sql"))
    assert result.returncode == 1
    assert json.loads(result.stdout)["error_code"] == "FileUnreadable"


def large_program(views: int, *, changed: int = -1, broken: int = -1) -> str:
    """Tables with lateness and a UDF, then views over CTEs, joins and the UDF."""
    lines = [
        "create function bump(x int) returns int as x + 1;",
        "create table t0 (id bigint, k int, ts timestamp lateness interval 1 hour);",
        "create table t1 (id bigint, k int) with ('materialized' = 'true');",
    ]
    names = ["t0", "t1"]
    for i in range(views):
        left, right = names[(i * 7) % len(names)], names[(i * 3 + 1) % len(names)]
        threshold = 1 if i == changed else 0
        where = "wher" if i == broken else "where"
        lines.append(
            f"create view v{i} as with base as (select id, k from {left}) "
            f"select b.id, bump(b.k) as k from base b join {right} r on b.id = r.id "
            f"{where} b.k > {threshold};"
        )
        names.append(f"v{i}")
    return "\n".join(lines) + "\n"


def test_large_programs_are_analyzed_in_parallel_with_the_same_result(tmp_path: Path) -> None:
    old, new = tmp_path / "old.sql", tmp_path / "new.sql"
    old.write_text(large_program(300))
    new.write_text(large_program(300, changed=150))
    serial = spindle("diff", "--json", str(old), str(new), workers=1)
    parallel = spindle("diff", "--json", str(old), str(new), workers=2)
    assert serial.returncode == parallel.returncode == 0, serial.stderr + parallel.stderr
    assert json.loads(parallel.stdout) == json.loads(serial.stdout)
    modified = json.loads(serial.stdout)["program_diff"]["modified_views"]
    assert "v150" in modified and "v149" not in modified


def test_parallel_analysis_fills_the_statement_cache() -> None:
    from spindle.cli import analysis
    from spindle.program import facts, parse_program, statements

    facts.forget_all()
    text = large_program(300)
    assert analysis.prime([text], workers=2) == 303
    assert all(facts.known(s.text) for s in statements.split(text))
    assert analysis.prime([text], workers=2) == 0  # nothing left to analyze
    assert parse_program(text).views["v299"].query.find(exp.Join) is not None  # lazy AST


def test_a_broken_statement_in_a_large_program_is_located_in_parallel_too(tmp_path: Path) -> None:
    old, new = tmp_path / "old.sql", tmp_path / "new.sql"
    old.write_text(large_program(300))
    new.write_text(large_program(300, broken=250))
    bodies = [
        json.loads(spindle("diff", "--json", str(old), str(new), workers=n).stdout) for n in (1, 2)
    ]
    assert bodies[0] == bodies[1]
    assert bodies[0]["error_code"] == "InvalidProgram"
    assert bodies[0]["details"]["line"] == 254, bodies[0]


def test_diff_shows_an_estimate_without_storage(capsys: pytest.CaptureFixture[str]) -> None:
    from spindle.cli.main import main as cli

    grades = "examples/grades"
    assert cli(["diff", f"{grades}/v1.sql", f"{grades}/v2.sql", "--json"]) == 0
    estimate = json.loads(capsys.readouterr().out)["estimate"]
    assert estimate["viewsToEvaluate"] == [
        "avg_grade",
        "avg_grade_enriched",
        "avg_grade_all_courses",
    ]
    assert estimate["inputRows"] is None and estimate["connectorRows"] == 0
    assert estimate["sizesUnknown"] == ["grades", "students"]
    assert cli(["diff", f"{grades}/v1.sql", f"{grades}/v2.sql"]) == 0
    assert "duration: unknown (no throughput recorded yet)" in capsys.readouterr().out
