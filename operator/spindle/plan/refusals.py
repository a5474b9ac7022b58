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
        "discarded under LATENESS cannot rebuild views. Revert the change, or clear the "
        "pipeline's state and backfill from scratch.",
        details={"tables": tables},
    )


def _reads_transitively(program: Program, view: str) -> set[str]:
    seen: set[str] = set()
    stack = [view]
    while stack:
        for dep in program.views[stack.pop()].dependencies:
            if dep not in seen:
                seen.add(dep)
                if dep in program.views:
                    stack.append(dep)
    return seen


def unmaterialized_tables(change: Change) -> Refusal | None:
    needing = sorted(
        name
        for name, c in change.changes.items()
        if c.kind == "view" and c.status in (Status.ADDED, Status.MODIFIED)
    )
    blocking: dict[str, list[str]] = {}
    for view in needing:
        for name in _reads_transitively(change.new, view):
            table = change.new.tables.get(name)
            unmodified = name in change.old.tables and name not in change.changes
            if table is not None and unmodified and not table.materialized:
                blocking.setdefault(name, []).append(view)
    if not blocking:
        return None
    tables = sorted(blocking)
    return Refusal(
        error_code="TableNotMaterialized",
        message=f"Views that need bootstrapping read tables that are not materialized "
        f"({', '.join(tables)}), so their contents are not stored. Declare them with "
        "'materialized' = 'true' (which truncates them once), or clear the pipeline's state.",
        details={"tables": tables, "views": sorted({v for vs in blocking.values() for v in vs})},
    )


RULES: tuple[Callable[[Change], Refusal | None], ...] = (lateness, unmaterialized_tables)


def refusal(change: Change) -> Refusal | None:
    for rule in RULES:
        found = rule(change)
        if found:
            return found
    return None
