"""Views Spindle cannot write for Spark are refused when the program is planned, at the call."""

from __future__ import annotations

import pytest

from spindle.program import parse_program
from tests.unit.test_program import refusal

TABLE = "create table t (s varchar, n int);\n"


@pytest.mark.parametrize(
    ("query", "said", "column"),
    [
        # the driver failed after approval: InternalError, Unexpected KeyError: 'replacement'
        (
            "select regexp_replace(s, 'a') as r from t",
            "calls REGEXP_REPLACE in a form Spindle cannot write for Spark: it lacks its "
            "argument 'replacement'. Check the number and order of its arguments",
            8,
        ),
        ("select upper(regexp_replace(s, 'a')) as r from t", "calls REGEXP_REPLACE", 14),
        # refused by the runtime only, at the view's first line, after approval
        (
            "select k from t lateral view explode(split(s, ',')) x as k",
            "uses LATERAL, which Spindle cannot run on Spark",
            30,
        ),
        ("select * from t pivot (sum(n) for s in ('a'))", "uses PIVOT", 24),
        # sqlglot reads the column as the word 'N', a unit no one has: NULL for every row
        (
            "select date_trunc(n, current_timestamp()) as d from t",
            "calls DATE_TRUNC with the unit 'N', which is none of Spark's",
            8,
        ),
        # was written CAST(n AS BIGINT), the places dropped
        ("select trunc(n, 2) as x from t", "calls TRUNC with a number of places", 8),
        # Spark refused these after approval: UDTF_ALIAS_NUMBER_MISMATCH
        (
            "select n, posexplode(split(s, ',')) from t",
            "calls POSEXPLODE, which makes more than one column, with no name for them: "
            "name each, POSEXPLODE(...) AS (a, b)",
            11,
        ),
        ("select json_tuple(s, 'a', 'b') as j from t", "calls JSON_TUPLE, which makes", 8),
        ("select stack(2, n, n, n, n) from t", "calls STACK, which makes", 8),
        ("select inline(array(struct(n, s))) from t", "calls INLINE, which makes", 8),
        # Spark got CAST('12:30:00' AS TIMESTAMP): today's date at 12:30
        ("select time '12:30:00' as t from t", "uses the type TIME, which Spark's SQL", 13),
        ("select n, cast(s as time) as t from t", "uses the type TIME", 16),  # at what it casts
        # Feldera's fields Spark's EXTRACT has not: INVALID_EXTRACT_FIELD after approval
        (
            "select extract(epoch from current_timestamp()) as e from t",
            "calls EXTRACT(EPOCH FROM ...), a field Spark's EXTRACT does not have: write "
            "UNIX_SECONDS(ts)",
            27,
        ),
        (
            "select n, extract(millisecond from current_timestamp()) as e from t",
            "calls EXTRACT(MILLI",
            36,
        ),
        # silently other values: the flags and delimiters were dropped, a day that does not
        # exist was NULL on every row, AT TIME ZONE ran as FROM_UTC_TIMESTAMP
        ("select s from t where regexp_like(s, '^a', 'i')", "calls REGEXP_LIKE with the flags", 23),
        ("select initcap(s, ' ') as i from t", "calls INITCAP with delimiters", 16),
        ("select date '2024-02-30' as d from t", "has the DATE '2024-02-30', which does not", 13),
        ("select n, cast('2024-13-01 00:00' as timestamp) as d from t", "has the TIMESTAMP", 16),
        ("select n, cast('2024-02-30' as timestamp) as d from t", "has the TIMESTAMP", 16),
        ("select s at time zone 'UTC' as z from t", "uses AT TIME ZONE", 8),
        # Spark refused it after approval, with an empty message
        ("select s from t where s similar to 'a%'", "uses SIMILAR TO", 23),
    ],
)
def test_what_cannot_be_written_for_spark_is_refused_at_its_place(
    query: str, said: str, column: int
) -> None:
    refused = refusal(parse_program(f"{TABLE}create view v as {query};"))
    assert refused.reason == "UnsupportedSql"
    assert refused.message.startswith(f"View 'v' {said}")
    assert (refused.details["line"], refused.details["column"]) == (2, 17 + column)


@pytest.mark.parametrize(
    "item",
    [
        "date '2024-02-29' as d",
        "timestamp '2024-02-29 23:59:59.123456' as x",
        "cast('2024' as date) as y",  # a form Spark reads, left to it
        "date '0000-01-01' as z",  # a year Spark has
        "regexp_like(s, '^a') as r",
        "initcap(s) as i",
    ],
)
def test_what_spark_reads_as_meant_is_written(item: str) -> None:
    parse_program(f"{TABLE}create view v as select {item} from t;").refuse_unrunnable()


def test_calls_sqlglot_would_warn_of_are_written_quietly(caplog: pytest.LogCaptureFixture) -> None:
    program = parse_program(f"{TABLE}create view v as select initcap(s) as i from t;")
    program.refuse_unrunnable()
    assert not [r for r in caplog.records if "INITCAP" in r.getMessage()]


