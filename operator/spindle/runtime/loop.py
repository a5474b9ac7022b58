"""The driver loop: bootstrap when the brain said so, then step until told to stop (SIGTERM:
finish the step, commit, return) or, with `until_idle`, until input runs dry.

A step that storage refused (`RETRIED`: an input's, an output's, the state tables' or the
checkpoint store's; a bucket briefly unreachable, a permission being fixed) is retried from the
last committed checkpoint after a growing wait (`spec.retry`), as a restarted driver would be,
without the restart; the driver fails only once the retries are spent. Any other failure (a SQL
error, a conflicting writer, a lost file) fails it at once: trying again would fail the same
way.

The local body (`spindle local run`) and the driver-pod body (`runtime.pod`) act through it.
Progress is reported as lines (`say`), and durably as checkpoints.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from spindle.api.types import RetrySpec
from spindle.checkpoint import Manifest
from spindle.errors import SpindleError
from spindle.lifecycle import Decision, DriverMode
from spindle.program import Program
from spindle.runtime.engine import Runtime, StepStats
from spindle.wording import counted

Say = Callable[[str], None]

RETRIED = frozenset(
    {
        "InputUnreadable",
        "OutputUnwritable",
        "StorageRefused",  # the state tables' (Spark's)
        "StorageUnavailable",
        "StorageRequestRejected",  # the checkpoint store's
        "StorageBucketNotFound",
    }
)
"""The reasons of a step storage refused: another attempt, later, may succeed."""


def view_line(**fields: Any) -> str:
    """One view evaluated by a bootstrap, as a progress line."""
    written = counted(fields["rows"], "row")
    return f"  [{fields['done']}/{fields['total']}] {fields['view']}: {written} written"


def reporter(say: Say) -> Callable[..., None]:
    """Turn the runtime's progress events into readable lines."""

    def report(event: str, **fields: Any) -> None:
        if event == "bootstrap-start":
            say(
                f"Bootstrapping change {fields['change_id']}: {counted(fields['views'], 'view')} "
                "to evaluate from stored state (no input is read)."
            )
        elif event in ("bootstrap-view", "preview-view"):
            say(view_line(**fields))
        elif event == "bootstrap-done":
            say(
                f"Bootstrap committed as checkpoint {fields['checkpoint']} "
                f"({counted(fields['rows'], 'row')} written)."
            )
        elif event == "vacuum-failed":
            say(f"Vacuum failed (retried after the next commit): {fields['error']}")
        elif event == "compaction-failed":
            relation, error = fields["relation"], fields["error"]
            say(f"Compaction of {relation} failed (retried at its next write): {error}")
        elif event == "compacted":
            relation, files, into = fields["relation"], fields["files"], fields["into"]
            if fields.get("consolidated"):
                say(
                    f"Consolidated {relation}: {counted(files, 'file')} into {into}, cancelled "
                    "rows removed."
                )
            else:
                say(f"Compacted {relation}: {counted(files, 'small file')} into {into}.")
        elif event == "input-waiting":
            what = "does not exist yet" if fields["missing"] else "has nothing to read yet"
            say(
                f"Input {fields['connector']}: {fields['location']} {what}; its rows are read "
                "when files arrive there (check the connector's path if you expected some now)."
            )
        elif event == "rollback":
            say(
                f"Rolled back {fields['relation']} to version {fields['version']} "
                "(a previous step did not commit)."
            )
        elif event == "output-put-back":
            say(
                f"Put back {fields['path']} in output {fields['connector']}: Spindle's undo of "
                "its writes there had also taken other writers' commits, and its driver stopped "
                "before it put them back. Their rows are back, and so are the ones it undid."
            )
        elif event == "output-undo-unfinished":
            say(
                f"Output {fields['connector']}: other writers' commits are missing from "
                f"{fields['path']}. Spindle's undo of its writes there took them too, its "
                "driver stopped before it put them back, and commits followed since, which "
                "putting them back would take. Write those rows again (DESCRIBE HISTORY shows "
                "what each version did)."
            )
        elif event == "output-discarded" and fields.get("by") == "abandoned":
            say(
                f"Removed {fields['path']} from output {fields['connector']}: a bootstrap or "
                "a step that did not commit wrote it (a change since abandoned, or an attempt "
                "done again now, which writes what it must again)."
            )
        elif event == "output-discarded":
            say(
                f"Removed {fields['path']} from output {fields['connector']}: a previous step "
                "wrote it and did not commit; its changes reach the output with a later step."
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
    retry: RetrySpec | None = None,
    retrying: Callable[[str | None], None] = lambda _: None,
    superseded: Callable[[], str | None] = lambda: None,
) -> Manifest:
    """Run `decision` (one that starts a driver); returns the last committed checkpoint.
    `retrying` hears each wait to retry a step (the line said) and the recovery (None), for
    the body to show (a driver pod's readiness, the local status). `superseded`, asked before
    each step, says why the driver must stop at its checkpoint (the pipeline changed under a
    body that has no one else to stop it), or None."""
    if decision.program is None or decision.plan is None or not decision.starts_driver:
        raise ValueError(f"nothing to drive: the lifecycle decided {decision.action}")
    if checkpoint is None:
        say("No checkpoint yet: creating the pipeline's state.")
        checkpoint = runtime.initialize(decision.program, restated=decision.plan.restate_request)
    if decision.mode is DriverMode.BOOTSTRAP:
        checkpoint = runtime.bootstrap(decision.plan, checkpoint, approved_by=approved_by)
        record = checkpoint.bootstrap
        say(
            "Input records read from connectors during the bootstrap: "
            f"{record.input_records_read if record else 0}"
        )
        on_bootstrapped(checkpoint)
    retry = retry or RetrySpec()
    while not stop.is_set():
        why = superseded()
        if why is not None:
            say(why)
            break
        checkpoint, stats = _step(
            runtime,
            decision.program,
            checkpoint,
            ingest=not paused(),
            retry=retry,
            stop=stop,
            say=say,
            retrying=retrying,
        )
        if stats is None:
            break  # told to stop while waiting to retry: the last checkpoint stands
        if stats.idle:
            if until_idle:
                break
            stop.wait(interval)
        else:
            say(
                f"step {stats.sequence}: {counted(stats.rows_ingested, 'row')} ingested, "
                f"{counted(len(stats.views_recomputed), 'view')} recomputed, checkpoint "
                f"{checkpoint.id}"
            )
    say(f"Stopped at checkpoint {checkpoint.id}.")
    return checkpoint


