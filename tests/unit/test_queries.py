"""Ad-hoc queries are single read-only queries of the pipeline's materialized relations,
refused otherwise before anything reaches Spark or leaves the user's machine."""

from __future__ import annotations

import datetime
import json
from decimal import Decimal
from typing import Any

import pytest

from spindle.cli.cluster_query import driver_of
from spindle.cli.kubectl_plugin import main as kubectl_spindle
from spindle.errors import SpindleError
from spindle.program import parse_program
from spindle.program.queries import (
    MAX_QUERY_ROWS,
    check_query,
    plain,
    query_failed,
    row_limit,
)

RELATIONS = {"grades", "avg_grade_enriched", "Mixed"}

ACCEPTED = [
    ("SELECT * FROM avg_grade_enriched ORDER BY student_name, class", None),
    ("select count(*) as n from GRADES;", "SELECT COUNT(*) AS n FROM GRADES"),
    ('SELECT * FROM "Mixed"', "SELECT * FROM `Mixed`"),
    ("WITH g AS (SELECT * FROM grades) SELECT * FROM g UNION ALL SELECT * FROM grades", None),
    ("SELECT 'a;b' AS s FROM grades WHERE x IN (SELECT x FROM grades) -- ; DROP", None),
    ("TABLE grades", "SELECT * FROM grades"),
    # calls as written, as in a view (sqlglot wrote a DATE_TRUNC of a date, and LIKE swapped)
    (
        "select date_trunc('hour', d) as h, like(x, 'a%') as l from grades",
        "SELECT DATE_TRUNC('HOUR', d) AS h, x LIKE 'a%' AS l FROM grades",
    ),
]

NOT_READ_ONLY = [
    "INSERT INTO grades VALUES (1, 'algebra', 97, '2025-09-15')",
    "DELETE FROM grades",
    "UPDATE grades SET grade = 0",
    "DROP TABLE grades",
    "CREATE TABLE t AS SELECT * FROM grades",
    "SELECT * INTO t FROM grades",
    "SELECT 1; DROP TABLE grades",
    "SELECT 1 FROM grades; SELECT 2 FROM grades",
    "SET spark.sql.ansi.enabled = false",
    "SHOW TABLES",
    "CACHE TABLE grades",
    "SELECT reflect('java.lang.System', 'exit', 0)",
    "SELECT java_method('java.lang.System', 'exit', 0)",
    "",
]

OUTSIDE = [
    "SELECT * FROM students",  # not materialized, or not the pipeline's
    "SELECT * FROM default.grades",
    "SELECT * FROM range(10)",
    "SELECT * FROM read_files('/var/run/secrets/kubernetes.io/serviceaccount/token')",
    "SELECT * FROM text.`/etc/passwd`",
    "SELECT * FROM mixed",  # a quoted name keeps its case
]


@pytest.mark.parametrize(("sql", "spark_sql"), ACCEPTED)
def test_a_read_only_query_of_materialized_relations_passes(
    sql: str, spark_sql: str | None
) -> None:
    checked = check_query(sql, relations=RELATIONS)
    if spark_sql is not None:
        assert checked.spark_sql == spark_sql  # Spark runs the checked tree, not the text


@pytest.mark.parametrize("sql", NOT_READ_ONLY)
def test_anything_but_one_query_is_refused_as_not_read_only(sql: str) -> None:
    with pytest.raises(SpindleError) as refused:
        check_query(sql)  # the client's check: no relations known
    assert refused.value.reason == "QueryNotReadOnly"
    assert "read-only query" in refused.value.message
    assert "not 0 statements" not in refused.value.message  # an empty query: "not an empty one"


@pytest.mark.parametrize("sql", OUTSIDE)
def test_reading_anything_but_the_pipelines_relations_is_refused(sql: str) -> None:
    with pytest.raises(SpindleError) as refused:
        check_query(sql, relations=RELATIONS)
    assert refused.value.reason == "InvalidQuery"
    assert "Mixed, avg_grade_enriched, grades" in refused.value.message or str(
        refused.value.message
    ).startswith("Syntax error: ")


