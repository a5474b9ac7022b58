"""The plan's maintenance decision per view: query in, mode and reason out (golden table)."""

from __future__ import annotations

import pytest

from spindle.plan.maintenance import Maintenance, Mode, maintenance, maintenance_of
from spindle.program import parse_program

TABLES = "create table t1 (id bigint, k int, v int);\ncreate table t2 (k int, label varchar);\n"

INCREMENTAL = Maintenance(Mode.INCREMENTAL)


SETS = "ROLLUP, CUBE or GROUPING SETS"


def recompute(reason: str) -> Maintenance:
    return Maintenance(Mode.RECOMPUTE, reason)


CASES: tuple[tuple[str, Maintenance], ...] = (
    ("select id, v * 2 as v2 from t1 where v > 3", INCREMENTAL),
    ("select a.id, b.label from t1 a join t2 b on a.k = b.k", INCREMENTAL),
    ("select a.id, b.label from t1 a, t2 b where a.k = b.k", INCREMENTAL),
    ("select a.id, b.label from t1 a left join t2 b on a.k = b.k", INCREMENTAL),
    ("select a.id, b.label from t1 a left outer join t2 b on a.k = b.k and b.k > 1", INCREMENTAL),
    (
        "select b.label, count(a.id) as n, max(a.v) as hi from t2 b left join t1 a "
        "on a.k = b.k group by b.label",
        INCREMENTAL,
    ),
    ("select k, count(*) as n, sum(v) as s, avg(v) as m from t1 group by k", INCREMENTAL),
    ("select distinct k from t1", INCREMENTAL),
    ("select k from t1 union all select k from t2", INCREMENTAL),
    (
        "select a.id from t1 a left join t2 b on a.k = b.k join t1 c on c.id = a.id",
        recompute("a LEFT JOIN among other joins"),
    ),
    ("select a.id from t1 a right join t2 b on a.k = b.k", recompute("RIGHT JOIN")),
    ("select a.id from t1 a full outer join t2 b on a.k = b.k", recompute("FULL OUTER JOIN")),
    ("select k, row_number() over (order by id) as r from t1", recompute("a window function")),
    ("select k, count(*) as n from t1 group by k having count(*) > 1", recompute("HAVING")),
    ("select k, count(*) as n from t1 group by rollup(k)", recompute(SETS)),
    ("select k, count(*) as n from t1 group by cube(k)", recompute(SETS)),
    ("select k, count(*) as n from t1 group by grouping sets ((k), ())", recompute(SETS)),
    ("select k, count(*) as n from t1 group by k with rollup", recompute(SETS)),
    (
        "select window(ts, '1 hour') as w, count(*) as n from t1 group by window(ts, '1 hour')",
        recompute("a time window (WINDOW, SESSION_WINDOW)"),
    ),
    (
        "select window(ts, '1 hour').start as s, count(*) as n from t1 "
        "group by window(ts, '1 hour').start",
        recompute("a time window (WINDOW, SESSION_WINDOW)"),
    ),
    ("select count(distinct k) as n from t1", recompute("COUNT(DISTINCT ...)")),
    ("select k from t1 union select k from t2", recompute("UNION (without ALL)")),
    ("select k, stddev(v) as sd from t1 group by k", recompute("the aggregate STDDEV")),
    # Spark's own aggregates that sqlglot does not know: the runtime recomputed them while the
    # plan (and the status) said incremental
    (
        "select k, try_sum(v) as s, count(*) as n from t1 group by k",
        recompute("the aggregate TRY_SUM"),
    ),
    ("select k, every(v > 1) as e from t1 group by k", recompute("the aggregate EVERY")),
    ("select k, any(v > 1) as e from t1 group by k", recompute("the aggregate ANY")),
    ("select k from t1 where k = any (select k from t2)", recompute("a subquery")),
    ("select label from t2 where label like any ('a%', 'b%')", INCREMENTAL),
    # maintained as if COUNT(x) (a row with x set and y NULL counted), and the first step of
    # GROUP BY ALL or of a FILTER over a group key failed the driver
    ("select k, count(id, v) as c from t1 group by k", recompute("COUNT of several arguments")),
    ("select k, count(*) as c, sum(v) as s from t1 group by all", recompute("GROUP BY ALL")),
    (
        "select k, count(*) filter (where k > 1) as c from t1 group by k",
        recompute("an aggregate's FILTER (WHERE ...)"),
    ),
    # a row's delete must carry the values its insert had: with these it did not (a later
    # "now", another draw), and rows stayed in the view for good; OFFSET skipped rows of every
    # change, and TABLESAMPLE sampled only the first step
    *(
        (f"select id, {call} as x from t1", recompute("a non-deterministic function"))
        for call in (
            "rand()",
            "randn()",
            "uniform(1, 2)",
            "randstr(3)",
            "uuid()",
            "now()",
            "curdate()",
            "current_timestamp",
            "localtimestamp()",
            "current_time()",
            "unix_timestamp()",
            "monotonically_increasing_id()",
            "spark_partition_id()",
            "input_file_name()",
            "base64(aes_encrypt(cast(v as string), '0000111122223333'))",  # a random IV
            "try_aes_encrypt(cast(v as string), '0000111122223333')",
        )
    ),
    *(
        (f"select id, {value} as x from t1", recompute(f"a date relative to now ('{word}')"))
        for value, word in (
            ("timestamp 'now'", "now"),
            ("date 'today'", "today"),
            ("cast(' Yesterday ' as date)", "Yesterday"),
            ("try_cast('tomorrow' as timestamp)", "tomorrow"),
        )
    ),
    ("select id, date '2024-01-01' as x from t1", INCREMENTAL),
    ("select id from t1 where cast(k as string) = 'today'", INCREMENTAL),  # only a string
    (
        "select id from t1 where v > unix_timestamp() - 60",
        recompute("a non-deterministic function"),
    ),
    ("select id, unix_timestamp(ts) as u from t1", INCREMENTAL),
    ("select id from t1 offset 2", recompute("OFFSET")),
    ("select id from t1 tablesample (10 percent)", recompute("TABLESAMPLE")),
    ("select id from t1 fetch first 2 rows only", recompute("FETCH FIRST")),  # was per change
)


@pytest.mark.parametrize(("query", "expected"), CASES, ids=[q for q, _ in CASES])
def test_each_view_is_maintained_as_the_plan_says(query: str, expected: Maintenance) -> None:
    program = parse_program(f"{TABLES}create view v as {query};\n")
    assert maintenance(program.views["v"]) == expected


def test_a_function_whose_body_recomputes_makes_its_callers_recompute() -> None:
    """The runtime inlines a function's body and recomputed such a view, while the plan (and
    the status) said incremental."""
    program = parse_program(
        "create function jitter(x int) returns double as x + rand();\n"
        "create function twice(x int) returns double as jitter(x) * 2;\n"
        "create function plain(x int) returns int as x + 1;\n"
        f"{TABLES}create view v as select id, twice(v) as j from t1;\n"
        "create view w as select id, plain(v) as p from t1;\n"
    )
    views = maintenance_of(program)
    assert views["v"] == recompute("a non-deterministic function (in function jitter)")
    assert views["w"] == INCREMENTAL
