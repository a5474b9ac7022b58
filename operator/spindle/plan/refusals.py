"""Why a change cannot be bootstrapped: a table of rules, each a pure function of the change.

Refusals are decided before anything is touched, so a refused change is never half-applied.
Connector-only changes are always allowed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spindle.plan.changes import ObjectChange, Status
from spindle.plan.diff import Diff
from spindle.program import Program


@dataclass(frozen=True)
class Refusal:
    error_code: str
    message: str
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Change:
    """What a rule looks at."""

    old: Program
    new: Program
    diff: Diff
    changes: Mapping[str, ObjectChange]


def lateness(change: Change) -> Refusal | None:
    if change.diff.connectors_only:
        return None
    tables = sorted(
        {t.name for p in (change.old, change.new) for t in p.tables.values() if t.lateness}
    )
    if not tables:
        return None
    return Refusal(
        error_code="LatenessNotBootstrappable",
        message=f"The program changed and uses LATENESS (tables: {', '.join(tables)}); state "
        "discarded under LATENESS cannot rebuild views. Revert the change, or start the "
        "pipeline over without its stored state (a new spec.storage.uri) and backfill its "
        "inputs from their start.",
        details={"tables": tables},
    )


def _tables_read(program: Program) -> dict[str, frozenset[str]]:
    """For each view, the tables it reads transitively: one pass in dependency order, so it
    stays linear in the size of the program."""
    reach: dict[str, frozenset[str]] = {}
    for name, view in program.views.items():  # topological order
        tables: set[str] = set()
        for dep in view.dependencies:
            tables.update(reach.get(dep, frozenset({dep} & program.tables.keys())))
        reach[name] = frozenset(tables)
    return reach


def unmaterialized_tables(change: Change) -> Refusal | None:
    needing = sorted(
        name
        for name, c in change.changes.items()
        if c.kind == "view" and c.status in (Status.ADDED, Status.MODIFIED)
    )
    unstored = {
        name
        for name, table in change.new.tables.items()
        if not table.materialized and name in change.old.tables and name not in change.changes
    }
    blocking: dict[str, list[str]] = {}
    if unstored:
        reach = _tables_read(change.new)
        for view in needing:
            for name in reach[view] & unstored:
                blocking.setdefault(name, []).append(view)
    if not blocking:
        return None
    tables = sorted(blocking)
    return Refusal(
        error_code="TableNotMaterialized",
        message=f"Views that need bootstrapping read tables that are not materialized "
        f"({', '.join(tables)}), so their contents are not stored. Declare them with "
        "'materialized' = 'true' (which truncates them once), or start the pipeline over "
        "without its stored state (a new spec.storage.uri: its inputs are then ingested again "
        "from their start).",
        details={"tables": tables, "views": sorted({v for vs in blocking.values() for v in vs})},
    )


def kind_changed(change: Change) -> Refusal | None:
    """A name that is a table on one side and a view on the other: one change cannot both
    discard the one's state and build the other's under the same name."""
    old, new = change.old, change.new
    names = sorted((old.tables.keys() & new.views.keys()) | (old.views.keys() & new.tables.keys()))
    if not names:
        return None
    return Refusal(
        error_code="RelationKindChanged",
        message=f"{', '.join(names)} would change between table and view under the same name. "
        "Give the new one another name, or remove the old one in one change and add the new "
        "one in the next.",
        details={"relations": names},
    )


RULES: tuple[Callable[[Change], Refusal | None], ...] = (
    kind_changed,
    lateness,
    unmaterialized_tables,
)


def refusal(change: Change) -> Refusal | None:
    for rule in RULES:
        found = rule(change)
        if found:
            return found
    return None
