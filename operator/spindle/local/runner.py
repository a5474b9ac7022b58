"""The local body: a pipeline under `--home`, observed from its files, acted on in process.

`status` (and `apply`) run one cycle that starts nothing: with no run in progress the status
says `Stopped` and names `spindle local run NAME`. `run` runs one cycle whose act is the driver
loop in the foreground (bootstrapping first when the brain says so; SIGTERM finishes the step,
commits and exits 0), then records the status once more, now that nothing runs.
"""

from __future__ import annotations

import datetime
import getpass
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spindle.api import Phase
from spindle.api.status import PipelineStatus
from spindle.checkpoint import Manifest
from spindle.checkpoint.origin import starting_checkpoint
from spindle.checkpoint.statistics import needs_sizes, stored_sizes
from spindle.errors import SpindleError, internal
from spindle.lifecycle import (
    Acted,
    Action,
    Decision,
    Event,
    Observation,
    Report,
    cycle,
    decide,
    decide_start,
    timestamp,
)
from spindle.local.home import LocalPipeline
from spindle.local.warm import alive
from spindle.plan.preview import PreviewReport
from spindle.progress import say as _note
from spindle.versions import RUNTIME_VERSION

if TYPE_CHECKING:  # pyspark loads only when something runs
    from spindle.runtime.engine import Runtime

Say = Callable[[str], None]
Progress = Callable[..., None]


def _now() -> str:
    return timestamp(datetime.datetime.now(datetime.UTC))


def start_from(pipeline: LocalPipeline, *, adopt: bool) -> Manifest | None:
    """The pipeline's latest checkpoint, or its `spec.storage.startFrom` one."""
    manifest = pipeline.manifest()
    storage = manifest.spec.storage
    return starting_checkpoint(
        pipeline.store(),
        start_from=storage.start_from if storage else None,
        pipeline=pipeline.ref,
        s3=pipeline.storage_root()[1],
        adopt=adopt,
    )


MASTER = "local[2]"
"""Where a local command runs Spark."""


def open_runtime(pipeline: LocalPipeline, *, report: Progress) -> Runtime:
    """The runtime of a local pipeline: Spark in local mode on the pipeline's storage. Says
    so when it starts Spark (tens of seconds in which nothing else is said)."""
    from spindle.runtime.factory import open_runtime as open_any
    from spindle.runtime.session import running

    if not running():
        _note(f"starting Spark ({MASTER})")
    return open_any(
        pipeline=pipeline.ref,
        spec=pipeline.manifest().spec,
        store=pipeline.store(),
        s3=pipeline.storage_root()[1],
        report=report,
        master=MASTER,
    )


@dataclass(frozen=True)
class RunSettings:
    """How `spindle local run` runs: in the foreground, until idle or until SIGTERM."""

    until_idle: bool
    report: Progress
    interval: float = 1.0
    stop: threading.Event | None = None
    """Set to finish the step, commit and return; without one, SIGTERM sets it (the warm
    server, whose commands run in threads, passes its own: there SIGTERM is the server's)."""


