"""What a query really reads: relations resolved through sqlglot scopes, and function calls.

CTEs, subqueries and set operations are resolved by scope, so a CTE that shadows a table name is
not a dependency on that table.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.scope import traverse_scope

from spindle.program.model import Reference


def _offset(node: exp.Expr) -> int:
    meta = node.meta if node.meta else {}
    start = meta.get("start")
    if start is None and isinstance(node, exp.Table) and node.this is not None:
        start = node.this.meta.get("start") if node.this.meta else None
    return int(start) if start is not None else 0


def relation_name(table: exp.Table) -> str:
    """The normalized name of a table reference; qualified names keep their qualifiers."""
    return ".".join(part.name for part in table.parts)


def read_relations(query: exp.Query) -> tuple[Reference, ...]:
    """Every base relation the query reads, each with the offset of its first reference."""
    try:
        scopes = traverse_scope(query)
    except OptimizeError:
        scopes = []
    found: dict[str, Reference] = {}
    for scope in scopes:
        for source in scope.sources.values():
            if isinstance(source, exp.Table):
                name = relation_name(source)
                found.setdefault(name, Reference(name=name, offset=_offset(source)))
    return tuple(sorted(found.values(), key=lambda r: (r.offset, r.name)))


def function_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    return node.sql_name().lower()


def called_functions(
    tree: exp.Expr, nodes: Iterable[exp.Expr] | None = None
) -> tuple[Reference, ...]:
    """Every function call in the tree (built-in or not), by lower-cased name. `nodes`, when
    given, are the tree's nodes in walk order (a census taken for other passes too)."""
    found: dict[str, Reference] = {}
    for node in tree.find_all(exp.Func) if nodes is None else nodes:
        if not isinstance(node, exp.Func):
            continue
        name = function_name(node)
        found.setdefault(name, Reference(name=name, offset=_offset(node)))
    return tuple(found.values())
