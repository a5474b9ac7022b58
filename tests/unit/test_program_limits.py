"""The program's documented limits and hostile text: each refused with a reason and a position,
never a Python error (docs/limits.md)."""

from __future__ import annotations

import codecs
import importlib.util
from pathlib import Path

import pytest

from spindle.errors import SpindleError
from spindle.plan import make_plan
from spindle.program import fingerprint, parse_program
from spindle.program.limits import (
    MAX_NAME_LENGTH,
    MAX_NESTING,
    MAX_PROGRAM_BYTES,
    MAX_STATEMENTS,
    MAX_TOKENS,
    check_program,
)
from spindle.program.source import program_text

TABLE = "create table t (a int);\n"


def error_of(sql: str) -> SpindleError:
    with pytest.raises(SpindleError) as caught:
        parse_program(sql)
    return caught.value


def where(error: SpindleError) -> tuple[int, int]:
    return error.details["line"], error.details["column"]


def test_a_program_over_the_size_limit_is_refused_before_it_is_parsed() -> None:
    garbage = "x" * (MAX_PROGRAM_BYTES + 1)  # a syntax error, if it were parsed
    assert error_of(garbage).reason == "ProgramTooLarge"
    multibyte = "é" * (MAX_PROGRAM_BYTES // 2 + 1)  # few characters, too many UTF-8 bytes
    error = error_of(multibyte)
    assert error.reason == "ProgramTooLarge"
    assert error.details == {"bytes": MAX_PROGRAM_BYTES + 2, "limit": MAX_PROGRAM_BYTES}
    with pytest.raises(SpindleError) as caught:
        program_text(b"-" * 10 * 1024 * 1024)
    assert caught.value.reason == "ProgramTooLarge"


def test_too_many_tokens_or_statements_are_refused_before_parsing() -> None:
    words = error_of("x " * (MAX_TOKENS + 1))  # a syntax error, if it were parsed
    assert words.reason == "ProgramTooLarge"
    assert words.details == {"tokens": MAX_TOKENS + 1, "limit": MAX_TOKENS}
    tables = "".join(f"create table t{i} (a int);\n" for i in range(MAX_STATEMENTS + 1))
    statements = error_of(tables + "this is not sql")
    assert statements.reason == "ProgramTooLarge"
    assert statements.details == {"statements": MAX_STATEMENTS + 2, "limit": MAX_STATEMENTS}


def test_the_largest_benchmark_program_is_within_the_limits() -> None:
    """`make bench` plans 10,000 views: the limits must not refuse it."""
    spec = importlib.util.spec_from_file_location("bench_plan", Path("bench/plan.py"))
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    text = bench.generate(10_000)
    check_program(text)


def test_a_program_at_the_size_limit_is_planned() -> None:
    text = TABLE + "-" * (MAX_PROGRAM_BYTES - len(TABLE))
    assert list(parse_program(text).tables) == ["t"]


def test_deep_parentheses_are_refused_where_they_cross_the_limit() -> None:
    depth = 5000
    sql = TABLE + "create view v as select " + "(" * depth + "a" + ")" * depth + " from t;"
    error = error_of(sql)
    assert error.reason == "NestingTooDeep"
    assert where(error) == (2, len("create view v as select ") + MAX_NESTING + 1)


def test_deep_subqueries_are_refused() -> None:
    sql = TABLE + "create view v as " + "select * from (" * 5000 + "select a from t" + ") x" * 5000
    assert error_of(sql).reason == "NestingTooDeep"


def test_nesting_at_the_limit_is_planned() -> None:
    sql = (
        TABLE
        + "create view v as select "
        + "(" * MAX_NESTING
        + "a"
        + ")" * MAX_NESTING
        + " x from t"
    )
    assert parse_program(sql).views["v"].dependencies == ("t",)


@pytest.mark.parametrize(
    "expression",
    [
        "not " * 3000 + "a > 1",
        "a > 1 and " + "case when a > 1 then " * 3000 + "true" + " end" * 3000,
    ],
)
def test_deep_nesting_without_parentheses_is_refused_at_the_statement(expression: str) -> None:
    error = error_of(TABLE + f"create view v as select a from t where {expression};")
    assert error.reason == "NestingTooDeep"
    assert where(error) == (2, 1)


def test_long_names_are_refused_where_they_are_written() -> None:
    long = "x" * 100_000
    error = error_of(f"create table t (a int, {long} int);")
    assert error.reason == "NameTooLong" and where(error) == (1, 24)
    quoted = error_of(f'create table "{long}" (a int);')
    assert quoted.reason == "NameTooLong" and where(quoted) == (1, 14)
    assert parse_program(f"create table {'n' * MAX_NAME_LENGTH} (a int);").tables


@pytest.mark.parametrize(
    ("text", "position", "words"),
    [
        (TABLE + "create view v as sel\x00ect a from t;", (2, 21), "NUL"),
        (TABLE + "-- \ud800\n", (2, 4), "surrogate (U+D800)"),
    ],
)
def test_characters_no_sql_can_hold_are_located(
    text: str, position: tuple[int, int], words: str
) -> None:
    error = error_of(text)
    assert error.reason == "InvalidProgram"
    assert where(error) == position and words in error.message


def test_bytes_that_are_not_utf8_are_located() -> None:
    with pytest.raises(SpindleError) as caught:
        program_text(b"create table t (a int);\ncreate table \xff (b int);")
    assert caught.value.reason == "InvalidProgram"
    assert where(caught.value) == (2, 14)
    assert "0xFF" in caught.value.message


def test_a_byte_order_mark_does_not_change_the_program() -> None:
    sql = "create table t (a int);\ncreate view v as select a from t;\n"
    plain = fingerprint(parse_program(sql))
    assert fingerprint(parse_program(program_text(codecs.BOM_UTF8 + sql.encode()))) == plain
    assert fingerprint(parse_program("\ufeff" + sql)) == plain


def test_crlf_line_endings_do_not_change_fingerprints_or_positions() -> None:
    sql = "create table t (a int);\n\ncreate view v as\n  select a frm t;\n"
    fixed = sql.replace("frm", "from")
    assert fingerprint(parse_program(fixed.replace("\n", "\r\n"))) == fingerprint(
        parse_program(fixed)
    )
    assert where(error_of(sql.replace("\n", "\r\n"))) == where(error_of(sql))


def test_long_chains_of_views_and_functions_in_any_order() -> None:
    n = 2000  # deeper than Python's recursion limit
    views = [f"create view v{i} as select a from {f'v{i - 1}' if i else 't'};" for i in range(n)]
    functions = [
        f"create function f{i}(x int) returns int as {f'f{i - 1}(x)' if i else 'x'};"
        for i in range(n)
    ]
    sql = "\n".join([TABLE, *reversed(views), *reversed(functions)])
    program = parse_program(sql)
    assert list(program.views) == [f"v{i}" for i in range(n)]
    prints = fingerprint(program)
    assert len(set(prints.functions.values())) == n
    assert make_plan(old=program, new=program).diff.is_empty


def test_a_cycle_through_a_long_chain_is_reported_with_its_path() -> None:
    chain = [f"create view v{i} as select a from v{(i + 1) % 1500};" for i in range(1500)]
    error = error_of("\n".join(chain))
    assert error.reason == "CyclicView"
    assert error.details["cycle"][0] == error.details["cycle"][-1]
    assert len(error.details["cycle"]) == 1501


@pytest.mark.parametrize(
    ("connectors", "words"),
    [
        ("[" * 100_000, "nests too deeply"),
        ('[{"transport": {"name": "x"}, "n": ' + "9" * 5000 + "}]", "invalid JSON"),
    ],
)
def test_hostile_connector_json_is_located_at_its_relation(connectors: str, words: str) -> None:
    error = error_of(f"\ncreate table t (a int) with ('connectors' = '{connectors}');")
    assert error.reason == "InvalidConnectors" and words in error.message
    assert where(error) == (2, 14) and error.details["relation"] == "t"


def test_syntax_errors_quote_the_token_not_its_repr() -> None:
    error = error_of("create table select (a int);")
    assert error.reason == "InvalidProgram"
    assert "got 'select'" in error.message and "<Token" not in error.message
