"""The one status shape: a decision plus what was observed, as `api.status.PipelineStatus`.

Every body records what `conclude` returns: the operator writes it to the status subresource,
the local CLI to its status file (and prints it), so one parser reads both. `conclude` also says
which Events are news, so no body decides that on its own. Condition transition times survive
when a condition did not change.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from spindle.api import Phase
from spindle.api.status import (
    BootstrapStatus,
    CheckpointStatus,
    Condition,
    DriverStatus,
    PendingChange,
    PipelineStatus,
    ViewMaintenance,
)
from spindle.checkpoint import Manifest
from spindle.lifecycle.decision import EVICTED, RETRYING, Decision, Event
from spindle.lifecycle.observation import Observation, answering, request_change

READY = "Ready"
PREVIEWED = "Previewed"
RECORDED = "Recorded"
"""A condition only a status the API server refused as too large has (False)."""
STATUS_TOO_LARGE = "StatusTooLarge"
STATUS_LIST_LIMIT = 100
"""The most entries the status keeps of each list of the pending change, and of `maintenance`
(the rest are counted in `omitted`): a program of 7,000 views (371 KB of SQL, well within
docs/limits.md) had a status of 1.4 MB, which with its spec was past what etcd stores, so
none was written."""


def timestamp(moment: datetime.datetime) -> str:
    """RFC 3339, to the second, as every time in the status is written."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def read_timestamp(text: object) -> datetime.datetime | None:
    """A time as the API server writes one (RFC 3339: `Z` or an offset, a fraction of a second
    or none), as `timestamp` writes one; None for none."""
    return datetime.datetime.fromisoformat(str(text)) if text else None


@dataclass(frozen=True)
class Report:
    """What a body records after one cycle: the status, and the Events that are news."""

    status: PipelineStatus
    events: tuple[Event, ...]


def checkpoint_status(checkpoint: Manifest, *, uri: str) -> CheckpointStatus:
    rows = {"table": 0, "view": 0}
    for record in checkpoint.state.values():
        rows[record.kind] += record.rows or 0
    return CheckpointStatus(
        id=checkpoint.id,
        sequence=checkpoint.sequence,
        time=timestamp(checkpoint.created_at),
        uri=uri,
        table_rows=rows["table"],
        view_rows=rows["view"],
    )


def bootstrap_status(checkpoint: Manifest) -> BootstrapStatus | None:
    record = checkpoint.bootstrap
    if record is None:
        return None
    return BootstrapStatus(
        change_id=record.change_id,
        checkpoint=checkpoint.id,
        approved_by=record.approved_by,
        finished_at=timestamp(record.finished_at),
        views_evaluated=len(record.views_evaluated),
        input_records_read=record.input_records_read,
    )


def _condition(
    kind: str,
    *,
    holds: bool | str,
    reason: str,
    message: str,
    generation: int,
    previous: PipelineStatus | None,
    now: str,
) -> Condition:
    """A condition whose transition time survives while its status and reason do not change."""
    status = holds if isinstance(holds, str) else ("True" if holds else "False")
    old = next((c for c in previous.conditions if c.type == kind), None) if previous else None
    unchanged = old is not None and (old.status, old.reason) == (status, reason)
    return Condition(
        type=kind,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=old.last_transition_time if old and unchanged else now,
        observed_generation=generation,
    )


