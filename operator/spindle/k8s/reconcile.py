"""One reconcile of one Pipeline: the operator's body (`PipelineBody`) in the brain's one cycle,
observe → decide → act → record status (`lifecycle.cycle`). The body decides nothing itself.

Level-based and idempotent: it reads everything afresh (the Pipeline, its driver pods, its
Secret, its latest checkpoint), so running it twice, or after a crash at any point, does the
right thing. The checkpoint store is the driver's progress channel: a bootstrap is done when a
checkpoint records it, and `status.lastCheckpoint` shows the newest one with its row counts.

Each pipeline's checkpoint I/O is bounded (`STORAGE_RETRY`): a store that hangs or fails ends
the reconcile within seconds with the reason `StorageUnavailable`, instead of holding a worker
that the other pipelines need. An `Outcome` says whether it is `quiet`: nothing but a change to
the Pipeline object (`inputs`) can change it, so the operator need not reconcile it again soon.
"""

from __future__ import annotations

import datetime
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from kubernetes.client.exceptions import ApiException
from pydantic import BaseModel, ValidationError

from spindle.api import DesiredState, PipelineSpec, StorageSpec
from spindle.api.status import DriverStatus, PipelineStatus
from spindle.api.types import APPROVE_ANNOTATION, PREVIEW_ANNOTATION, RESTATE_ANNOTATION
from spindle.checkpoint import Manifest, PipelineRef
from spindle.checkpoint.blobs import local_path
from spindle.checkpoint.objects import S3Options
from spindle.checkpoint.origin import starting_checkpoint
from spindle.checkpoint.retry import RetryPolicy
from spindle.checkpoint.statistics import needs_sizes, stored_sizes
from spindle.checkpoint.store import CheckpointStore, open_store, pipeline_root
from spindle.errors import SpindleError, first_problem
from spindle.k8s.cluster import (
    Cluster,
    SecretMissing,
    SecretUnreadable,
    api_message,
    refused,
    too_large,
)
from spindle.k8s.pods import (
    EVICTION_RESET_SECONDS,
    DriverSettings,
    Eviction,
    annotation,
    current_pod,
    driver_phase,
    driver_pod,
    eviction,
    lingering,
    observed_driver,
    pod_mode,
    pod_name,
    preview_pod_name,
)
from spindle.lifecycle import (
    Acted,
    Action,
    Decision,
    DriverMode,
    Event,
    Observation,
    Unobservable,
    cycle,
    failed,
    serving_preview,
    timestamp,
)
from spindle.lifecycle.observation import PREVIEW_REJECTED
from spindle.lifecycle.status import STATUS_TOO_LARGE, oversized, unrecorded
from spindle.plan.preview import PreviewReport

log = logging.getLogger("spindle.reconcile")
EVICTION_RESET = datetime.timedelta(seconds=EVICTION_RESET_SECONDS)
"""A stopped driver's count is forgotten this long after its back-off ended with no new driver."""

STORAGE_RETRY = RetryPolicy(deadline=8.0, connect_timeout=3.0, read_timeout=4.0)
"""The operator's checkpoint I/O: a store that does not answer costs a reconcile about ten
seconds at most (the driver, which must commit, keeps the patient default)."""
OBJECT_BYTES_LIMIT = 1_400_000
"""The largest Pipeline object, its status included, the operator writes a whole status into:
etcd stores a request of 1.5 MiB (its --max-request-bytes default), and the API server adds to
the object (managedFields, a resourceVersion). A larger one gets the small status `oversized`
makes, as one the API server refuses as too large (`too_large`) does."""
PREVIEW_MEMO = 4096
"""Preview reports the reconciler remembers (one per pipeline with a pending change)."""

Inputs = tuple[object, ...]


