"""A view's column references are checked against what it reads (`program.columns`): a
misspelt column is refused at `diff`, `plan`, `apply` and in the operator, at its own line and
column, instead of failing the driver after approval. The cases are in `column_cases.py`; the
integration test holds each verdict against Spark's analyzer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlglot

from spindle.api import Phase
from spindle.cli.main import main
from spindle.errors import SpindleError
from spindle.lifecycle import decide
from spindle.program import parse_program
from spindle.program.dialect import DIALECT
from spindle.program.grouping import is_aggregate
from spindle.program.spark_functions import SPARK_AGGREGATES
from tests.unit.column_cases import CASES, TABLES, Case
from tests.unit.test_lifecycle import checkpoint, observe, spec
from tests.unit.test_program import refusal

VIEW_LINE = TABLES.count("\n") + 2  # the query's line: after the tables and `create view v as`


def program_of(query: str) -> str:
    return f"{TABLES}create view v as\n{query};\n"


@pytest.mark.parametrize("case", CASES, ids=[c.query for c in CASES])
def test_a_column_reference_is_checked_against_what_the_view_reads(case: Case) -> None:
    program = parse_program(program_of(case.query))  # parsing alone never checks columns
    if case.reason is None:
        program.refuse_unrunnable()
        return
    with pytest.raises(SpindleError) as raised:
        program.refuse_unrunnable()
    error = raised.value
    where = (error.details["line"], error.details["column"])
    assert (error.reason, where) == (case.reason, (VIEW_LINE, case.query.index(case.at) + 1))
    assert error.details["view"] == "v"
    assert f"(line {VIEW_LINE}, column {where[1]})" in error.message


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("select t.scroe from t", "'t' has no column 'scroe'. Did you mean 'score'?"),
        ("select nme from t", "none of what it reads has ('t'). Did you mean 'name'?"),
        ("select s.nme from t as s", "'t' (as s) has no column 'nme'. Did you mean 'name'?"),
        ("select x.id from t as y", "nothing it reads is named 'x' (it reads y)"),
        ("select id from t, u", "'t' and 'u' both have. Qualify it, for example t.id"),
        (  # Spark's double-quoted string is a name in Spindle's SQL (Feldera's, standard)
            'select format_string("%d", id) as f from t',
            "('t'). Double quotes name a column; a string is in single quotes: '%d'.",
        ),
        (  # Feldera's map constructor reads to Spark as a column `map`, subscripted
            "select map['a', id] as m from t",
            "MAP['a', 1] is Feldera's map; Spark's SQL writes it MAP('a', 1).",
        ),
    ],
)
def test_the_message_says_what_to_write(query: str, says: str) -> None:
    with pytest.raises(SpindleError) as raised:
        parse_program(program_of(query)).refuse_unrunnable()
    assert says in raised.value.message


def test_a_reference_is_located_in_its_own_statement() -> None:
    text = (
        "create table t (id int, name varchar);\n\n"
        "-- a comment\n"
        "create view first as select id from t;\n"
        "create view second as\n"
        "  select id,\n"
        "         nmae\n"
        "  from t;\n"
    )
    with pytest.raises(SpindleError) as raised:
        parse_program(text).refuse_unrunnable()
    assert (raised.value.details["line"], raised.value.details["column"]) == (7, 10)
    assert raised.value.details["view"] == "second"


EVENTS = "create table e (ts timestamp, mm varchar, day date, unit varchar);\ncreate view v as\n"


@pytest.mark.parametrize(
    ("query", "at"),
    [
        ("select date_trunc(mm, ts) as m from e", "mm"),
        ('select date_trunc( "Day" , ts) as m from e', '"Day"'),
        ("select (select max(date_trunc(DAY, x.ts)) from e x where x.mm = e.mm) from e", "DAY"),
    ],
)
def test_a_date_trunc_unit_written_as_a_columns_name_is_refused(query: str, at: str) -> None:
    """Spark reads a name as DATE_TRUNC's unit as a column; Spindle reads the unit word (sqlglot
    writes `'MM'`): where both exist, the view would compute other values than Spark would."""
    with pytest.raises(SpindleError) as raised:
        parse_program(f"{EVENTS}{query};\n").refuse_unrunnable()
    error = raised.value
    assert error.reason == "AmbiguousColumn"
    assert (error.details["line"], error.details["column"]) == (3, query.index(at) + 1)
    name = at.strip('"')
    assert f"DATE_TRUNC('{name.lower()}', ...) for the unit" in error.message
    assert f".{name}, ...) to truncate by the column's values" in error.message


@pytest.mark.parametrize(
    "query",
    [
        "select date_trunc('mm', ts) as m from e",
        "select date_trunc(e.mm, ts) as m from e",  # the column's values, qualified
        "select date_trunc(hour, ts) as m from e",  # no column of that name
        "select date_trunc('day', day) as m from e",
        "select date_trunc(x.unit, ts) as m from e as x",
    ],
)
def test_a_date_trunc_unit_that_is_one_thing_passes(query: str) -> None:
    parse_program(f"{EVENTS}{query};\n").refuse_unrunnable()


def test_the_specs_program_is_refused_and_a_checkpointed_one_still_reads() -> None:
    bad = program_of("select scroe from t")
    refused = decide(observe(spec=spec(bad)))
    assert (refused.phase, refused.reason) == (Phase.FAILED, "UnknownColumn")
    kept = decide(observe(spec=spec(program_of("select score from t")), checkpoint=checkpoint(bad)))
    assert (kept.phase, kept.reason) == (Phase.AWAITING_APPROVAL, "AwaitingApproval")


def diff_refusal(tmp_path: Path, capsys: pytest.CaptureFixture[str], *, good: str, bad: str) -> str:
    """What `spindle diff` says of `bad` as the new program (it exits 1); as the old one it
    diffs (exit 0): a checkpointed program is never refused."""
    (tmp_path / "bad.sql").write_text(bad)
    (tmp_path / "good.sql").write_text(good)
    assert main(["diff", str(tmp_path / "bad.sql"), str(tmp_path / "good.sql")]) == 0
    capsys.readouterr()
    assert main(["diff", str(tmp_path / "good.sql"), str(tmp_path / "bad.sql")]) == 1
    return capsys.readouterr().err


def test_diff_refuses_the_new_program_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good, bad = program_of("select score from t"), program_of("select scroe from t")
    err = diff_refusal(tmp_path, capsys, good=good, bad=bad)
    assert "UnknownColumn" in err and f"line {VIEW_LINE}, column 8" in err


def test_a_program_spark_has_run_is_not_second_guessed() -> None:
    """After an upgrade, a running pipeline whose checkpoint holds the spec's very program keeps
    running even if the check would refuse it: Spark has analyzed it already."""
    ran = program_of("select scroe from t")
    kept = decide(observe(spec=spec(ran), checkpoint=checkpoint(ran)))
    assert kept.phase is not Phase.FAILED and kept.reason != "UnknownColumn"


@pytest.mark.parametrize("name", sorted(SPARK_AGGREGATES))
def test_each_of_sparks_aggregates_is_read_as_one(name: str) -> None:
    """A call of any of Spark's aggregate functions, as sqlglot parses it, counts as an
    aggregate: one read as a scalar would have its columns refused as ungrouped."""
    calls = []
    for arguments in ("score", "score, 0.5", "score, 0.5, 1", "score, 0.5, 1, 2"):
        try:
            tree = sqlglot.parse_one(f"select {name}({arguments}) from t", dialect=DIALECT)
        except sqlglot.errors.ParseError:
            continue  # not this many arguments
        calls.append(tree.selects[0])
    assert calls and all(is_aggregate(call) for call in calls)


@pytest.mark.parametrize(
    ("query", "says"),
    [
        (
            "select name, score, count(*) as c from t group by name",
            "neither in its GROUP BY nor inside an aggregate. Add score to the GROUP BY, "
            "aggregate it (for example MAX(score)), or use ANY_VALUE(score)",
        ),
        ("select name, count(*) as c from t", "beside aggregates, without a GROUP BY. Add GROUP"),
    ],
)
def test_an_ungrouped_column_says_how_to_group_it(query: str, says: str) -> None:
    with pytest.raises(SpindleError) as raised:
        parse_program(program_of(query)).refuse_unrunnable()
    assert says in raised.value.message


def test_an_unknown_call_is_one_problem_not_also_an_ungrouped_column() -> None:
    """`avgg(score)` may be an aggregate (it is a typo of one): the column inside it was also
    reported as neither grouped nor aggregated, with advice to group it."""
    refused = refusal(
        parse_program(program_of("select name, avgg(score) as a from t group by name"))
    )
    assert refused.reason == "UnknownFunction"
    assert "problems" not in refused.details, refused.details.get("more")


@pytest.mark.parametrize("output", ["file_output", "delta_table_output"])
def test_a_view_column_named_as_its_outputs_weight_is_refused(output: str) -> None:
    """The output adds `weight` to every row: the view's own column of that name failed every
    write after approval (COLUMN_ALREADY_EXISTS, retried five times as OutputUnwritable)."""
    config = {"path": "/out"} if output == "file_output" else {"uri": "s3://b/out"}
    connectors = json.dumps([{"name": "sink", "transport": {"name": output, "config": config}}])
    program = parse_program(
        "create table t (k varchar);\n"
        f"create view totals with ('connectors' = '{connectors}') as\n"
        "  select k, count(*) as Weight from t group by k;"
    )
    refused = refusal(program)
    assert refused.reason == "DuplicateColumn"
    assert refused.message.startswith(
        "View 'totals' has a column named 'weight', the column its output connector 'sink' adds"
    )
    assert (refused.details["line"], refused.details["column"]) == (3, 13)
    parse_program(
        "create table t (k varchar);\ncreate view v as select k as weight from t;"
    ).refuse_unrunnable()


INSERT_DELETE = {"name": "json", "config": {"update_format": "insert_delete"}}


def weighed_view(*outputs: tuple[str, dict[str, object] | None]) -> str:
    """A view with a column `weight` and one file output per (name, format)."""
    connectors = json.dumps(
        [
            {"name": name, "transport": {"name": "file_output", "config": {"path": f"/{name}"}}}
            | ({"format": fmt} if fmt is not None else {})
            for name, fmt in outputs
        ]
    )
    return (
        "create table t (k varchar);\n"
        f"create view totals with ('connectors' = '{connectors}') as\n"
        "  select k, count(*) as weight from t group by k;"
    )


def test_the_weight_refusal_names_an_output_that_writes_the_column() -> None:
    """It named the first output, an `insert_delete` one that writes no `weight` column."""
    refused = refusal(parse_program(weighed_view(("feed", INSERT_DELETE), ("sink", None))))
    assert refused.reason == "DuplicateColumn" and refused.details["connector"] == "sink"
    assert refused.message.startswith(
        "View 'totals' has a column named 'weight', the column its output connector 'sink' adds"
    )


def test_a_weight_column_is_refused_beside_insert_delete_outputs_too_saying_why() -> None:
    """An `insert_delete` output writes no `weight` column, but each change reaches it with
    one (`runtime.zsets.signed`, the engine's contents `withColumn("weight", ...)`), which it
    reads to put the row under "insert" or "delete": the view's own column was taken for the
    weight and left out of the rows, or its name made ambiguous. The message said the output
    adds the column to each row it writes, which it does not."""
    refused = refusal(parse_program(weighed_view(("feed", INSERT_DELETE))))
    assert refused.reason == "DuplicateColumn" and refused.details["connector"] == "feed"
    assert (
        "the column each change reaches its output connector 'feed' with (+1 for a row "
        'inserted, -1 for one deleted), which it writes as {"insert": row} or {"delete": row}: '
        "the view's own column would be lost from the rows, or the write fail. Give the view's "
        "column another name (... AS weight_1)"
    ) in refused.message
    assert (refused.details["line"], refused.details["column"]) == (3, 13)
