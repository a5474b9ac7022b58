"""Which watch events and re-lists reconcile a pipeline again: a quiet one (awaiting approval,
failed for good) only when the inputs of its object change, an event of its driver pod arrives,
or its recheck is due; one with a driver at every one. Run by the operator's own worker against
a fake API server, with storage in a local directory."""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

from spindle.checkpoint.store import open_store
from spindle.errors import SpindleError
from spindle.k8s.metrics import Key, Metrics, Watchdog
from spindle.k8s.operator import Operator, WorkQueue, checkers
from spindle.k8s.reconcile import Reconciler, Settings
from tests.checkpoints import manifest
from tests.unit.test_lifecycle import V1, V2
from tests.unit.test_metrics import KEY, Clock, Harness, harness, seed
from tests.unit.test_operator_body import spec


def listed(run: Harness) -> dict[str, Any]:
    """The pipeline as a re-list shows it: its metadata only (`Cluster.pipelines`)."""
    return {"metadata": run.cluster.pipelines[KEY]["metadata"]}


def queued(run: Harness, event: str = "MODIFIED") -> bool:
    """Whether the pipeline's watch event (or, with `event="relist"`, a re-list), as the API
    server shows the pipeline now, queues it."""
    run.operator.work, run.operator.watchdog = WorkQueue(), Watchdog(stall_after=60.0)
    if event == "relist":
        run.operator.offer(listed(run), relisted=True)
    else:
        run.operator.pipeline_event(run.cluster.pipelines[KEY], event)
    return KEY in run.operator.work.queued


def relist(run: Harness) -> None:
    """One re-list showing the pipeline, and what it queued done by the operator's worker."""

    async def drive() -> None:
        work = run.operator.work = WorkQueue()
        if run.operator.offer(listed(run), relisted=True):
            await run.operator._check([KEY])
        worker = asyncio.create_task(run.operator._worker())
        while work.queued or work.busy:
            await asyncio.sleep(0.01)
        worker.cancel()

    asyncio.run(drive())


def test_a_relist_reconciles_a_running_pipeline_only_when_its_checkpoint_moved(
    tmp_path: Path,
) -> None:
    """Only a driver moves a checkpoint, and its pod's changes are watched: a re-list of a
    pipeline whose driver is active reads the checkpoint pointer (one conditional read), and
    reconciles the pipeline only when the checkpoint moved."""
    run = harness(Clock())
    first = seed(tmp_path, V1)
    run.cluster.apply("grades", spec(tmp_path, V1))
    run.reconcile()
    assert run.cluster.pods, "a run driver was started"
    status = run.cluster.status("grades")
    assert status["lastCheckpoint"]["id"] == first.id

    for _ in range(3):
        relist(run)
    assert run.value("spindle_reconciles_total", result="unchanged") == 3.0
    assert run.value("spindle_reconciles_total", result="ok") == 1.0
    assert run.cluster.status("grades") == status

    store = open_store(tmp_path.as_uri(), namespace="default", name="grades")
    moved = store.commit(manifest(first, program=V1))  # the driver committed a step
    relist(run)
    assert run.value("spindle_reconciles_total", result="ok") == 2.0
    assert run.cluster.status("grades")["lastCheckpoint"]["id"] == moved.id
    relist(run)
    assert run.value("spindle_reconciles_total", result="unchanged") == 4.0

    reconciler = run.operator.reconciler
    assert reconciler is not None and reconciler._stores
    run.operator.watchdog = Watchdog(stall_after=60.0)
    run.operator.pipeline_event(run.cluster.pipelines[KEY], "DELETED")
    assert not reconciler._stores  # a deleted pipeline's store, and its checkpoint, go
    assert not reconciler.unmoved(*KEY, moved.id)  # unknown now: a reconcile would find out


