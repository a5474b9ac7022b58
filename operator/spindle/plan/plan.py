"""The change plan: a frozen object computed once from two programs, then executed.

`make_plan` composes the passes (fingerprints → object changes → connector changes → refusals)
into a `ChangePlan`. The runtime evaluates it; the lifecycle decides on it; the CLI prints it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from spindle.plan.changes import ObjectChange, Status, object_changes, with_reasons
from spindle.plan.connectors import connector_changes
from spindle.plan.diff import Diff, ProgramDiff
from spindle.plan.estimate import Estimate, Rate, StoredSize, make_estimate
from spindle.plan.maintenance import Maintenance, maintenance_of
from spindle.plan.refusals import Change, Refusal, refusal
from spindle.plan.translation import revised_views, with_revised
from spindle.program import Fingerprints, Program, fingerprint, parse_program
from spindle.program.fingerprint import digest
from spindle.program.spark_calls import TRANSLATION_REVISION
from spindle.versions import RUNTIME_VERSION

EMPTY_PROGRAM = parse_program("")


def change_id(
    *,
    old_program_fp: str,
    new_program_fp: str,
    runtime: str,
    restate: tuple[str, ...] = (),
    request: str | None = None,
) -> str:
    """Short, stable id of a change: what an approval names. A restatement (views recomputed
    without an SQL change) is part of it, so approving one never approves the other, and so is
    its request as written (`v@2`): a request is served once (the checkpoint records it as
    written), and asking again (a new label, another spelling) is a change of its own, which
    the approval of the last one, left in place, does not approve."""
    extra = (
        ("restate", *sorted(restate), *(("request", request) if request else ())) if restate else ()
    )
    return digest("change", old_program_fp, new_program_fp, runtime, *extra)[:12]


RESTATE = "restate"
"""The reason of a view recomputed on request (`spindle.dev/restate`), and of its dependents."""


@dataclass(frozen=True)
class Bootstrap:
    allowed: bool
    error_code: str | None = None
    message: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"allowed": self.allowed, "error_code": self.error_code, "message": self.message}


@dataclass(frozen=True)
class ChangePlan:
    old: Program
    new: Program
    old_fingerprints: Fingerprints
    new_fingerprints: Fingerprints
    diff: Diff
    changes: Mapping[str, ObjectChange]
    change_id: str
    bootstrap: Bootstrap
    runtime: str
    first_start: bool
    """No checkpoint yet: nothing to diff against, so no approval is needed."""
    maintenance: Mapping[str, Maintenance] = field(default_factory=dict)
    """How each view of the new program is kept up to date (incremental or recompute)."""
    restate: tuple[str, ...] = ()
    """Views named by a restatement request (sorted); their dependents are restated too."""
    restate_request: str | None = None
    """The request as given (`spindle.dev/restate`): the checkpoint records it once served."""
    estimate: Estimate | None = None
    """What bootstrapping costs (None before the first checkpoint: nothing to bootstrap)."""

    @property
    def kept_state(self) -> frozenset[str]:
        """Checkpointed relations the bootstrap keeps (and may read)."""
        old = set(self.old.tables) | set(self.old.views)
        new = set(self.new.tables) | set(self.new.views)
        return frozenset((old & new) - set(self.state_to_discard))

    @property
    def needs_approval(self) -> bool:
        return not self.first_start and not self.diff.is_empty

    def _with_status(self, kind: str, *statuses: Status) -> tuple[str, ...]:
        return tuple(n for n, c in self.changes.items() if c.kind == kind and c.status in statuses)

    @property
    def views_to_evaluate(self) -> tuple[str, ...]:
        """New and modified views, in dependency order."""
        wanted = set(self._with_status("view", Status.ADDED, Status.MODIFIED))
        return tuple(v for v in self.new.views if v in wanted)

    @property
    def tables_to_truncate(self) -> tuple[str, ...]:
        """Modified tables whose rows cannot be kept (all but appended nullable columns)."""
        return tuple(
            sorted(
                n
                for n, c in self.changes.items()
                if c.kind == "table"
                and c.status is Status.MODIFIED
                and c.category is not None
                and c.category.value == "breaking"
            )
        )

    @property
    def tables_to_evolve(self) -> tuple[str, ...]:
        """Modified tables that keep their rows, with NULL in appended columns."""
        return tuple(
            sorted(
                n
                for n, c in self.changes.items()
                if c.kind == "table"
                and c.status is Status.MODIFIED
                and n not in self.tables_to_truncate
            )
        )

    @property
    def state_to_discard(self) -> tuple[str, ...]:
        return tuple(
            sorted(
                n
                for n, c in self.changes.items()
                if c.status is Status.REMOVED
                or (c.kind == "view" and c.status is Status.MODIFIED)
                or n in self.tables_to_truncate
            )
        )

    @property
    def connectors_to_reset(self) -> tuple[str, ...]:
        """Input connectors that start from their configured start, not their offsets."""
        reset = set(self.diff.added_input_connectors) | set(self.diff.modified_input_connectors)
        for table in self.tables_to_truncate:
            reset.update(c.key for c in self.new.tables[table].connectors)
        return tuple(sorted(reset))

    def to_json(self) -> dict[str, Any]:
        body = self.diff.to_json()
        body["change_id"] = self.change_id
        body["changes"] = {n: self.changes[n].to_json() for n in sorted(self.changes)}
        body["bootstrap"] = self.bootstrap.to_json()
        body["maintenance"] = {n: m.to_json() for n, m in self.maintenance.items()}
        return body


def _bootstrap(found: Refusal | None) -> Bootstrap:
    if found is None:
        return Bootstrap(allowed=True)
    return Bootstrap(False, found.error_code, found.message, found.details)


def restated(new: Program, restate: tuple[str, ...]) -> list[str]:
    """The views named and every view reading them, transitively, in the program's order (the
    caller checked that the names are views of `new`)."""
    found: set[str] = set(restate)
    for name, view in new.views.items():  # topological order: upstream first
        if found & set(view.dependencies):
            found.add(name)
    return [n for n in new.views if n in found]


def _with_restated(
    changes: dict[str, ObjectChange], new: Program, restate: tuple[str, ...]
) -> dict[str, ObjectChange]:
    for name in restated(new, restate):
        with_reasons(changes, name, (RESTATE,))
    return changes


@dataclass(frozen=True)
class Stored:
    """What the checkpoint records beyond its program, for the estimate: each stored
    relation's size (None: not observed) and the rates earlier steps and bootstraps measured."""

    sizes: Mapping[str, StoredSize] | None = None
    rates: tuple[Rate, ...] = ()
    outputs_mode: str = "replace"


