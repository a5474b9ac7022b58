"""Leader election, the I/O loop: read the Lease, apply `spindle.k8s.election`'s step, write it
with the resourceVersion read, and tell the operator when it starts or stops leading.

The loop is thin on purpose; every decision is in `election`. Losing the lease is noticed two
ways: a renewal that fails or is refused, and a timer armed at each successful renewal for the
renew deadline, so that a leader whose API calls hang still stops acting in time.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from spindle.k8s.election import (
    Move,
    Observed,
    Record,
    Timing,
    acting,
    next_step,
    observe,
    released,
)
from spindle.lifecycle import read_timestamp

log = logging.getLogger("spindle.leader")


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _record(body: dict[str, Any]) -> Record:
    spec = body.get("spec") or {}

    def when(key: str) -> datetime.datetime | None:
        return read_timestamp(spec.get(key))

    return Record(
        holder=spec.get("holderIdentity") or None,
        duration=float(spec.get("leaseDurationSeconds") or 0),
        acquired=when("acquireTime"),
        renewed=when("renewTime"),
        transitions=int(spec.get("leaseTransitions") or 0),
        version=body["metadata"]["resourceVersion"],
    )


def _micro(moment: datetime.datetime | None) -> str | None:
    """MicroTime as the API server writes it."""
    return None if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _body(*, name: str, namespace: str, record: Record) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if record.version:
        metadata["resourceVersion"] = record.version
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": {
            "holderIdentity": record.holder,
            "leaseDurationSeconds": max(1, math.ceil(record.duration)),  # never shorter
            "acquireTime": _micro(record.acquired),
            "renewTime": _micro(record.renewed),
            "leaseTransitions": record.transitions,
        },
    }


@dataclass
class LeaseStore:
    """Get, create and update one Lease (the only verbs the operator's Role grants)."""

    api: client.ApiClient
    name: str
    namespace: str
    timeout: float

    def __post_init__(self) -> None:
        self.coordination = client.CoordinationV1Api(self.api)

    def read(self) -> Record | None:
        try:
            response: Any = self.coordination.read_namespaced_lease(
                self.name, self.namespace, _preload_content=False, _request_timeout=self.timeout
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return _record(json.loads(response.data))

    def write(self, record: Record) -> bool:
        """Create (no version) or replace (the version read); False when another candidate
        wrote first (409 Conflict: the resourceVersion moved, or the Lease already exists)."""
        body = _body(name=self.name, namespace=self.namespace, record=record)
        try:
            if record.version:
                self.coordination.replace_namespaced_lease(
                    self.name,
                    self.namespace,
                    body,  # type: ignore[arg-type]
                    _request_timeout=self.timeout,
                )
            else:
                self.coordination.create_namespaced_lease(
                    self.namespace,
                    body,  # type: ignore[arg-type]
                    _request_timeout=self.timeout,
                )
            return True
        except ApiException as error:
            if error.status == 409:
                return False
            raise


@dataclass
class Elector:
    """Campaigns for the lease for ever; calls `on_start` when this process starts leading and
    `on_stop` when it must stop acting. Both run on the event loop and must not block."""

    store: LeaseStore
    identity: str
    timing: Timing
    on_start: Callable[[], None]
    on_stop: Callable[[], None]
    clock: Callable[[], float] = time.monotonic
    leading: bool = False
    _observed: Observed | None = None
    _renewed_at: float | None = None
    _deadline: asyncio.TimerHandle | None = None
    _released: bool = False
    """Given up on shutdown: a write landing after that starts nothing."""
    _attempting: asyncio.Future[None] | None = None
    """The attempt in flight: a campaign cancelled mid-write leaves its write to land, and
    `release` waits for it."""

    async def run(self) -> None:
        log.info(
            "leader election: %s campaigns for Lease %s/%s",
            self.identity,
            self.store.namespace,
            self.store.name,
        )
        while True:
            self._attempting = asyncio.ensure_future(self._attempt())
            try:
                await asyncio.shield(self._attempting)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the API server is unreachable or refused: try again
                log.warning("leader election: attempt failed: %s", error)
            self._check()
            await asyncio.sleep(self.timing.retry_period)

    async def _attempt(self) -> None:
        record = await asyncio.to_thread(self.store.read)
        self._observed = observe(previous=self._observed, record=record, now=self.clock())
        step = next_step(
            identity=self.identity,
            observed=self._observed,
            now=self.clock(),
            wall=_utcnow(),
            timing=self.timing,
        )
        if step.write is None:
            return
        sent = self.clock()
        if await asyncio.to_thread(self.store.write, step.write):
            self._renewed_at = sent
            self._arm()
            if step.move is Move.TAKE and self._observed is not None:
                log.info(
                    "leader election: %s takes the lease over from %s (transition %d)",
                    self.identity,
                    self._observed.record.holder or "nobody (released)",
                    step.write.transitions,
                )
        elif step.move is Move.RENEW:
            log.warning("leader election: renewal lost a race: the lease moved on")
            self._renewed_at = None

    def _arm(self) -> None:
        """Stop acting at the renew deadline unless a renewal comes first."""
        if self._deadline is not None:
            self._deadline.cancel()
        assert self._renewed_at is not None
        delay = self._renewed_at + self.timing.renew_deadline - self.clock()
        self._deadline = asyncio.get_running_loop().call_later(max(0.0, delay), self._check)

    def _check(self) -> None:
        if self._released:
            return
        now = self.clock()
        should = acting(renewed_at=self._renewed_at, now=now, timing=self.timing)
        if should and not self.leading:
            self.leading = True
            log.info("leader election: %s started leading", self.identity)
            self.on_start()
        elif self.leading and not should:
            self.leading = False
            log.warning(
                "leader election: %s stopped leading (no renewal for %.1fs; deadline %.0fs)",
                self.identity,
                now - (self._renewed_at or now),
                self.timing.renew_deadline,
            )
            self.on_stop()

    async def release(self) -> None:
        """On a clean shutdown (the campaign stopped): stop acting, then give the lease up if
        it is still ours, so that a standby need not wait for it to expire. A write the
        campaign had in flight lands first: a take or a renewal landing after the release
        held the lease for a process that was gone (the standby waited for it to expire)."""
        self._released = True
        attempting = self._attempting
        if attempting is not None and not attempting.done():
            await asyncio.wait({attempting}, timeout=self.timing.renew_deadline)
        if attempting is not None:  # its error, now or when it lands, is moot: retrieved
            attempting.add_done_callback(lambda done: done.cancelled() or done.exception())
        if self._deadline is not None:
            self._deadline.cancel()
        held, self._renewed_at = self._renewed_at is not None, None
        if self.leading:
            self.leading = False
            log.info("leader election: %s stopped leading (shutting down)", self.identity)
            self.on_stop()
        if not held:
            return
        try:
            record = await asyncio.to_thread(self.store.read)
            if record is None or record.holder != self.identity:
                return
            if await asyncio.to_thread(self.store.write, released(record=record, wall=_utcnow())):
                log.info("leader election: %s released the lease", self.identity)
        except Exception as error:
            log.warning("leader election: could not release the lease: %s", error)
