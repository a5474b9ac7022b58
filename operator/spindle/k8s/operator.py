"""The operator process: kopf watches, a work queue, periodic re-lists, health and metrics.

kopf delivers watch events for Pipelines and their driver pods; each only enqueues the pipeline
(`on.event` handlers keep no state on the object). Workers take keys from the queue, one
reconcile per pipeline at a time, in a thread. A re-list of all pipelines every `resync` seconds
is the backbone that makes the operator level-based: a missed event costs latency, never
correctness. A pipeline whose last outcome was quiet (`Outcome.quiet`: awaiting approval,
stopped, failed for good) is skipped by re-lists and by the echo of its own status write while
the inputs of its object are unchanged, for up to `recheck` seconds; one whose storage did not
answer rests `STORAGE_REST` seconds. So a fleet at rest costs a re-list a LIST, not a reconcile
per pipeline, and a hung store holds one worker now and then, not one at every re-list. One
whose driver is active is checked by each re-list: one conditional read of its checkpoint
pointer, and a reconcile only if the checkpoint moved (`Relist.CHECK`); a re-list's checks run
on as few threads of their own as their pace asks for (`checkers`), not through the queue, and
hand what they have no time for to the workers (`_moved`). Its pod's changes are watched, and
reconcile it at once. Neither the echo of a status write nor the ADDED event of a pod the
operator has just created (`_creating`) reconciles a pipeline: they carry nothing the reconcile
that caused them did not know. Every settled pipeline is reconciled again after `recheck`
seconds, whatever happened.

kopf's own bookkeeping stays out of GitOps' way: there are no create/update handlers, so kopf
writes no progress or diff-base annotations; the only kopf-managed metadata is the
`spindle.dev/finalizer` of pipelines with `deleteOnPipelineDeletion: true` (and its
`spindle.dev/`-prefixed annotations while their data is deleted). Nothing else blocks deletion.

With leader election (`Election`), only the holder of the Lease runs workers; a standby keeps
its watches and re-lists (so its health stays meaningful) but enqueues nothing. On takeover it
re-lists and reconciles every pipeline; on losing the lease it stops its workers at once and
drops its queue (`spindle.k8s.election` explains the fencing margin).
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import logging
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import kopf
from aiohttp import web

from spindle.api.crd import PLURAL
from spindle.api.types import GROUP, VERSION
from spindle.k8s.cluster import Cluster, api_client
from spindle.k8s.election import Timing
from spindle.k8s.leader import Elector, LeaseStore
from spindle.k8s.metrics import Key, Metrics, Seen, Watchdog
from spindle.k8s.pods import LABEL_PIPELINE, MANAGED, observed_driver
from spindle.k8s.reconcile import Inputs, Outcome, Reconciler, Settings, inputs
from spindle.lifecycle import ObservedDriver

FINALIZER = "spindle.dev/finalizer"
DRIVER_POD_SELECTOR = ",".join(f"{key}={value}" for key, value in sorted(MANAGED.items()))
"""The pods the operator watches: its drivers (and previews), selected by the API server."""
STORAGE_REST = 30.0
"""Seconds a pipeline whose storage did not answer waits before a re-list retries it."""
CHECKERS = 4
"""Threads a re-list's checks run on at most, beside the workers' own: enough to overlap the
round trips to a remote store (10-30 ms each to a cloud S3: 500 checks take 2-4 s on four).
A pass uses as few as finish it in half its budget (`checkers`): threads that take turns on
the GIL between short round trips cost CPU, and a nearby store answers in a millisecond."""
CHECK_BUDGET = 0.8
"""The share of a resync period a pass of checks may take; what it has not checked by then
is reconciled by the workers, and the next re-list finds the pass over."""
log = logging.getLogger("spindle.operator")


class Relist(enum.Enum):
    """What a re-list does with a settled pipeline whose object's inputs are unchanged."""

    SKIP = "skip"
    """Nothing: it is quiet (nothing outside its object can change it), or its storage rests."""
    CHECK = "check"
    """Read its checkpoint pointer (a conditional read), and reconcile it only if it moved: its
    driver is active, and only a driver moves a checkpoint (its pod's changes are watched)."""
    FULL = "full"
    """Reconcile it: what is wrong lies outside its object (a missing Secret)."""


