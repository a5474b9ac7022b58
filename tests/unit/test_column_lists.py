"""A view's column list names its columns, and `CREATE VIEW v AS VALUES ...` is a view: the
query each becomes (written SQL in, the view's query out), and the refusals of a list whose
width is not the query's, at the list."""

from __future__ import annotations

import pytest

from spindle.errors import SpindleError
from spindle.plan.maintenance import Mode, maintenance
from spindle.program import parse_program

TABLE = "create table t (x int, k int, s varchar);\n"


def listed(query: str, alias: str) -> str:
    """A query read as a derived table of the listed names (twice: see `listed`)."""
    return f"SELECT * FROM (SELECT * FROM ({query}) AS __listed) AS {alias}"


@pytest.mark.parametrize(
    ("view", "query", "mode"),
    [
        # written out: each output takes its listed name in place (the shape, and so
        # incremental maintenance, is kept)
        ("v (n, c) as select x, 'a' from t", "SELECT x AS n, 'a' AS c FROM t", Mode.INCREMENTAL),
        (
            "v (key, n) as select k, count(*) as c from t group by k",
            "SELECT k AS key, COUNT(*) AS n FROM t GROUP BY k",
            Mode.INCREMENTAL,
        ),
        (
            "v (z) as select x from t union all select k from t",
            "SELECT x AS z FROM t UNION ALL SELECT k FROM t",
            Mode.INCREMENTAL,
        ),
        (  # the listed names the query's own: GROUP BY k reads the input either way
            "v (k, total) as select k, sum(x) as total from t group by k order by k",
            "SELECT k AS k, SUM(x) AS total FROM t GROUP BY k ORDER BY k",
            Mode.RECOMPUTE,  # ORDER BY: recomputed, as without a list
        ),
        # a name a clause refers to that the list or the query gives, a star, a lateral
        # alias, a set operation's ORDER BY: the query as a derived table
        (  # ORDER BY x would have sorted by the output x, which is t's y
            "v (x, s) as select s, x from t order by x limit 2",
            listed("SELECT s, x FROM t ORDER BY x LIMIT 2", "v(x, s)"),
            Mode.RECOMPUTE,
        ),
        (
            "v (n, w) as select x + 1 as z, z * 2 as w2 from t",
            listed("SELECT x + 1 AS z, z * 2 AS w2 FROM t", "v(n, w)"),
            Mode.RECOMPUTE,
        ),
        (
            "v (n) as select x from t union all select k from t order by x",
            listed("SELECT x FROM t UNION ALL SELECT k FROM t ORDER BY x", "v(n)"),
            Mode.RECOMPUTE,
        ),
        (
            "v (key, n) as select k as kk, count(*) from t group by kk",
            listed("SELECT k AS kk, COUNT(*) FROM t GROUP BY kk", "v(key, n)"),
            Mode.RECOMPUTE,
        ),
        (
            "v (a, b, c) as select * from t",
            listed("SELECT * FROM t", "v(a, b, c)"),
            Mode.RECOMPUTE,
        ),
        # VALUES: Spark's names for its columns, or the list's
        (
            "v as values (1, 'a'), (2, 'b')",
            "SELECT * FROM (VALUES (1, 'a'), (2, 'b')) AS \"values\"(col1, col2)",
            Mode.RECOMPUTE,
        ),
        (
            "v (n, s) as values (1, 'a')",
            listed("SELECT * FROM (VALUES (1, 'a')) AS \"values\"(col1, col2)", "v(n, s)"),
            Mode.RECOMPUTE,
        ),
    ],
)
def test_a_column_list_names_the_querys_columns(view: str, query: str, mode: Mode) -> None:
    program = parse_program(f"{TABLE}create view {view};")
    assert program.views["v"].query.sql() == query
    assert maintenance(program.views["v"]).mode is mode


@pytest.mark.parametrize(
    ("view", "message", "column"),
    [
        (
            "v (a, b) as select x from t",
            "View 'v' lists 2 columns (a, b) where its query gives 1 column. List one name per "
            "column",
            16,
        ),
        (
            "v (a) as select * from t",
            "View 'v' lists 1 column (a) where its query gives 3 columns. List one name per column",
            16,
        ),
        (
            "v as select d.a from (select * from t) as d(a, b)",
            "View 'v': the derived table 'd' names 2 columns (a, b) where its query gives 3 "
            "columns. List one name per column",
            55,
        ),
    ],
)
def test_a_list_of_another_width_is_refused_at_the_list(
    view: str, message: str, column: int
) -> None:
    with pytest.raises(SpindleError) as refused:
        parse_program(f"{TABLE}create view {view};").refuse_unrunnable()
    assert refused.value.reason == "ColumnCountMismatch"
    assert refused.value.message == f"{message} (line 2, column {column})"
    assert (refused.value.details["line"], refused.value.details["column"]) == (2, column)


def test_rows_of_values_of_different_widths_are_refused_at_the_row() -> None:
    with pytest.raises(SpindleError) as refused:
        parse_program(f"{TABLE}create view v as values (1, 2),\n  (3);")
    assert refused.value.reason == "InvalidProgram"
    assert "the first has 2 values, this one 1" in refused.value.message
    assert (refused.value.details["line"], refused.value.details["column"]) == (3, 4)


def test_a_reader_sees_the_listed_names() -> None:
    """The column check reads a view's columns as listed: `w` reading `v.n` is fine, and
    reading the query's own name `x` is an unknown column."""
    program = parse_program(
        f"{TABLE}create view v (n) as select x from t;\ncreate view w as select n from v;"
    )
    program.refuse_unrunnable()
    with pytest.raises(SpindleError) as unknown:
        parse_program(
            f"{TABLE}create view v (n) as select x from t;\ncreate view w as select x from v;"
        ).refuse_unrunnable()
    assert unknown.value.reason == "UnknownColumn"
