"""Declared column types (`program.types`): what each is stored as, and the ones Spindle cannot
store refused at `diff`, `plan`, `apply` and in the operator, at the column, with what to declare
instead, instead of failing the driver after approval without a line. The integration test
`test_types_spark.py` stores a row of every accepted type in Delta."""

from __future__ import annotations

from pathlib import Path

import pytest

from spindle.api import Phase
from spindle.errors import SpindleError
from spindle.lifecycle import decide
from spindle.program import parse_program
from spindle.program.types import STORED_TYPES, declared_for, stored_type
from tests.unit.test_calls import refusal
from tests.unit.test_columns import diff_refusal
from tests.unit.test_lifecycle import observe, spec

STORED: list[tuple[str, str, str]] = [  # as written -> canonical type -> Spark type storing it
    ("int", "INT", "INT"),
    ("integer", "INT", "INT"),
    ("int4", "INT", "INT"),
    ("int8", "BIGINT", "BIGINT"),  # Feldera's and Postgres's; sqlglot's default reads TINYINT
    ("int64", "BIGINT", "BIGINT"),
    ("bigint", "BIGINT", "BIGINT"),
    ("smallint", "SMALLINT", "SMALLINT"),
    ("int2", "SMALLINT", "SMALLINT"),
    ("tinyint", "TINYINT", "TINYINT"),
    ("boolean", "BOOLEAN", "BOOLEAN"),
    ("bool", "BOOLEAN", "BOOLEAN"),
    ("decimal(5, 2)", "DECIMAL(5, 2)", "DECIMAL(5, 2)"),
    ("numeric(38, 0)", "DECIMAL(38, 0)", "DECIMAL(38, 0)"),
    ("dec(12)", "DECIMAL(12)", "DECIMAL(12, 0)"),
    ("number(5, 5)", "DECIMAL(5, 5)", "DECIMAL(5, 5)"),
    ("real", "FLOAT", "DOUBLE"),
    ("float", "FLOAT", "DOUBLE"),
    ("float32", "FLOAT", "DOUBLE"),
    ("double", "DOUBLE", "DOUBLE"),
    ("double precision", "DOUBLE", "DOUBLE"),
    ("float64", "DOUBLE", "DOUBLE"),
    ("float8", "DOUBLE", "DOUBLE"),
    ("varchar", "VARCHAR", "STRING"),
    ("varchar(20)", "VARCHAR(20)", "STRING"),
    ("character varying(5)", "VARCHAR(5)", "STRING"),
    ("text", "VARCHAR", "STRING"),
    ("string", "VARCHAR", "STRING"),
    ("char(3)", "CHAR(3)", "STRING"),
    ("date", "DATE", "DATE"),
    ("timestamp", "TIMESTAMP", "TIMESTAMP"),
    ("timestamp(3)", "TIMESTAMP(3)", "TIMESTAMP"),
    ("timestamp without time zone", "TIMESTAMP", "TIMESTAMP"),
    ("datetime", "TIMESTAMP", "TIMESTAMP"),  # Feldera's alias
    ("varbinary", "VARBINARY", "BINARY"),
    ("binary(16)", "BINARY(16)", "BINARY"),
    ("bytea", "VARBINARY", "BINARY"),
]

REFUSED: list[tuple[str, str]] = [  # as written -> what the message tells the user to declare
    ("time", "declare TIMESTAMP (a time on a fixed date) or VARCHAR"),
    ("timestamp with time zone", "declare TIMESTAMP and store instants in UTC"),
    ("interval", "declare BIGINT and store a count of seconds"),
    ("interval day", "declare BIGINT and store a count of seconds"),
    ("uuid", "declare VARCHAR, or BINARY (16 bytes)"),
    ("json", "declare VARCHAR and read fields with get_json_object"),
    ("tinyint unsigned", "declare SMALLINT, which holds every TINYINT UNSIGNED value"),
    ("int unsigned", "declare BIGINT, which holds every INT UNSIGNED value"),
    ("bigint unsigned", "declare DECIMAL(20, 0), which holds every BIGINT UNSIGNED value"),
    ("map<int, varchar>", "use one row per entry"),
    ("array<int>", "use one row per element"),
    ("struct<a int>", "use one column per field"),
    ("row(a int, b varchar)", "use one column per field"),  # Feldera's; was a syntax error
    ("bit", "declare BOOLEAN or BINARY"),
    ("decimal", "give it a precision, and a scale for digits after the point: DECIMAL(10, 2)"),
    ("numeric", "give it a precision"),
    ("decimal(39, 2)", "a precision p from 1 to 38 and a scale s from 0 to p"),
    ("decimal(5, 7)", "a precision p from 1 to 38 and a scale s from 0 to p"),
    ("decimal(0, 0)", "a precision p from 1 to 38"),
    ("geometry", "declare one of BIGINT, BINARY, BOOLEAN, CHAR, DATE, DOUBLE, FLOAT, INT,"),
]