def inputs(pipeline: dict[str, Any]) -> Inputs:
    """What of a Pipeline object its reconcile reads: which object it is, its spec (by
    generation), the approval, restatement and preview annotations, and whether it is being
    deleted. Its status, labels and other annotations change no decision."""
    meta = pipeline.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    return (
        meta.get("uid"),
        meta.get("generation"),
        annotations.get(APPROVE_ANNOTATION),
        annotations.get(RESTATE_ANNOTATION),
        annotations.get(PREVIEW_ANNOTATION),
        bool(meta.get("deletionTimestamp")),
    )


@dataclass(frozen=True)
class Settings:
    driver: DriverSettings
    default_storage: StorageSpec | None = None
    shared_files: bool = False
    """Whether the operator and its driver pods see one file system (tests of the operator's
    body, on one machine): only then may a pipeline keep its state in local storage."""


@dataclass(frozen=True)
class Outcome:
    phase: str
    action: Action
    requeue_after: float | None
    checkpoint: Manifest | None
    since: datetime.datetime
    """When the Ready condition last changed (how long the phase has lasted, as a rule)."""
    reason: str = ""
    """The Ready condition's reason."""
    inputs: Inputs = ()
    """`inputs` of the Pipeline object this outcome was reached from."""
    quiet: bool = False
    """Settled until the Pipeline object changes: everything was observed, no driver is
    active (only a driver writes checkpoints; its pod's events are watched) and nothing is
    due later."""
    observed: bool = True
    """Everything was observed: no problem lies outside the object (a Secret, the storage)."""


def _now() -> str:
    return timestamp(datetime.datetime.now(datetime.UTC))