@dataclass
class LocalBody:
    """The local body: observe the files under `--home` and the checkpoint, act by running the
    driver loop in this process (only for `spindle local run`), record `status.json`."""

    pipeline: LocalPipeline
    say: Say
    run: RunSettings | None = None
    """Set for `spindle local run`: the only time this body starts a driver."""
    checkpoint: Manifest | None = None
    generation: int = 0
    superseded: bool = False
    """Whether the run stopped because the pipeline changed under it (`spindle local apply`,
    `restate`): `run` then decides again, as the operator does after stopping a driver."""
    shown: bool = False
    """Whether the command shows the status this body records (its conditions) or raises it
    as its error: an Event that repeats one of its conditions is then not said again."""

    def observe(self) -> Observation:
        pipeline = self.pipeline
        record = pipeline.record()
        self.generation = int(record["generation"])
        self.checkpoint = start_from(pipeline, adopt=self.run is not None)
        spec, restate = pipeline.manifest().spec, pipeline.restate
        sizes, preview = None, None
        runtime = spec.runtime_version or RUNTIME_VERSION
        if self.checkpoint is not None and needs_sizes(
            self.checkpoint, sql=spec.sql, runtime=runtime, restate=restate
        ):
            s3 = pipeline.storage_root()[1]
            sizes = stored_sizes(pipeline.store().objects, self.checkpoint, s3=s3)
            preview = pipeline.store().latest_preview()
        return Observation(
            spec=spec,
            generation=self.generation,
            checkpoint=self.checkpoint,
            approval=pipeline.approval,
            driver=pipeline.driver(),
            last_bootstrap=record.get("lastBootstrap"),
            checkpoint_uri=pipeline.store().manifest_uri(self.checkpoint.id)
            if self.checkpoint
            else None,
            previous=pipeline.status(),
            start_requested=self.run is not None,
            restart_requested=self.run is not None,
            name=pipeline.name,
            restate=restate,
            sizes=sizes,
            preview=preview,
        )

    def act(self, decision: Decision) -> Acted:
        if self.run is None or decision.mode is None:
            if self.run is not None and refused(decision):
                self.shown = True  # `run` raises the decision as its error
            return Acted(decision)
        from spindle.runtime.loop import drive

        pipeline, run, mode = self.pipeline, self.run, decision.mode
        stop = run.stop or threading.Event()
        pipeline.mark_running()
        driver = {"generation": self.generation, "change_id": decision.change_id}
        recorded: dict[str, Any] = {}

        def record(**fields: Any) -> None:
            recorded.clear()
            recorded.update(fields)
            pipeline.set_driver(**fields)

        base = self.checkpoint.id if self.checkpoint is not None else None
        record(mode=mode.value, phase="Running", base=base, **driver)
        examined = (self.generation, pipeline.restate)

        def superseded() -> str | None:
            """Why this run must stop now: the pipeline changed, and the lifecycle stops its
            driver for it (a changed program or restatement). Decided once per change, and
            not recorded: the final status is (`run`)."""
            nonlocal examined
            now = (pipeline.generation, pipeline.restate)
            if now == examined:
                return None
            examined = now
            decided = decide(LocalBody(pipeline, say=self.say).observe())
            if decided.action is not Action.STOP_DRIVER:
                return None
            self.superseded = True
            return f"{decided.reason}: {decided.message}"

        def bootstrapped(_: Manifest) -> None:
            pipeline.update(lastBootstrap=decision.change_id)
            record(mode="run", phase="Running", **driver)

        def retrying(line: str | None) -> None:  # `spindle local status` shows it
            record(mode="run", phase="Running", retrying=line, **driver)

        previous: dict[int, Any] = {}
        try:
            if run.stop is None:  # this process is the run's: its signals stop it
                previous = _stop_on_signal(signal.SIGTERM, stop, say=self.say)
            runtime = open_runtime(pipeline, report=run.report)
            if run.stop is None:  # after Spark's start, which ends the run at a Ctrl-C
                previous.update(_stop_on_signal(signal.SIGINT, stop, say=self.say))
            drive(
                runtime,
                decision=decision,
                checkpoint=self.checkpoint,
                stop=stop,
                until_idle=run.until_idle,
                paused=lambda: pipeline.manifest().spec.paused,
                say=self.say,
                approved_by=getpass.getuser(),
                on_bootstrapped=bootstrapped,
                interval=run.interval,
                retry=pipeline.manifest().spec.retry,
                retrying=retrying,
                superseded=superseded,
            )
            pipeline.set_driver(mode="run", generation=self.generation, phase="Succeeded")
        except KeyboardInterrupt:  # Ctrl-C as Spark started, or a second one in a step: the
            # run ended, as `driver()` reads a running one whose process is gone
            ended = {key: value for key, value in recorded.items() if key != "retrying"}
            pipeline.set_driver(**{**ended, "phase": "Succeeded"})
            raise
        except Exception as error:  # a Spindle bug too: the status says the run failed
            failed = error if isinstance(error, SpindleError) else internal(error)
            pipeline.set_driver(
                mode=mode.value,
                generation=self.generation,
                phase="Failed",
                reason=failed.reason,
                message=failed.message,
            )
            raise
        finally:
            pipeline.clear_running()
            for number, handler in previous.items():
                signal.signal(number, handler)
        return Acted(decision)

    def record(self, status: PipelineStatus, events: Sequence[Event]) -> None:
        try:
            self.pipeline.save_status(status.to_json())
        except SpindleError as error:  # a home it may only read: `local status` still shows
            if error.reason != "InvalidHome":  # it (a run fails on the files it must write)
                raise
        shown = {(c.reason, c.message) for c in status.conditions} if self.shown else set()
        for event in events:
            if (event.reason, event.message) not in shown:
                self.say(f"{event.type} {event.reason}: {event.message}")


def refused(decision: Decision) -> bool:
    """Whether `run` refuses `decision`, raising it as its error: it starts no driver, and no
    approval awaited explains why (an invalid program, a refusal)."""
    return not decision.starts_driver and decision.phase is not Phase.AWAITING_APPROVAL


