"""How each view is kept up to date: incrementally from its inputs' changes, or by recomputing.

`decompose` reads a view's query and returns its *shape*, the algebra the runtime maintains
incrementally (DBSP-style Z-sets: rows with weights, +1 inserted, -1 deleted):

- `Linear`: UNION ALL of select-project-join blocks (inner and cross joins, or one LEFT JOIN).
  Its change is the sum, over each input reference, of the block with that reference replaced by
  its change (references before it read the new state, after it the old); a LEFT JOIN adds the
  change of its unmatched left rows.
- `Aggregate`: one such block under GROUP BY (or a global aggregate, or SELECT DISTINCT) with
  COUNT, SUM, AVG, MIN and MAX. Groups keep running counts and sums; only the groups a change
  touches are read and rewritten; MIN and MAX re-read a group only when one of its values left.

Anything else is a string: the reason the view falls back to recomputing. The table of
constructs below is the whole policy. The plan calls `maintenance` (pure, on the query as
written); the runtime calls `decompose` again on the query it translated for Spark.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlglot import exp

from spindle.program import Function, Program, View
from spindle.program.calls import call_name
from spindle.program.grouping import is_aggregate


class Mode(StrEnum):
    INCREMENTAL = "incremental"
    RECOMPUTE = "recompute"


FALLBACK: Mapping[type[exp.Expr], str] = {
    exp.Window: "a window function",
    exp.Limit: "LIMIT",
    exp.Fetch: "FETCH FIRST",
    exp.Order: "ORDER BY",
    exp.With: "a WITH clause",
    exp.Subquery: "a subquery",
    exp.Except: "EXCEPT",
    exp.Intersect: "INTERSECT",
    exp.Unnest: "UNNEST",
    exp.Lateral: "LATERAL",
    exp.Having: "HAVING",
    exp.Filter: "an aggregate's FILTER (WHERE ...)",
    exp.Offset: "OFFSET",
    exp.TableSample: "TABLESAMPLE",
    **dict.fromkeys(
        (
            exp.Rand,
            exp.Randn,
            exp.Uniform,
            exp.Randstr,
            exp.Shuffle,
            exp.Uuid,
            exp.CurrentTimestamp,
            exp.CurrentDate,
            exp.CurrentTime,
            exp.Localtimestamp,
            exp.Systimestamp,
        ),
        "a non-deterministic function",
    ),
}
"""Constructs (anywhere in the query) that make a view recompute, with the reason shown. A
non-deterministic function would give a row's delete another value than its insert (a later
"now", another random draw), so the two would not cancel."""

NONDETERMINISTIC_CALLS = frozenset(
    {
        "rand",
        "random",
        "randn",
        "uniform",
        "randstr",
        "shuffle",
        "uuid",
        "current_timestamp",
        "current_date",
        "current_time",
        "localtimestamp",
        "curdate",
        "now",
        "getdate",
        "sysdate",
        "monotonically_increasing_id",
        "spark_partition_id",
        "input_file_name",
        "input_file_block_start",
        "input_file_block_length",
        "reflect",
        "java_method",
        "try_reflect",
        "aes_encrypt",  # a random IV unless given one
        "try_aes_encrypt",
    }
)
"""Spark's non-deterministic functions by name: sqlglot reads some as calls it does not know,
and the program keeps some calls as written (`spindle.program.calls`)."""

RELATIVE_DATES = frozenset({"now", "today", "yesterday", "tomorrow"})
"""Strings Spark reads as a date or time relative to now (`DATE 'today'`, `CAST('now' AS
TIMESTAMP)`): a query that holds one is as non-deterministic as `now()`. Only where it is cast to
a date or time: elsewhere (`status = 'today'`) it is a string like any other."""

AGGREGATES: Mapping[type[exp.Expr], str] = {
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
}
"""Aggregate functions maintained incrementally, by kind."""

RESERVED_PREFIX = "__"
"""Columns the runtime adds to state (weights, group keys, running sums) start with this."""


@dataclass(frozen=True)
class Maintenance:
    """What the plan says about one view."""

    mode: Mode
    reason: str | None = None
    """Why the view recomputes (None when incremental)."""

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode.value, **({"reason": self.reason} if self.reason else {})}


@dataclass(frozen=True, eq=False)
class Linear:
    blocks: tuple[exp.Select, ...]
    """UNION ALL branches, each a select-project-join block."""


@dataclass(frozen=True, eq=False)
class Call:
    kind: str
    """count, sum, avg, min or max."""
    argument: exp.Expr | None
    """None for COUNT(*)."""
    node: exp.Expr
    """The call as it appears in the select list (replaced by its running value)."""


@dataclass(frozen=True, eq=False)
class Aggregate:
    block: exp.Select
    """The select-project-join block the groups are computed over."""
    keys: tuple[exp.Expr, ...]
    calls: tuple[Call, ...]
    outputs: tuple[exp.Expr, ...]
    """The select list, aliased, in terms of `keys` and `calls`."""
    grouped: bool
    """False for a global aggregate: exactly one row, even over no input."""


Shape = Linear | Aggregate


def references(block: exp.Select) -> tuple[exp.Table, ...]:
    """The relations a block reads, in FROM-then-JOIN order (one per occurrence)."""
    source = block.args.get("from_")
    found = [source.this] if source is not None else []
    found.extend(join.this for join in block.args.get("joins") or ())
    return tuple(t for t in found if isinstance(t, exp.Table))


def _join_problem(join: exp.Join, *, only: bool) -> str | None:
    """Inner and cross joins are maintained anywhere; a LEFT JOIN when it is the block's only
    join (its unmatched rows are maintained from the left rows the right side's change touches)."""
    side, kind = (join.side or "").upper(), (join.kind or "").upper()
    if side == "LEFT" and kind in ("", "OUTER"):
        return None if only else "a LEFT JOIN among other joins"
    if side or kind not in ("", "INNER", "CROSS"):
        return f"{' '.join(p for p in (side, kind) if p) or 'this'} JOIN"
    return None


def _block_problem(block: exp.Select) -> str | None:
    source = block.args.get("from_")
    if source is None:
        return "a SELECT without FROM"
    joins = block.args.get("joins") or ()
    if len(references(block)) != 1 + len(joins):
        return "a subquery"
    for join in joins:
        problem = _join_problem(join, only=len(joins) == 1)
        if problem:
            return problem
    if any(str(column.alias_or_name).startswith(RESERVED_PREFIX) for column in block.expressions):
        return f"an output column whose name starts with {RESERVED_PREFIX}"
    return None


def _first_fallback(query: exp.Expr) -> str | None:
    for node in query.walk():
        reason = next((FALLBACK[t] for t in type(node).__mro__ if t in FALLBACK), None)
        if reason is not None:
            return reason
        if _nondeterministic(node):
            return "a non-deterministic function"
        if _relative_date(node):
            return f"a date relative to now ('{node.name.strip()}')"
        if _other_aggregate(node):
            return f"the aggregate {call_name(node)}"
        if isinstance(node, exp.Distinct) and isinstance(node.parent, exp.AggFunc):
            return f"{node.parent.key.upper()}(DISTINCT ...)"
        if isinstance(node, exp.Count) and node.expressions:  # counted as of its first only
            return "COUNT of several arguments"
        nested = node is not query and node.parent_select is not None
        if isinstance(node, exp.Select) and nested and not isinstance(node.parent, exp.Union):
            return "a subquery"
    return None


def _nondeterministic(node: exp.Expr) -> bool:
    if isinstance(node, exp.StrToUnix):  # UNIX_TIMESTAMP() is the time now
        return node.this is None
    if not isinstance(node, exp.Anonymous):
        return False
    name = str(node.this).lower()
    return name in NONDETERMINISTIC_CALLS or (name == "unix_timestamp" and not node.expressions)


def _relative_date(node: exp.Expr) -> bool:
    """A string Spark reads as a date or time relative to now: one of `RELATIVE_DATES` cast
    to a date or time (`DATE 'today'` parses as that cast); elsewhere it is only a string."""
    cast = node.parent
    return (
        node.is_string
        and node.name.strip().lower() in RELATIVE_DATES
        and isinstance(cast, exp.Cast)
        and cast.to.this in exp.DataType.TEMPORAL_TYPES
    )


def _other_aggregate(node: exp.Expr) -> bool:
    """Whether `node` aggregates by other than `AGGREGATES`: sqlglot's (`STDDEV`) and also
    Spark's own that sqlglot does not know (`TRY_SUM`, `EVERY`: the program layer knows them by
    name), which the plan said were maintained incrementally while the runtime recomputed them."""
    return (
        isinstance(node, exp.Func | exp.Any) and type(node) not in AGGREGATES and is_aggregate(node)
    )


def _branches(query: exp.Expr) -> tuple[exp.Select, ...] | str:
    if isinstance(query, exp.Select):
        return (query,)
    if isinstance(query, exp.Union):
        if query.args.get("distinct"):
            return "UNION (without ALL)"
        left, right = _branches(query.left), _branches(query.right)
        if isinstance(left, str):
            return left
        if isinstance(right, str):
            return right
        return left + right
    return f"a {query.key.upper()} query"


def _calls(select: exp.Select) -> tuple[Call, ...]:
    calls: list[Call] = []
    for output in select.expressions:
        for node in output.find_all(*AGGREGATES):
            argument = node.this
            star = argument is None or isinstance(argument, exp.Star)
            calls.append(Call(AGGREGATES[type(node)], None if star else argument, node))
    return tuple(calls)


def decompose(query: exp.Expr) -> Shape | str:
    """The view's shape, or why it must be recomputed."""
    reason = _first_fallback(query)
    if reason is not None:
        return reason
    branches = _branches(query)
    if isinstance(branches, str):
        return branches
    for block in branches:
        problem = _block_problem(block)
        if problem:
            return problem
    aggregating = [
        b
        for b in branches
        if b.args.get("group") or b.args.get("distinct") or any(_calls_in(b.expressions))
    ]
    if not aggregating:
        return Linear(branches)
    if len(branches) > 1:
        return "UNION ALL over an aggregate"
    return _aggregate(branches[0])


def _calls_in(outputs: list[exp.Expr]) -> list[exp.Expr]:
    return [node for output in outputs for node in output.find_all(*AGGREGATES)]


TIME_WINDOWS = frozenset({"window", "session_window"})
"""Spark's time-window calls: a group keyed by one is a struct Spark builds per row (and a
session window spans rows), which the running values per key are not kept for."""


def _aggregate(select: exp.Select) -> Aggregate | str:
    group = select.args.get("group")
    distinct = select.args.get("distinct")
    calls = _calls(select)
    if distinct is not None:
        if calls or group is not None or distinct.args.get("on"):
            return "SELECT DISTINCT with aggregates"
        keys = tuple(output.unalias() for output in select.expressions)
        return Aggregate(select, keys, (), tuple(select.expressions), grouped=True)
    if group is not None:
        sets = (exp.Rollup, exp.Cube, exp.GroupingSets)  # as keys: GROUP BY ROLLUP(a)
        if any(group.args.get(k) for k in ("rollup", "cube", "grouping_sets", "totals")) or any(
            isinstance(key, sets) for key in group.expressions
        ):
            return "ROLLUP, CUBE or GROUPING SETS"
        if group.args.get("all"):  # its keys are implied: the change's grouping had none
            return "GROUP BY ALL"
        if any(
            str(call.this).lower() in TIME_WINDOWS
            for key in group.expressions
            for call in key.find_all(exp.Anonymous)
        ):
            return "a time window (WINDOW, SESSION_WINDOW)"
        keys = tuple(group.expressions)
    else:
        keys = ()
    return Aggregate(select, keys, calls, tuple(select.expressions), grouped=group is not None)


def maintenance(view: View, functions: Mapping[str, Function] | None = None) -> Maintenance:
    """The view's maintenance; a construct in the body of a user-defined function it calls
    (`functions`: the program's) counts as in the query, as the runtime inlines the body."""
    shape = decompose(view.query)
    if isinstance(shape, str):
        return Maintenance(Mode.RECOMPUTE, shape)
    for name in _called(view.functions, functions or {}):
        reason = _first_fallback((functions or {})[name].body)
        if reason is not None:
            return Maintenance(Mode.RECOMPUTE, f"{reason} (in function {name})")
    return Maintenance(Mode.INCREMENTAL)


def _called(names: tuple[str, ...], functions: Mapping[str, Function]) -> list[str]:
    """`names` and the functions they call, transitively, each once."""
    found: list[str] = []
    pending = [n for n in names if n in functions]
    while pending:
        name = pending.pop(0)
        if name not in found:
            found.append(name)
            pending.extend(n for n in functions[name].calls if n in functions)
    return found


def maintenance_of(program: Program) -> dict[str, Maintenance]:
    """Every view's maintenance, in dependency order."""
    return {name: maintenance(view, program.functions) for name, view in program.views.items()}
