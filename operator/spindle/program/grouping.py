"""Aggregating queries checked for columns that are neither grouped nor aggregated.

`SELECT name, score, COUNT(*) FROM t GROUP BY name` (a column forgotten in the GROUP BY), or
`SELECT name, COUNT(*) FROM t` (no GROUP BY at all), used to pass `spindle diff`, `plan` and
`apply`, reach approval, and fail in the driver with Spark's `MISSING_AGGREGATION` or
`MISSING_GROUP_BY` at the view's first line. Here each SELECT of a view's qualified query
(`spindle.program.columns` qualifies it) that aggregates is read for a selected column outside
every aggregate call whose column appears nowhere in the GROUP BY: `UngroupedColumn`, at the
column's line and column.

Only what Spark refuses too. A column that appears anywhere in a grouping expression is left to
Spark (`SELECT b + a ... GROUP BY a + b` runs: Spark compares expressions semantically); so are
`GROUP BY ALL`, calls of the program's own functions, lambda variables and outer references.
A call is an aggregate when sqlglot knows it as one or Spark lists its name among its aggregate
functions (`spindle.program.spark_functions.SPARK_AGGREGATES`).
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp
from sqlglot.optimizer.scope import Scope, traverse_scope

from spindle.program.spark_functions import SPARK_AGGREGATES

Problem = tuple[exp.Column, str, str, dict[str, object]]
"""The ungrouped column, the reason, the message, and the details of the refusal."""


def ungrouped(view: str, query: exp.Query, *, declared: frozenset[str]) -> Problem | None:
    """The first selected column of view `view`'s qualified `query` that an aggregating SELECT
    neither groups nor aggregates, or None. `declared`: the program's function names (their
    calls are not read into)."""
    for scope in traverse_scope(query):
        select = scope.expression
        if not isinstance(select, exp.Select) or not _aggregates(select, declared):
            continue
        group = select.args.get("group")
        if group is not None and group.args.get("all"):
            continue  # GROUP BY ALL groups by whatever is not aggregated
        grouped = {_key(c) for c in group.find_all(exp.Column)} if group is not None else set()
        for column in _bare_columns(select.expressions, declared):
            if _key(column) not in grouped and column.table in _own_sources(scope):
                return _problem(view, column, grouped=group is not None)
    return None


_MODIFIERS = (exp.Filter, exp.WithinGroup, exp.IgnoreNulls, exp.RespectNulls)
"""What wraps a call and modifies it: `COUNT(*) FILTER (WHERE ...)`, `... WITHIN GROUP (...)`."""


def is_aggregate(node: exp.Expr) -> bool:
    """Whether `node` is a call that aggregates the rows of its group (not a window function),
    with its modifiers, if any."""
    call = node
    while isinstance(call, _MODIFIERS):
        call = call.this
    around = node.parent
    while isinstance(around, _MODIFIERS):
        around = around.parent
    if isinstance(around, exp.Window) or isinstance(call.this, exp.Query | exp.Subquery):
        return False  # a window function, or `= ANY (SELECT ...)`
    if isinstance(call, exp.AggFunc):
        return True
    if isinstance(call, exp.Anonymous):
        names = [call.name]
    elif isinstance(call, exp.Func):
        names = list(type(call).sql_names())
    else:
        names = [call.key]  # `ANY(x)`, Spark's aggregate, is a predicate to sqlglot
    return any(name.lower() in SPARK_AGGREGATES for name in names)


def _aggregates(select: exp.Select, declared: frozenset[str]) -> bool:
    if select.args.get("group") is not None:
        return True
    having = select.args.get("having")
    searched = [*select.expressions, *([having] if having is not None else [])]
    return any(is_aggregate(node) for node in _walk(searched, declared))


def _bare_columns(nodes: list[exp.Expr], declared: frozenset[str]) -> Iterator[exp.Column]:
    """The column references of `nodes` outside aggregate calls, in order."""
    for node in _walk(nodes, declared, into_aggregates=False):
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            yield node


def _walk(
    nodes: list[exp.Expr], declared: frozenset[str], *, into_aggregates: bool = True
) -> Iterator[exp.Expr]:
    """The nodes of `nodes` in this scope (not subqueries, lambdas or the program's function
    calls, and, without `into_aggregates`, not inside aggregate calls), depth first."""
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, exp.Query | exp.Subquery | exp.Lambda | exp.Column):
            continue
        if isinstance(node, exp.Anonymous) and node.name.lower() in declared:
            continue
        if not into_aggregates and is_aggregate(node):
            continue
        stack.extend(reversed(list(node.iter_expressions())))


def _key(column: exp.Column) -> tuple[str, str]:
    return column.table.lower(), column.name.lower()


def _own_sources(scope: Scope) -> set[str]:
    """The names a column of this scope is qualified with when it reads this scope's own
    sources (an unqualified one is a lambda variable or a name sqlglot could not place)."""
    return {name for name in scope.sources if name}


def _problem(view: str, column: exp.Column, *, grouped: bool) -> Problem:
    name = column.name
    details: dict[str, object] = {"view": view, "reference": name}
    if grouped:
        message = (
            f"View '{view}' selects column '{name}', which is neither in its GROUP BY nor "
            f"inside an aggregate. Add {name} to the GROUP BY, aggregate it (for example "
            f"MAX({name})), or use ANY_VALUE({name}) if any value of the group will do"
        )
    else:
        message = (
            f"View '{view}' selects column '{name}' beside aggregates, without a GROUP BY. "
            f"Add GROUP BY {name}, aggregate it (for example MAX({name})), or compute the "
            "aggregates as window functions (... OVER ())"
        )
    return column, "UngroupedColumn", message, details
