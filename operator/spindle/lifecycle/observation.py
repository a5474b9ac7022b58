"""What a body observed about one pipeline, in the brain's terms (no I/O, no API objects).

Each body (operator, local CLI, driver pod) fills an `Observation` from its own world; the brain
decides on it and never asks for more.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from spindle.api import PipelineSpec
from spindle.api.status import PipelineStatus
from spindle.api.types import PREVIEW_ANNOTATION
from spindle.checkpoint import Manifest
from spindle.plan import StoredSize
from spindle.plan.preview import PreviewReport
from spindle.versions import RUNTIME_VERSION


class DriverMode(StrEnum):
    """What a driver was started to do."""

    RUN = "run"
    BOOTSTRAP = "bootstrap"
    PREVIEW = "preview"
    """A data-diff preview of a pending change: commits nothing, never the pipeline's driver."""


@dataclass(frozen=True)
class ObservedDriver:
    """The pipeline's driver as observed: a driver pod, or a `spindle local run` process."""

    mode: DriverMode
    generation: int
    phase: str  # "Pending" | "Running" | "Succeeded" | "Failed"
    change_id: str | None = None
    reason: str | None = None
    message: str | None = None
    paused: bool | None = None
    """Whether it was started with ingestion paused; None: it follows desiredState live."""
    spark: str | None = None
    """The fingerprint of the `spec.spark` and `spec.retry` it was started with
    (`PipelineSpec.driver_fingerprint`); None: it follows the spec."""
    retrying: str | None = None
    """Why it waits to retry a step storage refused, as it said it ("" when the body sees
    only that it does: a driver pod's readiness); None: it is stepping."""

    placement: str | None = None
    """The fingerprint of the storage and service account it was started with
    (`PipelineSpec.placement_fingerprint`); None: it follows the spec."""
    program: str | None = None
    """The fingerprint of the SQL it was started with (`PipelineSpec.sql_fingerprint`); None:
    it follows the spec."""
    base: str | None = None
    """A bootstrap driver's: the checkpoint its change was planned from. Once the latest
    checkpoint is another, its bootstrap committed (the later steps' checkpoints record no
    bootstrap); None: not known (a driver started before it was recorded)."""
    lingering: bool = False
    """Failed, yet not ended: its pod waits for what it cannot get (an image the kubelet
    retries pulling), and would start if it came, so stopping deletes it too."""
    ending: bool = False
    """Asked to end (its pod deleted): it stops at a checkpoint, and is gone shortly."""
    stalled: tuple[str, str] | None = None
    """(reason, message) of a driver that neither starts nor ends by itself while nothing
    changes: no node can take its pod, or its node does not end it once deleted. Not a
    failure: it resolves when the cluster does, and holds the pipeline's one driver place."""

    @property
    def active(self) -> bool:
        return self.phase in ("Pending", "Running")

    @property
    def present(self) -> bool:
        """Whether there is something for a stop to end: an active driver or a lingering one."""
        return self.active or self.lingering


@dataclass(frozen=True)
class Unobservable:
    """Why the pipeline could not be observed (bad spec, missing Secret, unreachable storage)."""

    reason: str
    message: str


@dataclass(frozen=True)
class Observation:
    spec: PipelineSpec
    generation: int
    checkpoint: Manifest | None
    approval: str | None = None
    driver: ObservedDriver | None = None
    last_bootstrap: str | None = None
    runtime_version: str = RUNTIME_VERSION
    checkpoint_uri: str | None = None
    """Where the body found `checkpoint`'s manifest (the storage layout is the body's)."""
    previous: PipelineStatus | None = None
    """The status the body recorded last (transition times, announced events)."""
    problem: Unobservable | None = None
    start_requested: bool = True
    """Whether the body would start a driver now: the operator and a driver pod always; the
    local CLI only in `spindle local run` (else nothing is running, and the status says so)."""
    restart_requested: bool = False
    """Whether a user asked, now, to start the pipeline whatever ended its last driver
    (`spindle local run`): a failed driver then holds it `Failed` no longer."""
    name: str = "NAME"
    """The pipeline's name, for messages that tell a user what to type."""
    restate: str | None = None
    """A restatement request (`spindle.dev/restate`, `spindle local restate`), as given."""
    sizes: Mapping[str, StoredSize] | None = None
    """The checkpoint's stored relations' sizes, from their Delta logs; None when the body did
    not read them (nothing to estimate: the program is the checkpointed one)."""
    preview: PreviewReport | None = None
    """The newest data-diff preview kept beside the checkpoints (of whichever change); the
    status shows it only while it names the pending change."""
    preview_request: str | None = None
    """A preview request (`spindle.dev/preview=<change id>[@label]`), as given."""
    previewing: ObservedDriver | None = None
    """The preview pod serving `preview_request`, if there is one."""

    @property
    def preview_refused(self) -> tuple[str, str] | None:
        """(reason, message) of the `Previewed` condition last recorded, when it says the
        cluster refused the preview pod of this very request: a refused request is served,
        as a failed preview is, so it is not tried again at each reconcile (a new label is)."""
        request, previous = self.preview_request, self.previous
        if request is None or previous is None:
            return None
        for condition in previous.conditions:
            if condition.reason == PREVIEW_REJECTED and condition.message.endswith(
                answering(request)
            ):
                return condition.reason, condition.message.removesuffix(f" {answering(request)}")
        return None

    @property
    def spark_ran(self) -> bool:
        """Whether the spec's program is the checkpoint's: Spark has run it, so the program
        layer's reference checks do not second-guess it (after an upgrade, say)."""
        return self.checkpoint is not None and self.checkpoint.program.text == self.spec.sql


PREVIEW_REJECTED = "PreviewPodRejected"
"""The `Previewed` reason of a preview pod the API server refused to create."""


def answering(request: str) -> str:
    """How a `Previewed` condition's message ends when it answers `request` (what `kubectl
    spindle preview` waits for)."""
    return f"({PREVIEW_ANNOTATION}={request})"


def request_change(request: str) -> str:
    """The change id a preview request (`<change id>[@label]`) names."""
    return request.partition("@")[0].strip()


def bootstrapped(checkpoint: Manifest | None, change_id: str | None) -> bool:
    """Whether `checkpoint` records the bootstrap of `change_id`."""
    record = checkpoint.bootstrap if checkpoint is not None else None
    return record is not None and change_id is not None and record.change_id == change_id
