"""Canonical SQL: the form two statements are compared in.

Passes (sqlglot style) look at a tree and return *edits*; the edits are applied in place, the
tree is rendered without comments, and the edits are undone. No deep copy is made, which is what
keeps canonicalization cheap for programs of thousands of views.

The passes: every source gets a positional alias (`#t0`, `#t1`, ... by first appearance: table
aliases, CTE names and an unaliased table's implicit alias), column qualifiers follow, and the
optional `INNER` is dropped. sqlglot's generator already fixes keyword case, whitespace and the
optional `AS`; the parser normalized identifier case. Formatting, comments, keyword case,
unquoted identifier case and alias spelling therefore never count as a change.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlglot import exp
from sqlglot.errors import ErrorLevel

from spindle.program.dialect import DIALECT

_ALIAS_PREFIX = "#t"  # cannot collide with an unquoted identifier

Edit = tuple[exp.Expr, str, Any]


def _alias_owner(alias: exp.TableAlias) -> bool:
    return isinstance(alias.parent, exp.Table | exp.Subquery | exp.CTE | exp.Lateral | exp.Unnest)


CENSUS_TYPES: tuple[type[exp.Expr], ...] = (
    exp.TableAlias,
    exp.Column,
    exp.Table,
    exp.CTE,
    exp.Join,
    exp.Func,
)


def census(tree: exp.Expr) -> list[exp.Expr]:
    """The nodes the passes (and `called_functions`) look at, in walk order: one walk serves
    them all."""
    return list(tree.find_all(*CENSUS_TYPES))


def positional_aliases(nodes: Sequence[exp.Expr]) -> list[Edit]:
    """Edits that give every source a positional alias; the renaming is injective, so
    different queries never share a canonical form."""
    mapping: dict[str, str] = {}
    for node in nodes:
        if (isinstance(node, exp.TableAlias) and _alias_owner(node) and node.this) or (
            isinstance(node, exp.Table) and not node.alias and not node.db
        ):
            mapping.setdefault(node.name, f"{_ALIAS_PREFIX}{len(mapping)}")
    if not mapping:
        return []
    cte_names = {node.alias for node in nodes if isinstance(node, exp.CTE)}

    def fresh(name: str) -> exp.Identifier:
        return exp.Identifier(this=mapping[name], quoted=True)

    edits: list[Edit] = []
    for node in nodes:
        if isinstance(node, exp.TableAlias) and _alias_owner(node) and node.this:
            edits.append((node, "this", fresh(node.name)))
        elif isinstance(node, exp.Column) and (part := _source_part(node)) is not None:
            if node.text(part) in mapping:
                edits.append((node, part, fresh(node.text(part))))
        elif isinstance(node, exp.Table) and not node.db:
            if node.name in cte_names:
                edits.append((node, "this", fresh(node.name)))
            elif not node.alias:
                edits.append((node, "alias", exp.TableAlias(this=fresh(node.name))))
    return edits


def _source_part(column: exp.Column) -> str | None:
    """The part of a column reference that can name a source: its first. In `a.s.f` it is `a`
    (sqlglot's `db`; `s` is a struct column), in `a.x` it is `a` (`table`)."""
    return next((part for part in ("catalog", "db", "table") if column.args.get(part)), None)


def optional_inner(nodes: Sequence[exp.Expr]) -> list[Edit]:
    return [
        (join, "kind", None)
        for join in nodes
        if isinstance(join, exp.Join) and (join.args.get("kind") or "").upper() == "INNER"
    ]


PASSES: tuple[Callable[[Sequence[exp.Expr]], list[Edit]], ...] = (
    positional_aliases,
    optional_inner,
)

# Trees are shared through the statement cache; edits are serialized so that concurrent
# readers (the operator runs sync handlers in threads) never see a half-edited tree.
_EDITING = threading.RLock()


@contextmanager
def canonical_form(tree: exp.Expr, nodes: Sequence[exp.Expr] | None = None) -> Iterator[exp.Expr]:
    """Temporarily put `tree` in canonical form; it is restored on exit. `nodes` is the tree's
    `census`, when the caller has it already."""
    undo: list[Edit] = []
    with _EDITING:
        yield from _edited(tree, census(tree) if nodes is None else nodes, undo)


def _edited(tree: exp.Expr, nodes: Sequence[exp.Expr], undo: list[Edit]) -> Iterator[exp.Expr]:
    try:
        for make_edits in PASSES:
            for node, key, value in make_edits(nodes):
                undo.append((node, key, node.args.get(key)))
                node.set(key, value)
        yield tree
    finally:
        for node, key, value in reversed(undo):
            node.set(key, value)


DROPPED_SILENTLY: dict[type[exp.Expr], tuple[str, str]] = {
    exp.Exists: ("EXISTS(", "expression"),  # Spark's EXISTS(array, x -> predicate)
}
"""Arguments Spindle's SQL drops without saying so, with the text that kind is written with:
`EXISTS(a, x -> x > 1)` and `EXISTS(a, x -> x > 2)` were both `EXISTS(a)`. The golden plan
case `call_arguments_the_dialect_cannot_write` holds calls whose canonical forms must differ."""


def render(tree: exp.Expr) -> str:
    """`tree` in Spindle's SQL, or, where that SQL cannot say all of it, that SQL followed by
    the tree's `structure`: the dialect writes `SORT_ARRAY(x, false)`, `SORT_ARRAY(x)` and
    `ARRAY_SORT(x)` all as `ARRAY_SORT(x)`, and `TO_CHAR(x, '999')` as `CAST(x AS TEXT)`, so
    a change from one to another was no change. The generator says what it could not write
    (and logged it, a warning a user saw after the command's output); `DROPPED_SILENTLY` the
    rest."""
    generator = DIALECT.generator(comments=False, unsupported_level=ErrorLevel.IGNORE)
    text = generator.generate(tree, copy=False)
    if generator.unsupported_messages or _dropped(tree, text):
        return f"{text} /* {structure(tree)} */"
    return text


def _dropped(tree: exp.Expr, text: str) -> bool:
    kinds = tuple(kind for kind, (written, _) in DROPPED_SILENTLY.items() if written in text)
    return bool(kinds) and any(
        node.args.get(DROPPED_SILENTLY[type(node)][1]) is not None
        for node in tree.find_all(*kinds)
        if type(node) in DROPPED_SILENTLY
    )


def structure(node: object) -> str:
    """A tree written as its node kinds and their arguments, all of them (never their
    positions or comments): two trees with the same structure are the same query."""
    if isinstance(node, exp.Expr):
        parts = ",".join(
            f"{key}={structure(value)}" for key, value in node.args.items() if value is not None
        )
        return f"{type(node).__name__}({parts})"
    if isinstance(node, list):
        return "[" + ",".join(structure(item) for item in node) + "]"
    return repr(node)


def canonical_sql(tree: exp.Expr, nodes: Sequence[exp.Expr] | None = None) -> str:
    with canonical_form(tree, nodes) as canonical:
        return render(canonical)


@dataclass(frozen=True)
class QueryShape:
    """A query split into its output column expressions and the rest (canonical SQL)."""

    projections: tuple[str, ...]
    body: str
    distinct: bool


def query_shape(query: exp.Query) -> QueryShape | None:
    """The shape of a plain SELECT; None for set operations and other query forms."""
    if not isinstance(query, exp.Select):
        return None
    with canonical_form(query) as tree:
        projections = tuple(render(p) for p in tree.expressions)
        original = tree.expressions
        tree.set("expressions", [exp.Star()])
        try:
            body = render(tree)
        finally:
            tree.set("expressions", original)
    return QueryShape(projections, body, bool(query.args.get("distinct")))