def test_a_quiet_pipeline_waits_for_a_change_of_its_object(tmp_path: Path) -> None:
    run = harness(Clock())
    seed(tmp_path, V1)
    run.cluster.apply("grades", spec(tmp_path, V2))
    assert queued(run, "ADDED")
    run.reconcile()
    assert run.phase() == "AwaitingApproval"
    assert not queued(run)  # the echo of its own status write, or a re-list: nothing changed
    change = run.cluster.status("grades")["pendingChange"]["id"]
    run.cluster.annotate("grades", "spindle.dev/approve", change)
    assert queued(run)
    run.reconcile()
    assert run.phase() == "Bootstrapping"
    assert not queued(run, "relist")  # a driver runs: a re-list checks its checkpoint instead
    assert run.operator.offer(listed(run), relisted=True)
    assert not queued(run)  # the echo of its status write, and the ADDED event of its pod
    [pod] = run.cluster.pods.values()
    run.operator.pod_event(pod, "ADDED")
    assert KEY not in run.operator.work.queued
    pod["status"]["phase"] = "Running"  # the driver as the brain sees it changed
    run.operator.pod_event(pod, "MODIFIED")
    assert KEY in run.operator.work.queued


def test_a_preview_request_reconciles_a_quiet_pipeline_at_once(tmp_path: Path) -> None:
    """`kubectl spindle preview` annotates a pipeline awaiting approval, which is quiet: the
    annotation is a change of its object, not something for the recheck to find minutes later."""
    run = harness(Clock())
    seed(tmp_path, V1)
    run.cluster.apply("grades", spec(tmp_path, V2))
    run.reconcile()
    assert run.phase() == "AwaitingApproval"
    assert not queued(run)
    change = run.cluster.status("grades")["pendingChange"]["id"]
    run.cluster.annotate("grades", "spindle.dev/preview", f"{change}@20261124T060000")
    assert queued(run)


def test_a_driver_pod_event_or_a_due_recheck_reconciles_a_quiet_pipeline(tmp_path: Path) -> None:
    run = harness(Clock())
    seed(tmp_path, V1)
    run.cluster.apply("grades", spec(tmp_path, V2))
    run.reconcile()
    assert not queued(run)
    run.operator.pod_event({"metadata": {"namespace": "default", "labels": {}}})
    assert KEY not in run.operator.work.queued  # not one of its pods
    run.operator.pod_event(
        {"metadata": {"namespace": "default", "labels": {"spindle.dev/pipeline": "grades"}}}
    )
    assert KEY in run.operator.work.queued
    run.reconcile()
    assert not queued(run)
    run.operator.recheck = 0.0
    run.reconcile()
    assert run.phase() == "AwaitingApproval"
    assert queued(run)  # still quiet, but its recheck is due at once
    run.operator.recheck = 300.0
    run.reconcile()
    assert not queued(run)
    run.cluster.apply("grades", spec(tmp_path, V1))  # reverted: a new generation
    assert queued(run)


def test_a_pipeline_missing_its_secret_is_tried_at_every_relist(tmp_path: Path) -> None:
    """Its fix (creating the Secret) is not a change of its object."""
    run = harness(Clock())
    ref = {"name": "s3", "key": "id"}
    storage = {
        "uri": tmp_path.as_uri(),
        "credentials": {"accessKeyId": ref, "secretAccessKey": ref},
    }
    run.cluster.apply("grades", {"sql": V1, "storage": storage})
    run.reconcile()
    assert run.cluster.status("grades")["conditions"][0]["reason"] == "SecretNotFound"
    assert queued(run, "relist")
    run.cluster.secrets[("default", "s3")] = {"id": "x"}
    run.reconcile()
    assert run.phase() == "Pending"


def test_a_change_is_reconciled_before_the_routine_reconciles_of_a_relist() -> None:
    async def order() -> list[tuple[str, str]]:
        work = WorkQueue()
        for index in range(3):
            work.add(("default", f"relisted-{index}"), relisted=True)
        work.add(("default", "approved"))  # a watch event
        work.add(("default", "relisted-2"))  # an event names a re-listed key: it moves up
        work.add(("default", "relisted-0"), relisted=True)  # already queued: no second entry
        return [await work.take() for _ in range(3)] + [key for key in work.relisted]

    assert asyncio.run(order()) == [
        ("default", "approved"),
        ("default", "relisted-2"),
        ("default", "relisted-0"),
        ("default", "relisted-1"),
    ]