@dataclass
class Reconciler:
    cluster: Cluster
    settings: Settings
    on_outcome: Callable[[str, str, Outcome], None] = lambda namespace, name, outcome: None
    on_create: Callable[[dict[str, Any]], None] = lambda pod: None
    """Called with each pod just before it is created: its own ADDED event then tells the
    operator nothing new (the reconcile that creates it records its status)."""
    _stores: dict[tuple[str, str], tuple[str, S3Options, CheckpointStore]] = field(
        default_factory=dict
    )
    """Each pipeline's store, by (namespace, name), with the root and credentials it was opened
    with: the one its last reconcile read (and `unmoved` checks)."""
    _previews: dict[tuple[str, str, str], PreviewReport | None] = field(default_factory=dict)
    said_too_large: set[tuple[str, str]] = field(default_factory=set)
    """The pipelines whose StatusTooLarge Warning Event was posted and no status written since
    says so (a `Recorded` condition): a status refused even small is said once, not at every
    reconcile."""
    evictions: dict[tuple[str, str], Eviction] = field(default_factory=dict)
    """The last driver the cluster stopped, by pipeline, from the reconcile that sees it to the
    one that creates the next (its pod goes first: the new one takes its name). Kept in
    memory: an operator restart in between starts the count again."""

    # -- what a body needs, cached across reconciles -------------------------------------------

    def spec_of(self, pipeline: dict[str, Any]) -> PipelineSpec:
        spec = _validated(PipelineSpec, pipeline.get("spec") or {}, where="spec.")
        default = spec.storage is None
        if default:
            spec = spec.model_copy(update={"storage": self.storage_of(pipeline)})
        if not self.settings.shared_files:
            _refuse_local(spec.storage, default=default)
        return spec

    def storage_of(self, pipeline: dict[str, Any]) -> StorageSpec:
        """The pipeline's storage (or the operator's default), read without the rest of its
        spec."""
        raw = (pipeline.get("spec") or {}).get("storage")
        if raw is not None:
            return _validated(StorageSpec, raw, where="spec.storage.")
        if self.settings.default_storage is None:
            raise SpindleError(
                reason="StorageNotConfigured",
                message="The pipeline has no spec.storage and the operator has no default "
                "storage; set spec.storage.uri (s3://bucket/prefix), or install the "
                "operator with a default storage.",
            )
        return self.settings.default_storage

    def s3(self, namespace: str, storage: StorageSpec) -> S3Options:
        credentials = storage.credentials
        keys: list[str | None] = [None, None]
        if credentials is not None:
            refs = (credentials.access_key_id, credentials.secret_access_key)
            secrets: dict[str, dict[str, str]] = {}  # both keys from one read of one Secret
            for index, ref in enumerate(refs):
                try:
                    if ref.name not in secrets:
                        secrets[ref.name] = self.cluster.secret_data(namespace, ref.name)
                    if ref.key not in secrets[ref.name]:
                        raise SecretMissing(ref.name, ref.key)
                    keys[index] = secrets[ref.name][ref.key]
                except SecretMissing as missing:
                    what = f"has no key {missing.key!r}" if missing.key else "does not exist"
                    raise SpindleError(
                        reason="SecretNotFound",
                        message=f"Secret {namespace}/{ref.name}, named by "
                        f"spec.storage.credentials, {what}. Create it with the keys "
                        f"{credentials.access_key_id.key} and "
                        f"{credentials.secret_access_key.key}.",
                    ) from None
                except SecretUnreadable as unreadable:
                    raise _unreadable(namespace, unreadable) from None
        return S3Options(
            endpoint=storage.endpoint, region=storage.region, access_key=keys[0], secret_key=keys[1]
        )

    def store(
        self, namespace: str, name: str, storage: StorageSpec, s3: S3Options
    ) -> CheckpointStore:
        root = pipeline_root(storage.uri, namespace=namespace, name=name)
        kept = self._stores.get((namespace, name))
        if kept is None or kept[:2] != (root, s3):
            kept = (root, s3, open_store(root, s3=s3, retry=STORAGE_RETRY))
            self._stores[(namespace, name)] = kept
        return kept[2]

    def preview(
        self, store: CheckpointStore, checkpoint: Manifest, *, sql: str, requested: bool
    ) -> PreviewReport | None:
        """The newest preview report beside the checkpoints, for a pipeline with a pending
        change. On a cluster only a requested preview writes one (the preview pod started for
        `spindle.dev/preview`), so while none is requested the report read last for the same
        checkpoint and program still holds, and a fleet of pending changes costs no LIST of
        previews per reconcile. (One written by `spindle local preview` into the same storage
        shows after the next request, or after the operator restarts.)"""
        key = (store.uri, checkpoint.id, sql)
        if requested or key not in self._previews:
            if len(self._previews) >= PREVIEW_MEMO:
                self._previews.clear()
            self._previews[key] = store.latest_preview()
        return self._previews[key]

    def forget(self, namespace: str, name: str) -> None:
        """A deleted pipeline: its store (and the checkpoint it keeps) is not kept any longer."""
        self._stores.pop((namespace, name), None)
        self.evictions.pop((namespace, name), None)
        self.said_too_large.discard((namespace, name))
        self.cluster.pod_versions.forget(namespace, name)

    def unmoved(self, namespace: str, name: str, checkpoint: str | None) -> bool:
        """Whether the pipeline's latest checkpoint is still `checkpoint`, by one conditional
        read of the store its last reconcile used (the manifest is not read again); False when
        that is unknown or the store does not answer, so that a full reconcile finds out."""
        kept = self._stores.get((namespace, name))
        if kept is None:
            return False
        try:
            latest = kept[2].latest()
        except Exception:  # the full reconcile reports it, with its reason
            return False
        return (latest.id if latest is not None else None) == checkpoint

    # -- the loop body -----------------------------------------------------------------------

    def reconcile(self, namespace: str, name: str) -> Outcome | None:
        pipeline = self.cluster.pipeline(namespace, name)
        if pipeline is None:
            self.forget(namespace, name)
            return None  # driver pods go with it (ownerReferences)
        if pipeline["metadata"].get("deletionTimestamp"):  # its store is kept for delete_data
            return None
        body = PipelineBody(self, pipeline)
        acted, report = cycle(body, now=_now())
        ready = report.status.conditions[0]
        driving = body.pod is not None and not _finished(body.pod)
        outcome = Outcome(
            phase=acted.decision.phase.value,
            action=acted.decision.action,
            requeue_after=body.requeue_after,
            checkpoint=body.checkpoint,
            since=datetime.datetime.fromisoformat(ready.last_transition_time),
            reason=ready.reason,
            inputs=inputs(pipeline),
            quiet=body.requeue_after is None and not body.unobserved and not driving,
            observed=not body.unobserved,
        )
        self.on_outcome(namespace, name, outcome)
        return outcome

    # -- deletion ----------------------------------------------------------------------------

    def delete_data(self, pipeline: dict[str, Any]) -> int | None:
        """`deleteOnPipelineDeletion: true`: remove the pipeline's checkpoints and state; the
        number of objects removed. First its driver pods are deleted, and None is returned
        while one is still there (the caller asks again): a driver that is still running
        would commit a checkpoint into the emptied prefix, one that points at deleted state."""
        namespace, name = pipeline["metadata"]["namespace"], pipeline["metadata"]["name"]
        if self._drivers_left(namespace, name):
            return None
        storage = self.storage_of(pipeline)  # the rest of the spec may no longer validate
        root = pipeline_root(storage.uri, namespace=namespace, name=name)
        kept = self._stores.get((namespace, name))
        try:
            store = self.store(namespace, name, storage, self.s3(namespace, storage))
        except SpindleError:
            # the Secret went first (its namespace, or an Argo CD app holding both, deleted
            # whole): the store the pipeline's last reconcile used holds its credentials
            if kept is None or kept[0] != root:
                raise
            store = kept[2]
        keys = [item.key for item in store.objects.scan("")]
        for start in range(0, len(keys), 500):
            store.objects.delete(keys[start : start + 500])
        # a previous leader's reconcile, still in its thread, may have started one meanwhile
        return None if self._drivers_left(namespace, name) else len(keys)

    def _drivers_left(self, namespace: str, name: str) -> bool:
        """Whether a driver pod of the pipeline is still there, after asking each to end. A
        grace period keeps a deleted pod listed until its kubelet has ended the container (a
        grace of 0 would remove the object at once, the container still running)."""
        pods = self.cluster.driver_pods(namespace, name)
        for pod in pods:
            meta = pod["metadata"]
            grace = meta.get("deletionGracePeriodSeconds")
            if not meta.get("deletionTimestamp") or (grace or 0) > ENDING_GRACE_SECONDS:
                self.cluster.delete_pod(pod, grace_seconds=ENDING_GRACE_SECONDS)
        return bool(pods) and bool(self.cluster.driver_pods(namespace, name))


