"""The elector's I/O around the pure election (`k8s.leader`): a shutdown releases the lease even
when the campaign had a write in flight, so a standby takes over at once."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import replace

from spindle.k8s.election import Record, Timing
from spindle.k8s.leader import Elector


class GatedStore:
    """A Lease store whose writes wait for `gate` once `slow`: a write in flight."""

    namespace, name = "spindle-system", "spindle-operator"

    def __init__(self) -> None:
        self.record: Record | None = None
        self.writing, self.gate = threading.Event(), threading.Event()

    def read(self) -> Record | None:
        return self.record

    def write(self, record: Record) -> bool:
        self.writing.set()
        self.gate.wait(10)
        if record.version != (self.record.version if self.record else ""):
            return False  # the API server's 409: another write came first
        self.record = replace(record, version=str(int(record.version or 0) + 1))
        return True


def test_a_shutdown_during_a_take_in_flight_releases_the_lease() -> None:
    """The take landed after the release had looked: the lease stayed held by a process
    that was gone, and the standby waited the lease duration out."""

    async def scenario() -> tuple[str | None, bool, int]:
        store, starts = GatedStore(), []
        elector = Elector(
            store=store,  # type: ignore[arg-type]
            identity="a_1",
            timing=Timing(lease_duration=15.0, renew_deadline=10.0, retry_period=0.05),
            on_start=lambda: starts.append(1),
            on_stop=lambda: None,
        )
        campaign = asyncio.create_task(elector.run())
        await asyncio.to_thread(store.writing.wait, 10)  # the take is in flight
        campaign.cancel()  # the operator's stop: the campaign ends first
        with contextlib.suppress(asyncio.CancelledError):
            await campaign
        threading.Timer(0.2, store.gate.set).start()  # the take lands during the release
        await elector.release()
        assert store.record is not None
        return store.record.holder, elector.leading, len(starts)

    holder, leading, starts = asyncio.run(scenario())
    assert (holder, leading, starts) == (None, False, 0)
