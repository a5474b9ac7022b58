"""What the brain decided: a phase, one next action, the Ready condition and the change.

A `Decision` carries everything a body would otherwise work out again: which driver mode the
action starts, whether it starts a driver at all, and the error to refuse with when it does not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from spindle.api import Phase
from spindle.api.status import PendingChange
from spindle.errors import SpindleError
from spindle.lifecycle.observation import DriverMode
from spindle.plan import ChangePlan
from spindle.program import Program


class Action(StrEnum):
    NONE = "none"
    START_RUN = "start_run"
    START_BOOTSTRAP = "start_bootstrap"
    STOP_DRIVER = "stop_driver"


_MODES = {Action.START_RUN: DriverMode.RUN, Action.START_BOOTSTRAP: DriverMode.BOOTSTRAP}


@dataclass(frozen=True)
class Event:
    type: str  # "Normal" | "Warning"
    reason: str
    message: str


EVICTED = "DriverEvicted"
"""The reason of a driver the cluster stopped (evicted, preempted, its node shut down), not a
failure of its own: the next one starts from the last checkpoint, no restart asked for."""

RETRYING = "StepRetrying"
"""The Ready condition's reason while a running driver waits to retry a step (`Running`, not
Ready); posted as a Warning Event too."""


@dataclass(frozen=True)
class Decision:
    phase: Phase
    action: Action
    ready: bool
    reason: str
    """The Ready condition's CamelCase reason."""
    message: str
    """The Ready condition's message: what happens, or what to do."""
    pending_change: PendingChange | None = None
    change_id: str | None = None
    preview: str | None = None
    """A preview request for the pending change that the body should start a preview for."""
    preview_refused: tuple[str, str] | None = None
    """(reason, message) of the preview pod the cluster refused to create for `preview`: the
    `Previewed` condition says so, the change stays pending, and the request is not tried
    again (`Observation.preview_refused`)."""
    plan: ChangePlan | None = field(default=None, compare=False)
    program: Program | None = field(default=None, compare=False)

    @property
    def mode(self) -> DriverMode | None:
        """The driver mode the action starts, if it starts one."""
        return _MODES.get(self.action)

    @property
    def starts_driver(self) -> bool:
        return self.mode is not None

    def refusal(self) -> SpindleError:
        """The error a body raises when it was asked to run but the decision starts nothing."""
        return SpindleError(
            reason=self.reason, message=self.message, details={"phase": self.phase.value}
        )


def failed(reason: str, message: str, *, stop: bool = False) -> Decision:
    """`Failed` with `reason`; the driver is stopped only when `stop` (else left alone)."""
    action = Action.STOP_DRIVER if stop else Action.NONE
    return Decision(Phase.FAILED, action, ready=False, reason=reason, message=message)