def test_a_held_key_waits_for_its_reconcile_and_keeps_workers_off_until_released() -> None:
    """Deleting a pipeline's data holds its key: a reconcile under way ends first, and none
    starts until the data is gone (one that had read the pipeline before its deletion could
    start a driver into the emptied prefix); what was queued meanwhile comes after."""
    key, other = ("default", "grades"), ("default", "other")

    async def sequence() -> list[str]:
        work, events = WorkQueue(), []
        work.add(key)
        assert await work.take() == key  # a reconcile is under way

        async def delete() -> None:
            async with work.hold(key):
                events.append("holding")
                work.add(key)  # a watch event while the data is deleted
                await asyncio.sleep(0.05)
                events.append("released")

        holder = asyncio.create_task(delete())
        await asyncio.sleep(0.05)
        events.append("reconcile done")
        work.done(key)
        work.add(key)  # an event queued before the holder woke
        await asyncio.sleep(0)
        work.add(other)
        events.append(f"took {(await work.take())[1]}")  # the held key is skipped
        await holder
        events.append(f"took {(await work.take())[1]}")
        return events

    assert asyncio.run(sequence()) == [
        "reconcile done",
        "holding",
        "took other",
        "released",
        "took grades",
    ]


def test_a_reconcile_cut_off_by_lost_leadership_keeps_its_key_until_its_thread_ends(
    tmp_path: Path,
) -> None:
    """Stopping leading cancels the workers, but a reconcile already in its thread runs on: its
    key was freed at once, and deleting the data could begin under a reconcile that then
    started a driver into the emptied prefix."""
    import threading

    run = harness(Clock())
    started, finish = threading.Event(), threading.Event()
    reconciler = run.operator.reconciler
    assert reconciler is not None

    def slow(namespace: str, name: str) -> None:
        started.set()
        finish.wait(5)

    reconciler.reconcile = slow  # type: ignore[method-assign,assignment]

    async def sequence() -> list[str]:
        events: list[str] = []
        work = run.operator.work = WorkQueue()
        run.operator._threads = ThreadPoolExecutor(1)
        worker = asyncio.create_task(run.operator._worker())
        run.operator._workers = [worker]
        work.add(KEY)
        await asyncio.to_thread(started.wait, 5)
        run.operator._stop_leading()  # the workers cancelled, the queue dropped
        await asyncio.gather(worker, return_exceptions=True)
        run.operator._start_leading()  # and leading again, while the reconcile runs on
        for task in run.operator._workers:
            task.cancel()

        async def delete() -> None:
            assert run.operator.work is not None
            async with run.operator.work.hold(KEY):
                events.append("holding")

        holder = asyncio.create_task(delete())
        await asyncio.sleep(0.1)
        events.append("reconcile ends")
        finish.set()
        await holder
        return events

    assert asyncio.run(sequence()) == ["reconcile ends", "holding"]


def test_a_pass_of_checks_hands_what_it_has_no_time_for_to_the_workers() -> None:
    """A re-list checks its pipelines with active drivers one after another (`_moved`): those
    whose checkpoint moved or whose check failed go to the workers, and once a store that
    hangs has used up the pass's time, so do all the rest, unchecked."""

    class Stores:
        def unmoved(self, namespace: str, name: str, checkpoint: str | None) -> bool:
            if name == "fails":
                raise SpindleError(reason="StorageUnavailable", message="no answer")
            if name == "hangs":
                time.sleep(0.3)  # answers in the end, but the pass is out of time
            return name != "moved"

    operator = Operator(settings=cast(Settings, None), namespaces=None, metrics=Metrics())
    operator.reconciler, operator.leading = cast(Reconciler, Stores()), True
    names = ["same", "moved", "fails", "hangs", "after-1", "after-2"]
    due: list[tuple[Key, str | None]] = [(("default", name), "c-1") for name in names]
    handed: list[Key] = []
    operator._moved(due, deadline=time.monotonic() + 0.1, moved=handed.append)
    assert [name for _, name in handed] == ["moved", "fails", "after-1", "after-2"]
    operator.leading = False  # leadership lost: nothing more is read, nothing handed over
    operator._moved(due, deadline=time.monotonic() + 10, moved=handed.append)
    assert len(handed) == 4
    text = operator.metrics.exposition().decode()
    assert 'spindle_reconciles_total{result="unchanged"} 2.0' in text


