"""Function calls are checked against Spark's built-ins and the program's functions
(`program.calls`): a misspelt function is refused at `diff`, `plan`, `apply` and in the
operator, at the call, with the closest name. Verdicts on queries are cases of
`column_cases.py` (held against Spark's analyzer); these are the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from spindle.api import Phase
from spindle.cli.main import main
from spindle.errors import SpindleError
from spindle.lifecycle import decide
from spindle.program import parse_program
from tests.unit.test_lifecycle import checkpoint, observe, spec

TABLE = "create table t (id int, grade decimal(5, 2));\n"


def refusal(text: str) -> SpindleError:
    with pytest.raises(SpindleError) as raised:
        parse_program(text).refuse_unrunnable()
    return raised.value


@pytest.mark.parametrize(
    ("view", "call", "message", "where"),
    [
        (
            "create view v as select avgg(grade) as a from t;",
            "avgg",
            "View 'v' calls 'avgg', which is neither a Spark function nor one the program "
            "declares. Did you mean 'avg'? Fix the name, or declare it with CREATE FUNCTION.",
            (2, 25),
        ),
        (  # no close name: the message still says what to do
            "create view v as select id,\n  zzqqxx(grade) as a from t;",
            "zzqqxx",
            "View 'v' calls 'zzqqxx', which is neither a Spark function nor one the program "
            "declares. Fix the name, or declare it with CREATE FUNCTION.",
            (3, 3),
        ),
    ],
)
def test_the_message_names_the_call_the_closest_function_and_what_to_do(
    view: str, call: str, message: str, where: tuple[int, int]
) -> None:
    error = refusal(TABLE + view)
    assert error.reason == "UnknownFunction"
    assert error.message == f"{message} (line {where[0]}, column {where[1]})"
    assert error.details == {"line": where[0], "column": where[1], "view": "v", "call": call}


@pytest.mark.parametrize(
    ("call", "said"),
    [
        ("row(id, grade)", "STRUCT(1, 'a'), or NAMED_STRUCT"),  # was: Did you mean 'pow'?
        ("parse_date('2025-01-02', '%Y-%m-%d')", "TO_DATE(s, 'yyyy-MM-dd')"),
        ("format_date('%Y', current_date())", "DATE_FORMAT(d, 'yyyy-MM-dd')"),
    ],
)
def test_a_felderas_function_spark_spells_otherwise_says_how_to_write_it(
    call: str, said: str
) -> None:
    error = refusal(TABLE + f"create view v as select {call} as x from t;\n")
    assert error.reason == "UnknownFunction"
    assert f"Write it as Spark's SQL has it: {said}" in error.message
    assert "Did you mean" not in error.message
    assert "CREATE FUNCTION" not in error.message  # the rewrite is the advice, not the name


def test_a_functions_body_is_checked_and_a_declared_function_is_suggested() -> None:
    error = refusal(
        TABLE + "create function bump(g int) returns int as g + 1;\n"
        "create function twice(g int) returns int as\n  bumpp(bumpp(g));\n"
    )
    assert (error.details["function"], error.details["call"]) == ("twice", "bumpp")
    assert "calls 'bumpp'" in error.message and "Did you mean 'bump'?" in error.message
    assert (error.details["line"], error.details["column"]) == (4, 3)


def test_the_first_problem_in_the_text_is_reported() -> None:
    error = refusal(
        TABLE + "create view v as select frobnicate(id) as f, scroe from t;\n"
        "create view w as select nme from t;\n"
    )
    assert (error.reason, error.details["line"]) == ("UnknownFunction", 2)
    error = refusal(TABLE + "create view v as select scroe, frobnicate(id) as f from t;\n")
    assert error.reason == "UnknownColumn"


def test_a_qualified_call_is_left_to_spark() -> None:
    parse_program(TABLE + "create view v as select my.fn(id) as f from t;\n").refuse_unrunnable()


def test_the_operator_refuses_it_and_leaves_a_program_spark_ran_alone() -> None:
    bad = TABLE + "create view v as select avgg(grade) as a from t;\n"
    refused = decide(observe(spec=spec(bad)))
    assert (refused.phase, refused.reason) == (Phase.FAILED, "UnknownFunction")
    kept = decide(observe(spec=spec(bad), checkpoint=checkpoint(bad)))
    assert kept.phase is not Phase.FAILED


def test_every_problem_is_listed_not_only_the_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A program with three mistakes is fixed in one round: the refusal lists them all, in the
    order the runtime would meet them (what cannot run, then references, in text order)."""
    text = (
        "create table t (id int, at time);\n"
        "create view v as select scroe from t;\n"
        "create view w as select avgg(id) as a from t;\n"
    )
    error = refusal(text)
    assert (error.reason, error.details["problems"]) == ("UnsupportedType", 3)
    assert [m.split("'")[1] for m in error.details["more"]] == ["v", "w"]
    refused = decide(observe(spec=spec(text)))
    assert refused.message.endswith(" The first of 3 problems; `spindle plan -f` lists them all.")
    (tmp_path / "new.sql").write_text(text)
    (tmp_path / "old.sql").write_text(TABLE)
    assert main(["diff", str(tmp_path / "old.sql"), str(tmp_path / "new.sql")]) == 1
    said = capsys.readouterr().err
    assert said.count("  also: ") == 2 and "(line 3, column 25)" in said