def make_plan(
    *,
    old: Program | None,
    new: Program,
    old_runtime: str | None = None,
    runtime: str = RUNTIME_VERSION,
    old_translation: int | None = None,
    restate: tuple[str, ...] = (),
    restate_request: str | None = None,
    stored: Stored | None = None,
) -> ChangePlan:
    """Diff `new` against `old` (the checkpointed program, or None before the first one);
    `restate` names views of `new` to recompute though they did not change; `old_translation`
    is the translation revision of the checkpoint's state (`plan.translation`)."""
    first_start = old is None
    before = EMPTY_PROGRAM if old is None else old
    old_fp, new_fp = fingerprint(before), fingerprint(new)
    runtime_changed = old_runtime is not None and old_runtime != runtime
    restate = () if first_start else tuple(sorted(set(restate)))
    changes = object_changes(
        old=before, new=new, old_fp=old_fp, new_fp=new_fp, runtime_changed=runtime_changed
    )
    changes = _with_restated(changes, new, restate)
    revised = (
        ()
        if first_start or old_translation is None or old_runtime != runtime
        else revised_views(old=before, new=new, since=old_translation)
    )
    changes = with_revised(changes, new=new, revised=revised)

    def names(kind: str, status: Status) -> tuple[str, ...]:
        return tuple(sorted(n for n, c in changes.items() if c.kind == kind and c.status is status))

    program_diff = ProgramDiff(  # added and removed from the programs: a name that moved
        # from table to view (refused: `refusals.kind_changed`) is both
        added_tables=tuple(sorted(new.tables.keys() - before.tables.keys())),
        removed_tables=tuple(sorted(before.tables.keys() - new.tables.keys())),
        modified_tables=names("table", Status.MODIFIED),
        added_views=tuple(sorted(new.views.keys() - before.views.keys())),
        removed_views=tuple(sorted(before.views.keys() - new.views.keys())),
        modified_views=names("view", Status.MODIFIED),
    )
    diff = Diff(program_diff, None, **connector_changes(old=before, new=new))
    found = refusal(Change(old=before, new=new, diff=diff, changes=changes))
    plan = ChangePlan(
        old=before,
        new=new,
        old_fingerprints=old_fp,
        new_fingerprints=new_fp,
        diff=diff,
        changes=changes,
        change_id=change_id(
            old_program_fp="" if first_start else old_fp.program,
            new_program_fp=new_fp.program,
            runtime=f"{runtime}+translation-{TRANSLATION_REVISION}" if revised else runtime,
            restate=restate,
            request=restate_request,
        ),
        bootstrap=_bootstrap(None if first_start else found),
        runtime=runtime,
        first_start=first_start,
        maintenance=maintenance_of(new),
        restate=restate,
        # a first start computes every view: it serves a request made before it, too
        restate_request=restate_request if restate or first_start else None,
    )
    if first_start:
        return plan
    given = stored or Stored()
    estimate = make_estimate(
        new=new,
        views=plan.views_to_evaluate,
        kept=plan.kept_state,
        sizes=given.sizes,
        rates=given.rates,
        outputs_mode=given.outputs_mode,
        emptied=plan.tables_to_truncate,
        restarted=plan.connectors_to_reset,
    )
    return replace(plan, estimate=estimate)
