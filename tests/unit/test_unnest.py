"""UNNEST in FROM or a JOIN: what Spindle writes for Spark (`LATERAL VIEW EXPLODE(a) x AS e`),
and what it refuses at planning because sqlglot wrote it otherwise than it means
(`program.writable`): an UNNEST without a name for its column was dropped from the query
(each row counted once, not once per element), WITH ORDINALITY was written as a name too many
(Spark's UDTF_ALIAS_NUMBER_MISMATCH after approval), a LEFT JOIN or an ON condition was
dropped. Its arguments, and the names it gives, are checked as columns (`program.columns`)."""

from __future__ import annotations

import pytest

from spindle.program import parse_program
from spindle.runtime.translate import view_sql
from tests.unit.test_program import refusal

TABLE = "create table t (id bigint, name varchar);\n"
SCHEMAS = {"t": {"id": "BIGINT", "name": "STRING"}}
COLUMN = len("create view v as ") + 1
"""The column a view's query starts at."""
SPLIT = "SPLIT(`t`.`name`, CONCAT('\\\\Q', ',', '\\\\E'))"


def spark(query: str) -> str:
    program = parse_program(f"{TABLE}create view v as {query};")
    program.refuse_unrunnable()
    return view_sql(program.views["v"], program, SCHEMAS).sql


@pytest.mark.parametrize(
    ("query", "written"),
    [
        (
            "select id, count(*) as c from t, unnest(split(name, ',')) as x(e) group by id",
            "SELECT `t`.`id` AS `id`, COUNT(*) AS `c` FROM `t` AS `t` "
            f"LATERAL VIEW EXPLODE({SPLIT}) x AS `e` GROUP BY `t`.`id`",
        ),
        (
            "select id, x.e from t cross join unnest(split(name, ',')) as x(e) where x.e <> ''",
            "SELECT `t`.`id` AS `id`, `x`.`e` AS `e` FROM `t` AS `t` "
            f"LATERAL VIEW EXPLODE({SPLIT}) x AS `e` WHERE `x`.`e` <> ''",
        ),
        (  # ON TRUE: a cross join
            "select id, e from t join unnest(split(name, ',')) as x(e) on true",
            "SELECT `t`.`id` AS `id`, `x`.`e` AS `e` FROM `t` AS `t` "
            f"LATERAL VIEW EXPLODE({SPLIT}) x AS `e`",
        ),
        (
            "select e from unnest(array[1, 2]) as x(e)",
            "SELECT `x`.`e` AS `e` FROM EXPLODE(ARRAY(1, 2)) AS `x`(`e`)",
        ),
    ],
)
def test_an_unnest_naming_its_column_is_written_as_a_lateral_view(query: str, written: str) -> None:
    assert spark(query) == written


def test_a_select_lists_unnest_is_spark_s_explode() -> None:
    assert "EXPLODE(SPLIT(" in spark("select id, unnest(split(name, ',')) as e from t")


UNNEST = "View 'v' uses UNNEST without a name for its column"
ORDINALITY = "View 'v' uses UNNEST ... WITH ORDINALITY, which Spindle cannot write for Spark"


