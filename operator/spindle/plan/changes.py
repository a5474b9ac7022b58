"""Per-object changes: status, the reasons for a modification, and a category.

Reasons: `schema` and `properties` (own declaration), `query` (own query), `upstream:<name>` (a
relation it reads changed its data), `udf:<name>` (a function it calls changed) and `runtime` (the
checkpoint was written by another runtime version).
Categories, after SQLMesh and ksqlDB: `non_breaking` (only columns appended; existing columns and
rows unchanged), `metadata` (only how the view is kept, e.g. MATERIALIZED), `breaking` (the rest).
A view's appended column keeps its rows unless it aggregates them (an aggregate where the query
did not aggregate), makes several of each (a generator: `EXPLODE`, `STACK`, ...), reads others
(a window function), or groups them otherwise (GROUP BY ALL groups by what is not aggregated).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from sqlglot import exp

from spindle.program import Fingerprints, Program, Table, View
from spindle.program.calls import call_name
from spindle.program.canonical import query_shape
from spindle.program.grouping import is_aggregate
from spindle.program.ordinals import GENERATORS


class Status(StrEnum):
    ADDED = "added"
    REMOVED = "removed"
    MODIFIED = "modified"


class Category(StrEnum):
    NON_BREAKING = "non_breaking"
    METADATA = "metadata"
    BREAKING = "breaking"


@dataclass(frozen=True)
class ObjectChange:
    name: str
    kind: str  # "table" | "view"
    status: Status
    reasons: tuple[str, ...] = ()
    category: Category | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "status": self.status.value,
            "reasons": list(self.reasons),
            "category": self.category.value if self.category else None,
        }


def _appended_nullable_columns(old: Table, new: Table) -> bool:
    before = tuple((c.name, c.type, c.nullable, c.lateness) for c in old.columns)
    after = tuple((c.name, c.type, c.nullable, c.lateness) for c in new.columns)
    extra = new.columns[len(old.columns) :]
    return (
        len(after) > len(before)
        and after[: len(before)] == before
        and all(c.nullable and c.lateness is None for c in extra)
        and old.primary_key == new.primary_key
        and (old.materialized, old.append_only) == (new.materialized, new.append_only)
    )


def _columns(table: Table) -> tuple[tuple[str, str, bool], ...]:
    return tuple((c.name, c.type, c.nullable) for c in table.columns)


def _lateness(table: Table) -> tuple[str | None, ...]:
    return tuple(c.lateness for c in table.columns)


def table_change(old: Table, new: Table) -> ObjectChange | None:
    if old.schema_signature() == new.schema_signature():
        return None
    reasons = []
    if _columns(old) != _columns(new) or old.primary_key != new.primary_key:
        reasons.append("schema")
    if (old.materialized, old.append_only) != (new.materialized, new.append_only) or (
        len(old.columns) == len(new.columns) and _lateness(old) != _lateness(new)
    ):
        reasons.append("properties")
    category = Category.NON_BREAKING if _appended_nullable_columns(old, new) else Category.BREAKING
    return ObjectChange(new.name, "table", Status.MODIFIED, tuple(reasons), category)


def _own_aggregate(node: exp.Expr, select: exp.Select) -> bool:
    """Whether `node` is an aggregate call of `select` (one in a subquery is the subquery's)."""
    return (
        isinstance(node, exp.Func | exp.Any)
        and is_aggregate(node)
        and node.find_ancestor(exp.Select) is select
    )


def _changes_rows(item: exp.Expr, select: exp.Select, *, grouped: bool) -> bool:
    """Whether select item `item` of `select` changes which rows it has: a window function,
    a generator (several rows for each), or an aggregate where the rows were not `grouped`
    already (one row for all)."""
    return any(
        isinstance(node, exp.Window)
        or (isinstance(node, exp.Func) and call_name(node).lower() in GENERATORS)
        or (not grouped and _own_aggregate(node, select))
        for node in item.walk()
    )


def _appended_projections(old: View, new: View) -> bool:
    """Only output columns were appended, and they keep the rows: same sources, filters and
    grouping, no DISTINCT and no GROUP BY ALL, and no appended column that aggregates where
    the query did not, generates rows or is a window function."""
    before, after = query_shape(old.query), query_shape(new.query)
    if before is None or after is None or before.distinct or after.distinct:
        return False
    if not (
        before.body == after.body
        and len(after.projections) > len(before.projections)
        and after.projections[: len(before.projections)] == before.projections
        and "*" not in before.projections
    ):
        return False
    was, select = old.query, new.query
    assert isinstance(was, exp.Select) and isinstance(select, exp.Select)  # as query_shape says
    group = select.args.get("group")
    if group is not None and group.args.get("all"):
        return False
    grouped = group is not None or any(_own_aggregate(node, was) for node in was.walk())
    appended = select.expressions[len(before.projections) :]
    return not any(_changes_rows(item, select, grouped=grouped) for item in appended)


def view_change(
    *,
    old: View,
    new: View,
    old_fp: Fingerprints,
    new_fp: Fingerprints,
    runtime_changed: bool,
) -> ObjectChange | None:
    reasons: list[str] = []
    if old.canonical != new.canonical:
        reasons.append("query")
    if old.materialized != new.materialized:
        reasons.append("properties")
    for dep in new.dependencies:
        if dep in old_fp.data and old_fp.data[dep] != new_fp.data[dep]:
            reasons.append(f"upstream:{dep}")
    for function in sorted(set(old.functions) | set(new.functions)):
        if old_fp.functions.get(function) != new_fp.functions.get(function):
            reasons.append(f"udf:{function}")
    if runtime_changed:
        reasons.append("runtime")
    if not reasons and old_fp.views[old.name] != new_fp.views[new.name]:
        reasons.append("query")  # a dependency set change not visible in the canonical text
    if not reasons:
        return None
    if reasons == ["properties"]:
        category = Category.METADATA
    elif reasons == ["query"] and _appended_projections(old, new):
        category = Category.NON_BREAKING
    else:
        category = Category.BREAKING
    return ObjectChange(new.name, "view", Status.MODIFIED, tuple(reasons), category)


def with_reasons(changes: dict[str, ObjectChange], name: str, reasons: tuple[str, ...]) -> None:
    """View `name` modified for `reasons` too, though its own SQL may not have changed: a new
    breaking modification, or the reasons an existing modification lacks added to it (a view
    added or removed stays as it is)."""
    existing = changes.get(name)
    if existing is None:
        changes[name] = ObjectChange(name, "view", Status.MODIFIED, reasons, Category.BREAKING)
        return
    missing = tuple(r for r in reasons if r not in existing.reasons)
    if existing.status is Status.MODIFIED and missing:
        changes[name] = ObjectChange(
            name, "view", Status.MODIFIED, (*existing.reasons, *missing), Category.BREAKING
        )


def object_changes(
    *, old: Program, new: Program, old_fp: Fingerprints, new_fp: Fingerprints, runtime_changed: bool
) -> dict[str, ObjectChange]:
    """Every added, removed and modified table and view, by name."""
    changes: dict[str, ObjectChange] = {}
    for kind, before, after in (
        ("table", old.tables, new.tables),
        ("view", old.views, new.views),
    ):
        for name in after.keys() - before.keys():
            changes[name] = ObjectChange(name, kind, Status.ADDED)
        for name in before.keys() - after.keys():
            changes[name] = ObjectChange(name, kind, Status.REMOVED)
    for name in old.tables.keys() & new.tables.keys():
        table = table_change(old.tables[name], new.tables[name])
        if table:
            changes[name] = table
    for name in new.views:  # topological order, so upstream reasons are settled first
        if name in old.views:
            view = view_change(
                old=old.views[name],
                new=new.views[name],
                old_fp=old_fp,
                new_fp=new_fp,
                runtime_changed=runtime_changed,
            )
            if view:
                changes[name] = view
    return changes
