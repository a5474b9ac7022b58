"""Queries and what Spindle's reference checks (columns, function calls) say of them.

Each case is a view's query over the tables in `TABLES`, the reason the check gives (None: it
passes) and the reference it points at (the first occurrence of that text in the query). The unit
tests check the verdicts; the integration test checks every verdict against Spark's analyzer,
so a case here is also a claim about Spark: a query marked None runs, one with a reason fails.
"""

from __future__ import annotations

from typing import NamedTuple

TABLES = """\
create table t (id int, name varchar, score int, ts timestamp) with ('materialized' = 'true');
create table u (id int, city varchar, "Mixed" int) with ('materialized' = 'true');
create materialized view named as select name, count(*) as n from t group by name;
create materialized view unnamed as select name, count(*) from t group by name;
create function bump(g int) returns int as g + 1;
"""
"""Two tables, a view whose columns are all named, one with a column Spark names itself, and a
function."""


class Case(NamedTuple):
    query: str
    reason: str | None
    at: str = ""


CASES: tuple[Case, ...] = (
    # Projections, filters, aliases: Spark resolves select aliases in later items, GROUP BY,
    # HAVING and ORDER BY.
    Case("select id, name from t", None),
    Case("select ID, Name from t", None),
    Case("select s.id from t as s", None),
    Case("select t.* from t", None),
    Case("select score + 1 as s1, s1 * 2 as s2 from t", None),
    Case("select upper(name) as name from t where name like 'a%'", None),
    Case("select name, count(*) as n from t group by name having n > 1", None),
    Case("select name as nm, count(*) as c from t group by nm order by nm", None),
    Case("select name, max(score) as m from t group by name order by m desc", None),
    Case("select name, count(*) filter (where score > 1) as c from t group by name", None),
    Case("select distinct name from t", None),
    Case("select case when score > 1 then name else 'x' end as c from t", None),
    Case("select cast(score as double) as d, current_date as today from t", None),
    Case("select date_trunc('hour', ts) as h, count(*) as c from t group by 1", None),
    # Joins.
    Case("select t.id, u.city from t join u on t.id = u.id", None),
    Case("select t.*, u.city from t join u on t.id = u.id", None),
    Case("select id, city from t join u using (id)", None),
    Case("select coalesce(t.id, u.id) as id from t full outer join u on t.id = u.id", None),
    Case("select id from t left semi join u on t.id = u.id", None),
    Case("select id from t left anti join u on t.id = u.id", None),
    Case("select id from t left semi join u on t.id = u.idd", "UnknownColumn", "u.idd"),
    Case("select name from t join (select id as tid from u) x on t.id = x.tid", None),
    # Subqueries, CTEs, set operations, windows.
    Case("select * from (select id, score from t) x where x.score > 1", None),
    Case("select n from (select name as n from t)", None),
    Case("with c as (select id, score from t) select c.id, score from c", None),
    Case("with a as (select * from t), b as (select id, name from a) select b.name from b", None),
    Case("select id from t where exists (select 1 from u where u.id = t.id)", None),
    Case("select id from t where id in (select id from u where city = name)", None),
    Case("select id, (select max(city) from u where u.id = t.id) as c from t", None),
    Case("select id from t where id not in (select id from u)", None),
    Case("select id from t where exists (select 1 from u where id = 1)", None),
    Case("select name from t where exists (select 1 from u join t as w on u.id = w.id)", None),
    Case("select id from t union all select id from u", None),
    Case("select name, lag(score) over (partition by name order by ts) as prev from t", None),
    Case("select id, sum(score) over w as s from t window w as (partition by name)", None),
    # Quoted names: Spark compares names case-insensitively by default.
    Case("select mixed from u", None),
    Case('select "Mixed" from u', None),
    # Views over views.
    Case("select name, n from named where n > 1", None),
    Case("select * from unnamed", None),
    # What the check cannot know, it leaves to Spark.
    Case("select transform(array(score), x -> x + 1) as a from t", None),
    Case("select id, explode(array(score, id)) as e from t", None),
    Case("select a, b from (values (1, 2)) as v(a, b)", None),
    # Refused: a column no source has, a source that is not there, a column two sources have.
    Case("select scroe from t", "UnknownColumn", "scroe"),
    Case("select t.scroe from t", "UnknownColumn", "t.scroe"),
    Case("select nam from t where score > 1", "UnknownColumn", "nam"),
    Case("select id from t group by nam", "UnknownColumn", "nam"),
    Case("select name from t order by scroe", "UnknownColumn", "scroe"),
    Case("select x.id from t as y", "UnknownColumn", "x.id"),
    Case("select t.id from t join u on t.id = u.idd", "UnknownColumn", "u.idd"),
    Case("select id from t join u on t.id = u.id", "AmbiguousColumn", "id"),
    Case("select name from t, u where t.id = u.id and city = nme", "UnknownColumn", "nme"),
    Case(
        "select id from t where exists (select 1 from u where u.idd = t.id)",
        "UnknownColumn",
        "u.idd",
    ),
    Case("with c as (select id from t) select c.score from c", "UnknownColumn", "c.score"),
    Case("select n, m from named", "UnknownColumn", "m"),
    Case("select id from t union all select idd from u", "UnknownColumn", "idd"),
    # Aggregates: every selected column outside an aggregate is grouped.
    Case("select name, score, count(*) as c from t group by name", "UngroupedColumn", "score"),
    Case("select name, count(*) as c from t", "UngroupedColumn", "name"),
    Case("select t.name, count(*) as c from t", "UngroupedColumn", "t.name"),
    Case("select upper(name) as u, max(score) as m from t group by id", "UngroupedColumn", "name"),
    Case("select name, score + count(*) as c from t group by name", "UngroupedColumn", "score"),
    Case("select name from t group by id", "UngroupedColumn", "name"),
    Case(
        "select name, sum(score) over (partition by name) as s from t group by name",
        "UngroupedColumn",
        "score",
    ),
    Case(
        "select t.id, max(u.city) as c from t join u on t.id = u.id group by u.id",
        "UngroupedColumn",
        "t.id",
    ),
    Case(
        "select id from (select id, name, count(*) as c from t group by id) x",
        "UngroupedColumn",
        "name",
    ),
    Case(
        "select name, count(*) as c from t group by name having score > 1",
        "UngroupedColumn",
        "score >",
    ),
    # A correlated scalar subquery is evaluated per row: in a grouped select list Spark wants
    # it aggregated or grouped by, even where what it reads is grouped; in a HAVING, what it
    # reads grouped.
    Case(
        "select name, (select max(city) from u where u.id = t.id) as c from t group by name",
        "UngroupedColumn",
        "t.id",
    ),
    Case(
        "select name, (select max(city) from u where u.city = t.name) as c from t group by name",
        "UngroupedColumn",
        "t.name",
    ),
    Case(
        "select count(*) as n, (select max(city) from u where u.id = t.id) as c from t",
        "UngroupedColumn",
        "t.id",
    ),
    Case(
        "select name from t group by name having count(*) > "
        "(select count(*) from u where u.id = t.id)",
        "UngroupedColumn",
        "t.id",
    ),
    Case(
        "select name, max((select max(city) from u where u.id = t.id)) as c from t group by name",
        None,
    ),
    Case(
        "select name, (select max(city) from u where u.id = t.id) as c from t group by name, 2",
        None,
    ),
    Case(
        "select name from t group by name having count(*) > "
        "(select count(*) from u where u.city = t.name)",
        None,
    ),
    Case("select name, (select max(city) from u where u.id > 0) as c from t group by name", None),
    Case("select name from t where count(*) > 1", "MisplacedAggregate", "count(*)"),
    Case(
        "select name, count(*) as c from t group by name, max(score)",
        "MisplacedAggregate",
        "max(score)",
    ),
    Case(
        "select id from t where row_number() over (order by id) = 1",
        "MisplacedWindow",
        "row_number()",
    ),
    Case(
        "select id, count(*) as c from t group by id having rank() over (order by id) = 1",
        "MisplacedWindow",
        "rank()",
    ),
    Case("select id from t qualify row_number() over (partition by name order by ts) = 1", None),
    # numbering, ranking and offsets need ordered rows; aggregates and first_value do not
    Case(
        "select id, row_number() over (partition by name) as r from t",
        "UnorderedWindow",
        "row_number()",
    ),
    Case("select id, lag(score) over () as p from t", "UnorderedWindow", "lag("),
    Case("select id, ntile(4) over (partition by name) as q from t", "UnorderedWindow", "ntile("),
    Case(
        "select id from t qualify rank() over (partition by name) = 1", "UnorderedWindow", "rank("
    ),
    Case("select id, sum(score) over (partition by name) as s from t", None),
    Case("select id, first_value(score) over (partition by name) as f from t", None),
    Case("select id, row_number() over w as r from t window w as (order by id)", None),
    # Spark's time window is a call, though WINDOW starts a clause (a syntax error before)
    Case(
        "select window(ts, '1 hour').start as h, count(*) as c from t "
        "group by window(ts, '1 hour')",
        None,
    ),
    Case(
        "select window(ts, '1 hour') as w, name from t group by window(ts, '1 hour')",
        "UngroupedColumn",
        "name from",
    ),
    # positions count the select list from 1: sqlglot read 0 and -1 as Python indexes
    Case("select name, count(*) as c from t group by 0", "OrdinalOutOfRange", "0"),
    Case("select name, count(*) as c from t group by 3", "OrdinalOutOfRange", "3"),
    Case("select id, name from t order by 0", "OrdinalOutOfRange", "0"),
    Case("select name, count(*) as c from t group by 1 order by 2", None),
    Case("select * from t order by 4", None),
    Case("select posexplode(array(id, score)) as (p, v) from t order by 2", None),  # two columns
    Case("select id, name from t order by 99999999999", None),  # a BIGINT: a constant
    Case("select id from (select id, rank() over (order by id) as r from t) where r = 1", None),
    Case("select sum(count(*)) as x from t", "NestedAggregate", "count(*)"),
    Case("select name, max(score + avg(id)) as x from t group by name", "NestedAggregate", "avg("),
    Case("select count(*) filter (where max(score) > 1) as c from t", "NestedAggregate", "max("),
    Case("select name, count(*) as c from t group by name having c > 1 and name <> 'a'", None),
    Case("select name from t where score > (select avg(score) from t)", None),
    Case("select name from t where exists (select 1 from u group by id having count(*) > 1)", None),
    Case("select name, count(*) as c from t group by all", None),
    Case(
        "select b + a as s, count(*) as c from (select id as a, score as b from t) group by a + b",
        None,
    ),
    Case("select upper(name) as u, count(*) as c from t group by upper(name)", None),
    Case("select name, count(*) as c, max(score) + 1 as m from t group by rollup(name)", None),
    Case("select name, count(*) filter (where score > 1) as c from t group by name", None),
    Case("select count(*) as c, max(score) as m, 1 as one, current_date as d from t", None),
    Case("select name, count(*) as c from t group by name having max(score) > 1", None),
    Case("select name, rank() over (order by count(*)) as r from t group by name", None),
    Case("select name, sum(count(*)) over () as total from t group by name", None),
    Case("select collect_list(score) as l, percentile_approx(score, 0.5) as p from t", None),
    Case("select name, any_value(score) as s, first(ts) as f from t group by name", None),
    Case("select name, bump(count(*)) as b from t group by name", None),
    Case("select id, (select max(city) from u) as c from t group by id", None),
    Case("select name, transform(collect_list(score), x -> x + 1) as l from t group by name", None),
    Case("select score, sum(score) over () as s from t", None),
    # Output columns: each named once (Spark evaluates the query, but a view's columns are
    # stored and read by name).
    Case("select t.id, u.id from t join u on t.id = u.id", "DuplicateColumn", "u.id"),
    Case("select id, name as ID from t", "DuplicateColumn", "name as ID"),
    Case("select name, upper(name) as Name from t", "DuplicateColumn", "upper(name)"),
    Case("select t.id, u.id as uid from t join u on t.id = u.id", None),
    Case("select x.n from (select id as n, id as n2 from t) x", None),
    Case("select id, score from t union all select id, id from u", None),
    # Set operations: each input selects as many columns as the first.
    Case("select id from t union all select id, city from u", "ColumnCountMismatch", "city"),
    Case("select id, name from t union select id from u", "ColumnCountMismatch", "id from u"),
    Case("select id from t intersect select id, city from u", "ColumnCountMismatch", "city"),
    Case("select id from t except all select id, city from u", "ColumnCountMismatch", "city"),
    Case(
        "select id from t union all select id from u union all select id, 1 as one from t",
        "ColumnCountMismatch",
        "1 as one",
    ),
    Case("select * from t union all select id, city from u", "ColumnCountMismatch", "id, city"),
    Case("select id, name, score from t union all select * from u", None),
    Case("select id from t union all (select id from u union all select id from t)", None),
    # JOIN ... USING: each side has the column.
    Case("select id from t join u using (idd)", "UnknownColumn", "idd"),
    Case("select name from t join u using (name)", "UnknownColumn", "name)"),
    Case("select t.id from t join u using (id) join named using (name)", None),
    Case(
        "select 1 as x from t join u using (id) join named using (city)", "UnknownColumn", "city)"
    ),
    # Found by an adversarial run against Spark's analyzer (each was refused, and Spark runs it):
    # names compare case-insensitively, in GROUP BY and correlated subqueries too;
    Case("select u.mixed, count(*) as c from u group by mixed", None),
    Case('select "Mixed", count(*) as c from u group by MIXED', None),
    Case("select id from t where exists (select 1 from u where Mixed = t.score)", None),
    # a table alias's column list renames its columns;
    Case("select a, x.b from t as x(a, b, c, d)", None),
    Case("select a, count(*) as n from t as x(a, b, c, d) group by a", None),
    Case("select x.e from t as x(a, b, c, d)", "UnknownColumn", "x.e"),
    # an ordinal inside ROLLUP, CUBE or GROUPING SETS names a select item;
    Case("select name, count(*) as c from t group by rollup(1)", None),
    Case(
        "select upper(name) as un, id, count(*) as c from t group by grouping sets ((1), (2))", None
    ),
    # LIKE ANY is a quantifier, not the aggregate ANY;
    Case("select id from t where name like any ('a%', 'b%')", None),
    Case("select name like any ('a%', 'b%') as m from t", None),
    # a hint is no call, and a unit is no column (written in Spark's and Feldera's order);
    Case("select /*+ broadcast(u) */ t.id from t join u on t.id = u.id", None),
    Case("select timestampadd(hour, 1, ts) as a, timestampdiff(day, ts, ts) as d from t", None),
    Case("select dateadd(day, 1, ts) as a, date_add(hour, 1, ts) as b from t", None),
    Case("select datediff(hour, ts, ts) as d from t", None),
    Case("select timestampdiff(hour, tss, ts) as d from t", "UnknownColumn", "tss"),
    # a subquery's column whose source is opaque is not the outer query's to check.
    Case("select id from t where exists (select 1 from (values (1)) as v where col1 = t.id)", None),
    # Function calls: a Spark built-in (sqlglot knows it or not), or one the program declares.
    Case("select bump(score) as b, BUMP(id) as c from t", None),
    Case("select date_format(ts, 'yyyy') as d, get_json_object(name, '$.a') as j from t", None),
    Case("select percentile_approx(score, 0.5) as p, count_if(score > 1) as c from t", None),
    Case("select levenshtein(name, 'a') as l, nvl2(name, 1, 0) as n from t", None),
    Case("select avgg(score) as a from t", "UnknownFunction", "avgg"),
    Case("select AVGG(score) as a from t", "UnknownFunction", "AVGG"),
    # TIMESTAMPADD is Spark's grammar, not an unknown call: the grouping check still applies
    Case(
        "select name, timestampadd(hour, 1, ts) as h, count(*) as c from t group by name",
        "UngroupedColumn",
        "ts)",
    ),
    # an unknown call may be an aggregate: no UngroupedColumn beside it (was a second problem)
    Case("select name, avgg(score) as a from t group by name", "UnknownFunction", "avgg"),
    Case("select id, frobnicate(name) as f from t where id > 0", "UnknownFunction", "frobnicate"),
    Case("select id from t where bumpp(score) > 1", "UnknownFunction", "bumpp"),
    Case(
        "select id from t where exists (select 1 from u where lenght(city) > 1)",
        "UnknownFunction",
        "lenght",
    ),
)