def table(declared: str) -> str:
    return f"create table t (\n  id int,\n  x {declared}\n);\ncreate view v as select id from t;\n"


@pytest.mark.parametrize(("declared", "canonical", "spark"), STORED, ids=[s[0] for s in STORED])
def test_a_declared_type_is_stored_as_its_spark_type(
    declared: str, canonical: str, spark: str
) -> None:
    program = parse_program(table(declared))
    program.refuse_unrunnable()
    assert program.tables["t"].columns[1].type == canonical
    assert stored_type(canonical) == spark


@pytest.mark.parametrize(("declared", "instead"), REFUSED, ids=[r[0] for r in REFUSED])
def test_a_type_spindle_cannot_store_is_refused_at_the_column(declared: str, instead: str) -> None:
    program = parse_program(table(declared))  # it still parses: a checkpoint's program reads
    with pytest.raises(SpindleError) as raised:
        program.refuse_unrunnable()
    error = raised.value
    assert error.reason == "UnsupportedType"
    assert (error.details["line"], error.details["column"]) == (3, 3)
    assert error.message.startswith("Column 't.x': Spindle cannot store type ")
    assert instead in error.message and error.message.endswith("(line 3, column 3)")
    assert (error.details["relation"], error.details["name"]) == ("t", "x")


def test_every_stored_name_is_one_a_program_can_hold() -> None:
    """The table holds canonical names only: an alias in it could never match a column."""
    for name in STORED_TYPES:
        program = parse_program(f"create table t (x {name});")
        assert program.tables["t"].columns[0].type == name


def test_each_unstorable_column_is_refused_in_program_order() -> None:
    program = parse_program(
        "create table a (id int, at time);\ncreate table b (\n  id int,\n  n int unsigned);\n"
    )
    problems = [(u.details["relation"], u.details["line"]) for u in program.unrunnable]
    assert problems == [("a", 1), ("b", 4)]


def test_the_specs_program_is_refused_by_the_operator() -> None:
    refused = decide(observe(spec=spec(table("time"))))
    assert (refused.phase, refused.reason) == (Phase.FAILED, "UnsupportedType")
    assert "line 3, column 3" in refused.message


def test_diff_refuses_an_unstorable_type_on_the_new_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good, bad = table("timestamp"), table("timestamp with time zone")
    err = diff_refusal(tmp_path, capsys, good=good, bad=bad)
    assert "UnsupportedType" in err and "line 3, column 3" in err


def test_a_column_declared_twice_is_refused_at_its_second_declaration() -> None:
    """Spark compares names case-insensitively: `id` and `ID` are one column to it."""
    program = parse_program("create table t (\n  id int,\n  name varchar,\n  ID bigint);\n")
    with pytest.raises(SpindleError) as raised:
        program.refuse_unrunnable()  # it still parses: a checkpoint's program reads
    error = raised.value
    assert (error.reason, error.details["line"], error.details["column"]) == (
        "DuplicateColumn",
        4,
        3,
    )
    assert error.message.startswith(
        "Table 't' declares column 'id' twice (first at line 2); rename"
    )


@pytest.mark.parametrize(
    ("spark_type", "declared"),
    [
        ("int", "INT"),
        ("bigint", "BIGINT"),
        ("string", "VARCHAR"),
        ("binary", "VARBINARY"),
        ("timestamp_ntz", "TIMESTAMP"),
        ("decimal(6,3)", "DECIMAL(6, 3)"),
        ("array<int>", None),
        ("struct<a:int>", None),
    ],
)
def test_what_to_declare_for_a_type_spark_reads(spark_type: str, declared: str | None) -> None:
    """A file's column type, as a message advises declaring it: what is advised is stored
    (a DECIMAL stored as an INT32 in Parquet was advised as INT, which cannot hold 1.5)."""
    assert declared_for(spark_type) == declared
    if declared is not None:
        assert stored_type(declared) is not None