@dataclass(frozen=True)
class Settled:
    """A pipeline the operator need not reconcile until `until` (monotonic), unless the
    inputs of its object change or an event of its driver pod arrives; `relist` says what a
    re-list does with it meanwhile. Its object's events that change no input (the echo of its
    own status write) wait."""

    inputs: Inputs
    until: float
    relist: Relist = Relist.SKIP
    checkpoint: str | None = None
    """The latest checkpoint its last reconcile saw (what `Relist.CHECK` compares)."""


@dataclass
class WorkQueue:
    """Deduplicating keys: a key is queued at most once, and never reconciled concurrently.

    Keys that a watch event or a requeue adds are taken before those a re-list adds (and a
    re-listed key an event names moves up), so a re-list of a busy fleet never delays the
    change someone just made behind hundreds of routine reconciles."""

    urgent: deque[Key] = field(default_factory=deque)
    relisted: deque[Key] = field(default_factory=deque)
    queued: set[Key] = field(default_factory=set)
    busy: set[Key] = field(default_factory=set)
    again: set[Key] = field(default_factory=set)
    _ready: asyncio.Event = field(default_factory=asyncio.Event)
    _freed: asyncio.Event = field(default_factory=asyncio.Event)

    def add(self, key: Key, *, relisted: bool = False) -> None:
        if key in self.busy:
            self.again.add(key)
        elif key in self.queued:
            if not relisted and key in self.relisted:
                self.relisted.remove(key)
                self.urgent.append(key)
        else:
            self.queued.add(key)
            (self.relisted if relisted else self.urgent).append(key)
            self._ready.set()

    def add_after(self, key: Key, delay: float) -> None:
        asyncio.get_running_loop().call_later(delay, self.add, key)

    async def take(self) -> Key:
        while True:
            while not (self.urgent or self.relisted):
                self._ready.clear()
                await self._ready.wait()
            key = self.urgent.popleft() if self.urgent else self.relisted.popleft()
            self.queued.discard(key)
            if key in self.busy:  # held (`hold`): reconciled once the holder is done
                self.again.add(key)
                continue
            self.busy.add(key)
            return key

    def done(self, key: Key) -> None:
        self.busy.discard(key)
        self._freed.set()
        if key in self.again:
            self.again.discard(key)
            self.add(key)

    def drop(self) -> None:
        """Forget every queued key (leadership lost); a key being worked on stays busy until
        its work is done, so nothing takes it meanwhile, whoever leads next."""
        self.urgent.clear()
        self.relisted.clear()
        self.queued.clear()
        self.again.clear()

    @contextlib.asynccontextmanager
    async def hold(self, key: Key) -> AsyncIterator[None]:
        """The key for work done outside the queue (deleting a pipeline's data): waits for a
        reconcile under way to end, and keeps workers off the key until the work is done; what
        was queued meanwhile is reconciled after it."""
        while key in self.busy:
            self._freed.clear()
            await self._freed.wait()
        self.busy.add(key)
        try:
            yield
        finally:
            self.done(key)


@dataclass(frozen=True)
class Election:
    """Where the Lease is and who this process is; None on `Operator` means no election."""

    identity: str
    lease_name: str
    lease_namespace: str
    timing: Timing = field(default_factory=Timing)


