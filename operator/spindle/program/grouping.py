"""Aggregating queries checked for columns that are neither grouped nor aggregated, and for
aggregates where rows are not grouped yet.

`SELECT name, score, COUNT(*) FROM t GROUP BY name` (a column forgotten in the GROUP BY), or
`SELECT name, COUNT(*) FROM t` (no GROUP BY at all), used to pass `spindle diff`, `plan` and
`apply`, reach approval, and fail in the driver with Spark's `MISSING_AGGREGATION` or
`MISSING_GROUP_BY` at the view's first line. Here each SELECT of a view's qualified query
(`spindle.program.columns` qualifies it) that aggregates is read for a selected column outside
every aggregate call whose column appears nowhere in the GROUP BY: `UngroupedColumn`, at the
column's line and column; so is such a column in its HAVING (Spark's `UNRESOLVED_COLUMN`), and
a correlated scalar subquery such a SELECT evaluates per row, outside every aggregate. An
aggregate call in a WHERE or a GROUP BY, which are evaluated before rows are grouped, is
`MisplacedAggregate`, a window function in a WHERE or HAVING `MisplacedWindow`, an
aggregate call inside another's arguments `NestedAggregate`, and a window function that
numbers, ranks or offsets rows over a window without ORDER BY `UnorderedWindow`.

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

from spindle.program.calls import call_name, unknown_call
from spindle.program.spark_functions import SPARK_AGGREGATES

Problem = tuple[exp.Expr, str, str, dict[str, object]]
"""Where the problem is (a column, or a call), the reason, the message, and the details."""


def grouping_problem(view: str, query: exp.Query, *, declared: frozenset[str]) -> Problem | None:
    """The first problem of grouping in view `view`'s qualified `query`, or None: an aggregate
    call in a WHERE or GROUP BY, a window function in a WHERE or HAVING, an aggregate call
    inside another, or a column an aggregating SELECT neither groups nor aggregates (in its
    select list, then its HAVING).
    `declared`: the program's function names (their calls are not read into)."""
    for scope in traverse_scope(query):
        select = scope.expression
        if not isinstance(select, exp.Select):
            continue
        misplaced = (
            _misplaced(view, select, declared)
            or _nested(view, select, declared)
            or _unordered(view, select, declared)
        )
        if misplaced is not None:
            return misplaced
        if not _aggregates(select, declared) or _unknown_call(select, declared):
            continue  # an unknown call (`AVGG(x)`, UnknownFunction) may be an aggregate
        group = select.args.get("group")
        if group is not None and group.args.get("all"):
            continue  # GROUP BY ALL groups by whatever is not aggregated
        grouped = _grouped(select, group, declared) if group is not None else set()
        if grouped is None:
            continue
        having = select.args.get("having")
        for clause, nodes in (("select", select.expressions), ("having", [having])):
            for column in _bare_columns([n for n in nodes if n is not None], declared):
                if _key(column) not in grouped and column.table in _own_sources(scope):
                    return _problem(view, column, grouped=group is not None, clause=clause)
        correlated = _ungrouped_subquery(view, scope, select, grouped, declared)
        if correlated is not None:
            return correlated
    return None


def _ungrouped_subquery(
    view: str,
    scope: Scope,
    select: exp.Select,
    grouped: set[tuple[str, str]],
    declared: frozenset[str],
) -> Problem | None:
    """A correlated scalar subquery an aggregating SELECT evaluates outside every aggregate
    and does not group by: Spark evaluates it per row, and refuses it in the select list of a
    query of one row per group (`SCALAR_SUBQUERY_IS_IN_GROUP_BY_OR_AGGREGATE_FUNCTION`), even
    where the columns it reads are grouped; in the HAVING, where they are not."""
    own = _own_sources(scope)
    outer = {  # each subquery's columns of this scope's sources
        id(child.expression): [c for c in child.external_columns if c.table in own]
        for child in scope.subquery_scopes
    }
    group, having = select.args.get("group"), select.args.get("having")
    keys = list(group.expressions) if group is not None else []
    for node in _walk(_after_grouping(select), declared, into_aggregates=False):
        if not isinstance(node, exp.Subquery) or isinstance(node.parent, exp.Exists | exp.In):
            continue
        columns = outer.get(id(node.this)) or []
        if having is not None and node.find_ancestor(exp.Having) is having:
            columns = [c for c in columns if _key(c) not in grouped]
        if not columns or any(key == node for key in keys):
            continue
        column = columns[0]
        position = next(
            (i for i, item in enumerate(select.expressions, 1) if node in (item, item.this)), 0
        )
        by = f"group by it (GROUP BY {position}), " if position else ""
        message = (
            f"View '{view}' evaluates a subquery that reads {column.table}.{column.name} of "
            "each row outside every aggregate, and its rows are grouped: a group has many "
            f"rows. Aggregate the subquery's value (for example MAX((SELECT ...))), {by}or join "
            "what it reads and aggregate that"
        )
        return column, "UngroupedColumn", message, {"view": view, "reference": column.name}
    return None


