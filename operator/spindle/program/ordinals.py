"""GROUP BY and ORDER BY positions that name no column of the select list.

`GROUP BY 0` (or 3 of two columns, or -1) is Spark's `GROUP_BY_POS_OUT_OF_RANGE`. sqlglot reads
the position as a Python index before Spark sees it, so `GROUP BY 0` reached Spark as the last
column (`GROUP BY COUNT(*)`: refused with the wrong reason) and `ORDER BY 0` ran, ordered by the
last column, where Spark refuses it. Here such a position is `OrdinalOutOfRange`, at the number.
A SELECT with a star or a generator (`posexplode`, `inline`, ...) is left to Spark: its number
of columns is not known here; so is a number above INT's range, a constant to Spark.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp

from spindle.program.calls import call_name
from spindle.wording import counted

Problem = tuple[exp.Expr, str, str, dict[str, object]]


def ordinal_problem(view: str, query: exp.Query) -> Problem | None:
    """The first GROUP BY or ORDER BY position outside 1..(columns selected) in the query."""
    for select in query.find_all(exp.Select):
        if any(_widens(e) for e in select.expressions):
            continue
        width = len(select.expressions)
        for clause, node in _positions(select):
            position = _number(node)
            if position is not None and not 1 <= position <= width:
                message = (
                    f"View '{view}' has {clause} {position}, but its SELECT has "
                    f"{counted(width, 'column')}: a position counts them from 1. Name the "
                    f"column instead, or use a position from 1 to {width}"
                )
                return node, "OrdinalOutOfRange", message, {"view": view, "position": position}
    return None


def _positions(select: exp.Select) -> Iterator[tuple[str, exp.Expr]]:
    group = select.args.get("group")
    for node in group.expressions if group is not None else ():
        yield "GROUP BY", node
    order = select.args.get("order")
    for node in order.expressions if order is not None else ():
        yield "ORDER BY", node.this if isinstance(node, exp.Ordered) else node


GENERATORS = frozenset(
    {"explode", "explode_outer", "posexplode", "posexplode_outer", "inline", "inline_outer"}
    | {"stack", "json_tuple"}
)
"""Spark's generators: one select item that stands for several columns."""
INT_MAX = 2**31 - 1
"""Above it a number is a BIGINT, which Spark sorts and groups by as a constant, not a position."""


def _widens(item: exp.Expr) -> bool:
    """Whether a select item may stand for more columns than one (a star, a generator)."""
    if isinstance(item, exp.Star) or item.is_star:
        return True
    return any(isinstance(n, exp.Func) and call_name(n).lower() in GENERATORS for n in item.walk())


def _number(node: exp.Expr) -> int | None:
    """The integer position `node` writes (`1`, `-1`), or None for anything else."""
    sign = 1
    if isinstance(node, exp.Neg):
        sign, node = -1, node.this
    if isinstance(node, exp.Literal) and not node.is_string and node.name.isdigit():
        value = int(node.name)
        return sign * value if value <= INT_MAX else None
    return None