@dataclass
class Operator:
    settings: Settings
    namespaces: list[str] | None
    resync: float = 10.0
    workers: int = 8
    port: int = 8080
    stall_after: float = 60.0
    recheck: float = 300.0
    """Seconds a quiet pipeline with an unchanged object goes without a reconcile."""
    metrics: Metrics = field(default_factory=Metrics)
    reconciler: Reconciler | None = None
    work: WorkQueue | None = None
    watchdog: Watchdog | None = None
    election: Election | None = None
    elector: Elector | None = None
    leading: bool = False
    _tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    _workers: list[asyncio.Task[Any]] = field(default_factory=list)
    _relist: asyncio.Event = field(default_factory=asyncio.Event)
    _checking: asyncio.Task[None] | None = None
    """The re-list's pass of checks under way, if any (`_check`)."""
    _settled: dict[Key, Settled] = field(default_factory=dict)
    _heard: dict[Key, set[Inputs]] = field(default_factory=dict)
    """The inputs each event or re-list showed of a pipeline while its reconcile ran (`offer`):
    it is reconciled again once that ends only if one of them is not what it read (the echo of
    its own status write is). All are kept: a re-list's LIST, answered before a change, can
    arrive after that change's event."""
    _reconciling: set[Key] = field(default_factory=set)
    """Keys a worker is reconciling now."""
    _pods: dict[Key, tuple[ObservedDriver, bool] | None] = field(default_factory=dict)
    """Each driver pod as its last event showed it (`_driver_seen`)."""
    _checkers: ThreadPoolExecutor | None = None
    """`CHECKERS` threads for the re-lists' checks (`_check`)."""
    _check_seconds: float = 0.03
    """Seconds one check took on one thread in the last pass (first: a remote store's)."""
    _threads: ThreadPoolExecutor | None = None
    """One thread per worker: a reconcile mostly waits on the API server and storage, and the
    default executor has only CPUs + 4 threads, fewer than the workers."""

    # -- startup -------------------------------------------------------------------------------

    async def start(self) -> None:
        self.work = WorkQueue()
        self.watchdog = Watchdog(stall_after=self.stall_after)
        self._threads = ThreadPoolExecutor(self.workers, thread_name_prefix="reconcile")
        self._checkers = ThreadPoolExecutor(CHECKERS, thread_name_prefix="check")
        api = api_client()
        self.reconciler = Reconciler(
            cluster=Cluster(api),
            settings=self.settings,
            on_outcome=self._outcome,
            on_create=self._creating,
        )
        self._relist = asyncio.Event()
        self._tasks.append(asyncio.create_task(self._resync(), name="resync"))
        if self.election is None:
            self._start_leading()
        else:
            election = self.election
            self.metrics.leading(False)
            self.elector = Elector(
                store=LeaseStore(
                    api=api,
                    name=election.lease_name,
                    namespace=election.lease_namespace,
                    timeout=election.timing.renew_deadline / 2,
                ),
                identity=election.identity,
                timing=election.timing,
                on_start=self._start_leading,
                on_stop=self._stop_leading,
            )
            self._tasks.append(asyncio.create_task(self.elector.run(), name="leader-election"))
        app = web.Application()
        app.add_routes([web.get("/healthz", self._health), web.get("/metrics", self._metrics)])
        runner = web.AppRunner(app, handle_signals=False)
        await runner.setup()
        await web.TCPSite(runner, "0.0.0.0", self.port).start()
        self._tasks.append(asyncio.create_task(_hold(runner), name="http"))
        log.info("spindle operator: %s, health and metrics on :%d", self._scope(), self.port)

    async def stop(self) -> None:
        """Workers first, then the campaign ends, then the lease is released (a standby takes
        over at once). A renewal still in flight when the lease was released re-took it, and
        the standby waited the lease out, or this process started leading again."""
        self._stop_leading()
        campaign = [t for t in self._tasks if t.get_name() == "leader-election"]
        for task in campaign:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._stop_leading()  # the campaign, ended mid-renewal, may have started it again
        if self.elector is not None:
            await self.elector.release()
        tasks = [*self._tasks, *([self._checking] if self._checking else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def _scope(self) -> str:
        return "all namespaces" if self.namespaces is None else ", ".join(self.namespaces)

    # -- leadership ----------------------------------------------------------------------------

    def _start_leading(self) -> None:
        """Workers start, and an immediate re-list enqueues every pipeline."""
        self.leading = True
        self.metrics.leading(True)
        self._settled.clear()
        self._heard.clear()
        self._workers = [
            asyncio.create_task(self._worker(), name=f"worker-{index}")
            for index in range(self.workers)
        ]
        self._relist.set()

    def _stop_leading(self) -> None:
        """Nothing new starts: the workers are cancelled and the queue dropped. A reconcile
        already in its thread finishes its current API call sequence (see docs/operator.md),
        its key busy until then, whoever takes the queue next."""
        if not self.leading:
            return
        self.leading = False
        self.metrics.leading(False)
        for task in self._workers:
            task.cancel()
        self._workers = []
        if self.work is not None:  # a key whose reconcile runs on in its thread stays busy
            self.work.drop()

    # -- the loop ------------------------------------------------------------------------------

    def _settle(self, key: Key, outcome: Outcome | None) -> None:
        """Remember an outcome until it is due (`Settled`): a quiet one is skipped by re-lists
        for `recheck` seconds, one whose storage did not answer for `STORAGE_REST`; one with an
        active driver is checked by re-lists, and one with a problem outside its object is
        reconciled by each."""
        if outcome is None:
            self._settled.pop(key, None)
            return
        relist, rest = Relist.CHECK, self.recheck
        if outcome.quiet:
            relist = Relist.SKIP
        elif outcome.reason == "StorageUnavailable":
            relist, rest = Relist.SKIP, STORAGE_REST
        elif not outcome.observed:
            relist, rest = Relist.FULL, self.resync
        checkpoint = outcome.checkpoint.id if outcome.checkpoint else None
        self._settled[key] = Settled(outcome.inputs, time.monotonic() + rest, relist, checkpoint)

    def _due(self, key: Key, pipeline: Any) -> bool:
        """Whether a re-listed or changed pipeline needs a reconcile whatever `Settled.relist`
        says: it is new to this process, its object's inputs changed, or it is due."""
        settled = self._settled.get(key)
        return (
            settled is None
            or settled.inputs != inputs(pipeline)
            or time.monotonic() >= settled.until
        )

    def _creating(self, pod: dict[str, Any]) -> None:
        """A pod a reconcile is about to create (in its thread): its ADDED event is no news."""
        meta = pod["metadata"]
        self._pods[(meta["namespace"], meta["name"])] = _driver_seen(pod)

    def _outcome(self, namespace: str, name: str, outcome: Outcome) -> None:
        if not self.leading:  # a reconcile that outlived this process's leadership
            return  # (a standby serves no pipeline's series: the leader does)
        key, checkpoint = (namespace, name), outcome.checkpoint
        at = checkpoint.created_at if checkpoint else None
        self.metrics.observed(key, Seen(phase=outcome.phase, since=outcome.since, checkpoint_at=at))
        record = checkpoint.bootstrap if checkpoint else None
        if checkpoint is not None and record is not None:
            seconds = (record.finished_at - record.started_at).total_seconds()
            self.metrics.bootstrapped(
                key, checkpoint_id=checkpoint.id, finished_at=record.finished_at, seconds=seconds
            )

    def _moved(
        self, due: list[tuple[Key, str | None]], *, deadline: float, moved: Callable[[Key], None]
    ) -> None:
        """Some of a re-list's checks (`Relist.CHECK`), one after another in a checker thread:
        `moved` is called at once with each pipeline whose checkpoint is no longer the one its
        last reconcile saw or whose check failed, and, once `deadline` (monotonic) has passed,
        with each left unchecked (a store that hangs has cost enough: the workers reconcile
        the rest, each with its own time bound). A check that finds nothing changed counts as
        a reconcile with result `unchanged`. Nothing more is read once leadership is lost."""
        assert self.reconciler is not None
        for index, (key, checkpoint) in enumerate(due):
            if not self.leading:
                return
            if time.monotonic() > deadline:
                for late, _ in due[index:]:
                    moved(late)
                return
            started = time.perf_counter()
            try:
                unchanged = self.reconciler.unmoved(*key, checkpoint)
            except Exception:  # a reconcile finds out what is wrong, and reports it
                unchanged = False
            if unchanged:
                self.metrics.reconciled(seconds=time.perf_counter() - started, result="unchanged")
            else:
                moved(key)

    def _reconcile(self, key: Key) -> Outcome | None:
        """One reconcile, in a worker thread, timed and counted by its result."""
        assert self.reconciler is not None
        started, result = time.perf_counter(), "error"
        try:
            outcome = self.reconciler.reconcile(*key)
            result = "gone" if outcome is None else "ok"
            return outcome
        finally:
            self.metrics.reconciled(seconds=time.perf_counter() - started, result=result)

    async def _worker(self) -> None:
        work = self.work
        assert work is not None
        while self.leading:
            key = await work.take()
            if not self.leading:
                break
            loop = asyncio.get_running_loop()
            outcome, running, handed_off = None, None, False
            self._reconciling.add(key)
            try:
                running = loop.run_in_executor(self._threads, self._reconcile, key)
                outcome = await asyncio.shield(running)
                if outcome is None:
                    self.metrics.forget(key)
                elif outcome.requeue_after is not None:
                    work.add_after(key, outcome.requeue_after)
            except asyncio.CancelledError:  # leadership lost: the reconcile runs on in its
                # thread, and its key stays busy until it ends (a holder waits for that)
                if running is not None and not running.done():
                    running.add_done_callback(functools.partial(_release, work, key))
                    handed_off = True
                raise
            except Exception:
                log.exception("reconcile of %s/%s failed; retrying", *key)
                work.add_after(key, 5.0)
            finally:
                self._reconciling.discard(key)
                if not handed_off:
                    try:
                        self._settle(key, outcome)
                        heard = self._heard.pop(key, set())
                        if heard and (outcome is None or heard != {outcome.inputs}):
                            work.add(key)  # its object changed after the reconcile read it
                    finally:
                        work.done(key)

    async def _check(self, keys: list[Key]) -> None:
        """Check the pipelines a re-list found with an active driver (`_moved`), on as many
        threads as the last pass's pace asks for (`checkers`), and queue each that needs a
        reconcile as soon as it is found. One pass runs at a time, and ends before the next
        re-list (`CHECK_BUDGET`), which checks again."""
        loop = asyncio.get_running_loop()
        due = [
            (key, settled.checkpoint)
            for key in keys
            if (settled := self._settled.get(key)) is not None and settled.relist is Relist.CHECK
        ]

        def queue(key: Key) -> None:  # on the loop
            if self.work is not None and self.leading:
                self.work.add(key, relisted=True)

        def moved(key: Key) -> None:  # in a checker thread
            loop.call_soon_threadsafe(queue, key)

        budget = CHECK_BUDGET * self.resync
        threads = checkers(len(due), seconds=self._check_seconds, budget=budget)
        started = time.monotonic()
        deadline = started + budget
        passes = [
            loop.run_in_executor(
                self._checkers,
                functools.partial(self._moved, part, deadline=deadline, moved=moved),
            )
            for part in (due[start::threads] for start in range(threads))
            if part
        ]
        try:
            await asyncio.gather(*passes)
        except Exception:
            log.exception("checking the checkpoints of pipelines with active drivers failed")
        if due:
            self._check_seconds = (time.monotonic() - started) * threads / len(due)

    async def _resync(self) -> None:
        assert self.work is not None and self.reconciler is not None
        assert self.watchdog is not None
        while True:
            self._relist.clear()  # a takeover during this re-list asks for another at once
            try:
                listed_at = time.monotonic()
                items = await asyncio.to_thread(self.reconciler.cluster.pipelines, self.namespaces)
                versions, checks = {}, []
                for item in items:
                    meta = item["metadata"]
                    key = (meta["namespace"], meta["name"])
                    versions[key] = meta.get("resourceVersion", "")
                    if self.offer(item, relisted=True):
                        checks.append(key)
                self.watchdog.listed(versions)
                self.metrics.keep(set(versions), listed_at=listed_at)
                if checks and (self._checking is None or self._checking.done()):
                    self._checking = asyncio.create_task(self._check(checks), name="checks")
            except Exception:
                log.exception("re-listing pipelines failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._relist.wait(), timeout=self.resync)

    # -- watch events --------------------------------------------------------------------------

    def pipeline_event(self, body: Any, event_type: str | None) -> None:
        if self.work is None or self.watchdog is None:
            return
        meta = body.get("metadata", {})
        key = (meta.get("namespace", ""), meta.get("name", ""))
        if event_type == "DELETED":
            self.metrics.forget(key)
            self._settled.pop(key, None)
            if self.reconciler is not None:
                self.reconciler.forget(*key)
            return
        self.watchdog.delivered(key, meta.get("resourceVersion"))
        self.offer(body)

    def offer(self, pipeline: Any, *, relisted: bool = False) -> bool:
        """Queue a pipeline a watch event or a re-list shows, if it is due (`_due`); a re-list
        also queues one whose `Settled.relist` asks for a reconcile. True for one it asks to
        check instead (`Relist.CHECK`): the re-list checks those together (`_check`). One being
        reconciled is decided when that ends (`_heard`), against what that reconcile read: a
        driver pod's event clears what it had settled, so the echo of the status write that
        event's reconcile makes would otherwise reconcile it a second time."""
        meta = pipeline.get("metadata", {})
        key = (meta.get("namespace", ""), meta.get("name", ""))
        if self.work is None or not self.leading:
            return False
        if key in self._reconciling:  # what it settles is not known yet: due or not
            self._heard.setdefault(key, set()).add(inputs(pipeline))
            return False
        if self._due(key, pipeline):
            self.work.add(key, relisted=relisted)
        elif relisted and (relist := self._settled[key].relist) is not Relist.SKIP:
            if relist is Relist.CHECK:
                return True
            self.work.add(key, relisted=True)
        return False

    def pod_event(self, body: Any, event_type: str | None = None) -> None:
        """A driver pod changed: its pipeline is reconciled if the driver as the brain sees it
        (`observed_driver`: phase, failure, labels, whether its readiness says it retries a
        step) changed, or the pod is going or gone; its other conditions and scheduling
        attempts change no decision."""
        if self.work is None:
            return
        meta = body.get("metadata", {})
        pipeline = (meta.get("labels") or {}).get(LABEL_PIPELINE)
        if not pipeline:
            return
        pod = (meta.get("namespace", ""), meta.get("name", ""))
        if self.reconciler is not None and meta.get("resourceVersion"):
            self.reconciler.cluster.pod_versions.saw(pod[0], pipeline, meta["resourceVersion"])
        if event_type == "DELETED":
            self._pods.pop(pod, None)
        else:
            seen = _driver_seen(body)
            if seen is not None and self._pods.get(pod) == seen:
                return
            self._pods[pod] = seen
        if self.leading:
            key = (meta.get("namespace", ""), pipeline)
            self._settled.pop(key, None)
            self.work.add(key)

    # -- HTTP ----------------------------------------------------------------------------------

    async def _health(self, request: web.Request) -> web.Response:
        problem = self.watchdog.problem() if self.watchdog else "starting"
        if problem:
            return web.json_response({"status": "stalled", "problem": problem}, status=503)
        return web.json_response({"status": "ok"})

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.exposition(), content_type="text/plain")


def _release(work: WorkQueue, key: Key, _: asyncio.Future[Any]) -> None:
    work.done(key)


def checkers(count: int, *, seconds: float, budget: float) -> int:
    """Threads for `count` checks of `seconds` each: as few as finish them in half of `budget`
    seconds, at least one and at most `CHECKERS`."""
    wanted = math.ceil(count * seconds / (budget / 2)) if budget > 0 else CHECKERS
    return max(1, min(CHECKERS, wanted))


def _driver_seen(pod: Any) -> tuple[ObservedDriver, bool] | None:
    """The driver a pod shows the brain, and whether it is being deleted; None if unreadable."""
    try:
        driver = observed_driver(pod)
    except (KeyError, ValueError, TypeError):
        return None
    return driver, bool(pod.get("metadata", {}).get("deletionTimestamp"))


async def _hold(runner: web.AppRunner) -> None:
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


LAST_HANDLED = "spindle.dev/last-handled-configuration"
"""Where earlier Spindle operators let kopf keep its diff base."""


class NoDiffBase(kopf.DiffBaseStorage):
    """kopf keeps no last-handled configuration on Pipelines: the one handler (deleting data)
    needs no diff, and kopf would otherwise write one on every pipeline its `when` filter
    passes, an annotation GitOps tools did not apply."""

    def fetch(self, *, body: kopf.Body) -> None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: Any) -> None:
        if LAST_HANDLED in body.metadata.annotations:  # an older operator's: removed once
            patch.metadata.annotations[LAST_HANDLED] = None


def configure(settings: kopf.OperatorSettings) -> None:
    """kopf's settings for Spindle: where it keeps its marks, what it posts and watches."""
    settings.persistence.finalizer = FINALIZER
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="spindle.dev")
    settings.persistence.diffbase_storage = NoDiffBase()
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    # the API server sends only driver pods: a handler's `labels` filter on the client, after
    # every pod event in the watched namespaces has crossed the wire
    settings.watching.label_selectors["v1", "pods"] = DRIVER_POD_SELECTOR