def test_an_array_of_arrays_is_shown_as_one() -> None:
    """Feldera's `INT ARRAY ARRAY`, which sqlglot renders `ARRAY<INT>[ARRAY]`."""
    error = refusal(table("int array array"))
    assert error.message.startswith("Column 't.x': Spindle cannot store type ARRAY<ARRAY<INT>>;")


SIGNATURES: list[tuple[str, str, tuple[int, int]]] = [  # a function; what is said; where
    (  # Spark's SQL has no UINT: the result was CAST(... AS UINT)
        "create function f(x int) returns int unsigned as x + 1;",
        "Function 'f': its result has the type UINT, which Spindle cannot run on Spark: declare "
        "BIGINT, which holds every INT UNSIGNED value",
        (2, 17),  # at the function's name: the result's type is not located
    ),
    (
        "create function f(x decimal(50, 2)) returns int as 1;",
        "Function 'f': parameter 'x' has the type DECIMAL(50, 2), which Spindle cannot run on "
        "Spark: DECIMAL(p, s) needs a precision p from 1 to 38",
        (2, 19),
    ),
    (  # written as a TIMESTAMP, where a view's CAST(s AS TIME) is refused (`writable`)
        "create function f(x int) returns time as x;",
        "Function 'f': its result has the type TIME, which Spindle cannot run on Spark: declare "
        "TIMESTAMP (a time on a fixed date) or VARCHAR",
        (2, 17),
    ),
    (  # written CAST(x AS BINARY(16)) for each call, which Spark refuses
        "create function f(x varbinary(16)) returns int as 1;",
        "Function 'f': parameter 'x' has the type VARBINARY(16), which Spindle cannot run on "
        "Spark: declare BINARY, without a size",
        (2, 19),
    ),
    (
        "create function f(x time) returns int as 1;",
        "Function 'f': parameter 'x' has the type TIME",
        (2, 19),
    ),
    (
        "create function f(x int) returns int as cast(x as money);",
        "Function 'f' uses the type MONEY, which Spindle cannot run on Spark: use one of BIGINT,",
        (2, 51),  # at the type
    ),
    (
        "create function f(x int) returns varchar as\n  cast(x as timestamp with time zone);",
        "Function 'f' uses the type TIMESTAMPTZ, which Spindle cannot run on Spark: use "
        "TIMESTAMP and store instants in UTC",
        (3, 13),
    ),
]


@pytest.mark.parametrize(
    ("function", "said", "where"), SIGNATURES, ids=[s[1][:40] for s in SIGNATURES]
)
def test_a_functions_type_spark_has_not_is_refused(
    function: str, said: str, where: tuple[int, int]
) -> None:
    error = refusal(f"create table t (id int);\n{function}\ncreate view v as select id from t;")
    assert error.reason == "UnsupportedType"
    assert error.message.startswith(said)
    assert (error.details["line"], error.details["column"]) == where
    assert error.details["function"] == "f"


@pytest.mark.parametrize(
    "function",
    [
        "create function f(x float64, y array<int>) returns decimal(10, 2) as x;",
        "create function f(x text) returns datetime as cast(x as timestamp);",
        "create function f(x row(a int)) returns int as 1;",  # Feldera's ROW: Spark's STRUCT
    ],
)
def test_a_functions_type_spark_has_is_accepted(function: str) -> None:
    parse_program(f"create table t (id int);\n{function}").refuse_unrunnable()


@pytest.mark.parametrize(
    "query",
    [
        "select cast(amount as decimal) as a, amount::numeric as b, try_cast(amount as dec) as c",
        "select ts + cast(id as interval day) as due, cast(ts as interval) as i",
        "select cast(ts as timestamp_ntz) as n, cast(ts as timestamp_ltz) as l",
        "select cast(array(amount) as array<decimal>) as a",
    ],
)
def test_a_view_casts_to_types_spark_computes_with_that_no_column_stores(query: str) -> None:
    """A DECIMAL without a precision (Spark's DECIMAL(10, 0)), an INTERVAL, TIMESTAMP_NTZ/LTZ:
    Spark runs such a cast as written, and refusing it blocked every change of the program."""
    program = parse_program(
        "create table t (id bigint, amount decimal(10, 2), ts timestamp);\n"
        f"create view v as {query} from t;\n"
        "create function f(p decimal) returns decimal as cast(p as decimal);"
    )
    program.refuse_unrunnable()