ENDING_GRACE_SECONDS = 1
"""The grace a driver pod deleted with its pipeline's data gets: the kubelet ends it within
this, and the pod stays listed until it has."""


_Model = TypeVar("_Model", bound=BaseModel)


def _validated(model: type[_Model], raw: Any, *, where: str) -> _Model:
    try:
        return model.model_validate(raw)
    except ValidationError as error:
        field, problem = first_problem(error)
        raise SpindleError(
            reason="InvalidSpec", message=f"{where}{field}: {problem}. Fix the Pipeline spec."
        ) from None


def _unreadable(namespace: str, error: SecretUnreadable) -> SpindleError:
    """A Secret the API server will not give the operator, as the pipeline's condition (it was
    retried forever, with no condition, when an empty name made the GET a forbidden LIST)."""
    where = f"Secret {namespace}/{error.name}, named by spec.storage.credentials"
    if error.status == 403:
        reason = "SecretForbidden"
        message = (
            f"The operator may not read {where}: {error.detail}. Name a Secret in the "
            "pipeline's namespace that the operator's service account may get (the chart's "
            "ClusterRole grants get on secrets; a narrower Role must name this Secret)."
        )
    else:
        reason = "SecretUnreadable"
        message = (
            f"The API server refused to return {where} (HTTP {error.status}): {error.detail}. "
            "Fix the name in spec.storage.credentials."
        )
    details = {"secret": error.name, "status": error.status}
    return SpindleError(reason=reason, message=message, details=details)


