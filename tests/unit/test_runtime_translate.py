"""Spindle SQL to Spark SQL, without Spark: column types, AVG over DECIMAL, UDFs inlined,
unsupported constructs refused with a line and column."""

from __future__ import annotations

import pytest

from spindle.errors import SpindleError
from spindle.program import parse_program
from spindle.runtime.translate import spark_type, table_ddl_schema, translated, view_sql

PROGRAM = """
create table grades (student_id int, class varchar, grade decimal(5, 2));
create function bump(g decimal(5, 2)) returns decimal(5, 2) as g + 1;
create view avg_grade as select class, avg(grade) as class_avg from grades group by class;
create view bumped as select student_id, bump(grade) as g from grades;
"""
SCHEMAS = {"grades": {"student_id": "INT", "class": "STRING", "grade": "DECIMAL(5,2)"}}


@pytest.mark.parametrize(
    ("declared", "spark"),
    [("INT", "INT"), ("varchar(20)", "STRING"), ("NUMERIC(5, 2)", "DECIMAL(5, 2)")],
)
def test_declared_types_map_to_spark_types(declared: str, spark: str) -> None:
    assert spark_type(declared) == spark


def test_an_unknown_type_is_unsupported_type() -> None:
    with pytest.raises(SpindleError) as unknown:
        spark_type("GEOMETRY")
    assert unknown.value.reason == "UnsupportedType" and "DECIMAL(p, s)" in unknown.value.message


def test_table_schema_is_spark_ddl() -> None:
    table = parse_program(PROGRAM).tables["grades"]
    assert table_ddl_schema(table) == "`student_id` INT, `class` STRING, `grade` DECIMAL(5, 2)"


def test_avg_over_decimal_keeps_the_argument_scale() -> None:
    program = parse_program(PROGRAM)
    sql = view_sql(program.views["avg_grade"], program, SCHEMAS).sql
    assert "CAST(AVG(" in sql.upper() and "DECIMAL(5, 2)" in sql.upper()


def test_udfs_are_inlined() -> None:
    program = parse_program(PROGRAM)
    sql = view_sql(program.views["bumped"], program, SCHEMAS).sql
    assert "bump" not in sql.lower() and "+ 1" in sql


A, B = "`t`.`a`", "`t`.`b`"


@pytest.mark.parametrize(
    ("written", "spark"),
    [
        # sqlglot reads these in another argument order: Spark was sent TIMESTAMPDIFF(B, a, hour)
        ("timestampdiff(hour, a, b)", f"TIMESTAMPDIFF(hour, {A}, {B})"),
        ("datediff(day, a, b)", f"DATEDIFF(day, {A}, {B})"),
        ("date_add(hour, 1, a)", f"DATE_ADD(hour, 1, {A})"),  # its unit was dropped
        ("timestampadd(minute, 5, a)", f"TIMESTAMPADD(minute, 5, {A})"),
        ("dateadd(week, 1, a)", f"DATEADD(week, 1, {A})"),
        ("datediff(a, b)", f"DATEDIFF({A}, {B})"),  # days, the two-argument form
    ],
)
def test_a_unit_argument_keeps_its_place(written: str, spark: str) -> None:
    """Spark's grammar and Feldera read `NAME(unit, x, y)` alike: the call reaches Spark as
    written, its unit a keyword, not a column named `hour`."""
    table = "create table t (a timestamp, b timestamp);\n"
    program = parse_program(f"{table}create view v as select {written} as x from t;")
    sql = view_sql(program.views["v"], program, {"t": {"a": "TIMESTAMP", "b": "TIMESTAMP"}}).sql
    assert f"{spark} AS" in sql


S = "CAST(`t`.`s` AS STRING)"  # the argument, as the parameter's type


@pytest.mark.parametrize(
    ("body", "spark"),
    [
        ("like(x, 'a%')", f"CAST((({S} LIKE 'a%')) AS BOOLEAN)"),
        ("like(x, 'a%') or x is null", f"CAST((({S} LIKE 'a%' OR {S} IS NULL)) AS BOOLEAN)"),
        ("x like 'a%'", f"CAST(({S} LIKE 'a%') AS BOOLEAN)"),
    ],
)
def test_a_function_body_may_start_with_sparks_like_call(body: str, spark: str) -> None:
    """`AS like(x, 'a%')` read as a `CREATE ... LIKE` clause: the function was refused as
    malformed ("CREATE FUNCTION needs (parameters) RETURNS <type> AS <expression>")."""
    program = parse_program(
        "create table t (s varchar);\n"
        f"create function f(x varchar) returns boolean as {body};\n"
        "create view v as select f(s) as r from t;"
    )
    program.refuse_unrunnable()
    assert view_sql(program.views["v"], program, {"t": {"s": "STRING"}}).sql == (
        f"SELECT {spark} AS `r` FROM `t` AS `t`"
    )


