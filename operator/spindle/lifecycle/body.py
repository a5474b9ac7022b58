"""A body: what the brain needs from a place a pipeline runs in, and the one cycle over it.

There are three bodies: the operator (`k8s`: API objects, driver pods, `.status`), the local CLI
(`local`: the home directory, a run in process, a status file) and the driver pod
(`runtime.pod`: its environment and checkpoint, the driver loop). Each observes, acts and
records; `cycle` is the only order they are called in, and the brain decides everything between.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from spindle.api.status import DriverStatus, PipelineStatus
from spindle.lifecycle.decision import Decision, Event
from spindle.lifecycle.observation import Observation
from spindle.lifecycle.rules import decide
from spindle.lifecycle.status import Report, conclude


@dataclass(frozen=True)
class Acted:
    """What acting on a decision came to: the decision as carried out (a start the cluster
    refused is a failure) and the driver the status shows afterwards."""

    decision: Decision
    driver: DriverStatus | None = None


class Body(Protocol):
    def observe(self) -> Observation: ...

    def act(self, decision: Decision) -> Acted: ...

    def record(self, status: PipelineStatus, events: Sequence[Event]) -> None: ...


def cycle(
    body: Body, *, now: str, decide: Callable[[Observation], Decision] = decide
) -> tuple[Acted, Report]:
    """observe → decide → act → record, once."""
    observed = body.observe()
    acted = body.act(decide(observed))
    report = conclude(acted.decision, observed, driver=acted.driver, now=now)
    body.record(report.status, report.events)
    return acted, report