def _step(
    runtime: Runtime,
    program: Program,
    checkpoint: Manifest,
    *,
    ingest: bool,
    retry: RetrySpec,
    stop: threading.Event,
    say: Say,
    retrying: Callable[[str | None], None],
) -> tuple[Manifest, StepStats | None]:
    """One step, retried while storage refuses it and `retry` allows: the checkpoint it
    reached and its stats (none when told to stop while waiting to retry). The last refusal,
    once the retries are spent, says how many times the step failed."""
    failures = 0
    while True:
        try:
            if failures:
                checkpoint = _resumed(runtime, checkpoint)
            checkpoint, stats = runtime.step(program, checkpoint, ingest=ingest)
        except SpindleError as error:
            if error.reason not in RETRIED or not retry.attempts:
                raise
            failures += 1
            if failures > retry.attempts:
                raise _spent(error, failures) from error
            delay = retry.delay(failures)
            line = (
                f"Step {checkpoint.sequence + 1} failed ({error.reason}): {error.message} "
                f"Retry {failures} of {retry.attempts} in {delay:g} s, from checkpoint "
                f"{checkpoint.id}."
            )
            say(line)
            retrying(line)
            if stop.wait(delay):
                return _stopped(runtime, checkpoint), None
            continue
        if failures:
            retried = counted(failures, "retry", "retries")
            say(f"Recovered after {retried}: checkpoint {checkpoint.id}.")
            retrying(None)
        return checkpoint, stats


def _resumed(runtime: Runtime, checkpoint: Manifest) -> Manifest:
    """Where a retry starts: the checkpoint the failed attempt committed, if storage refused
    only the answer to its commit (it landed), else the one it started from. Reading the
    latest checkpoint may be refused too: that is one more failed attempt."""
    store = runtime.store
    latest = store.latest()
    if latest is not None and latest.id == store.attempted and latest.parent == checkpoint.id:
        return latest
    return checkpoint


def _stopped(runtime: Runtime, checkpoint: Manifest) -> Manifest:
    """The checkpoint a run stopped while waiting to retry ends at: the failed attempt's own,
    if it landed (as far as storage says now)."""
    try:
        return _resumed(runtime, checkpoint)
    except SpindleError:
        return checkpoint


def _spent(error: SpindleError, failures: int) -> SpindleError:
    """The last refusal, saying the retries are spent (`spec.retry.attempts`)."""
    retries = failures - 1
    return SpindleError(
        reason=error.reason,
        message=f"{error.message} The step failed {failures} times: its first attempt and "
        f"{counted(retries, 'retry', 'retries')} (spec.retry.attempts).",
        details={**error.details, "attempts": failures},
    )