_QUALIFY = "filter on it with QUALIFY, or in an outer query"
_MISPLACED: tuple[tuple[str, bool, str], ...] = (
    ("where", False, "move the condition to HAVING, or compute the aggregate in a subquery"),
    ("where", True, _QUALIFY),
    ("group", False, "group by the columns it aggregates, and select the aggregate"),
    ("having", True, _QUALIFY),
)
"""Which clause (its key in a SELECT's arguments) cannot hold a window function (True) or an
aggregate call (False), and what to write instead, in the order the clauses are read: what
Spark refuses as `INVALID_WHERE_CONDITION`, `GROUP_BY_AGGREGATE` and
`WINDOW_FUNCTION_NOT_ALLOWED_IN_CLAUSE`."""
_CLAUSES = {"where": "WHERE", "group": "GROUP BY", "having": "HAVING"}
_KINDS = {
    False: ("MisplacedAggregate", "before rows are grouped"),
    True: ("MisplacedWindow", "before window functions are"),
}
"""Per kind of call (window or not): the reason, and what the clause is evaluated before."""


def _misplaced(view: str, select: exp.Select, declared: frozenset[str]) -> Problem | None:
    """An aggregate call, or a window function, in a clause evaluated before them."""
    for clause, window, advice in _MISPLACED:
        node = select.args.get(clause)
        if node is None:
            continue
        found = next((n for n in _walk([node], declared) if _is(n, window=window)), None)
        if found is None:
            continue
        if window:
            kind = f"window function {call_name(_unwrapped(found.this))}() OVER (...)"
        else:
            kind = f"aggregate {call_name(_unwrapped(found))}"
        reason, why = _KINDS[window]
        shown = _CLAUSES[clause]
        message = f"View '{view}' calls {kind} in its {shown}, which is evaluated {why}: {advice}"
        return found, reason, message, {"view": view, "clause": shown}
    return None


def _nested(view: str, select: exp.Select, declared: frozenset[str]) -> Problem | None:
    """An aggregate call inside the arguments (or FILTER) of another."""
    for outer in _walk(_after_grouping(select), declared):
        if not is_aggregate(outer):
            continue
        core = _unwrapped(outer)  # the call itself, under its modifiers: not nested in itself
        inner = next(
            (
                n
                for n in _walk(list(outer.iter_expressions()), declared)
                if is_aggregate(n) and _unwrapped(n) is not core
            ),
            None,
        )
        if inner is None:
            continue
        within, called = call_name(_unwrapped(outer)), call_name(_unwrapped(inner))
        message = (
            f"View '{view}' calls aggregate {called} inside aggregate {within}: aggregate the "
            f"result of {called} in an outer query, or make {within} a window function "
            f"({within}({called}(...)) OVER ())"
        )
        return inner, "NestedAggregate", message, {"view": view}
    return None


ORDERED_WINDOW_FUNCTIONS = frozenset(
    {"ROW_NUMBER", "RANK", "DENSE_RANK", "PERCENT_RANK", "CUME_DIST", "NTILE", "LAG", "LEAD"}
    | {"NTH_VALUE"}
)
"""Window functions whose window Spark requires ordered (`WINDOW_FUNCTION_FRAME_NOT_ORDERED`):
they number, rank or offset the rows of a partition, which have no order without one."""


def _unordered(view: str, select: exp.Select, declared: frozenset[str]) -> Problem | None:
    """A window function that needs its rows ordered, over a window without ORDER BY (a named
    window, `OVER w`, is left to Spark: its ORDER BY is in the WINDOW clause)."""
    for window in _walk([*select.expressions, *_present(select, "qualify")], declared):
        if not isinstance(window, exp.Window) or window.args.get("order") is not None:
            continue
        if window.args.get("alias") is not None:
            continue
        name = call_name(_unwrapped(window.this))
        if name not in ORDERED_WINDOW_FUNCTIONS:
            continue
        message = (
            f"View '{view}' calls window function {name}() over a window without ORDER BY: "
            f"the rows of a partition have no order to {_ORDERED_VERB.get(name, 'rank')} them "
            f"by. Add ORDER BY to its OVER clause ({name}(...) OVER (PARTITION BY ... ORDER BY "
            "...))"
        )
        return window, "UnorderedWindow", message, {"view": view, "function": name}
    return None


