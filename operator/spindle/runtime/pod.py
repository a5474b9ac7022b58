"""The driver-pod body: a Spark driver pod observes, decides and acts like the other bodies.

The pod carries everything it needs: the pipeline (JSON: namespace, name, generation, spec; in
`SPINDLE_PIPELINE` and, past 120,000 bytes, its parts: `api.pod_env`), the mode and the
approved change id as arguments, S3 credentials from a Secret through `secretKeyRef`, and
Spark settings as `--conf` arguments. It observes its
environment and the checkpoint it finds (adopting `startFrom`), and the brain decides again:
a bootstrap of anything but the approved change id is refused (`ChangeMoved`), so a change that
moved after approval is never bootstrapped. It acts through the driver loop and records its
status as lines on stderr; the operator records `.status` from the checkpoint it commits.

A preview pod (`--mode preview`) observes the same way without adopting anything, plans, and
evaluates the pending change in scratch space (`runtime.preview`): it commits nothing, and its
report (or why there is none) goes beside the checkpoints, where the operator reads it.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from spindle.api import PipelineSpec
from spindle.api.pod_env import PIPELINE_ENV, pipeline_json
from spindle.api.status import PipelineStatus
from spindle.api.types import HEALTH_PORT, QUERY_PORT
from spindle.checkpoint import Manifest, PipelineRef
from spindle.checkpoint.objects import S3Options
from spindle.checkpoint.origin import starting_checkpoint
from spindle.checkpoint.store import CheckpointStore, open_store
from spindle.errors import SpindleError
from spindle.lifecycle import (
    Acted,
    Decision,
    DriverMode,
    Event,
    Observation,
    cycle,
    decide,
    decide_start,
    timestamp,
)
from spindle.plan.preview import PreviewReport
from spindle.runtime.engine import Runtime
from spindle.runtime.factory import open_runtime
from spindle.runtime.health import Health, serve_health
from spindle.runtime.loop import drive, reporter
from spindle.runtime.query_server import QueryServer


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class PodSettings:
    """What the operator put on the pod's command line."""

    mode: DriverMode
    change_id: str | None = None
    approved_by: str | None = None
    restate: str | None = None
    """The restatement request (`spindle.dev/restate`) the approved change was planned with."""
    preview_request: str | None = None
    """For a preview pod: the `spindle.dev/preview` request it serves."""
    master: str = "local[2]"
    conf: Mapping[str, str] = field(default_factory=dict)
    until_idle: bool = False
    interval: float = 1.0
    query_port: int | None = QUERY_PORT
    """The read-only query server's port on the pod's loopback (None: no server)."""
    health_port: int | None = HEALTH_PORT
    """The readiness server's port on the pod IP (None: no server)."""


def pipeline_from_env(env: Mapping[str, str] = os.environ) -> tuple[PipelineRef, int, PipelineSpec]:
    raw = pipeline_json(env)
    if not raw:
        raise SpindleError(
            reason="DriverMisconfigured",
            message=f"{PIPELINE_ENV} is not set; driver pods are created by the operator.",
        )
    body = json.loads(raw)
    ref = PipelineRef(namespace=body["namespace"], name=body["name"])
    return ref, int(body["generation"]), PipelineSpec.model_validate(body["spec"])


