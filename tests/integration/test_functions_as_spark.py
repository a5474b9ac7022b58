"""A call of the program's own function computes what Spark's SQL function of the same body
computes.

A function is inlined into each view that calls it (`runtime.translate`). Its arguments were
put in the body as they were written, so `dbl(x + 1)` of a body `n * 2` computed `x + 1 * 2`,
and took no parameter's type, so `tag(10)` of a DECIMAL(10, 2) parameter gave '10', not
'10.00'. Here each function is also declared to Spark (`CREATE TEMPORARY FUNCTION ... RETURN`),
and each call is evaluated both ways over rows with NULLs: the values and their types agree.
"""

from __future__ import annotations

from typing import Any

import pytest

from spindle.program import parse_program
from spindle.runtime.translate import view_sql
from tests.integration.test_calls_as_written import session_over

TABLE = "create table src (k int, x int, d decimal(5, 2), s varchar);\n"
ROWS = [(1, 10, "1.50", "a"), (2, -3, "2.25", None), (3, None, None, "bc"), (4, 0, "0.00", "")]
FUNCTIONS = {  # Spindle's declaration: Spark's
    "create function dbl(n int) returns int as n * 2;": ("dbl(n INT) RETURNS INT RETURN n * 2"),
    "create function half(n int) returns double as n / 2;": (
        "half(n INT) RETURNS DOUBLE RETURN n / 2"
    ),
    "create function tag(v decimal(10, 2)) returns varchar as cast(v as varchar);": (
        "tag(v DECIMAL(10, 2)) RETURNS STRING RETURN CAST(v AS STRING)"
    ),
    "create function neg(n int) returns int as -n;": "neg(n INT) RETURNS INT RETURN -n",
    "create function pick(a int, b int) returns int as case when a > b then a else b end;": (
        "pick(a INT, b INT) RETURNS INT RETURN CASE WHEN a > b THEN a ELSE b END"
    ),
    "create function quad(n int) returns int as dbl(dbl(n));": (
        "quad(n INT) RETURNS INT RETURN dbl(dbl(n))"
    ),
}
CALLS = [
    "dbl(x + 1)",  # was x + 1 * 2
    "neg(x - 1)",  # was -x - 1
    "half(x + 1)",
    "half(d)",  # a DECIMAL argument of an INT parameter: 1.50 is 1
    "dbl(d)",
    "tag(x)",  # an INT argument of a DECIMAL(10, 2) parameter: '10.00'
    "pick(x + 0, k * 3)",
    "dbl(dbl(x + 1) + 1)",
    "quad(x - 1)",
    "dbl(k) + dbl(x) * 2",
]


@pytest.fixture(scope="module")
def source(spark: Any) -> tuple[Any, dict[str, dict[str, str]]]:
    import decimal

    rows = [(k, x, None if d is None else decimal.Decimal(d), s) for k, x, d, s in ROWS]
    session, schemas = session_over(spark, TABLE, rows)
    for declared in FUNCTIONS.values():
        session.sql(f"CREATE OR REPLACE TEMPORARY FUNCTION {declared}")
    return session, schemas


@pytest.mark.parametrize("call", CALLS)
def test_a_functions_call_computes_what_sparks_sql_function_does(
    source: tuple[Any, dict[str, dict[str, str]]], call: str
) -> None:
    session, schemas = source
    select = f"select k, {call} as r from src order by k"
    program = parse_program(f"{TABLE}{''.join(FUNCTIONS)}\ncreate view v as {select};")
    translated = session.sql(view_sql(program.views["v"], program, schemas).sql)
    spark = session.sql(select)
    assert translated.schema["r"].dataType == spark.schema["r"].dataType
    assert translated.collect() == spark.collect()
