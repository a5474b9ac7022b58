"""The driver loop: bootstrap when the brain said so, then step until told to stop (SIGTERM:
finish the step, commit, return) or, with `until_idle`, until input runs dry.

The local body (`spindle local run`) and the driver-pod body (`runtime.pod`) act through it.
Progress is reported as lines (`say`), and durably as checkpoints.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from spindle.checkpoint import Manifest
from spindle.lifecycle import Decision, DriverMode
from spindle.runtime.engine import Runtime

Say = Callable[[str], None]


def view_line(**fields: Any) -> str:
    """One view evaluated by a bootstrap, as a progress line."""
    return f"  [{fields['done']}/{fields['total']}] {fields['view']}: {fields['rows']} rows written"


def reporter(say: Say) -> Callable[..., None]:
    """Turn the runtime's progress events into readable lines."""

    def report(event: str, **fields: Any) -> None:
        if event == "bootstrap-start":
            say(
                f"Bootstrapping change {fields['change_id']}: {fields['views']} views to "
                "evaluate from stored state (no input is read)."
            )
        elif event in ("bootstrap-view", "preview-view"):
            say(view_line(**fields))
        elif event == "bootstrap-done":
            say(
                f"Bootstrap committed as checkpoint {fields['checkpoint']} "
                f"({fields['rows']} rows written)."
            )
        elif event == "vacuum-failed":
            say(f"Vacuum failed (retried after the next commit): {fields['error']}")
        elif event == "compacted":
            relation, files, into = fields["relation"], fields["files"], fields["into"]
            if fields.get("consolidated"):
                say(f"Consolidated {relation}: {files} files into {into}, cancelled rows removed.")
            else:
                say(f"Compacted {relation}: {files} small files into {into}.")
        elif event == "rollback":
            say(
                f"Rolled back {fields['relation']} to version {fields['version']} "
                "(a previous step did not commit)."
            )

    return report


def drive(
    runtime: Runtime,
    *,
    decision: Decision,
    checkpoint: Manifest | None,
    stop: threading.Event,
    until_idle: bool,
    paused: Callable[[], bool],
    say: Say,
    approved_by: str | None,
    on_bootstrapped: Callable[[Manifest], None] = lambda _: None,
    interval: float = 1.0,
) -> Manifest:
    """Run `decision` (one that starts a driver); returns the last committed checkpoint."""
    if decision.program is None or decision.plan is None or not decision.starts_driver:
        raise ValueError(f"nothing to drive: the lifecycle decided {decision.action}")
    if checkpoint is None:
        say("No checkpoint yet: creating the pipeline's state.")
        checkpoint = runtime.initialize(decision.program)
    if decision.mode is DriverMode.BOOTSTRAP:
        checkpoint = runtime.bootstrap(decision.plan, checkpoint, approved_by=approved_by)
        record = checkpoint.bootstrap
        say(
            "Input records read from connectors during the bootstrap: "
            f"{record.input_records_read if record else 0}"
        )
        on_bootstrapped(checkpoint)
    while not stop.is_set():
        checkpoint, stats = runtime.step(decision.program, checkpoint, ingest=not paused())
        if stats.idle:
            if until_idle:
                break
            stop.wait(interval)
        else:
            say(
                f"step {stats.sequence}: {stats.rows_ingested} rows ingested, "
                f"{len(stats.views_recomputed)} views recomputed, checkpoint {checkpoint.id}"
            )
    say(f"Stopped at checkpoint {checkpoint.id}.")
    return checkpoint