@dataclass
class DriverPodBody:
    """The driver pod's body: observe `SPINDLE_PIPELINE` and the checkpoint (adopting
    `startFrom`), act through the driver loop, record Events as lines."""

    settings: PodSettings
    stop: threading.Event
    ref: PipelineRef | None = None
    spec: PipelineSpec | None = None
    store: CheckpointStore | None = None
    s3: S3Options | None = None
    checkpoint: Manifest | None = None
    health: Health | None = None
    """The readiness server, started with the pod (before Spark: the kubelet sees the pod
    Ready before a first step could fail, and Spark on Kubernetes waits for a Ready driver)."""

    def observe(self) -> Observation:
        self.ref, generation, self.spec = pipeline_from_env()
        if self.spec.storage is None:
            raise SpindleError(
                reason="StorageNotConfigured", message="The pipeline has no storage."
            )
        self.s3 = S3Options.from_env()
        self.store = open_store(
            self.spec.storage.uri, namespace=self.ref.namespace, name=self.ref.name, s3=self.s3
        )
        self.checkpoint = starting_checkpoint(
            self.store,
            start_from=self.spec.storage.start_from,
            pipeline=self.ref,
            s3=self.s3,
            adopt=self.settings.mode is not DriverMode.PREVIEW,
        )
        if self.checkpoint is None and self.settings.mode is DriverMode.PREVIEW:
            raise SpindleError(
                reason="CheckpointNotFound",
                message="A preview needs a checkpoint to evaluate the change from; the "
                "pipeline has none yet.",
            )
        return Observation(
            spec=self.spec,
            generation=generation,
            checkpoint=self.checkpoint,
            approval=None if self.settings.mode is DriverMode.PREVIEW else self.settings.change_id,
            restate=self.settings.restate,
            checkpoint_uri=self.store.manifest_uri(self.checkpoint.id) if self.checkpoint else None,
            name=self.ref.name,
        )

    def decide(self, observed: Observation) -> Decision:
        if self.settings.mode is DriverMode.PREVIEW:
            return decide(observed)  # the pending change, whatever it is: act compares ids
        bootstrap_of = self.settings.change_id or ""
        decision = decide_start(
            observed,
            bootstrap_of=bootstrap_of if self.settings.mode is DriverMode.BOOTSTRAP else None,
        )
        if self.settings.mode is DriverMode.BOOTSTRAP and decision.mode is DriverMode.RUN:
            say(f"Change {bootstrap_of} is already bootstrapped; running.")
        return decision

    def act(self, decision: Decision) -> Acted:
        assert self.ref is not None and self.spec is not None and self.store is not None
        spec = self.spec
        if self.settings.mode is DriverMode.PREVIEW and not self._still_pending(decision):
            from spindle.runtime.preview import refused

            assert self.checkpoint is not None
            change_id, request = self.settings.change_id or "", self.settings.preview_request
            self.store_report(refused(change_id, self.checkpoint, request=request))
            return Acted(decision)  # without starting Spark: there is nothing to evaluate
        runtime = open_runtime(
            pipeline=self.ref,
            spec=spec,
            store=self.store,
            s3=self.s3,
            report=reporter(say),
            master=self.settings.master,
            conf=self.settings.conf,
        )
        if self.settings.mode is DriverMode.PREVIEW:
            self._preview(runtime, decision)
            return Acted(decision)
        queries = serve_queries(runtime, port=self.settings.query_port)
        try:
            self.checkpoint = drive(
                runtime,
                decision=decision,
                checkpoint=self.checkpoint,
                stop=self.stop,
                until_idle=self.settings.until_idle,
                paused=lambda: spec.paused,
                say=say,
                approved_by=self.settings.approved_by,
                interval=self.settings.interval,
                retry=spec.retry,
                retrying=self.health.retrying if self.health else lambda _: None,
            )
        finally:
            if queries is not None:
                queries.stop()
        return Acted(decision)

    def _still_pending(self, decision: Decision) -> bool:
        """Whether the change this preview pod was started for is still the pending one."""
        return decision.plan is not None and decision.change_id == self.settings.change_id

    def _preview(self, runtime: Runtime, decision: Decision) -> None:
        from spindle.runtime.preview import Bounds, preview

        assert self.spec is not None and self.checkpoint is not None and decision.plan
        request = self.settings.preview_request
        bounds = self.spec.preview
        report = preview(
            runtime,
            decision.plan,
            self.checkpoint,
            bounds=Bounds(sample_rows=bounds.sample_rows, timeout_seconds=bounds.timeout_seconds),
            request=request,
        )
        say(report.headline())

    def store_report(self, report: PreviewReport) -> None:
        assert self.store is not None
        self.store.write_preview(report)
        say(report.headline())

    def record(self, status: PipelineStatus, events: Sequence[Event]) -> None:
        """Events as lines; `.status` itself is the operator's to write (from the checkpoint
        this pod committed and the pod's phase)."""
        for event in events:
            say(f"{event.type} {event.reason}: {event.message}")


def serve_queries(runtime: Runtime, *, port: int | None) -> QueryServer | None:
    """The query server, when asked for; a port that cannot be bound costs the queries only."""
    if port is None:
        return None
    try:
        return QueryServer(runtime, port=port, say=say).start()
    except OSError as error:
        say(f"Not serving queries: 127.0.0.1:{port} cannot be bound ({error}).")
        return None


def run_driver_pod(settings: PodSettings, *, stop: threading.Event) -> int:
    """The pod's whole life: one cycle, whose act runs until stopped (or idle)."""
    previewing = settings.mode is DriverMode.PREVIEW  # a preview pod has no readiness probe
    health = None if previewing else serve_health(port=settings.health_port, say=say)
    body = DriverPodBody(settings, stop, health=health)
    try:
        cycle(body, now=timestamp(datetime.datetime.now(datetime.UTC)), decide=body.decide)
    finally:
        if health is not None:
            health.stop()
    return 0
