"""The brain: pure functions from what a body observed to a decision and the one status shape.

Every body (the operator, the local CLI, the driver pod) runs `cycle`: it observes, the brain
decides (`decide`, a table of rules) and builds the status (`conclude`), the body acts and
records. No body decides anything on its own, so they cannot drift. No I/O code is imported here.
"""

from spindle.lifecycle.body import Acted, Body, cycle
from spindle.lifecycle.decision import Action, Decision, Event, failed
from spindle.lifecycle.observation import (
    DriverMode,
    Observation,
    ObservedDriver,
    Unobservable,
    bootstrapped,
)
from spindle.lifecycle.rules import decide, decide_start, serving_preview
from spindle.lifecycle.status import (
    Report,
    checkpoint_status,
    conclude,
    read_timestamp,
    timestamp,
)

__all__ = [
    "Acted",
    "Action",
    "Body",
    "Decision",
    "DriverMode",
    "Event",
    "Observation",
    "ObservedDriver",
    "Report",
    "Unobservable",
    "bootstrapped",
    "checkpoint_status",
    "conclude",
    "cycle",
    "decide",
    "decide_start",
    "failed",
    "read_timestamp",
    "serving_preview",
    "timestamp",
]