def _previewed(
    decision: Decision, observed: Observation, *, now: str
) -> tuple[PendingChange | None, list[Condition]]:
    """The pending change with its newest preview's counts, and the `Previewed` condition: the
    preview's outcome, a preview pod's failure, why its pod does not start (no node takes it,
    or the API server refused it), or `Previewing` while a requested one runs. A failed
    preview leaves the change exactly as it was."""
    pending, report, request = decision.pending_change, observed.preview, observed.preview_request
    if pending is None:
        return pending, []
    if report is not None and report.change_id != pending.id:
        report = None
    stale = request is not None and request_change(request) != pending.id
    if stale:
        request = None
    if report is not None and report.error is None:
        pending = pending.model_copy(update={"preview": report.summary()})
    pod = observed.previewing
    refused = decision.preview_refused or observed.preview_refused
    if stale:
        holds, reason = "False", "PreviewIgnored"
        message = (
            f"The preview request names change {request_change(observed.preview_request or '')},"
            f" not the pending change {pending.id}; it was ignored. Annotate "
            f"spindle.dev/preview={pending.id} to preview the pending change."
        )
    elif report is not None and (request is None or report.request == request):
        if report.error is None:
            holds, reason, message = "True", "PreviewReady", report.headline() + "."
        else:
            holds, reason, message = "False", report.error.reason, report.error.message
    elif request is not None and pod is not None and pod.phase in ("Failed", "Succeeded"):
        holds, reason = "False", pod.reason or "PreviewFailed"
        message = pod.message or (
            f"The preview pod of change {pending.id} ended without a report; see its logs. "
            "The pending change is unchanged: change the label of spindle.dev/preview to "
            "preview again."
        )
    elif request is not None and pod is not None and pod.stalled is not None:
        holds, (reason, said) = "False", pod.stalled
        message = (
            f"{said} The pending change is unchanged; a new label of spindle.dev/preview "
            "starts a preview pod with the spec's settings as they are then."
        )
    elif request is not None and refused is not None:
        holds, (reason, message) = "False", refused
    elif request is not None:
        holds, reason = "Unknown", "Previewing"
        message = f"A preview of change {pending.id} is being evaluated in scratch space."
    else:
        return pending, []
    if request is not None or stale:
        message = f"{message} {answering(observed.preview_request or '')}"
    condition = _condition(
        PREVIEWED,
        holds=holds,
        reason=reason,
        message=message,
        generation=observed.generation,
        previous=observed.previous,
        now=now,
    )
    return pending, [condition]


def _ignored_approval(decision: Decision, observed: Observation) -> Event | None:
    """An approval annotation that names neither the pending change nor the last bootstrap."""
    approval = observed.approval
    if decision.phase is not Phase.AWAITING_APPROVAL or not approval:
        return None
    if approval in (decision.change_id, observed.last_bootstrap):
        return None
    return Event(
        "Warning",
        "ApprovalIgnored",
        f"Approval {approval} does not name the pending change {decision.change_id}; it was "
        f"ignored. Approve {decision.change_id} to bootstrap.",
    )


def _news(decision: Decision, observed: Observation, ignored: Event | None) -> tuple[Event, ...]:
    """The only place that decides which Events to post: an ignored approval once (until the
    annotation changes), a failure or a driver retrying a step once per new reason."""
    previous = observed.previous
    news: list[Event] = []
    if ignored and (
        previous is None
        or previous.ignored_approval != observed.approval
        # the same wrong id, left in place, for another change (a revert in Git, say)
        or previous.pending_change is None
        or previous.pending_change.id != decision.change_id
    ):
        news.append(ignored)
    before = previous.conditions[0].reason if previous and previous.conditions else None
    warns = decision.phase is Phase.FAILED or decision.reason in (RETRYING, EVICTED)
    if warns and decision.reason != before:
        news.append(Event("Warning", decision.reason, decision.message))
    program = decision.program
    new_generation = previous is None or previous.observed_generation != observed.generation
    if program is not None and program.warnings and new_generation:
        news.append(_program_warnings(program.warnings))
    return tuple(news)


PROGRAM_WARNINGS = "ProgramWarnings"
"""The Event reason of what the program's parse warned of (a connector key Spindle does not
read, an unnamed connector), once per generation: `spindle diff` prints them, and the operator
had no way to show them."""


def _program_warnings(warnings: tuple[str, ...]) -> Event:
    shown = "; ".join(warnings[:5])
    more = f" (and {len(warnings) - 5} more)" if len(warnings) > 5 else ""
    return Event("Warning", PROGRAM_WARNINGS, f"{shown}{more}")


_Entry = TypeVar("_Entry")