def test_kubectl_spindle_query_refuses_a_non_query_before_anything_is_sent(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The kubeconfig does not exist: reaching the API server would fail with another reason.
    argv = ["--kubeconfig", "/nonexistent", "query", "grades", "DROP TABLE grades", "--json"]
    assert kubectl_spindle(argv) == 1
    assert json.loads(capsys.readouterr().out)["error_code"] == "QueryNotReadOnly"


@pytest.mark.parametrize(
    ("status", "phase"),
    [
        ({"phase": "AwaitingApproval"}, "AwaitingApproval"),
        ({"phase": "Stopped", "driverPod": {"name": "grades-g1-driver"}}, "Stopped"),
        ({}, "Pending"),
    ],
)
def test_a_pipeline_without_a_serving_driver_is_named_with_its_phase(
    status: dict[str, object], phase: str
) -> None:
    with pytest.raises(SpindleError) as refused:
        driver_of({"metadata": {"name": "grades"}, "status": status})
    assert refused.value.reason == "PipelineNotRunning"
    assert f"grades is {phase}, not Running" in refused.value.message
    running = {"phase": "Running", "driverPod": {"name": "grades-g1-driver"}}
    assert driver_of({"metadata": {"name": "grades"}, "status": running}) == "grades-g1-driver"


@pytest.mark.parametrize("limit", [0, -1, MAX_QUERY_ROWS + 1, True, 2.5, "10"])
def test_a_row_limit_outside_one_to_the_most_an_answer_holds_is_refused(limit: object) -> None:
    with pytest.raises(SpindleError) as refused:
        row_limit(limit)
    assert refused.value.reason == "InvalidQuery"
    assert f"at most {MAX_QUERY_ROWS:,} rows" in refused.value.message
    assert row_limit(1) == 1 and row_limit(MAX_QUERY_ROWS) == MAX_QUERY_ROWS


MISTAKES = [
    # (query, what `spindle query` says: what a program says of the same SQL, located in the query)
    ("select (1 from grades", "Syntax error: Expecting ) (line 1, column 11)"),
    (
        "select * from join grades",
        "Syntax error: Expected table name but got 'join' (line 1, column 15)",
    ),
    (
        "select * from",
        "Syntax error: Expected table name but got the end of the statement (line 1, column 10)",
    ),
    (
        "\n  -- the best first\n  select * from grades where (grade > 1",
        "Syntax error: Expecting ) (line 3, column 39)",
    ),
    (  # sqlglot: "Required keyword: 'expression' missing for <class '...Add'>"
        "select grade + from grades",
        "Syntax error: '+' is incomplete: something is missing before 'from' (line 1, column 16)",
    ),
    (
        "select * from grades where",
        "Syntax error: WHERE is incomplete: something is missing after it (line 1, column 22)",
    ),
]


@pytest.mark.parametrize(("sql", "expected"), MISTAKES)
def test_a_query_that_does_not_parse_says_so_as_a_program_would(sql: str, expected: str) -> None:
    with pytest.raises(SpindleError) as refused:
        check_query(sql, relations=RELATIONS)
    with pytest.raises(SpindleError) as in_program:
        parse_program(f"create view v as {sql.strip()};")
    assert refused.value.reason == "InvalidQuery"
    assert refused.value.message == expected
    assert expected.split(" (line ")[0] == in_program.value.message.split(" (line ")[0]
    line, column = (int(n) for n in expected.rstrip(")").split("(line ")[1].split(", column "))
    assert refused.value.details == {"line": line, "column": column, "query": sql}


def test_a_query_spark_cannot_run_lists_the_relations_only_when_one_is_unknown() -> None:
    column = query_failed(
        "select nope from grades",
        "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with "
        "name `nope` cannot be resolved. SQLSTATE: 42703",
        RELATIONS,
    )
    assert column.reason == "InvalidQuery"
    assert column.message.startswith("The query cannot run: [UNRESOLVED_COLUMN.")
    assert "Only materialized" not in column.message and "avg_grade_enriched" not in column.message
    relation = query_failed(
        "select * from t",
        "[TABLE_OR_VIEW_NOT_FOUND] The table or view `t` cannot be found. SQLSTATE: 42P01",
        RELATIONS,
    )
    assert relation.message.endswith(
        "Only materialized tables and views can be queried (Mixed, avg_grade_enriched, grades)."
        " (line 1, column 15)"
    )


def test_a_query_spark_cannot_run_is_located_in_the_query_as_written() -> None:
    """Spark's `line 1 pos 11` was in the SQL Spindle wrote for it, not the user's query."""
    refused = query_failed(
        "SELECT\n  id,\n  nme\nFROM students",
        "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with "
        "name `nme` cannot be resolved. Did you mean one of the following? [`id`, `name`]. "
        "SQLSTATE: 42703; line 1 pos 11;",
        RELATIONS,
    )
    assert (refused.details["line"], refused.details["column"]) == (3, 3)
    assert "pos 11" not in refused.message and ";." not in refused.message
    assert refused.message.endswith("SQLSTATE: 42703. (line 3, column 3)")


@pytest.mark.parametrize(
    ("names", "instead"),
    [(["avg", "n", "avg"], "AS avg_3"), (["count(1)", "count(1)"], "AS c2")],
)
def test_an_answer_with_two_columns_of_one_name_says_how_to_name_them(
    names: list[str], instead: str
) -> None:
    """Each row is an object keyed by column name: one would hide the other."""
    from spindle.program.queries import answer_columns

    with pytest.raises(SpindleError) as refused:
        answer_columns(names, sql="select ...")
    assert refused.value.reason == "InvalidQuery"
    assert f"two columns named {names[-1]!r}" in refused.value.message
    assert f"`... {instead}`" in refused.value.message
    assert answer_columns(["avg", "n"], sql="select ...") == ("avg", "n")


@pytest.mark.parametrize(
    ("sql", "said", "column"),
    [
        ("SELECT id FROM students s WHERE s.nme > 1", "`s`.`nme`", 35),  # not the alias
        ("SELECT 'nme' AS label, nme FROM students", "`nme`", 24),  # not the string
        ("SELECT `nme` FROM students", "`nme`", 9),  # quoted as Spark quotes it
        ("SELECT id, date FROM students", "`date`", 12),  # a keyword's name
    ],
)
def test_the_name_spark_could_not_resolve_is_found_where_the_query_has_it(
    sql: str, said: str, column: int
) -> None:
    refused = query_failed(
        sql,
        f"[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with "
        f"name {said} cannot be resolved. SQLSTATE: 42703",
        RELATIONS,
    )
    assert (refused.details["line"], refused.details["column"]) == (1, column)


def test_a_call_spark_cannot_be_sent_is_invalid_at_its_position() -> None:
    """The generator's Python error reached the user: "invalid literal for int() with base 10:
    'x'", with no line or column."""
    with pytest.raises(SpindleError) as invalid:
        check_query(
            "SELECT name,\n  date_add(name, 'x') AS d FROM students", relations={"students"}
        )
    assert invalid.value.reason == "InvalidQuery"
    assert (invalid.value.details["line"], invalid.value.details["column"]) == (2, 3)
    assert "DATE_ADD" in invalid.value.message


@pytest.mark.parametrize(
    "query",
    [
        "SELECT posexplode(split(name, ' ')) FROM students",
        "SELECT initcap(name) FROM students",
    ],
)
def test_what_only_views_may_not_do_a_query_may(query: str) -> None:
    assert check_query(query, relations={"students"}).spark_sql


@pytest.mark.parametrize("where", ["before", "after"])
def test_kubectl_spindle_takes_its_connection_flags_before_or_after_the_command(
    where: str,
) -> None:
    from spindle.cli.kubectl_plugin import build_parser

    flags = ["--kubeconfig", "/k", "--context", "c", "-n", "ns"]
    command = ["query", "grades", "SELECT 1"]
    argv = flags + command if where == "before" else command + flags
    args = build_parser().parse_args(argv)
    assert (args.kubeconfig, args.context, args.namespace) == ("/k", "c", "ns")


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (Decimal("-1E-10"), "-0.0000000001"),
        (Decimal("0E-8"), "0.00000000"),
        (Decimal("97.00"), "97.00"),
        (float("nan"), "NaN"),
        (float("-inf"), "-Infinity"),
        (1.5, 1.5),
        (datetime.timedelta(days=1), "P1D"),
        (datetime.timedelta(seconds=-1), "-PT1S"),
        (datetime.timedelta(0), "PT0S"),
        (datetime.timedelta(days=1, hours=2, minutes=3, seconds=4.5), "P1DT2H3M4.5S"),
        ([datetime.timedelta(minutes=5), None], ["PT5M", None]),
    ],
)
def test_an_answers_values_are_json_as_written_without_exponents(value: Any, shown: Any) -> None:
    """`--json` printed DECIMAL as `-1.00E-10`, wrote bare NaN (not JSON), and failed on an
    interval as "a Spindle bug"."""
    assert plain(value) == shown
    json.dumps(plain(value), allow_nan=False)


def test_a_port_forward_nobody_answers_is_given_up_after_the_timeout() -> None:
    """The WebSocket handshake had no timeout: an API server (or node) that accepted the
    connection and never answered held `kubectl spindle query` for ever."""
    import socket
    import threading

    from kubernetes import client

    from spindle.cli.cluster_query import forward_query

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        configuration = client.Configuration()
        configuration.host = f"http://127.0.0.1:{silent.getsockname()[1]}"
        api = client.ApiClient(configuration)
        raised: list[BaseException] = []

        def ask() -> None:
            try:
                forward_query(api, namespace="ns", pod="p", sql="SELECT 1", timeout=0.5, limit=1)
            except BaseException as error:
                raised.append(error)

        asking = threading.Thread(target=ask, daemon=True)
        asking.start()
        asking.join(60)  # without the timeout, it never ends
        assert not asking.is_alive(), "the query waited for the handshake for ever"
    (error,) = raised
    assert isinstance(error, SpindleError) and error.reason == "QueryServerUnreachable"
    assert "was not set up within 0.5 s" in error.message
