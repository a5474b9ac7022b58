"""Leader election, the pure part: what a candidate does next given the Lease it read, and
whether a leader may still act. No I/O and no clock of its own (`spindle.k8s.leader` does both).

Standard `coordination.k8s.io/v1` Lease semantics, as client-go's leaderelection uses them:
- a lease belongs to `holderIdentity` for `leaseDurationSeconds` after its last renewal;
- expiry is judged on the *candidate's own monotonic clock*, from when it first observed the
  current record (its resourceVersion), never from the `renewTime` written by another node's
  clock, so clock skew between nodes cannot make a lease look expired early;
- every write carries the resourceVersion it read (optimistic concurrency): of two candidates
  that both decide to take an expired lease, the API server lets exactly one write succeed;
- the leader acts only while its last successful renewal, timed from when the request was
  *sent*, is younger than `renew_deadline` (< the lease duration). A standby cannot take over
  before it has seen the record unchanged for the lease duration, which started after that
  request was sent: the leader stops acting at least `lease_duration - renew_deadline` seconds
  before anyone else can start (the fencing margin).
"""

from __future__ import annotations

import datetime
import enum
from dataclasses import dataclass


@dataclass(frozen=True)
class Timing:
    lease_duration: float = 15.0
    """Seconds a lease is valid after its last renewal (`leaseDurationSeconds`)."""
    renew_deadline: float = 10.0
    """A leader that has not renewed for this long stops acting; must be < lease_duration."""
    retry_period: float = 2.0
    """Seconds between attempts to acquire or renew."""

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "leader election needs 0 < retry period < renew deadline < lease duration, got "
                f"{self.retry_period}, {self.renew_deadline}, {self.lease_duration}"
            )


@dataclass(frozen=True)
class Record:
    """A Lease's spec as read, with the resourceVersion the next write must carry."""

    holder: str | None
    duration: float
    acquired: datetime.datetime | None
    renewed: datetime.datetime | None
    transitions: int
    version: str


@dataclass(frozen=True)
class Observed:
    """A record and when (this candidate's monotonic clock) it was first seen unchanged."""

    record: Record
    since: float


class Move(enum.Enum):
    CREATE = "create"
    """No Lease exists: create it, holding it."""
    RENEW = "renew"
    """This candidate holds it: write a new renewTime."""
    TAKE = "take"
    """Released (no holder) or expired: take it over (a transition)."""
    WAIT = "wait"
    """Someone else holds a lease that has not expired."""


@dataclass(frozen=True)
class Step:
    move: Move
    write: Record | None
    """The record to write (its `version` is the one read), or None for WAIT."""


def observe(*, previous: Observed | None, record: Record | None, now: float) -> Observed | None:
    """Track since when the current record is unchanged: a new resourceVersion restarts it."""
    if record is None:
        return None
    if previous is not None and previous.record.version == record.version:
        return previous
    return Observed(record=record, since=now)


def expired(*, observed: Observed, now: float) -> bool:
    """Whether the holder's lease has run out, judged on this candidate's clock."""
    return now - observed.since >= observed.record.duration


def next_step(
    *,
    identity: str,
    observed: Observed | None,
    now: float,
    wall: datetime.datetime,
    timing: Timing,
) -> Step:
    """What `identity` does next. `now` is its monotonic clock, `wall` the time to record."""
    if observed is None:
        fresh = Record(
            holder=identity,
            duration=timing.lease_duration,
            acquired=wall,
            renewed=wall,
            transitions=0,
            version="",
        )
        return Step(Move.CREATE, fresh)
    record = observed.record
    if record.holder == identity:
        renewed = Record(
            holder=identity,
            duration=timing.lease_duration,
            acquired=record.acquired or wall,
            renewed=wall,
            transitions=record.transitions,
            version=record.version,
        )
        return Step(Move.RENEW, renewed)
    if not record.holder or expired(observed=observed, now=now):
        taken = Record(
            holder=identity,
            duration=timing.lease_duration,
            acquired=wall,
            renewed=wall,
            transitions=record.transitions + 1,
            version=record.version,
        )
        return Step(Move.TAKE, taken)
    return Step(Move.WAIT, None)


def acting(*, renewed_at: float | None, now: float, timing: Timing) -> bool:
    """Whether a leader may act: its last successful write (timed from when it was sent) is
    younger than the renew deadline. None: it never won, or it gave the lease up."""
    return renewed_at is not None and now - renewed_at < timing.renew_deadline


def released(*, record: Record, wall: datetime.datetime) -> Record:
    """The record a leader writes on a clean shutdown: no holder, so a standby takes over at
    its next attempt instead of waiting out the lease."""
    return Record(
        holder=None,
        duration=1.0,
        acquired=record.acquired,
        renewed=wall,
        transitions=record.transitions,
        version=record.version,
    )