DELETE_RETRY_SECONDS = 10.0
"""How long a failed deletion of checkpoint data waits before its next try (of `retries`)."""
DRIVERS_END_SECONDS = 120.0
"""How long deleting checkpoint data waits for the pipeline's driver pods to end (deleted with
a grace of `reconcile.ENDING_GRACE_SECONDS`, no graceful stop) before that try fails."""


def register(operator: Operator, registry: kopf.OperatorRegistry) -> None:
    """The kopf handlers, with pinned ids; none of them stores state on the objects."""

    kopf.on.login(registry=registry, id="spindle-login")(kopf.login_via_client)

    @kopf.on.startup(registry=registry, id="spindle-startup")
    async def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        configure(settings)
        await operator.start()

    @kopf.on.cleanup(registry=registry, id="spindle-cleanup")
    async def cleanup(**_: Any) -> None:
        await operator.stop()

    # Async, so they run on the event loop that owns the work queue: kopf runs a sync handler
    # in a thread, where waking a worker waiting on the queue is not safe (nor prompt).
    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry, id="pipeline-event")
    async def pipeline_event(body: kopf.Body, type: str | None, **_: Any) -> None:
        operator.pipeline_event(body, type)

    @kopf.on.event("", "v1", "pods", labels=dict(MANAGED), registry=registry, id="driver-pod-event")
    async def pod_event(body: kopf.Body, type: str | None, **_: Any) -> None:
        operator.pod_event(body, type)

    def deletes_data(spec: kopf.Spec, **_: Any) -> bool:
        return bool((spec.get("storage") or {}).get("deleteOnPipelineDeletion"))

    @kopf.on.delete(
        GROUP, VERSION, PLURAL, when=deletes_data, retries=3, registry=registry, id="delete-data"
    )
    async def delete_data(body: kopf.Body, logger: Any, **_: Any) -> None:
        reconciler = operator.reconciler
        assert reconciler is not None
        meta = body["metadata"]
        # Both replicas' kopf run this handler; only the leader deletes. A standby waits until
        # it leads, or until the pipeline is gone (the leader deleted the data and released it).
        while not operator.leading:
            current = await asyncio.to_thread(
                reconciler.cluster.pipeline, meta["namespace"], meta["name"]
            )
            if current is None or current["metadata"]["uid"] != meta["uid"]:
                return
            await asyncio.sleep(2.0)
        key = (meta["namespace"], meta["name"])
        work = operator.work
        assert work is not None
        # No reconcile runs meanwhile: one that read the pipeline before its deletion began
        # could start a driver after the last look for one, into the emptied prefix.
        async with work.hold(key):
            waited, delete = 0.0, functools.partial(reconciler.delete_data, dict(body))
            try:
                while True:
                    if not operator.leading:  # another replica leads now
                        raise RuntimeError("this replica stopped leading")
                    if (count := await asyncio.to_thread(delete)) is not None:
                        break
                    if waited >= DRIVERS_END_SECONDS:
                        raise RuntimeError(f"its driver pods did not end within {waited:.0f} s")
                    await asyncio.sleep(2.0)
                    waited += 2.0
            except Exception as error:  # kopf tries `retries` times, then lets the object go
                raise kopf.TemporaryError(
                    f"could not delete checkpoint data: {error}", delay=DELETE_RETRY_SECONDS
                ) from error
        logger.info(f"deleted {count} objects of checkpoint data")


def run(operator: Operator) -> None:
    registry = kopf.OperatorRegistry()
    register(operator, registry)
    kopf.run(
        registry=registry,
        standalone=True,
        clusterwide=operator.namespaces is None,
        namespaces=operator.namespaces or [],
    )
