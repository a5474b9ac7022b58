"""A view whose translation to Spark SQL changed since its state was computed is a change.

`DATE_TRUNC('hour', ts)` was written for Spark as `TRUNC(ts, 'HOUR')`, NULL for every row
(`program.spark_calls`). A pipeline whose checkpoint holds state computed that way would,
after an upgrade, go on adding correctly truncated rows to a view of NULLs; instead the plan
reports the view (and what reads it) modified, for the runtime, and its bootstrap recomputes it.
"""

from __future__ import annotations

import datetime

from sqlglot import exp

from spindle.checkpoint.manifest import BootstrapRecord, Manifest, PipelineRef
from spindle.checkpoint.records import next_manifest
from spindle.plan import make_plan
from spindle.program import parse_program
from spindle.program.spark_calls import TRANSLATION_REVISION, as_written, revised_calls

PROGRAM = parse_program(
    """create table events (id int, ts timestamp, name varchar);
create function tag(s varchar) returns varchar as concat_ws('-', s, 'x');
create view hourly as select date_trunc('hour', ts) as hour, count(*) as n from events
  group by date_trunc('hour', ts);
create view busiest as select max(n) as n from hourly;
create view tagged as select tag(name) as t from events;
create view plain as select id, upper(name) as name from events;
create function outer_tag(s varchar) returns varchar as upper(tag(s));
create view nested as select date_trunc('day', date_trunc('hour', ts)) as d from events;
create view wrapped as select outer_tag(name) as t from events;
"""
)


def test_views_computed_by_an_older_translation_are_modified_for_the_runtime() -> None:
    plan = make_plan(old=PROGRAM, new=PROGRAM, old_runtime="v1", runtime="v1", old_translation=0)
    assert {n: c.reasons for n, c in plan.changes.items()} == {
        "hourly": ("runtime",),
        "busiest": ("upstream:hourly",),
        "tagged": ("runtime",),  # the call is in the function it calls
        "nested": ("runtime",),
        "wrapped": ("runtime",),  # in a function that function calls
    }
    assert plan.diff.program_diff.modified_views == (
        "busiest",
        "hourly",
        "nested",
        "tagged",
        "wrapped",
    )
    assert plan.views_to_evaluate == ("hourly", "busiest", "tagged", "nested", "wrapped")
    unchanged = make_plan(old=PROGRAM, new=PROGRAM, old_runtime="v1", runtime="v1")
    assert plan.change_id != unchanged.change_id


def test_state_of_the_current_translation_is_no_change() -> None:
    plan = make_plan(
        old=PROGRAM,
        new=PROGRAM,
        old_runtime="v1",
        runtime="v1",
        old_translation=TRANSLATION_REVISION,
    )
    assert plan.diff.is_empty and not plan.changes


def test_only_calls_written_otherwise_count() -> None:
    query = (
        parse_program(
            "create table t (s varchar, d date); create view v as select "
            "date_trunc('month', d) as m, trunc(d, 'MM') as t, to_char(s) as c, "
            "regexp_extract(s, 'a') as r from t;"
        )
        .views["v"]
        .query
    )
    revised = revised_calls([query], since=0)
    # TO_CHAR without a format and REGEXP_EXTRACT without a group are written as before
    assert [type(c) for c in revised] == [exp.DateTrunc, exp.Trunc]
    assert revised_calls([query], since=TRANSLATION_REVISION) == []
    written = as_written(query).sql(dialect="spark")
    assert "DATE_TRUNC('MONTH', d)" in written and "TRUNC(d, 'MM')" in written
    nested = PROGRAM.views["nested"].query
    assert "DATE_TRUNC('DAY', DATE_TRUNC('HOUR', ts))" in as_written(nested).sql(dialect="spark")


def test_a_step_keeps_its_parents_translation_and_a_bootstrap_records_the_current_one() -> None:
    def manifest(parent: Manifest | None, bootstrap: BootstrapRecord | None = None) -> Manifest:
        return next_manifest(
            parent=parent,
            pipeline=PipelineRef(namespace="default", name="p"),
            program=PROGRAM,
            state={},
            connectors={},
            spark_version="4.2.0",
            bootstrap=bootstrap,
        )

    assert manifest(None).translation_revision == TRANSLATION_REVISION
    step = manifest(manifest(None).model_copy(update={"translation_revision": 0}))
    assert step.translation_revision == 0, "a step recomputes no view: its state is as it was"
    now = datetime.datetime.now(datetime.UTC)
    record = BootstrapRecord(change_id="c", started_at=now, finished_at=now)
    assert manifest(step, record).translation_revision == TRANSLATION_REVISION


