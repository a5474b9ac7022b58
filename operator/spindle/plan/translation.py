"""Views whose stored state was computed by an older translation to Spark SQL.

A fix to how calls are written for Spark (`program.spark_calls`) changes what a view that
makes such a call computes, though its SQL did not change. The checkpoint records the
translation revision its state was computed with; each view kept by the checkpoint that makes
a call written otherwise since is modified with the reason `runtime`, and every view reading
it, transitively, with `upstream:<name>`, so the change waits for approval and its bootstrap
recomputes them, instead of mixing values of both translations in one view.
"""

from __future__ import annotations

from spindle.plan.changes import ObjectChange, with_reasons
from spindle.program import Program, View
from spindle.program.spark_calls import (
    ARGUMENTS_CAST,
    CASED_NAMES,
    COLUMN_LISTS,
    cased_outputs,
    first_select,
    revised_calls,
)

RUNTIME = "runtime"


def revised_views(*, old: Program, new: Program, since: int) -> tuple[str, ...]:
    """The views of both programs whose query (or a function it calls) makes a call whose
    translation changed after revision `since`, or that call a function of the program at all
    before its arguments were cast (`ARGUMENTS_CAST`), or name a column with capitals in
    double quotes before such names kept them (`CASED_NAMES`), or have a column list, which
    named nothing before `COLUMN_LISTS`."""
    return tuple(
        name
        for name, view in new.views.items()
        if name in old.views
        and (
            (since < ARGUMENTS_CAST and any(f in new.functions for f in view.functions))
            or (since < CASED_NAMES and (cased_outputs(view.query) or _cased_star(new, view)))
            or (since < COLUMN_LISTS and view.column_list)
            or revised_calls(
                [view.query, *(new.functions[f].body for f in _called(new, view.functions))],
                since=since,
            )
        )
    )


def _cased_star(program: Program, view: View) -> bool:
    """Whether a view selects only stars over a table with a column named with capitals."""
    select = first_select(view.query)
    if select is None or not all(item.is_star for item in select.expressions):
        return False
    tables = [program.tables[d] for d in view.dependencies if d in program.tables]
    return any(c.name != c.name.lower() for table in tables for c in table.columns)


def _called(program: Program, direct: tuple[str, ...]) -> list[str]:
    """The functions `direct` names and every function they call, transitively."""
    found: list[str] = []
    pending = [f for f in direct if f in program.functions]
    while pending:
        name = pending.pop()
        if name in found:
            continue
        found.append(name)
        pending.extend(f for f in program.functions[name].calls if f in program.functions)
    return found


def with_revised(
    changes: dict[str, ObjectChange], *, new: Program, revised: tuple[str, ...]
) -> dict[str, ObjectChange]:
    """`changes` with each of `revised` modified for the runtime, and the views reading them
    for their upstream."""
    changed = set(revised)
    for name, view in new.views.items():  # topological order: upstream first
        upstream = sorted(changed & set(view.dependencies))
        reasons = ((RUNTIME,) if name in revised else ()) + tuple(f"upstream:{u}" for u in upstream)
        if not reasons:
            continue
        changed.add(name)
        with_reasons(changes, name, reasons)
    return changes
