"""The pipeline lifecycle: a pure function from what is observed to a phase and the next action.

Both bodies call `decide`: the operator (kopf handlers) and the local CLI, so they cannot drift.
"""

from spindle.lifecycle.decide import (
    Action,
    Condition,
    Decision,
    Driver,
    Event,
    Observation,
    PendingChange,
    decide,
    failed,
)
from spindle.lifecycle.report import checkpoint_status, new_events, report

__all__ = [
    "Action",
    "Condition",
    "Decision",
    "Driver",
    "Event",
    "Observation",
    "PendingChange",
    "checkpoint_status",
    "decide",
    "failed",
    "new_events",
    "report",
]
