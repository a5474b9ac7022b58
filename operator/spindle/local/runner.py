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

from spindle.checkpoint import Manifest, PipelineRef, open_store
from spindle.errors import SpindleError
from spindle.lifecycle import Action, Decision, Observation, decide
from spindle.local.home import LocalPipeline

Say = Callable[[str], None]


def start_from(pipeline: LocalPipeline) -> Manifest | None:
    """Adopt `spec.storage.startFrom` when the pipeline has no checkpoint of its own yet."""
    manifest = pipeline.manifest()
    store = pipeline.store()
    latest = store.latest()
    source = manifest.spec.storage.start_from if manifest.spec.storage else None
    if latest is not None or not source:
        return latest
    uri, _, checkpoint_id = source.partition("#")
    origin = open_store(uri, s3=pipeline.storage_root()[1])
    if not checkpoint_id:
        newest = origin.latest()
        if newest is None:
            raise SpindleError(
                reason="CheckpointNotFound",
                message=f"startFrom names {uri}, which has no checkpoint; name a pipeline root "
                "that has one, as <uri>#<checkpoint id>.",
                details={"uri": uri},
            )
        checkpoint_id = newest.id
    ref = PipelineRef(namespace=manifest.metadata.namespace, name=pipeline.name)
    return store.adopt(origin, checkpoint_id, pipeline=ref)


def observe(pipeline: LocalPipeline) -> tuple[Observation, Manifest | None]:
    manifest = pipeline.manifest()
    checkpoint = start_from(pipeline)
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
        body["lastCheckpoint"] = {
            "id": checkpoint.id,
            "time": checkpoint.created_at.isoformat(),
            "uri": f"{root}/checkpoints/{checkpoint.id}/manifest.json",
        }
    return body, decision


def _refuse(decision: Decision) -> SpindleError:
    condition = decision.conditions[0] if decision.conditions else None
    return SpindleError(
        reason=condition.reason if condition else decision.phase.value,
        message=condition.message if condition else f"The pipeline is {decision.phase.value}.",
        details={"phase": decision.phase.value},
    )


def run(pipeline: LocalPipeline, *, until_idle: bool, say: Say, interval: float = 1.0) -> int:
    """Run the pipeline in the foreground; returns the exit status."""
    if pipeline.running_pid() is not None:
        raise SpindleError(
            reason="AlreadyRunning",
            message=f"Pipeline '{pipeline.name}' is already running (PID "
            f"{pipeline.running_pid()}); stop it with `spindle local stop {pipeline.name}`.",
        )
    observation, checkpoint = observe(pipeline)
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

        runtime = open_runtime(pipeline, say=say)
        if checkpoint is None:
            say("No checkpoint yet: creating the pipeline's state.")
            checkpoint = runtime.initialize(decision.program)
        if decision.action is Action.START_BOOTSTRAP:
            checkpoint = runtime.bootstrap(decision.plan, checkpoint, approved_by=getpass.getuser())
            pipeline.update(lastBootstrap=decision.plan.change_id)
            say(
                f"Input records read from connectors during the bootstrap: "
                f"{checkpoint.bootstrap.input_records_read if checkpoint.bootstrap else 0}"
            )
            pipeline.set_driver(
                mode="run",
                generation=observation.generation,
                phase="Running",
                change_id=decision.change_id,
            )
        paused = pipeline.manifest().spec.desired_state.value == "Paused"
        while not stop.is_set():
            checkpoint, stats = runtime.step(decision.program, checkpoint, ingest=not paused)
            if stats.idle:
                if until_idle:
                    break
                stop.wait(interval)
            else:
                say(
                    f"step {stats.sequence}: {stats.rows_ingested} rows ingested, "
                    f"{len(stats.views_recomputed)} views recomputed, checkpoint {checkpoint.id}"
                )
        pipeline.set_driver(mode="run", generation=observation.generation, phase="Succeeded")
        say(f"Stopped at checkpoint {checkpoint.id}.")
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