@pytest.mark.parametrize(
    "item",
    [
        "posexplode(split(s, ',')) as (p, v)",
        "json_tuple(s, 'a')",  # one key: one column
        "stack(2, n, n)",  # two rows of one column
        "inline(array(struct(n)))",
        "explode(split(s, ','))",
        "inline(a)",  # how many fields `a` has, the SQL does not say: Spark decides
    ],
)
def test_a_generator_of_one_column_or_with_a_name_for_each_is_written(item: str) -> None:
    parse_program(
        f"{TABLE}create view a as select array(struct(n, s)) as a from t;\n"
        f"create view v as select {item} from {'a' if item == 'inline(a)' else 't'};"
    ).refuse_unrunnable()


def test_an_unpivot_is_named_as_written() -> None:
    refused = refusal(
        parse_program(f"{TABLE}create view v as select * from t unpivot (x for k in (n, s));")
    )
    assert refused.reason == "UnsupportedSql"
    assert refused.message.startswith("View 'v' uses UNPIVOT, which Spindle cannot run on Spark")


OTHERS = "use one of BIGINT, BINARY, BOOLEAN, CHAR, DATE, DOUBLE, FLOAT, INT, SMALLINT, TIMESTAMP"


@pytest.mark.parametrize(
    ("query", "said", "at"),
    [
        # Spark refused these after approval (its DECIMAL has 38 digits at most; no MONEY)
        (
            "select cast(n as decimal(40, 2)) as d from t",
            "DECIMAL(40, 2), which Spindle cannot run on Spark: DECIMAL(p, s) needs a precision "
            "p from 1 to 38",
            "decimal",
        ),
        (
            "select cast(n as money) as m from t",
            f"MONEY, which Spindle cannot run on Spark: {OTHERS}",
            "money",
        ),
        ("select n::bogus as b from t", "BOGUS, which", "bogus"),
        ("select cast(n as serial) as b from t", "SERIAL, which", "serial"),
        # written CAST(n AS UINT), a type Spark has not
        (
            "select cast(n as int unsigned) as u from t",
            "UINT, which Spindle cannot run on Spark: "
            "use BIGINT, which holds every INT UNSIGNED value",
            "int unsigned",
        ),
        # written CAST(s AS TIMESTAMP): the zone dropped
        (
            "select cast(s as timestamp with time zone) as z from t",
            "TIMESTAMPTZ, which Spindle cannot run on Spark: use TIMESTAMP and store instants "
            "in UTC",
            "timestamp",
        ),
        (
            "select timestamp with time zone '2024-01-01 00:00:00' as z from t",
            "TIMESTAMPTZ",
            "timestamp",
        ),
        # an element of a type Spark computes with
        ("select cast(array(n) as array<decimal(50, 2)>) as a from t", "DECIMAL(50, 2)", "array<"),
        # written for Spark as it is: a type Spark has not
        (
            "select cast(n as float64) as f from t",
            "FLOAT64, which Spindle cannot run on Spark: use DOUBLE",
            "float64",
        ),
        # Spark's BINARY and DOUBLE take no size: PARSE_SYNTAX_ERROR after approval
        (
            "select cast(s as varbinary(16)) as b from t",
            "VARBINARY(16), which Spindle cannot run on Spark: use BINARY, without a size",
            "varbinary",
        ),
        ("select cast(n as double(10, 2)) as d from t", "DOUBLE(10, 2)", "double"),
        # the outer cast's type, after the inner's
        ("select n,\n  cast(cast(n as int) as money) as m from t", "MONEY", "money"),
        ("select n::int::money as m from t", "MONEY", "money"),
        ("select cast(null as money) as m, cast(count(*) as int) as c from t", "MONEY", "money"),
    ],
)
def test_a_type_spark_has_not_is_refused_at_the_type(query: str, said: str, at: str) -> None:
    refused = refusal(parse_program(f"{TABLE}create view v as {query};"))
    assert refused.reason == "UnsupportedType"
    assert refused.message.startswith(f"View 'v' uses the type {said}")
    before = f"create view v as {query}"[: f"create view v as {query}".index(at)]
    line, column = before.count("\n"), len(before) - before.rfind("\n")
    assert (refused.details["line"], refused.details["column"]) == (2 + line, column)


@pytest.mark.parametrize(
    "item",
    [
        "cast(n as bigint) as a",
        "cast(s as text) as b",  # Spark's STRING
        "cast(s as string) as c",
        "cast(s as varchar(10)) as d",
        "cast(n as numeric(10, 2)) as e",
        "cast(n as double precision) as f",
        "cast(s as datetime) as g",  # Spark's TIMESTAMP
        "n::real as h",
        "cast(s as bytea) as i",
        "cast(split(s, ',') as array<int>) as j",  # Spark's, though no column stores it
        "cast(null as map<varchar, int>) as k",
        "cast(null as row(a int)) as l",  # Feldera's ROW type: Spark's STRUCT
        "date '2024-02-29' as m",
        "cast(s as varchar(5)) as n",  # sizes Spark's SQL reads, or sqlglot drops for it
        "cast(n as float(10)) as o",
        "cast(s as timestamp(3)) as p",
    ],
)
def test_a_type_spark_has_is_written(item: str) -> None:
    parse_program(f"{TABLE}create view v as select {item} from t;").refuse_unrunnable()