@pytest.mark.parametrize(
    ("query", "said", "at"),
    [
        # written for Spark as `FROM t`: each row counted once, not once per element
        (
            "select id, count(*) as c from t, unnest(split(name, ',')) as e group by id",
            UNNEST,
            "unnest",
        ),
        ("select id from t, unnest(split(name, ','))", UNNEST, "unnest"),
        ("select id from t cross join unnest(split(name, ',')) e", UNNEST, "unnest"),
        # written `LATERAL VIEW EXPLODE(...) x AS e, o`: UDTF_ALIAS_NUMBER_MISMATCH in Spark
        (
            "select id, e, o from t cross join unnest(split(name, ',')) with ordinality as x(e, o)",
            ORDINALITY,
            "with ordinality",
        ),
        (  # written POSEXPLODE(...) x AS pos, e: a column more, numbered from 0
            "select id, e from t, unnest(split(name, ',')) with ordinality as x(e)",
            ORDINALITY,
            "with ordinality",
        ),
        (  # BigQuery's, numbered from 0, which sqlglot reads as WITH ORDINALITY
            "select id, e from t, unnest(split(name, ',')) as x(e) with offset as o",
            "View 'v' uses UNNEST ... WITH OFFSET",
            "with offset",
        ),
        # the join's side and condition were dropped: an inner join of every element
        (
            "select id, e from t left join unnest(split(name, ',')) as x(e) on true",
            "View 'v' uses LEFT JOIN of UNNEST, which Spindle writes for Spark as an inner join",
            "unnest",
        ),
        (
            "select id, e from t join unnest(split(name, ',')) as x(e) on e > 'a'",
            "View 'v' joins UNNEST ON a condition, which Spindle cannot write for Spark (the "
            "condition was dropped): write CROSS JOIN UNNEST(a) AS x(e), and the condition in "
            "WHERE",
            "unnest",
        ),
        (
            "select id, e from t, unnest(split(name, ','), split(name, ';')) as x(e)",
            "View 'v' uses UNNEST of 2 arrays with 1 names for their columns",
            "unnest",
        ),
    ],
)
def test_an_unnest_spark_would_run_otherwise_is_refused_at_its_keyword(
    query: str, said: str, at: str
) -> None:
    refused_at(query, "UnsupportedSql", said, at)


def refused_at(query: str, reason: str, said: str, at: str) -> None:
    """The view `query` is refused for `reason`, the message starting `said`, at `at`."""
    refused = refusal(parse_program(f"{TABLE}create view v as {query};"))
    assert (refused.reason, refused.message[: len(said)]) == (reason, said)
    assert (refused.details["line"], refused.details["column"]) == (2, COLUMN + query.index(at))


def test_the_refusal_says_how_to_name_the_column() -> None:
    refused = refusal(parse_program(f"{TABLE}create view v as select id from t, unnest(name);"))
    assert "name it, UNNEST(a) AS x(e), and read x.e" in refused.message


@pytest.mark.parametrize(
    ("query", "name", "at"),
    [
        ("select id, e from t, unnest(nosuch) as x(e)", "nosuch", "nosuch"),
        ("select id, e from t, unnest(split(nosuch, ',')) as x(e)", "nosuch", "nosuch"),
        ("select id, f from t, unnest(split(name, ',')) as x(e)", "f", "f from"),
    ],
)
def test_an_unnests_arguments_and_the_columns_it_names_are_checked(
    query: str, name: str, at: str
) -> None:
    refused_at(query, "UnknownColumn", f"View 'v' reads column '{name}', which none of what", at)


def test_a_view_reading_an_unnesting_view_knows_its_columns() -> None:
    refused = refusal(
        parse_program(
            f"{TABLE}create view v as select * from t, unnest(split(name, ',')) as x(e);\n"
            "create view w as select id, ee from v;"
        )
    )
    assert refused.reason == "UnknownColumn" and "Did you mean 'e'?" in refused.message


@pytest.mark.parametrize(
    "query",
    [
        "select id from t where id in (select * from unnest(array[1, 2, 3]))",
        "select id, (select count(*) from unnest(split(name, ','))) as c from t",
        "with offset as (select id from t) select id from offset",
        "with ordinality as (select id from t) select id from ordinality",
    ],
)
def test_an_unnest_alone_in_its_from_and_a_cte_named_offset_plan(query: str) -> None:
    """`FROM UNNEST(a)` with no other source is Spark's `FROM EXPLODE(a)`, as written; a CTE
    named `offset` is not `UNNEST ... WITH OFFSET` (both were refused once)."""
    program = parse_program(f"{TABLE}create view v as {query};")
    program.refuse_unrunnable()