def _stop_on_signal(number: int, stop: threading.Event, *, say: Say) -> dict[int, Any]:
    """SIGTERM, or Ctrl-C (SIGINT), finishes the step, commits and stops the run; a second
    Ctrl-C abandons the step (the next run rolls it back and redoes it). For SIGINT this
    replaces Python's `KeyboardInterrupt` at once (PySpark's own handler, which cancelled the
    running jobs from inside the call that waited for them, is gone once Spark has started:
    `runtime.session`). The handler only starts a thread: setting the event or printing
    inside it could deadlock on a lock, or re-enter a write, that the interrupted code holds.
    Returns the handler replaced."""

    def stopping() -> None:
        if number == signal.SIGINT:
            say("Stopping after this step (Ctrl-C again abandons it; the next run redoes it).")
        stop.set()

    def handler(*_: Any) -> None:
        if number == signal.SIGINT and stop.is_set():
            raise KeyboardInterrupt
        threading.Thread(target=stopping, daemon=True).start()

    return {number: signal.signal(number, handler)}


def status(
    pipeline: LocalPipeline, *, say: Say, shown: bool = False
) -> tuple[PipelineStatus, Decision]:
    """One cycle that starts nothing: the status as recorded, and the decision behind it.
    `shown`: the command prints that status, so `say` gets no Event that repeats it."""
    acted, report = cycle(LocalBody(pipeline, say=say, shown=shown), now=_now())
    return report.status, acted.decision


def run(
    pipeline: LocalPipeline,
    *,
    until_idle: bool,
    say: Say,
    report: Progress,
    interval: float = 1.0,
    stop: threading.Event | None = None,
) -> Report:
    """Run the pipeline in the foreground; returns the status recorded once it stopped."""
    with pipeline.running_lock():
        return _run(pipeline, RunSettings(until_idle, report, interval, stop), say=say)


def _run(pipeline: LocalPipeline, settings: RunSettings, *, say: Say) -> Report:
    # Nothing to start is an error, unless a change to the pipeline stopped the run: then it
    # goes on as the change allows, or ends with the status saying why it cannot.
    decided: Callable[[Observation], Decision] = decide_start
    while True:
        body = LocalBody(pipeline, say=say, run=settings)
        acted, _ = cycle(body, now=_now(), decide=decided)
        if body.superseded:
            decided = decide
            continue
        final = cycle(LocalBody(pipeline, say=say), now=_now())[1]
        ended = acted.decision
        if refused(ended):
            raise ended.refusal()  # the change cannot run (an invalid program, a refusal)
        return final


def preview(
    pipeline: LocalPipeline, *, say: Say, report: Progress, stop: threading.Event | None = None
) -> tuple[PreviewReport, PipelineStatus]:
    """Preview the pending change (`spindle local preview`): evaluate it in scratch space and
    keep the report beside the checkpoints; returns it and the status that then shows it. A
    failed preview is no exception here: the report and the `Previewed` condition say why."""
    current, decision = status(pipeline, say=lambda _: None)
    pending = current.pending_change
    checkpoint = start_from(pipeline, adopt=False)
    if pending is None or decision.plan is None or checkpoint is None:
        raise SpindleError(
            reason="NoPendingChange",
            message=f"Pipeline '{pipeline.name}' has no change awaiting approval (phase "
            f"{current.phase.value}), so there is nothing to preview. Apply a changed program "
            f"(`spindle local apply -f ...`) or `spindle local restate {pipeline.name} VIEW...` "
            "first.",
            details={"phase": current.phase.value},
        )
    from spindle.runtime.preview import Bounds
    from spindle.runtime.preview import preview as evaluate

    bounds = pipeline.manifest().spec.preview
    say(f"Previewing change {pending.id} in scratch space (nothing is committed).")
    previewed = evaluate(
        open_runtime(pipeline, report=report),
        decision.plan,
        checkpoint,
        bounds=Bounds(sample_rows=bounds.sample_rows, timeout_seconds=bounds.timeout_seconds),
        stop=stop,
    )
    return previewed, status(pipeline, say=say)[0]


def stop(pipeline: LocalPipeline, *, force: bool, timeout: float = 120.0) -> bool:
    """Stop a running `local run`: SIGTERM (it commits, then exits), or SIGKILL with force."""
    pid = pipeline.running_pid()
    if pid is None:
        return False
    os.kill(pid, signal.SIGKILL if force else signal.SIGTERM)
    if not force:
        _note(f"waiting for the step in progress to commit (PID {pid})")
    deadline = time.monotonic() + timeout
    while pipeline.running_pid() is not None and alive(pid):
        if time.monotonic() > deadline:
            raise SpindleError(
                reason="StopTimedOut",
                message=f"Pipeline '{pipeline.name}' is still running (PID {pid}) {timeout:.0f}s "
                "after it was asked to stop: a step or bootstrap may still be committing. Wait "
                f"and run `spindle local stop {pipeline.name}` again, or end it now with "
                "--force (the step it was in is done again from the last checkpoint).",
                details={"pid": pid},
            )
        time.sleep(0.2)
    if force:
        pipeline.clear_running()
    return True