def test_a_fix_of_a_later_revision_revises_only_the_views_it_changed() -> None:
    """`LIKE(s, 'a%')`, Spark's call form, was written `'a%' LIKE s` until revision 2; state of
    revision 1 is stale only for a view that calls it so, not for one using the operator."""
    program = parse_program(
        """create table t (s varchar);
create function starts_a(x varchar) returns boolean as not not like(x, 'a%');
create view called as select s from t where like(s, 'a%');
create view through as select s from t where starts_a(s);
create view operator as select s from t where s like 'a%' or 'a%' like s;
create view trimmed as select ltrim('a', s) as s, log10(length(s)) as l from t;
create view logged as select log(10, length(s)) as l, trim(leading 'a' from s) as s from t;
"""
    )
    plan = make_plan(old=program, new=program, old_runtime="v1", runtime="v1", old_translation=1)
    assert {n: c.reasons for n, c in plan.changes.items()} == {
        "called": ("runtime",),
        "through": ("runtime",),
        "trimmed": ("runtime",),  # LTRIM(chars, s) and LOG10, revised in revision 2 too
    }
    written = as_written(program.views["called"].query)
    assert "WHERE s LIKE 'a%'" in written.sql(dialect="spark")
    assert as_written(written).sql() == written.sql(), "written once: not swapped back"
    operator = program.views["operator"].query
    assert (
        as_written(operator).sql()
        == operator.sql()
        == ("SELECT s FROM t WHERE s LIKE 'a%' OR 'a%' LIKE s")
    )


def test_state_of_a_view_calling_a_function_before_arguments_were_cast_is_revised() -> None:
    """Until revision 3 a call of the program's own function inlined its arguments as they
    were: `dbl(x + 1)` of `n * 2` computed `x + 1 * 2`, and no argument took its parameter's
    type. Every view that calls one (directly) is revised, and what reads it upstream."""
    program = parse_program(
        """create table t (x int, s varchar);
create function dbl(n int) returns int as n * 2;
create function quad(n int) returns int as dbl(dbl(n));
create view doubled as select dbl(x + 1) as d from t;
create view quadrupled as select quad(x) as q from t;
create view plain as select x + 1 as y from t;
create view reading as select max(d) as m from doubled;
"""
    )
    plan = make_plan(old=program, new=program, old_runtime="v1", runtime="v1", old_translation=2)
    assert {n: c.reasons for n, c in plan.changes.items()} == {
        "doubled": ("runtime",),
        "quadrupled": ("runtime",),
        "reading": ("upstream:doubled",),
    }
    current = make_plan(old=program, new=program, old_runtime="v1", runtime="v1", old_translation=3)
    assert current.diff.is_empty and not current.changes


def test_state_of_a_view_naming_columns_with_capitals_in_double_quotes_is_revised() -> None:
    """Until revision 3 `s AS "Name"` stored (and output) a column `name`; so did `SELECT *`
    over a table's column `"Mixed"`."""
    program = parse_program(
        """create table t (s varchar, "Mixed" int);
create view named as select s as "Name" from t;
create view lower as select s as "name", s as other from t;
create view starred as select * from t;
create view reading as select * from named;
"""
    )
    plan = make_plan(old=program, new=program, old_runtime="v1", runtime="v1", old_translation=2)
    assert {n: c.reasons for n, c in plan.changes.items()} == {
        "named": ("runtime",),
        "starred": ("runtime",),
        "reading": ("upstream:named",),
    }


def test_state_of_a_view_with_a_column_list_is_revised() -> None:
    """Until revision 4 a view's column list was ignored: `CREATE VIEW v (n, s) AS SELECT x,
    'a'` stored (and output) the columns `x` and `a`."""
    program = parse_program(
        """create table t (x int);
create view listed (n, s) as select x, 'a' from t;
create view unlisted as select x as n from t;
create view reading as select n from listed;
"""
    )
    plan = make_plan(old=program, new=program, old_runtime="v1", runtime="v1", old_translation=3)
    assert {n: c.reasons for n, c in plan.changes.items()} == {
        "listed": ("runtime",),
        "reading": ("upstream:listed",),
    }
    current = make_plan(old=program, new=program, old_runtime="v1", runtime="v1", old_translation=4)
    assert current.diff.is_empty and not current.changes
