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
)

__all__ = [
    "Action",
    "Condition",
    "Decision",
    "Driver",
    "Event",
    "Observation",
    "PendingChange",
    "decide",
]
