"""`report`: a decision plus what was observed, as the Pipeline status (no I/O).

Both bodies show the same status: the operator writes it to the status subresource, the local
body prints it. Condition transition times survive when a condition did not change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spindle.api.status import (
    BootstrapStatus,
    ChangeDiff,
    CheckpointStatus,
    Condition,
    DriverStatus,
    PendingChange,
    PipelineStatus,
)
from spindle.checkpoint.manifest import Manifest
from spindle.lifecycle.decide import Decision, Observation


def _time(manifest_time: Any) -> str:
    text: str = manifest_time.strftime("%Y-%m-%dT%H:%M:%SZ")
    return text


def checkpoint_status(checkpoint: Manifest, *, root: str) -> CheckpointStatus:
    rows = {"table": 0, "view": 0}
    for record in checkpoint.state.values():
        rows[record.kind] += record.rows or 0
    return CheckpointStatus(
        id=checkpoint.id,
        sequence=checkpoint.sequence,
        time=_time(checkpoint.created_at),
        uri=f"{root.rstrip('/')}/checkpoints/{checkpoint.id}/manifest.json",
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
        finished_at=_time(record.finished_at),
        views_evaluated=len(record.views_evaluated),
        input_records_read=record.input_records_read,
    )


def _conditions(
    decision: Decision, *, generation: int, previous: Sequence[Condition], now: str
) -> list[Condition]:
    before = {c.type: c for c in previous}
    conditions = []
    for condition in decision.conditions:
        status = "True" if condition.status else "False"
        old = before.get(condition.type)
        unchanged = old is not None and (old.status, old.reason) == (status, condition.reason)
        conditions.append(
            Condition(
                type=condition.type,
                status=status,
                reason=condition.reason,
                message=condition.message,
                last_transition_time=old.last_transition_time if old and unchanged else now,
                observed_generation=generation,
            )
        )
    return conditions


def report(
    decision: Decision,
    observed: Observation,
    *,
    root: str | None,
    driver: DriverStatus | None,
    previous: PipelineStatus | None,
    now: str,
) -> PipelineStatus:
    """The status to record for `decision`, taken on `observed`."""
    checkpoint = observed.checkpoint
    pending = decision.pending_change
    last_bootstrap = previous.last_bootstrap if previous else None
    if checkpoint is not None and checkpoint.bootstrap is not None:
        last_bootstrap = bootstrap_status(checkpoint)
    ignored = previous.ignored_approval if previous else None
    for event in decision.events:
        if event.reason == "ApprovalIgnored":
            ignored = observed.approval
    return PipelineStatus(
        phase=decision.phase,
        observed_generation=observed.generation,
        program_hash=decision.plan.new_fingerprints.program if decision.plan else None,
        checkpointed_program_hash=checkpoint.program.fingerprint if checkpoint else None,
        pending_change=None
        if pending is None
        else PendingChange(
            id=pending.id,
            diff=ChangeDiff.model_validate(pending.diff),
            changes=pending.changes,
            bootstrap=pending.bootstrap,
        ),
        last_checkpoint=None
        if checkpoint is None or root is None
        else checkpoint_status(checkpoint, root=root),
        last_bootstrap=last_bootstrap,
        driver_pod=driver,
        ignored_approval=ignored,
        conditions=_conditions(
            decision,
            generation=observed.generation,
            previous=previous.conditions if previous else (),
            now=now,
        ),
    )


def new_events(decision: Decision, previous: PipelineStatus | None, approval: str | None) -> bool:
    """Whether the decision's events are news: an ignored approval is announced once."""
    if not decision.events:
        return False
    return previous is None or previous.ignored_approval != approval
