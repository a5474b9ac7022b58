"""A view with a column list, and a view of VALUES, compute what Spark's own views of the same
text compute: the same column names, types and rows (`program.column_lists`).

Before, a column list was ignored: `CREATE VIEW v (n, s) AS SELECT x, 'a'` stored the columns
`x` and `a`, silently, and a view of VALUES was refused.
"""

from __future__ import annotations

from typing import Any

import pytest

from spindle.program import parse_program
from spindle.runtime.translate import view_sql
from tests.integration.test_calls_as_written import session_over

TABLE = "create table src (k int, x int, s varchar);\n"
ROWS = [(1, 10, "a"), (1, -3, None), (2, None, "bc"), (3, 0, "")]
VIEWS = [
    "v (n, label) as select x, s from src",
    "v (key, total) as select k, sum(x) from src group by k",
    "v (key, total) as select k as kk, sum(x) as t from src group by kk having t > 0",
    "v (a, b, c) as select * from src",
    "v (z) as select x from src union all select k from src",
    "v (key, n) as select k, count(*) as n from src group by k order by n desc, k",
    "v as values (1, 'a'), (2, null)",
    "v (n, label) as values (1, 'a'), (2, 'b')",
    "v (n, label) as select * from (values (1, 'a')) as t(p, q)",
    # a name ORDER BY reads that the list gives another column (it sorted by the output)
    "v (x, s) as select s, x from src where x is not null order by x limit 2",
    "v (n, w) as select x + 1 as z, z * 2 as w2 from src",  # a lateral alias
    "v (n) as select x from src union all select k from src order by x limit 3",
]


@pytest.fixture(scope="module")
def source(spark: Any) -> tuple[Any, dict[str, dict[str, str]]]:
    return session_over(spark, TABLE, ROWS)


@pytest.mark.parametrize("view", VIEWS)
def test_a_views_columns_are_named_as_sparks_own_view_names_them(
    source: tuple[Any, dict[str, dict[str, str]]], view: str
) -> None:
    session, schemas = source
    program = parse_program(f"{TABLE}create view {view};")
    translated = session.sql(view_sql(program.views["v"], program, schemas).sql)
    session.sql(f"create or replace temporary view {view}")
    spark = session.table("v")
    assert [(f.name, f.dataType) for f in translated.schema] == [
        (f.name, f.dataType) for f in spark.schema
    ]
    assert sorted(map(tuple, translated.collect()), key=repr) == sorted(
        map(tuple, spark.collect()), key=repr
    )
