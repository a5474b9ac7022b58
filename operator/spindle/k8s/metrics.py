"""Prometheus metrics and the liveness verdict, served on one small HTTP port.

`/metrics`: reconciles by result, pipelines per phase, bootstrap durations.
`/healthz`: fails when watching has stalled, i.e. when a periodic re-list finds a pipeline
version that the watch stream has not delivered within `stall_after` seconds, or when the
re-list itself has not completed for that long.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from spindle.api import Phase

Key = tuple[str, str]


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self.reconciles = Counter(
            "spindle_reconciles", "Reconciles by result.", ["result"], registry=self.registry
        )
        self.pipelines = Gauge(
            "spindle_pipelines", "Pipelines per phase.", ["phase"], registry=self.registry
        )
        self.bootstraps = Histogram(
            "spindle_bootstrap_duration_seconds",
            "Bootstrap durations, from the checkpoints that record them.",
            buckets=(1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600),
            registry=self.registry,
        )
        self._phases: dict[Key, str] = {}
        self._bootstraps_seen: set[str] = set()
        for phase in Phase:
            self.pipelines.labels(phase.value).set(0)

    def reconciled(self, key: Key, *, phase: str | None, result: str) -> None:
        self.reconciles.labels(result).inc()
        if phase is None:
            self._phases.pop(key, None)
        else:
            self._phases[key] = phase
        counts = {p.value: 0 for p in Phase}
        for value in self._phases.values():
            counts[value] = counts.get(value, 0) + 1
        for value, count in counts.items():
            self.pipelines.labels(value).set(count)

    def bootstrapped(self, checkpoint_id: str, seconds: float) -> None:
        if checkpoint_id not in self._bootstraps_seen:
            self._bootstraps_seen.add(checkpoint_id)
            self.bootstraps.observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


@dataclass
class Watchdog:
    stall_after: float
    _delivered: dict[Key, str] = field(default_factory=dict)
    _waiting_since: dict[Key, float] = field(default_factory=dict)
    _listed_at: float = field(default_factory=time.monotonic)

    def delivered(self, key: Key, resource_version: str | None) -> None:
        """The watch stream delivered this version of the object."""
        if resource_version:
            self._delivered[key] = resource_version
            self._waiting_since.pop(key, None)

    def listed(self, versions: dict[Key, str]) -> None:
        """A re-list saw these versions; remember since when each undelivered one waits."""
        now = time.monotonic()
        self._listed_at = now
        for key, version in versions.items():
            if self._delivered.get(key) == version:
                self._waiting_since.pop(key, None)
            else:
                self._waiting_since.setdefault(key, now)
        for key in set(self._waiting_since) - set(versions):
            del self._waiting_since[key]

    def problem(self) -> str | None:
        now = time.monotonic()
        if now - self._listed_at > self.stall_after:
            return f"no re-list of pipelines for {now - self._listed_at:.0f}s"
        late = [k for k, since in self._waiting_since.items() if now - since > self.stall_after]
        if late:
            names = ", ".join(f"{ns}/{name}" for ns, name in sorted(late)[:5])
            return f"the watch has not delivered changes to {names} for {self.stall_after:.0f}s"
        return None