def _refused(error: ApiException) -> Unobservable:
    return Unobservable(
        "ApiRequestRefused",
        f"The API server refused a request the operator made for this pipeline (HTTP "
        f"{error.status}): {api_message(error)}. Retrying does not help: fix what the message "
        "names in the Pipeline, or the operator's rights in this namespace (charts/spindle "
        "templates/rbac.yaml).",
    )


POD_CHECKS = (
    "spec.serviceAccountName (default: spindle-driver, see deploy/rbac/driver.yaml), the "
    "namespace's Pod Security level and its quota"
)
"""What to check when the API server refuses a pod the operator made for a pipeline."""


def _preview_refused(error: ApiException) -> tuple[str, str]:
    """`Decision.preview_refused` for a preview pod the API server refused: not retried (a
    quota or a policy refuses it again), until a new label asks again."""
    return PREVIEW_REJECTED, (
        f"The API server refused the preview pod (HTTP {error.status}): {api_message(error)}. "
        f"The pending change is unchanged. Check {POD_CHECKS}; then change the label of "
        "spindle.dev/preview to preview again, or approve without a preview."
    )


def _finished(pod: dict[str, Any]) -> bool:
    return driver_phase(pod) in ("Succeeded", "Failed")


def _driver_status(pod: dict[str, Any] | None) -> DriverStatus | None:
    """`status.driverPod`; none for a preview pod, which is never the pipeline's driver."""
    if pod is None or pod_mode(pod) is DriverMode.PREVIEW:
        return None
    meta = pod["metadata"]
    phase = driver_phase(pod)
    if meta.get("deletionTimestamp"):
        phase = "Terminating"
    return DriverStatus(name=meta["name"], mode=pod_mode(pod).value, phase=phase)


def _refuse_local(storage: StorageSpec | None, *, default: bool) -> None:
    """Local storage (`file:///path`) on a cluster: the operator and each driver pod have a
    file system of their own, so the operator never saw a driver's checkpoint, and planned
    each edit as if the pipeline had none (it restarted without approval)."""
    if storage is None:
        return
    where = "the operator's --default-storage-uri" if default else "spec.storage.uri"
    for named, uri in ((where, storage.uri), ("spec.storage.startFrom", storage.start_from)):
        if uri is not None and local_path(uri.partition("#")[0]) is not None:
            raise SpindleError(
                reason="StorageNotShared",
                message=f"{named} {uri!r} is a path on one machine, and on a cluster the "
                "operator and each driver pod have a file system of their own: keep the "
                "pipeline's state in object storage (s3://bucket/prefix, with "
                "spec.storage.endpoint for S3-compatible storage). Local storage is for "
                "`spindle local`.",
            )


def _previous(pipeline: dict[str, Any]) -> PipelineStatus | None:
    raw = pipeline.get("status")
    if not raw:
        return None
    try:
        return PipelineStatus.model_validate(raw)
    except ValidationError:
        return None  # written by an older operator: recomputed from scratch


def _desired(pipeline: dict[str, Any]) -> DesiredState:
    """spec.desiredState as written, before (or without) the rest of the spec: a stop is
    honoured while the spec, its Secret or its storage cannot be read."""
    try:
        return DesiredState((pipeline.get("spec") or {}).get("desiredState") or "Running")
    except ValueError:
        return DesiredState.RUNNING


def _comparable(status: Any) -> Any:
    return status if isinstance(status, dict) else None