_ORDERED_VERB = {"ROW_NUMBER": "number", "LAG": "offset", "LEAD": "offset", "NTH_VALUE": "pick"}


def _present(select: exp.Select, clause: str) -> list[exp.Expr]:
    node = select.args.get(clause)
    return [] if node is None else [node]


def _is(node: exp.Expr, *, window: bool) -> bool:
    return isinstance(node, exp.Window) if window else is_aggregate(node)


_MODIFIERS = (exp.Filter, exp.WithinGroup, exp.IgnoreNulls, exp.RespectNulls)
"""What wraps a call and modifies it: `COUNT(*) FILTER (WHERE ...)`, `... WITHIN GROUP (...)`."""


def is_aggregate(node: exp.Expr) -> bool:
    """Whether `node` is a call that aggregates the rows of its group (not a window function),
    with its modifiers, if any."""
    call = _unwrapped(node)
    around = node.parent
    while isinstance(around, _MODIFIERS):
        around = around.parent
    if isinstance(around, exp.Window):
        return False  # a window function
    if isinstance(call, exp.Any | exp.All) and isinstance(call.this, exp.Query | exp.Subquery):
        return False  # `= ANY (SELECT ...)`: a quantifier
    if isinstance(call, exp.Any) and isinstance(call.parent, exp.Like | exp.ILike):
        return False  # `name LIKE ANY ('a%', 'b%')`: a quantifier
    if isinstance(call, exp.AggFunc):
        return True
    if isinstance(call, exp.Anonymous):
        names = [call.name]
    elif isinstance(call, exp.Func):
        names = list(type(call).sql_names())
    else:
        names = [call.key]  # `ANY(x)`, Spark's aggregate, is a predicate to sqlglot
    return any(name.lower() in SPARK_AGGREGATES for name in names)


def _grouped(
    select: exp.Select, group: exp.Expr, declared: frozenset[str]
) -> set[tuple[str, str]] | None:
    """The columns a GROUP BY names, an ordinal inside ROLLUP, CUBE or GROUPING SETS naming
    the select item's (sqlglot expands top-level ordinals only); None when one names an
    aggregate or no item (Spark's to refuse)."""
    found = {_key(c) for c in group.find_all(exp.Column)}
    for ordinal in group.find_all(exp.Literal):
        if not ordinal.is_int or not ordinal.find_ancestor(exp.Rollup, exp.Cube, exp.GroupingSets):
            continue
        index = int(ordinal.this) - 1
        if not 0 <= index < len(select.expressions):
            return None
        item = select.expressions[index]
        if any(is_aggregate(n) for n in _walk([item], declared)):
            return None
        found |= {_key(c) for c in item.find_all(exp.Column)}
    return found


def _unwrapped(node: exp.Expr) -> exp.Expr:
    while isinstance(node, _MODIFIERS):
        node = node.this
    return node


def _aggregates(select: exp.Select, declared: frozenset[str]) -> bool:
    if select.args.get("group") is not None:
        return True
    return any(is_aggregate(node) for node in _walk(_after_grouping(select), declared))


def _unknown_call(select: exp.Select, declared: frozenset[str]) -> bool:
    """Whether the SELECT's list or HAVING calls a function neither Spark nor the program has."""
    return any(unknown_call(node, declared) for node in _walk(_after_grouping(select), declared))


def _after_grouping(select: exp.Select) -> list[exp.Expr]:
    """What a SELECT evaluates once its rows are grouped: its select list and its HAVING."""
    having = select.args.get("having")
    return [*select.expressions, *([having] if having is not None else [])]


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


def _problem(view: str, column: exp.Column, *, grouped: bool, clause: str) -> Problem:
    name = column.name
    details: dict[str, object] = {"view": view, "reference": name}
    if clause == "having":
        message = (
            f"View '{view}' reads column '{name}' in its HAVING, which is evaluated after rows "
            f"are grouped, and '{name}' is neither grouped nor inside an aggregate. Move the "
            f"condition to WHERE, add {name} to the GROUP BY, or aggregate it (for example "
            f"MAX({name}))"
        )
    elif grouped:
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