def _first(
    entries: dict[str, _Entry],
    *,
    key: str,
    limit: int,
    omitted: dict[str, int],
    wanted: Callable[[_Entry], bool] = lambda entry: False,
) -> dict[str, _Entry]:
    """At most `limit` of `entries`, those `wanted` first, in their order; how many were left
    out is added to `omitted[key]`."""
    if len(entries) <= limit:
        return entries
    omitted[key] = omitted.get(key, 0) + len(entries) - limit
    kept = set(sorted(entries, key=lambda name: not wanted(entries[name]))[:limit])
    return {name: entry for name, entry in entries.items() if name in kept}


def _cut_lists(body: dict[str, Any], *, key: str, limit: int, omitted: dict[str, int]) -> Any:
    """`body` (JSON) with each list in it, however deep, cut to its first `limit` entries;
    how many were left out is added to `omitted`, by the list's dotted path."""
    cut: dict[str, Any] = {}
    for name, value in body.items():
        path = f"{key}.{name}"
        if isinstance(value, list):
            cut[name] = value[:limit]
            if len(value) > limit:
                omitted[path] = omitted.get(path, 0) + len(value) - limit
        elif isinstance(value, dict):
            cut[name] = _cut_lists(value, key=path, limit=limit, omitted=omitted)
        else:
            cut[name] = value
    return cut


def _direct(change: dict[str, Any]) -> bool:
    """An object added, removed or changed itself, not only through what it reads."""
    reasons = [str(r) for r in change.get("reasons") or []]
    return not reasons or any(not r.startswith("upstream:") for r in reasons)


def _rows_differ(counts: dict[str, Any]) -> bool:
    """A preview's view whose rows the change adds, removes or changes."""
    return any(counts.get(kind) for kind in ("added", "removed", "changed"))


def _bounded_change(pending: PendingChange, *, limit: int) -> PendingChange:
    omitted = dict(pending.omitted or {})
    body = pending.model_dump(mode="json")
    body["changes"] = _first(
        body["changes"], key="changes", limit=limit, omitted=omitted, wanted=_direct
    )
    for part in ("diff", "estimate"):
        if body.get(part):
            body[part] = _cut_lists(body[part], key=part, limit=limit, omitted=omitted)
    views = (body.get("preview") or {}).get("views")
    if isinstance(views, dict):
        body["preview"]["views"] = _first(
            views, key="preview.views", limit=limit, omitted=omitted, wanted=_rows_differ
        )
    body["omitted"] = omitted or None
    return PendingChange.model_validate(body)


def omitted_note(pending: dict[str, Any], *, prefix: str = "") -> str | None:
    """`Not shown: <count> of <list>, ... (<what the status holds of them>).`: what a status
    left out of the lists of its pending change (JSON) whose dotted path starts with `prefix`
    (`pendingChange.omitted`); None when it left out none. A reader learns where the whole
    is from the caller."""
    omitted = {
        name: count
        for name, count in (pending.get("omitted") or {}).items()
        if name.startswith(prefix)
    }
    if not omitted:
        return None
    counts = ", ".join(f"{count:,} of {name}" for name, count in sorted(omitted.items()))
    held = max(_held(pending, path=name) for name in omitted)
    keeps = (
        f"the status keeps {held:,} of each list"
        if held
        else "the status is too large to keep these lists: see its Recorded condition"
    )
    return f"Not shown: {counts} ({keeps})."


def _held(pending: dict[str, Any], *, path: str) -> int:
    """How many entries the status holds of the list at dotted `path` of `pending`."""
    found: Any = pending
    for part in path.split("."):
        found = found.get(part) if isinstance(found, dict) else None
    return len(found) if isinstance(found, list | dict) else 0


