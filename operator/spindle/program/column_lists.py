"""A view's column list names its columns: `CREATE VIEW v (n, s) AS SELECT x, 'a' FROM t` has
the columns `n` and `s`, as in Feldera, Spark and standard SQL.

The rest of Spindle reads a view's query (`View.query`), so the list is applied to the query
itself, once, by `listed`: each output of the query's first SELECT takes its listed name
(`x AS n`), which keeps the query's shape, and with it incremental maintenance. Where renaming
could change what the query means (a star, whose columns are not written out; a name, given
or listed, that GROUP BY, HAVING, ORDER BY or QUALIFY refers to; an alias a later select item
reads; a set operation's ORDER BY), the query is read as a derived table with the listed
names instead (`SELECT * FROM (query) AS v(n, s)`), as Spark does for a view.

A list whose width differs from the query's is refused when the columns are written out
(`width_problem`, at parse time); behind a star, the column check refuses it. Both are
`ColumnCountMismatch`.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from spindle.program.spark_calls import first_select
from spindle.wording import counted

REFERRING = ("group", "having", "order", "qualify")
"""A SELECT's clauses whose column references may name an output column (Spark resolves
aliases there)."""


def listed(query: exp.Query, names: Sequence[exp.Identifier], *, view: str) -> exp.Query:
    """`query` with its columns named by `names` (a view's column list), as a new tree."""
    copy = query.copy()
    select = first_select(copy)
    if select is None or not _renamable(copy, select, names):
        # twice: qualifying names a derived table's columns by renaming its SELECT's outputs,
        # which would break the query's own ORDER BY of a set operation (`ORDER BY x`)
        inner = exp.select("*").from_(
            exp.Subquery(this=copy, alias=exp.TableAlias(this=exp.to_identifier("__listed")))
        )
        alias = exp.TableAlias(this=exp.to_identifier(view), columns=[n.copy() for n in names])
        return exp.select("*").from_(exp.Subquery(this=inner, alias=alias))
    for item, name in zip(list(select.expressions), names, strict=True):
        item.replace(exp.Alias(this=item.unalias().copy(), alias=name.copy()))
    return copy


def width_problem(query: exp.Query, names: Sequence[exp.Identifier], *, view: str) -> str | None:
    """Why a column list cannot name `query`'s columns (a width other than the written-out
    columns'), or None (also when a star hides the width: the column check sees it)."""
    select = first_select(query)
    if select is None or any(item.is_star for item in select.expressions):
        return None
    if len(select.expressions) == len(names):
        return None
    return mismatch(f"View '{view}' lists", names, len(select.expressions))


def mismatch(subject: str, names: Sequence[exp.Identifier], width: int) -> str:
    """A message for names listed (`subject`: who lists them) for `width` columns."""
    listed = f"{counted(len(names), 'column')} ({', '.join(n.name for n in names)})"
    return (
        f"{subject} {listed} where its query gives {counted(width, 'column')}. List one name "
        "per column"
    )


def _renamable(query: exp.Query, select: exp.Select, names: Sequence[exp.Identifier]) -> bool:
    """Whether naming `select`'s outputs in place keeps `query`'s meaning: its columns are
    written out, as many as listed, and nothing refers to an output by name, whose meaning a
    new name would change. ORDER BY, QUALIFY, HAVING and GROUP BY may name an output, so no
    reference there may be a name the query gives (`k AS kk ... GROUP BY kk`) or a listed
    one (`v (x, y) AS SELECT y, x ... ORDER BY x`: the output `x` would be sorted by); a
    select item may name an earlier item's alias (`x + 1 AS z, z * 2 AS w`); a set
    operation's ORDER BY names its first SELECT's outputs."""
    if len(select.expressions) != len(names) or any(item.is_star for item in select.expressions):
        return False
    if query is not select and query.args.get("order") is not None:
        return False
    given = {
        item.alias.lower()
        for item in select.expressions
        if isinstance(item, exp.Alias)
        and not (isinstance(item.this, exp.Column) and item.this.name.lower() == item.alias.lower())
    }
    renamed = {  # a listed name an item has already changes nothing
        name.name.lower()
        for item, name in zip(select.expressions, names, strict=True)
        if name.name.lower() != item.alias_or_name.lower()
    }
    listed = given | renamed
    clauses = [select.args.get(key) for key in REFERRING] + [query.args.get("order")]
    referred = [
        column.name.lower()
        for clause in clauses
        if clause is not None
        for column in clause.find_all(exp.Column)
        if not column.table
    ]
    lateral = [
        column.name.lower()
        for item in select.expressions
        for column in item.find_all(exp.Column)
        if not column.table
    ]
    return not (set(referred) & listed) and not (set(lateral) & given)