@dataclass
class PipelineBody:
    """The operator's body for one reconcile of one Pipeline: observe API objects and the
    checkpoint, act with driver pods, record `.status` (the subresource only) and Events."""

    reconciler: Reconciler
    pipeline: dict[str, Any]
    pods: list[dict[str, Any]] = field(default_factory=list)
    pod: dict[str, Any] | None = None
    spec: PipelineSpec | None = None
    checkpoint: Manifest | None = None
    requeue_after: float | None = None
    unobserved: bool = False
    """The observation has a problem (a Secret, the storage): its fix is not in the object."""
    observation: Observation | None = None
    """What `observe` saw, for `act`."""

    @property
    def cluster(self) -> Cluster:
        return self.reconciler.cluster

    def observe(self) -> Observation:
        """What there is; a request the API server refuses for good (`refused`: forbidden,
        invalid) is the pipeline's problem, with a reason, not an error retried forever."""
        try:
            observed = self._observe()
        except ApiException as error:
            if not refused(error):
                raise
            self.pods, self.pod, self.spec, self.checkpoint = [], None, None, None
            observed = replace(self._base(), problem=_refused(error))
        self.unobserved = observed.problem is not None
        self.observation = observed
        return observed

    def _base(self) -> Observation:
        """The observation before the spec, its Secret and its checkpoint are read."""
        meta = self.pipeline["metadata"]
        previous = _previous(self.pipeline)
        return Observation(
            spec=PipelineSpec(sql="", desired_state=_desired(self.pipeline)),
            generation=int(meta.get("generation", 1)),
            checkpoint=None,
            approval=annotation(meta, APPROVE_ANNOTATION),
            driver=observed_driver(self.pod) if self.pod else None,
            last_bootstrap=previous.last_bootstrap.change_id
            if previous and previous.last_bootstrap
            else None,
            previous=previous,
            name=meta["name"],
            restate=(meta.get("annotations") or {}).get(RESTATE_ANNOTATION),
            preview_request=annotation(meta, PREVIEW_ANNOTATION),
        )

    def _observe(self) -> Observation:
        meta = self.pipeline["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        self.pods = self.cluster.driver_pods(namespace, name)
        self.pod = current_pod(self.pods, owner_uid=meta["uid"])
        base = self._base()
        if base.preview_request:
            wanted = preview_pod_name(name, base.preview_request)
            pod = next((p for p in self.pods if p["metadata"]["name"] == wanted), None)
            base = replace(base, previewing=observed_driver(pod) if pod else None)
        try:
            spec = self.reconciler.spec_of(self.pipeline)
            assert spec.storage is not None
            s3 = self.reconciler.s3(namespace, spec.storage)  # the Secret: once per reconcile
            store = self.reconciler.store(namespace, name, spec.storage, s3)
            self.checkpoint = starting_checkpoint(
                store,
                start_from=spec.storage.start_from,
                pipeline=PipelineRef(namespace=namespace, name=name),
                s3=s3,
                adopt=False,
                retry=STORAGE_RETRY,
            )
            runtime = spec.runtime_version or base.runtime_version
            changed = self.checkpoint is not None and needs_sizes(
                self.checkpoint, sql=spec.sql, runtime=runtime, restate=base.restate
            )
            sizes, preview = None, None
            if changed and self.checkpoint is not None:
                sizes = stored_sizes(store.objects, self.checkpoint, s3=s3, retry=STORAGE_RETRY)
                preview = self.reconciler.preview(
                    store, self.checkpoint, sql=spec.sql, requested=bool(base.preview_request)
                )
        except SpindleError as error:
            return replace(base, problem=Unobservable(error.reason, error.message))
        self.spec = spec
        return replace(
            base,
            spec=spec,
            sizes=sizes,
            preview=preview,
            checkpoint=self.checkpoint,
            checkpoint_uri=store.manifest_uri(self.checkpoint.id) if self.checkpoint else None,
        )

    def act(self, decision: Decision) -> Acted:
        self._end_stale_previews(decision)
        try:
            self.pod, self.requeue_after = self._act(decision)
        except ApiException as error:
            if not refused(error):  # 413: a pod too large for the API server, too
                raise
            if decision.preview is not None:  # the pipeline is as it was, with no preview
                decision = replace(decision, preview_refused=_preview_refused(error))
            else:
                decision = failed(
                    "DriverPodRejected",
                    f"The API server refused the driver pod: {api_message(error)}. Check "
                    f"{POD_CHECKS}.",
                )
                self.requeue_after = 30.0
        return Acted(decision, _driver_status(self.pod))

    def _act(self, decision: Decision) -> tuple[dict[str, Any] | None, float | None]:
        pod, pods = self.pod, self.pods
        settings = self.reconciler.settings.driver
        if decision.action is Action.STOP_DRIVER and pod is not None:
            if not pod["metadata"].get("deletionTimestamp"):
                log.info("stopping driver %s (%s)", pod["metadata"]["name"], decision.reason)
                self.cluster.delete_pod(pod, grace_seconds=settings.termination_grace_seconds)
            return pod, 2.0
        if decision.preview is not None and decision.change_id is not None:
            self._start_preview(decision.preview, decision.change_id)
            return pod, 5.0
        if decision.mode is None:
            return pod, None
        assert self.spec is not None
        change_id = decision.change_id if decision.mode is DriverMode.BOOTSTRAP else None
        meta = self.pipeline["metadata"]
        key, mode = (meta["namespace"], meta["name"]), decision.mode.value
        name = pod_name(key[1], mode=mode, generation=int(meta["generation"]), change_id=change_id)
        stopped = self._evictions(key, name)
        if stopped is not None:  # the next driver waits out the back-off, its pod kept till then
            wait = stopped.wait(datetime.datetime.now(datetime.UTC))
            if wait > 0:
                return pod, wait
        wanted = driver_pod(
            pipeline=self.pipeline,
            spec=self.spec,
            mode=mode,
            change_id=change_id,
            settings=settings,
            evictions=stopped.in_a_row if stopped is not None else 0,
            base=self.checkpoint.id if self.checkpoint is not None else None,
        )
        assert wanted["metadata"]["name"] == name
        # finished drivers of earlier runs make way (all asked, then waited for if need be)
        waits = [self._make_way(p) for p in pods if p["metadata"]["name"] != name and _finished(p)]
        if any(waits):
            return pod, 2.0
        self.reconciler.on_create(wanted)
        if self.cluster.create_pod(wanted):
            log.info("created driver %s (%s)", name, decision.mode)
            self.reconciler.evictions.pop(key, None)
            return wanted, None  # its pod's next change, or a re-list, reconciles it again
        existing = next((p for p in pods if p["metadata"]["name"] == name), None)
        if existing is not None and _finished(existing):  # recreated once it is gone
            return existing, 2.0 if self._make_way(existing) else 1.0
        log.info("adopted existing driver %s", name)
        return existing or wanted, 2.0

    def _end_stale_previews(self, decision: Decision) -> None:
        """Delete the pipeline's preview pods that serve no request now (`serving_preview`)
        and have not ended: a pod no node took stayed Pending for good once its request was
        relabelled or its change approved (its deadline counts from its start), held the
        namespace's quota, and could start later, beside the driver. Nothing is deleted while
        the observation has a problem: what is pending is not known then."""
        observed = self.observation
        if observed is None or self.unobserved:
            return
        meta = self.pipeline["metadata"]
        serving = serving_preview(decision, observed)
        kept = preview_pod_name(meta["name"], serving) if serving is not None else None
        for pod in self.pods:
            pod_meta = pod["metadata"]
            owned = any(o.get("uid") == meta["uid"] for o in pod_meta.get("ownerReferences") or [])
            if not owned or pod_mode(pod) is not DriverMode.PREVIEW or pod_meta["name"] == kept:
                continue
            if pod_meta.get("deletionTimestamp") or _finished(pod):
                continue  # going, or ended: it holds nothing, and its logs say how it ended
            log.info("deleting preview pod %s: it serves no request now", pod_meta["name"])
            grace = self.reconciler.settings.driver.termination_grace_seconds
            self.cluster.delete_pod(pod, grace_seconds=grace)

    def _evictions(self, key: tuple[str, str], name: str) -> Eviction | None:
        """The stopped drivers a new driver pod `name` follows, if the cluster stopped the last
        (`Reconciler.evictions`). A pod of another name (a new generation: the user's fix, a
        restart asked for) starts at once, and a count older than the back-off resets."""
        memo = self.reconciler.evictions
        stopped = eviction(self.pod) if self.pod is not None else None
        if stopped is not None:
            memo[key] = stopped
        known = memo.get(key)
        now = datetime.datetime.now(datetime.UTC)
        if known is None or known.pod != name or (now - known.restart_at) > EVICTION_RESET:
            memo.pop(key, None)
            return None
        return known

    def _make_way(self, pod: dict[str, Any]) -> bool:
        """Delete a finished driver pod; whether to wait until it is gone. One the kubelet may
        yet start (`lingering`: a pull retried) is deleted with a grace, which keeps it listed
        until its container has ended, and waited for; another goes at once."""
        waits = lingering(pod)
        if not pod["metadata"].get("deletionTimestamp"):
            grace = ENDING_GRACE_SECONDS if waits else 0
            self.cluster.delete_pod(pod, grace_seconds=grace)
        return waits

    def _start_preview(self, request: str, change_id: str) -> None:
        """The preview pod of `request` (a retried create finds it: AlreadyExists)."""
        assert self.spec is not None
        wanted = driver_pod(
            pipeline=self.pipeline,
            spec=self.spec,
            mode=DriverMode.PREVIEW.value,
            change_id=change_id,
            settings=self.reconciler.settings.driver,
            preview=request,
        )
        self.reconciler.on_create(wanted)
        if self.cluster.create_pod(wanted):
            log.info("created preview pod %s", wanted["metadata"]["name"])

    def record(self, status: PipelineStatus, events: Sequence[Event]) -> None:
        for event in events:
            self.cluster.event(
                self.pipeline, type=event.type, reason=event.reason, message=event.message
            )
        body = status.to_json()
        if body == _comparable(self.pipeline.get("status")):
            return
        if object_bytes({**self.pipeline, "status": body}) > OBJECT_BYTES_LIMIT:
            self._record_small(status, detail=f"it would be over {OBJECT_BYTES_LIMIT:,} bytes")
            return
        try:
            self.cluster.write_status(self.pipeline, body)
        except ApiException as error:
            if not too_large(error):
                raise
            said = f"the API server refused it: HTTP {error.status}, {api_message(error)}"
            self._record_small(status, detail=said)
            return
        self.reconciler.said_too_large.discard(self.key)

    @property
    def key(self) -> tuple[str, str]:
        meta = self.pipeline["metadata"]
        return meta["namespace"], meta["name"]

    def _record_small(self, status: PipelineStatus, *, detail: str) -> None:
        """Record `oversized(status)` instead of a status the API server will not store (it
        raised at every reconcile: no status, no Event), with one Warning Event once it is
        written. One it refuses too raises, and the reconcile is retried: refused as too
        large, that is said in a Warning Event once (`Reconciler.said_too_large`)."""
        previous = _previous(self.pipeline)
        small = oversized(status, detail=detail, previous=previous, now=_now())
        body = small.to_json()
        if body == _comparable(self.pipeline.get("status")):
            return
        said = self.reconciler.said_too_large
        try:
            self.cluster.write_status(self.pipeline, body)
        except ApiException as error:
            if too_large(error) and self.key not in said:
                refusal = f"HTTP {error.status}, {api_message(error)}"
                self._warn_too_large(unrecorded(refusal=refusal))
                said.add(self.key)
            raise
        said_before = self.key in said or (
            previous is not None and any(c.reason == STATUS_TOO_LARGE for c in previous.conditions)
        )
        said.discard(self.key)  # the Recorded condition remembers it now
        if not said_before:
            self._warn_too_large(small.conditions[-1].message)

    def _warn_too_large(self, message: str) -> None:
        self.cluster.event(self.pipeline, type="Warning", reason=STATUS_TOO_LARGE, message=message)


def object_bytes(body: dict[str, Any]) -> int:
    """The size of an API object as etcd stores it: compact JSON in UTF-8. Measured with
    `\\uXXXX` escapes (`json.dumps`'s default), 720 KB of CJK comments counted 1.44 MB."""
    return len(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())