def test_a_driver_pod_event_reconciles_only_when_the_driver_changed(tmp_path: Path) -> None:
    """A pod's scheduling attempts and conditions change no decision; its phase does."""
    run = harness(Clock())
    run.operator.work, run.operator.watchdog = WorkQueue(), Watchdog(stall_after=60.0)
    labels = {"spindle.dev/pipeline": "grades", "spindle.dev/mode": "run"}
    pod: dict[str, Any] = {
        "metadata": {"namespace": "default", "name": "grades-g1-driver", "labels": labels},
        "status": {"phase": "Pending"},
    }

    def queues(event: str = "MODIFIED") -> bool:
        run.operator.work = WorkQueue()
        run.operator.pod_event(pod, event)
        return KEY in run.operator.work.queued

    assert queues("ADDED")
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False"}]
    assert not queues()
    pod["status"]["phase"] = "Running"
    assert queues()
    pod["metadata"]["deletionTimestamp"] = "2026-11-23T00:00:00Z"
    assert queues()
    assert queues("DELETED")


def test_a_pass_of_checks_uses_threads_only_when_round_trips_ask_for_them() -> None:
    """A nearby store answers in about a millisecond: one thread checks 500 pipelines well
    within the budget (more would only take turns on the GIL). A remote one at 30 ms needs
    the most threads allowed, and never more."""
    assert checkers(500, seconds=0.001, budget=8.0) == 1
    assert checkers(500, seconds=0.012, budget=8.0) == 2
    assert checkers(500, seconds=0.03, budget=8.0) == 4
    assert checkers(10_000, seconds=0.03, budget=8.0) == 4
    assert checkers(0, seconds=0.03, budget=8.0) == 1


def test_an_event_during_a_reconcile_reconciles_again_only_if_the_object_changed(
    tmp_path: Path,
) -> None:
    """The echo of a reconcile's own status write can arrive while that reconcile still runs,
    before the operator has settled what it read: it was taken for a change, and the pipeline
    was reconciled a second time (a fleet of 500 whose driver pods became Unschedulable: 813
    reconciles in 10 s where 500 would do). An event during a reconcile is now decided when
    it ends, against what it read: the object as it read it is no news; a change made
    meanwhile is, even when a re-list answered before the change arrives after its event, or
    when the change puts back what the operator had settled before."""
    run = harness(Clock())
    seed(tmp_path, V1)
    run.cluster.apply("grades", spec(tmp_path, V2))
    run.reconcile()
    assert run.phase() == "AwaitingApproval"
    run.operator.watchdog = Watchdog(stall_after=60.0)
    reconciler = run.operator.reconciler
    assert reconciler is not None
    read = reconciler.reconcile
    meanwhile: list[Callable[[], None]] = []

    def reconcile_and_then(namespace: str, name: str) -> Any:
        outcome = read(namespace, name)
        for then in meanwhile:  # on the reconcile's thread: the loop waits for it
            then()
        meanwhile.clear()
        return outcome

    reconciler.reconcile = reconcile_and_then  # type: ignore[method-assign]

    def echo() -> None:
        run.operator.pipeline_event(run.cluster.pipelines[KEY], "MODIFIED")

    def annotate(value: str) -> Callable[[], None]:
        return lambda: run.cluster.annotate("grades", "spindle.dev/restate", value)

    def reconciles(*then: Callable[[], None]) -> float:
        before = run.value("spindle_reconciles_total", result="ok") or 0.0
        meanwhile.extend(then)
        run.reconcile()
        return (run.value("spindle_reconciles_total", result="ok") or 0.0) - before

    change = run.cluster.status("grades")["pendingChange"]["id"]
    run.cluster.annotate("grades", "spindle.dev/approve", change)
    assert reconciles(echo) == 1  # its status write's echo, before it is settled
    assert run.phase() == "Bootstrapping"
    assert reconciles(annotate("x@1"), echo) == 2  # changed after it read the object

    stale: dict[str, Any] = {}
    keep = lambda: stale.update(copy.deepcopy(listed(run)))  # noqa: E731
    relist = lambda: run.operator.offer(stale, relisted=True)  # noqa: E731
    [pod] = run.cluster.pods.values()
    pod["status"]["phase"] = "Running"
    run.operator.pod_event(pod, "MODIFIED")  # clears what was settled: every event is due
    assert reconciles(keep, annotate("x@2"), echo, relist) == 2  # the LIST came after the event

    run.cluster.annotate("grades", "spindle.dev/restate", "x@3")
    assert queued(run)
    assert reconciles(annotate("x@2"), echo) == 2  # back to what was settled before it