@pytest.mark.parametrize(
    ("call", "spark"),
    [
        ("dbl(x + 1)", "CAST((CAST(`t`.`x` + 1 AS INT) * 2) AS INT)"),  # was x + 1 * 2
        ("neg(x - 1)", "CAST((-CAST(`t`.`x` - 1 AS INT)) AS INT)"),  # was -x - 1
        ("tag(x)", "CAST((CAST(CAST(`t`.`x` AS DECIMAL(10, 2)) AS STRING)) AS STRING)"),
        ("dbl(dbl(x))", "CAST((CAST(CAST((CAST(`t`.`x` AS INT) * 2) AS INT) AS INT) * 2) AS INT)"),
    ],
)
def test_a_functions_arguments_are_its_parameters_types_and_stay_whole(
    call: str, spark: str
) -> None:
    """As Spark's own SQL functions: `dbl(x + 1)` of `n * 2` computed `x + 1 * 2` (12, not 22,
    for x = 10), and `tag(10)` of a DECIMAL(10, 2) parameter gave '10', not '10.00'."""
    program = parse_program(
        "create table t (x int);\n"
        "create function dbl(n int) returns int as n * 2;\n"
        "create function neg(n int) returns int as -n;\n"
        "create function tag(v decimal(10, 2)) returns varchar as cast(v as varchar);\n"
        f"create view v as select {call} as r from t;"
    )
    sql = view_sql(program.views["v"], program, {"t": {"x": "INT"}}).sql
    assert sql == f"SELECT {spark} AS `r` FROM `t` AS `t`"


def test_a_name_in_double_quotes_keeps_its_capitals() -> None:
    """Qualify, in Spark's dialect, lowered every name: `s AS "Name"` was stored, and written to
    outputs, as `name`. Unquoted names are lower case, as Spindle reads them."""
    program = parse_program(
        'create table t (s varchar, "Mixed" int);\n'
        'create view v as select s as "Name", count(*) as "Total", max("Mixed") as m '
        "from t group by s;\n"
        'create view w as select "Name" from v union all select s as "Other" from t;\n'
        "create view x as select * from v;\n"
        'create view y as select name, "Mixed" from v, t;\n'
    )
    schemas = {"t": {"s": "STRING", "Mixed": "INT"}}
    assert view_sql(program.views["v"], program, schemas).sql == (
        "SELECT `t`.`s` AS `Name`, COUNT(*) AS `Total`, MAX(`t`.`mixed`) AS `m` FROM `t` AS `t` "
        "GROUP BY `t`.`s`"
    )
    schemas["v"] = {"Name": "STRING", "Total": "BIGINT", "m": "INT"}
    names = {
        name: [s.alias for s in translated(program.views[name], program, schemas).selects]
        for name in "wxy"
    }
    assert names == {"w": ["Name"], "x": ["Name", "Total", "m"], "y": ["name", "Mixed"]}


def test_a_chain_of_calls_is_written_out_to_the_depth_the_plan_allows() -> None:
    from spindle.program.udfs import MAX_CALL_DEPTH

    def chain(length: int) -> str:
        calls = "".join(
            f"create function f{i}(x int) returns int as f{i + 1}(x) + 1;\n"
            for i in range(length - 1)
        )
        return (
            "create table t (id int);\n"
            + calls
            + f"create function f{length - 1}(x int) returns int as x;\n"
            + "create view v as select f0(id) as y from t;\n"
        )

    program = parse_program(chain(MAX_CALL_DEPTH))
    program.refuse_unrunnable()
    sql = view_sql(program.views["v"], program, {"t": {"id": "INT"}}).sql
    assert sql.count("+ 1") == MAX_CALL_DEPTH - 1
    deeper = parse_program(chain(MAX_CALL_DEPTH + 1))  # a checkpoint's, say: not planned again
    with pytest.raises(SpindleError) as raised:
        view_sql(deeper.views["v"], deeper, {"t": {"id": "INT"}})
    assert raised.value.reason == "NestingTooDeep"


def test_calls_that_would_grow_past_the_limit_are_refused_before_they_are_written_out() -> None:
    """A body that calls the next function twice doubles at each level: 20 levels took minutes
    to write out (a driver that hangs after approval), for a checkpoint's program too."""
    calls = "".join(
        f"create function f{i}(x int) returns int as f{i + 1}(x) + f{i + 1}(x + 1);\n"
        for i in range(19)
    )
    program = parse_program(
        "create table t (id int);\n"
        + calls
        + "create function f19(x int) returns int as x;\n"
        + "create view v as select f0(id) as y from t;\n"
    )
    with pytest.raises(SpindleError) as raised:
        view_sql(program.views["v"], program, {"t": {"id": "INT"}})
    assert raised.value.reason == "ProgramTooLarge"
    assert "builds more than 200,000 expressions" in raised.value.message
    assert raised.value.details["line"] == 22  # at the view


def test_a_checkpointed_views_unpivot_is_named_as_written() -> None:
    """The runtime's check (a checkpoint's program is not planned again) said PIVOT of an
    UNPIVOT; it names constructs as planning does (`writable.unsupported`)."""
    program = parse_program(
        "create table t (id bigint, a int, b int);\n"
        "create view v as select * from t unpivot (x for k in (a, b));"
    )
    with pytest.raises(SpindleError) as raised:
        view_sql(program.views["v"], program, {"t": {"id": "BIGINT", "a": "INT", "b": "INT"}})
    assert raised.value.reason == "UnsupportedSql"
    assert "uses UNPIVOT, which Spindle cannot run on Spark" in raised.value.message
