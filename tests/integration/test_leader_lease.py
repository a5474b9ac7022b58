"""The election loop (`spindle.k8s.leader`) against the real API server's Leases, with short
times: one of two candidates leads; when the leader is cut off (its loop stopped, no release),
it stops acting before the other starts, and the other takes over; a released lease is taken
at the next attempt. Takeover times are printed, not asserted."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from kubernetes import client

from spindle.k8s.election import Timing
from spindle.k8s.leader import Elector, LeaseStore
from tests.conftest import Kube

pytestmark = [pytest.mark.kube]
TIMING = Timing(lease_duration=3.0, renew_deadline=2.0, retry_period=0.5)
LEASE = "spindle-operator"


async def _until(what: str, check: Any, *, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


async def _scenario(kube: Kube, namespace: str) -> list[tuple[float, str, str]]:
    log: list[tuple[float, str, str]] = []

    def candidate(identity: str) -> Elector:
        return Elector(
            store=LeaseStore(api=kube.api, name=LEASE, namespace=namespace, timeout=1.0),
            identity=identity,
            timing=TIMING,
            on_start=lambda: log.append((time.monotonic(), identity, "start")),
            on_stop=lambda: log.append((time.monotonic(), identity, "stop")),
        )

    a, b = candidate("a"), candidate("b")
    tasks = {a.identity: asyncio.create_task(a.run()), b.identity: asyncio.create_task(b.run())}
    await _until("a leader", lambda: a.leading or b.leading)
    await asyncio.sleep(TIMING.lease_duration)  # both keep campaigning: still exactly one
    assert [e.identity for e in (a, b) if e.leading] in (["a"], ["b"])
    leader, standby = (a, b) if a.leading else (b, a)

    tasks[leader.identity].cancel()  # cut off: no more renewals, no release
    cut = time.monotonic()
    await _until("the standby to take over", lambda: standby.leading)
    print(f"\ntakeover after the leader was cut off: {time.monotonic() - cut:.2f}s")
    assert not leader.leading  # it stopped on its own at the renew deadline

    c = candidate("c")
    tasks["c"] = asyncio.create_task(c.run())
    await asyncio.sleep(2 * TIMING.retry_period)
    assert not c.leading
    tasks[standby.identity].cancel()
    released = time.monotonic()
    await standby.release()
    await _until("c to take the released lease", lambda: c.leading)
    print(f"takeover of a released lease: {time.monotonic() - released:.2f}s")
    tasks["c"].cancel()
    await c.release()
    for task in tasks.values():
        task.cancel()
    return log


def test_one_leader_fenced_takeover_and_release_on_real_leases(kube: Kube) -> None:
    namespace = kube.namespace("lease")
    log = asyncio.run(_scenario(kube, namespace))
    names = [(who, what) for _, who, what in log]
    first, second = names[0][0], {"a": "b", "b": "a"}[names[0][0]]
    assert names == [
        (first, "start"),
        (first, "stop"),  # the cut-off leader stops acting before
        (second, "start"),  # the standby starts
        (second, "stop"),  # it releases (stops first)
        ("c", "start"),
        ("c", "stop"),
    ], names
    stopped, started = log[1][0], log[2][0]
    print(f"fencing margin: the old leader stopped {started - stopped:.2f}s before the new start")
    lease = client.CoordinationV1Api(kube.api).read_namespaced_lease(LEASE, namespace).spec
    assert lease.lease_transitions == 2 and not lease.holder_identity  # released at the end