def bounded(status: PipelineStatus, *, limit: int = STATUS_LIST_LIMIT) -> PipelineStatus:
    """`status` with at most `limit` entries in each list of its pending change and in
    `maintenance`, those a reader wants first (objects changed themselves, views that
    recompute, previewed views whose rows differ), and how many of each it leaves out
    (`omitted`, `maintenanceOmitted`)."""
    update: dict[str, Any] = {}
    if status.pending_change is not None:
        update["pending_change"] = _bounded_change(status.pending_change, limit=limit)
    if status.maintenance is not None:
        left = {"maintenance": status.maintenance_omitted or 0}
        update["maintenance"] = _first(
            status.maintenance,
            key="maintenance",
            limit=limit,
            omitted=left,
            wanted=lambda view: view.reason is not None,
        )
        update["maintenance_omitted"] = left["maintenance"] or None
    return status.model_copy(update=update)


_SMALLER = (
    "Apply the Pipeline with `kubectl apply --server-side` (a client-side apply keeps a second "
    "copy of spec.sql in an annotation), or split its program into smaller pipelines."
)


def unrecorded(*, refusal: str) -> str:
    """What a Warning Event says when the API server refuses even `oversized`'s status
    (`refusal` says how): the Pipeline's status is not updated until it is smaller."""
    return (
        "The pipeline's status could not be written: the API server refused even the status "
        f"without the lists of its pending change and maintenance ({refusal}), so the Pipeline "
        "alone is about as large as it stores, and its status is not updated (a pending "
        "change's id may be missing or old); `spindle plan -f pipeline.yaml` shows the change "
        "and its id. " + _SMALLER
    )


def oversized(
    status: PipelineStatus, *, detail: str, previous: PipelineStatus | None, now: str
) -> PipelineStatus:
    """The status to record when the API server will not store `status` (`detail` says why):
    no list of the pending change or of `maintenance` (`bounded` to none: their counts say
    what is left out), with the `Recorded` condition saying so and what to do."""
    small = bounded(status, limit=0)
    recorded = _condition(
        RECORDED,
        holds=False,
        reason=STATUS_TOO_LARGE,
        message=f"The pipeline's whole status does not fit in its object ({detail}): with "
        "it the Pipeline is past what the API server stores (etcd takes 1.5 MiB by default), "
        "so the status keeps no list of the pending change or of maintenance; `spindle plan "
        f"-f pipeline.yaml` shows the whole change. {_SMALLER}",
        generation=status.observed_generation,
        previous=previous,
        now=now,
    )
    return small.model_copy(update={"conditions": [*small.conditions, recorded]})


def conclude(
    decision: Decision, observed: Observation, *, driver: DriverStatus | None, now: str
) -> Report:
    """The status to record for `decision`, taken on `observed`, and the Events that are news."""
    checkpoint, previous = observed.checkpoint, observed.previous
    last_bootstrap = previous.last_bootstrap if previous else None
    if checkpoint is not None and checkpoint.bootstrap is not None:
        last_bootstrap = bootstrap_status(checkpoint)
    ignored = _ignored_approval(decision, observed)
    pending, previewed = _previewed(decision, observed, now=now)
    ready = _condition(
        READY,
        holds=decision.ready,
        reason=decision.reason,
        message=decision.message,
        generation=observed.generation,
        previous=previous,
        now=now,
    )
    status = PipelineStatus(
        phase=decision.phase,
        observed_generation=observed.generation,
        program_hash=decision.plan.new_fingerprints.program if decision.plan else None,
        checkpointed_program_hash=checkpoint.program.fingerprint if checkpoint else None,
        pending_change=pending,
        last_checkpoint=None
        if checkpoint is None or observed.checkpoint_uri is None
        else checkpoint_status(checkpoint, uri=observed.checkpoint_uri),
        last_bootstrap=last_bootstrap,
        driver_pod=driver,
        maintenance={
            name: ViewMaintenance(mode=m.mode.value, reason=m.reason)
            for name, m in decision.plan.maintenance.items()
        }
        if decision.plan
        else None,
        ignored_approval=observed.approval
        if ignored
        else (previous.ignored_approval if previous else None),
        conditions=[ready, *previewed],
    )
    return Report(bounded(status), _news(decision, observed, ignored))
