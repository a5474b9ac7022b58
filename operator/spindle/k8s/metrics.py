"""Prometheus metrics and the liveness verdict, served on one small HTTP port.

`/metrics` (docs/operator.md lists them; docs/grafana/spindle.json charts them):
- `spindle_reconciles_total{result}` and `spindle_reconcile_duration_seconds{result}` (histogram),
  `result` being ok, gone or error, or `unchanged` for a re-list's check of a pipeline with an
  active driver that found its checkpoint where it was (one conditional read, no reconcile);
- `spindle_pipelines{phase}`, every phase always present;
- `spindle_pending_changes_age_seconds{namespace,name}`: how long each pipeline has been
  AwaitingApproval (since its Ready condition last changed); a series only while it awaits;
- `spindle_checkpoint_age_seconds{namespace,name}`: the age of each Running pipeline's newest
  checkpoint; a series only while it is Running;
- `spindle_bootstrap_duration_seconds` (histogram): each bootstrap that finished while this
  process ran, once, from the checkpoint that records it;
- `spindle_leader`: 1 while this process reconciles (it holds the Lease, or leader election is
  off), 0 while it stands by. A standby serves no per-pipeline series: it reconciles nothing.

Labels stay bounded: counters and histograms carry no pipeline names (their buckets would
multiply by the fleet); the two per-pipeline gauges have one series per pipeline at most, and
drop it when the pipeline leaves the phase or is deleted. Ages are computed when scraped.

`/healthz`: fails when watching has stalled, i.e. when a periodic re-list finds a pipeline
version that the watch stream has not delivered within `stall_after` seconds, or when the
re-list itself has not completed for that long.
"""

from __future__ import annotations

import datetime
import threading
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from spindle.api import Phase

Key = tuple[str, str]
RESULTS = ("ok", "gone", "error", "unchanged")


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _seconds(since: datetime.datetime, *, now: datetime.datetime) -> float:
    """Seconds from `since` to `now`, never negative; a time without a zone is UTC."""
    if since.tzinfo is None:
        since = since.replace(tzinfo=datetime.UTC)
    return max(0.0, (now - since).total_seconds())


@dataclass(frozen=True)
class Seen:
    """What the last reconcile of one pipeline found."""

    phase: str
    since: datetime.datetime | None = None
    """When the phase's Ready condition last changed."""
    checkpoint_at: datetime.datetime | None = None
    """When the newest checkpoint was committed."""


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)
    clock: Callable[[], datetime.datetime] = _utcnow
    _seen: dict[Key, Seen] = field(default_factory=dict)
    _bootstrapped: dict[Key, str] = field(default_factory=dict)
    _recorded: dict[Key, float] = field(default_factory=dict)
    """When (monotonic) each pipeline's series was last recorded."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    started: datetime.datetime = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.clock()
        self.reconciles = Counter(
            "spindle_reconciles", "Reconciles by result.", ["result"], registry=self.registry
        )
        self.reconcile_seconds = Histogram(
            "spindle_reconcile_duration_seconds",
            "How long one reconcile of one pipeline took, by result.",
            ["result"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.bootstraps = Histogram(
            "spindle_bootstrap_duration_seconds",
            "Bootstrap durations, from the checkpoints that record them.",
            buckets=(1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600),
            registry=self.registry,
        )
        self.leader = Gauge(
            "spindle_leader",
            "1 while this process reconciles (holds the Lease), 0 while it stands by.",
            registry=self.registry,
        )
        for result in RESULTS:
            self.reconciles.labels(result)
            self.reconcile_seconds.labels(result)
        self.registry.register(_PerPipeline(self))

    def reconciled(self, *, seconds: float, result: str) -> None:
        self.reconciles.labels(result).inc()
        self.reconcile_seconds.labels(result).observe(seconds)

    def observed(self, key: Key, seen: Seen) -> None:
        with self._lock:
            self._seen[key] = seen
            self._recorded[key] = time.monotonic()

    def leading(self, value: bool) -> None:
        """Leadership changed; a standby forgets what it saw as leader (it no longer looks)."""
        self.leader.set(1 if value else 0)
        if not value:
            with self._lock:
                self._seen.clear()

    def forget(self, key: Key) -> None:
        """The pipeline is gone: its series go too."""
        with self._lock:
            self._drop(key)

    def _drop(self, key: Key) -> None:
        """Everything kept of one pipeline (the caller holds the lock)."""
        self._seen.pop(key, None)
        self._recorded.pop(key, None)
        self._bootstrapped.pop(key, None)

    def keep(self, keys: set[Key], *, listed_at: float) -> None:
        """A re-list's pipelines (asked for at `listed_at`, monotonic): any other recorded
        before it is gone, its series too (a DELETED event that came while its reconcile ran
        was undone when that reconcile recorded its outcome). One recorded since was created
        after the list was taken."""
        with self._lock:
            gone = {
                k
                for k in self._seen
                if k not in keys and self._recorded.get(k, float("-inf")) < listed_at
            }
            for key in gone:
                self._drop(key)

    def bootstrapped(
        self, key: Key, *, checkpoint_id: str, finished_at: datetime.datetime, seconds: float
    ) -> None:
        """Counted once per checkpoint, and only when it finished while this process ran (a
        restarted operator re-reads every pipeline's last bootstrap)."""
        with self._lock:
            before = _seconds(finished_at, now=self.started) > 0  # finished before we started
            if before or self._bootstrapped.get(key) == checkpoint_id:
                return
            self._bootstrapped[key] = checkpoint_id
        self.bootstraps.observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def snapshot(self) -> dict[Key, Seen]:
        with self._lock:
            return dict(self._seen)


@dataclass(eq=False)  # a registry keys its collectors by identity
class _PerPipeline:
    """The gauges computed from what reconciles found, when scraped."""

    metrics: Metrics

    def collect(self) -> Iterator[Metric]:
        now, seen = self.metrics.clock(), self.metrics.snapshot()
        phases = GaugeMetricFamily("spindle_pipelines", "Pipelines per phase.", labels=["phase"])
        tally = Tally(s.phase for s in seen.values())
        for phase in Phase:
            phases.add_metric([phase.value], tally[phase.value])
        pending = GaugeMetricFamily(
            "spindle_pending_changes_age_seconds",
            "How long each pipeline has awaited approval of its pending change.",
            labels=["namespace", "name"],
        )
        checkpoints = GaugeMetricFamily(
            "spindle_checkpoint_age_seconds",
            "The age of each Running pipeline's newest checkpoint.",
            labels=["namespace", "name"],
        )
        for key, s in sorted(seen.items()):
            if s.phase == Phase.AWAITING_APPROVAL and s.since is not None:
                pending.add_metric(list(key), _seconds(s.since, now=now))
            if s.phase == Phase.RUNNING and s.checkpoint_at is not None:
                checkpoints.add_metric(list(key), _seconds(s.checkpoint_at, now=now))
        yield phases
        yield pending
        yield checkpoints


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
