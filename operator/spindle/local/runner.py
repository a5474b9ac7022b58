"""Local commands on top of the lifecycle: observe a local pipeline, decide, and act.

`run` is the driver: it bootstraps when the lifecycle says so, then steps until idle (or until
SIGTERM, when it finishes the step, commits and exits 0).
"""

from __future__ import annotations

import getpass
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from spindle.checkpoint import Manifest, PipelineRef
from spindle.checkpoint.origin import starting_checkpoint
from spindle.errors import SpindleError
from spindle.lifecycle import Action, Decision, Observation, checkpoint_status, decide
from spindle.local.home import LocalPipeline

Say = Callable[[str], None]


def start_from(pipeline: LocalPipeline, *, adopt: bool) -> Manifest | None:
    """The pipeline's latest checkpoint, or its `spec.storage.startFrom` one."""
    manifest = pipeline.manifest()
    storage = manifest.spec.storage
    return starting_checkpoint(
        pipeline.store(),
        start_from=storage.start_from if storage else None,
        pipeline=PipelineRef(namespace=manifest.metadata.namespace, name=pipeline.name),
        s3=pipeline.storage_root()[1],
        adopt=adopt,
    )


def observe(pipeline: LocalPipeline, *, adopt: bool = False) -> tuple[Observation, Manifest | None]:
    manifest = pipeline.manifest()
    checkpoint = start_from(pipeline, adopt=adopt)
    observation = Observation(
        spec=manifest.spec,
        generation=pipeline.generation,
        checkpoint=checkpoint,
        approval=pipeline.approval,
        driver=pipeline.driver(),
        last_bootstrap=pipeline.record().get("lastBootstrap"),
    )
    return observation, checkpoint


def status(pipeline: LocalPipeline) -> tuple[dict[str, Any], Decision]:
    observation, checkpoint = observe(pipeline)
    decision = decide(observation)
    root, _ = pipeline.storage_root()
    body: dict[str, Any] = {
        "name": pipeline.name,
        "generation": observation.generation,
        "phase": decision.phase.value,
        "pendingChange": None,
        "lastCheckpoint": None,
        "conditions": [c.to_json() for c in decision.conditions],
        "running": pipeline.running_pid() is not None,
    }
    if decision.pending_change is not None:
        body["pendingChange"] = decision.pending_change.to_json()
    if checkpoint is not None:
        body["lastCheckpoint"] = checkpoint_status(checkpoint, root=root).model_dump(by_alias=True)
    return body, decision


def _refuse(decision: Decision) -> SpindleError:
    condition = decision.conditions[0] if decision.conditions else None
    return SpindleError(
        reason=condition.reason if condition else decision.phase.value,
        message=condition.message if condition else f"The pipeline is {decision.phase.value}.",
        details={"phase": decision.phase.value},
    )


def run(
    pipeline: LocalPipeline,
    *,
    until_idle: bool,
    say: Say,
    interval: float = 1.0,
    report: Callable[..., None] | None = None,
) -> int:
    """Run the pipeline in the foreground; returns the exit status."""
    if pipeline.running_pid() is not None:
        raise SpindleError(
            reason="AlreadyRunning",
            message=f"Pipeline '{pipeline.name}' is already running (PID "
            f"{pipeline.running_pid()}); stop it with `spindle local stop {pipeline.name}`.",
        )
    observation, checkpoint = observe(pipeline, adopt=True)
    decision = decide(observation)
    if decision.action not in (Action.START_RUN, Action.START_BOOTSTRAP):
        raise _refuse(decision)
    assert decision.program is not None and decision.plan is not None
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    pipeline.mark_running()
    mode = "bootstrap" if decision.action is Action.START_BOOTSTRAP else "run"
    pipeline.set_driver(
        mode=mode, generation=observation.generation, phase="Running", change_id=decision.change_id
    )
    try:
        from spindle.local.spark import open_runtime
        from spindle.runtime.driver import drive

        def bootstrapped(_: Manifest) -> None:
            pipeline.update(lastBootstrap=decision.change_id)
            pipeline.set_driver(
                mode="run",
                generation=observation.generation,
                phase="Running",
                change_id=decision.change_id,
            )

        checkpoint = drive(
            open_runtime(pipeline, say=say, report=report),
            decision=decision,
            checkpoint=checkpoint,
            stop=stop,
            until_idle=until_idle,
            paused=lambda: pipeline.manifest().spec.desired_state.value == "Paused",
            say=say,
            approved_by=getpass.getuser(),
            on_bootstrapped=bootstrapped,
            interval=interval,
        )
        pipeline.set_driver(mode="run", generation=observation.generation, phase="Succeeded")
        return 0
    except SpindleError as error:
        pipeline.set_driver(
            mode=mode,
            generation=observation.generation,
            phase="Failed",
            reason=error.reason,
            message=error.message,
        )
        raise
    finally:
        pipeline.clear_running()
        signal.signal(signal.SIGTERM, previous)


def stop(pipeline: LocalPipeline, *, force: bool, timeout: float = 120.0) -> bool:
    """Stop a running `local run`: SIGTERM (it commits, then exits), or SIGKILL with force."""
    import os

    pid = pipeline.running_pid()
    if pid is None:
        return False
    os.kill(pid, signal.SIGKILL if force else signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and pipeline.running_pid() is not None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    if force:
        pipeline.clear_running()
    return True
