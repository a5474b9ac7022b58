"""`decide`: observe → validate → plan → choose the phase and one next action (no I/O).

Rules, in order (the first that applies wins):
1. An invalid program: `Failed` (`InvalidProgram`, with line and column); a running driver is
   stopped.
2. `desiredState: Stopped`: stop the driver (`Stopping`), then `Stopped`.
3. A driver is running: a run of an older program is stopped gracefully (it checkpoints, then
   the new program is planned against that checkpoint); a bootstrap is `Bootstrapping` until the
   checkpoint records it; a driver started paused (or not) when desiredState now says otherwise
   is restarted; otherwise `Running` (or `Paused`).
4. The driver of this generation failed: `Failed` with its reason, until the spec changes.
5. No checkpoint yet, or nothing changed: start a run (no approval needed).
6. A change the plan refuses: `Failed` (`LatenessNotBootstrappable`, `TableNotMaterialized`).
7. `bootstrapPolicy: reject`: `Stopped` (`BootstrapRejected`), checkpoint untouched.
8. `allow`, or an approval naming the pending change id: start the bootstrap.
9. Otherwise `AwaitingApproval`; an approval naming another id is ignored with an Event.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from spindle.api import BootstrapPolicy, DesiredState, Phase, PipelineSpec
from spindle.checkpoint.manifest import Manifest
from spindle.errors import SpindleError
from spindle.plan import ChangePlan, make_plan
from spindle.program import Program, parse_program
from spindle.versions import RUNTIME_VERSION


class Action(StrEnum):
    NONE = "none"
    START_RUN = "start_run"
    START_BOOTSTRAP = "start_bootstrap"
    STOP_DRIVER = "stop_driver"


@dataclass(frozen=True)
class Driver:
    """The driver process/pod as observed."""

    mode: str  # "run" | "bootstrap"
    generation: int
    phase: str  # "Pending" | "Running" | "Succeeded" | "Failed"
    change_id: str | None = None
    program_fingerprint: str | None = None
    reason: str | None = None
    message: str | None = None
    paused: bool | None = None
    """Whether it was started with ingestion paused; None: it follows desiredState live."""

    @property
    def active(self) -> bool:
        return self.phase in ("Pending", "Running")


@dataclass(frozen=True)
class Observation:
    spec: PipelineSpec
    generation: int
    checkpoint: Manifest | None
    approval: str | None = None
    driver: Driver | None = None
    last_bootstrap: str | None = None
    runtime_version: str = RUNTIME_VERSION


@dataclass(frozen=True)
class Condition:
    type: str
    status: bool
    reason: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {
            "type": self.type,
            "status": "True" if self.status else "False",
            "reason": self.reason,
            "message": self.message,
        }


@dataclass(frozen=True)
class Event:
    type: str  # "Normal" | "Warning"
    reason: str
    message: str


@dataclass(frozen=True)
class PendingChange:
    id: str
    diff: dict[str, Any]
    changes: dict[str, Any]
    bootstrap: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "diff": self.diff,
            "changes": self.changes,
            "bootstrap": self.bootstrap,
        }


@dataclass(frozen=True)
class Decision:
    phase: Phase
    action: Action
    conditions: tuple[Condition, ...] = ()
    pending_change: PendingChange | None = None
    change_id: str | None = None
    events: tuple[Event, ...] = ()
    plan: ChangePlan | None = field(default=None, compare=False)
    program: Program | None = field(default=None, compare=False)

    @property
    def reason(self) -> str | None:
        return self.conditions[0].reason if self.conditions else None


def _decide(
    phase: Phase, action: Action, *, ready: bool, reason: str, message: str, **extra: Any
) -> Decision:
    """A decision with its Ready condition (the one condition every decision carries)."""
    return Decision(phase, action, (Condition("Ready", ready, reason, message),), **extra)


def failed(reason: str, message: str) -> Decision:
    """The decision when the pipeline cannot even be observed (bad spec, missing Secret,
    unreachable storage): `Failed` with that reason; the driver, if any, is left alone."""
    return _failed(reason, message, stop=False)


def _failed(reason: str, message: str, *, stop: bool, **extra: Any) -> Decision:
    action = Action.STOP_DRIVER if stop else Action.NONE
    return _decide(Phase.FAILED, action, ready=False, reason=reason, message=message, **extra)


def _pending(plan: ChangePlan) -> PendingChange:
    body = plan.to_json()
    return PendingChange(
        id=plan.change_id,
        diff=plan.diff.to_json(),
        changes=body["changes"],
        bootstrap=body["bootstrap"],
    )


def decide(observed: Observation) -> Decision:
    spec, driver = observed.spec, observed.driver
    active = driver is not None and driver.active
    try:
        program = parse_program(spec.sql)
    except SpindleError as error:
        return _failed(error.reason, error.message, stop=active)
    old: Program | None = None
    if observed.checkpoint is not None:
        try:
            old = parse_program(observed.checkpoint.program.text)
        except SpindleError as error:
            return _failed(
                "CheckpointProgramUnreadable",
                f"The checkpointed program no longer parses ({error.message}); start the "
                "pipeline from an older checkpoint or clear its state.",
                stop=active,
            )
    plan = make_plan(
        old=old,
        new=program,
        old_runtime=observed.checkpoint.runtime_version if observed.checkpoint else None,
        runtime=spec.runtime_version or observed.runtime_version,
    )
    common: dict[str, Any] = {"plan": plan, "program": program, "change_id": plan.change_id}

    if spec.desired_state is DesiredState.STOPPED:
        if active:
            return _decide(
                Phase.STOPPING,
                Action.STOP_DRIVER,
                ready=False,
                reason="Stopping",
                message="Stopping the driver gracefully.",
                **common,
            )
        return _decide(
            Phase.STOPPED,
            Action.NONE,
            ready=False,
            reason="Stopped",
            message="desiredState is Stopped.",
            **common,
        )

    if active and driver is not None:
        bootstrapped = (
            observed.checkpoint is not None
            and observed.checkpoint.bootstrap is not None
            and observed.checkpoint.bootstrap.change_id == driver.change_id
        )
        if driver.mode == "bootstrap" and not bootstrapped:
            return _decide(
                Phase.BOOTSTRAPPING,
                Action.NONE,
                ready=False,
                reason="Bootstrapping",
                message=f"Bootstrapping change {driver.change_id}.",
                **common,
            )
        if plan.needs_approval:
            return _decide(
                Phase.STOPPING,
                Action.STOP_DRIVER,
                ready=False,
                reason="ProgramChanged",
                message="The program changed: stopping the driver at a checkpoint "
                "before planning the change.",
                **common,
            )
        wants_pause = spec.desired_state is DesiredState.PAUSED
        if driver.paused is not None and driver.paused != wants_pause:
            return _decide(
                Phase.STOPPING,
                Action.STOP_DRIVER,
                ready=False,
                reason="DesiredStateChanged",
                message="Restarting the driver at a checkpoint to "
                f"{'pause' if wants_pause else 'resume'} ingestion.",
                **common,
            )
        if wants_pause:
            return _decide(
                Phase.PAUSED,
                Action.NONE,
                ready=True,
                reason="Paused",
                message="Ingestion is paused.",
                **common,
            )
        return _decide(
            Phase.RUNNING,
            Action.NONE,
            ready=True,
            reason="Running",
            message="The driver is running.",
            **common,
        )

    if driver is not None and driver.phase == "Failed" and driver.generation == observed.generation:
        return _failed(
            driver.reason or "DriverFailed",
            driver.message or "The driver failed; see its logs.",
            stop=False,
            **common,
        )

    if not plan.needs_approval:
        return _decide(
            Phase.PENDING,
            Action.START_RUN,
            ready=False,
            reason="Starting",
            message="Starting the driver.",
            **common,
        )

    pending = _pending(plan)
    if not plan.bootstrap.allowed:
        return _failed(
            plan.bootstrap.error_code or "BootstrapRefused",
            plan.bootstrap.message or "The change cannot be bootstrapped.",
            stop=False,
            pending_change=pending,
            **common,
        )
    if spec.bootstrap_policy is BootstrapPolicy.REJECT:
        return _decide(
            Phase.STOPPED,
            Action.NONE,
            ready=False,
            reason="BootstrapRejected",
            message=f"The program changed (change {plan.change_id}) and "
            "bootstrapPolicy is reject; the checkpoint is untouched. Revert the "
            "change or set bootstrapPolicy to await_approval or allow.",
            pending_change=pending,
            **common,
        )
    approved = observed.approval == plan.change_id
    if spec.bootstrap_policy is BootstrapPolicy.ALLOW or approved:
        return _decide(
            Phase.BOOTSTRAPPING,
            Action.START_BOOTSTRAP,
            ready=False,
            reason="Bootstrapping",
            message=f"Bootstrapping change {plan.change_id}.",
            pending_change=pending,
            **common,
        )
    events: tuple[Event, ...] = ()
    if observed.approval and observed.approval != observed.last_bootstrap:
        events = (
            Event(
                "Warning",
                "ApprovalIgnored",
                f"Approval {observed.approval} does not name the pending change "
                f"{plan.change_id}; it was ignored. Approve {plan.change_id} to "
                "bootstrap.",
            ),
        )
    return _decide(
        Phase.AWAITING_APPROVAL,
        Action.NONE,
        ready=False,
        reason="AwaitingApproval",
        message=f"Change {plan.change_id} needs approval: annotate the pipeline with "
        f"spindle.dev/approve={plan.change_id} (locally: spindle local approve NAME "
        f"{plan.change_id}).",
        pending_change=pending,
        events=events,
        **common,
    )
