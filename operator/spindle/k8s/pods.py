"""Spark driver pods: the manifest the operator creates, and what an observed pod means.

Pure functions over dicts. One driver pod per run or bootstrap, named deterministically
(`<pipeline>-g<generation>-driver` for a run, `<pipeline>-<change id>-driver` for a bootstrap),
so a retried create finds the existing pod (AlreadyExists) instead of starting a second one.
A data-diff preview runs in a pod of its own beside them (`<pipeline>-<change id>-preview-<hash
of the request>`), never taken for the pipeline's driver.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Any

from spindle.api import API_VERSION, KIND, BootstrapPolicy, PipelineSpec
from spindle.api.pod_env import pipeline_env
from spindle.api.types import (
    APPROVE_ANNOTATION,
    HEALTH_PORT,
    READY_PATH,
    RESTATE_ANNOTATION,
    mebibytes,
    quantity_value,
    request_annotation,
)
from spindle.lifecycle import DriverMode, ObservedDriver, read_timestamp, timestamp
from spindle.lifecycle.decision import EVICTED
from spindle.lifecycle.observation import request_change

LABEL_PIPELINE = "spindle.dev/pipeline"
LABEL_MODE = "spindle.dev/mode"
LABEL_GENERATION = "spindle.dev/generation"
LABEL_CHANGE = "spindle.dev/change"
LABEL_INGEST = "spindle.dev/ingest"
LABEL_SPARK = "spindle.dev/spark"
"""The fingerprint of the spec.spark settings a driver was started with."""
LABEL_PLACEMENT = "spindle.dev/placement"
"""The fingerprint of the storage and service account a driver was started with."""
LABEL_PROGRAM = "spindle.dev/program"
"""The fingerprint of the SQL a driver was started with."""
MANAGED = {"app.kubernetes.io/managed-by": "spindle", "app.kubernetes.io/name": "spindle-driver"}
EVICTIONS_ANNOTATION = "spindle.dev/evictions"
"""On a driver pod: how many drivers of the pipeline the cluster stopped in a row before it."""
BASE_ANNOTATION = "spindle.dev/checkpoint"
"""On a bootstrap driver pod: the checkpoint its change was planned from
(`ObservedDriver.base`)."""
K8S_MASTER = "k8s://https://kubernetes.default.svc"
RUN_AS = 185  # the spark user of the Spark image
EXECUTOR_TEMPLATE_ENV = "SPINDLE_EXECUTOR_POD_TEMPLATE"
"""The executor pod template, as JSON; the driver writes it to a file for Spark."""
READINESS = {
    "httpGet": {"path": READY_PATH, "port": "health"},
    "periodSeconds": 5,
    "timeoutSeconds": 3,
    "failureThreshold": 2,  # a slow answer once (a busy node) is no retry
}
"""Not Ready while the driver waits to retry a step (`runtime.health`): an HTTP probe, which
costs the node no process per probe (an exec probe would, for every driver, every period)."""
POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": RUN_AS,
    "runAsGroup": RUN_AS,
    "fsGroup": RUN_AS,
    "seccompProfile": {"type": "RuntimeDefault"},
}
CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
"""Driver and executor pods meet the restricted Pod Security profile."""


@dataclass(frozen=True)
class DriverSettings:
    """Operator-wide defaults for driver pods."""

    image: str
    service_account: str = "spindle-driver"
    local_threads: int = 2
    termination_grace_seconds: int = 120


def pod_name(pipeline: str, *, mode: str, generation: int, change_id: str | None) -> str:
    suffix = change_id if mode == "bootstrap" and change_id else f"g{generation}"
    return f"{pipeline}-{suffix}-driver"


def preview_pod_name(pipeline: str, request: str) -> str:
    """The preview pod of one request (`<change id>[@label]`, as `annotation` reads it): a new
    label, a new pod."""
    digest = hashlib.sha256(request.encode()).hexdigest()[:8]
    return f"{pipeline}-{request_change(request)}-preview-{digest}"


def annotation(meta: dict[str, Any], key: str) -> str | None:
    """A request annotation of a Pipeline's metadata, as `request_annotation` reads it."""
    return request_annotation(meta.get("annotations"), key)


PREVIEW_MARGIN_SECONDS = 300
"""A preview pod's deadline beyond spec.preview.timeoutSeconds: Spark's start, the report."""


def _resources(cpu: str | None, memory: str | None) -> dict[str, Any]:
    amounts = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    return {"requests": amounts, "limits": amounts} if amounts else {}


EXECUTOR_PREFIX_LENGTH = 47
"""The longest executor pod name prefix Spark accepts (a DNS label, `-exec-<n>` added)."""


def executor_prefix(pod: str) -> str:
    """The executor pod name prefix for driver pod `pod`: its name when Spark accepts it, else
    a DNS label of its first characters and a hash of the whole. Spark refuses a prefix longer
    than 47 characters or with a dot, and no executor started (a bootstrap pod's name is that
    long from a 28-character pipeline name)."""
    label = re.sub(r"[^a-z0-9-]", "-", pod.lower())
    if label == pod and len(pod) <= EXECUTOR_PREFIX_LENGTH:
        return pod
    digest = hashlib.sha256(pod.encode()).hexdigest()[:8]
    return f"{label[: EXECUTOR_PREFIX_LENGTH - len(digest) - 1].strip('-')}-{digest}"


def spark_conf(spec: PipelineSpec, *, namespace: str, image: str, pod: str) -> dict[str, str]:
    """Client-mode Spark on Kubernetes: executors are owned by (and collected with) the driver
    pod `pod`, whose IP comes from the downward API through `$(VAR)` expansion."""
    if spec.spark.mode != "kubernetes":
        return {}
    conf = {
        "spark.kubernetes.namespace": namespace,
        "spark.kubernetes.driver.pod.name": "$(SPINDLE_POD_NAME)",
        "spark.driver.host": "$(SPINDLE_POD_IP)",
        "spark.driver.bindAddress": "0.0.0.0",
        "spark.kubernetes.container.image": spec.spark.image or image,
        "spark.executor.instances": str(spec.spark.executor_instances),
        "spark.kubernetes.executor.podNamePrefix": executor_prefix(pod),
        # executors keep no volumes of their own: no claims to own or reuse
        "spark.kubernetes.driver.ownPersistentVolumeClaim": "false",
        "spark.kubernetes.driver.reusePersistentVolumeClaim": "false",
    }
    if spec.spark.executor.cpu:
        conf["spark.executor.cores"] = str(_whole_cores(spec.spark.executor.cpu))
        conf["spark.kubernetes.executor.request.cores"] = spec.spark.executor.cpu
        conf["spark.kubernetes.executor.limit.cores"] = spec.spark.executor.cpu
    if spec.spark.executor.memory:
        # Spark reads whole binary units only ('1.5g' fails; '2G' would be read as 2 GiB)
        conf["spark.executor.memory"] = f"{mebibytes(spec.spark.executor.memory)}m"
    return conf


HEAP_SHARE = 0.6
"""The share of `spec.spark.driver.memory` the driver's JVM heap gets: the rest is the JVM's
own (compiled code, classes, threads: about 0.7 GiB under the steady bench's load) and the
Python process beside it."""
DEFAULT_HEAP_MIB = 1024
"""Spark's default heap (`spark.driver.memory`, 1g), never lowered: a smaller container is
the user's explicit limit, and the kernel's kill (`OOMKilled`) says to raise it."""


def driver_heap(spec: PipelineSpec) -> dict[str, str]:
    """The driver JVM's heap from the pod's memory, unless `spec.spark.conf` sets it: a driver
    given 8Gi kept Spark's default 1g of heap (its JVM starts before any session setting)."""
    memory = spec.spark.driver.memory
    if memory is None or "spark.driver.memory" in spec.spark.conf:
        return {}
    heap = math.floor(mebibytes(memory) * HEAP_SHARE)
    return {"spark.driver.memory": f"{heap}m"} if heap > DEFAULT_HEAP_MIB else {}


def _whole_cores(quantity: str) -> int:
    """Task slots for a CPU quantity ('500m' → 1, '2' → 2): Spark counts whole cores."""
    return max(1, math.ceil(quantity_value(quantity)))


def executor_template(*, service_account: str) -> dict[str, Any]:
    """The pod template Spark starts executors from: the driver's security settings, and its
    service account (its image pull secrets) without a token, since executors never call the
    API server (Spark ran them as the namespace's `default` account, token mounted)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"labels": dict(MANAGED, **{"app.kubernetes.io/name": "spindle-executor"})},
        "spec": {
            "serviceAccountName": service_account,
            "automountServiceAccountToken": False,
            "securityContext": POD_SECURITY,
            "containers": [{"name": "executor", "securityContext": CONTAINER_SECURITY}],
        },
    }


def _env(
    namespace: str, name: str, generation: int, spec: PipelineSpec, *, service_account: str
) -> list[dict[str, Any]]:
    pipeline = {
        "namespace": namespace,
        "name": name,
        "generation": generation,
        "spec": spec.model_dump(by_alias=True, mode="json", exclude_none=True),
    }
    env: list[dict[str, Any]] = [
        *({"name": name, "value": value} for name, value in pipeline_env(pipeline)),
        {"name": "SPINDLE_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "SPINDLE_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ]
    if spec.spark.mode == "kubernetes":
        env.append(
            {
                "name": EXECUTOR_TEMPLATE_ENV,
                "value": json.dumps(executor_template(service_account=service_account)),
            }
        )
    storage = spec.storage
    if storage is not None and storage.credentials is not None:
        for variable, ref in (
            ("AWS_ACCESS_KEY_ID", storage.credentials.access_key_id),
            ("AWS_SECRET_ACCESS_KEY", storage.credentials.secret_access_key),
        ):
            env.append(
                {
                    "name": variable,
                    "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}},
                }
            )
    if storage is not None and storage.endpoint:
        env.append({"name": "SPINDLE_S3_ENDPOINT", "value": storage.endpoint})
    if storage is not None and storage.region:
        env.append({"name": "AWS_REGION", "value": storage.region})
    return env


def _literal(value: str) -> str:
    """`value` as a container argument Kubernetes passes unchanged (it expands `$(NAME)` and
    reads `$$` as `$` in command and args)."""
    return value.replace("$", "$$")


def _approver(meta: dict[str, Any], spec: PipelineSpec, change_id: str) -> str:
    """What approved the bootstrap of `change_id`, as its checkpoint records it."""
    if annotation(meta, APPROVE_ANNOTATION) == change_id:
        return f"annotation {APPROVE_ANNOTATION}"
    if spec.bootstrap_policy is BootstrapPolicy.ALLOW:
        return "spec.bootstrapPolicy: allow"
    return "operator"


def driver_pod(
    *,
    pipeline: dict[str, Any],
    spec: PipelineSpec,
    mode: str,
    change_id: str | None,
    settings: DriverSettings,
    preview: str | None = None,
    evictions: int = 0,
    base: str | None = None,
) -> dict[str, Any]:
    """The driver pod for `pipeline` (its API object; `spec` is the validated, defaulted spec);
    with `preview` (a request), the preview pod of the pending change `change_id`; `evictions`:
    the drivers the cluster stopped in a row before this one (`EVICTIONS_ANNOTATION`);
    `base`: a bootstrap's checkpoint (`BASE_ANNOTATION`)."""
    meta = pipeline["metadata"]
    namespace, name, generation = meta["namespace"], meta["name"], int(meta["generation"])
    image = spec.spark.image or settings.image
    account = spec.service_account_name or settings.service_account
    command = ["spindle", "driver", "--mode", mode]
    if preview is not None and change_id:
        command += ["--change-id", change_id, "--preview-request", _literal(preview)]
    if mode == "bootstrap" and change_id:
        command += ["--change-id", change_id, "--approved-by", _approver(meta, spec, change_id)]
    restate = (meta.get("annotations") or {}).get(RESTATE_ANNOTATION)
    if restate and change_id and (mode == "bootstrap" or preview is not None):
        command += ["--restate", _literal(restate)]  # else it plans another change than asked
    if spec.spark.mode == "kubernetes":
        command += ["--master", K8S_MASTER]
    else:
        command += ["--master", f"local[{settings.local_threads}]"]
    pod_named = (
        preview_pod_name(name, preview)
        if preview is not None
        else pod_name(name, mode=mode, generation=generation, change_id=change_id)
    )
    conf = {
        **driver_heap(spec),
        **spark_conf(spec, namespace=namespace, image=image, pod=pod_named),
    }
    for key, value in sorted(conf.items()):
        command += ["--conf", f"{key}={value}"]
    labels = {
        **MANAGED,
        LABEL_PIPELINE: name,
        LABEL_MODE: mode,
        LABEL_GENERATION: str(generation),
        LABEL_INGEST: "paused" if spec.paused else "on",
        LABEL_SPARK: spec.driver_fingerprint(),
        LABEL_PLACEMENT: spec.placement_fingerprint(),
        LABEL_PROGRAM: spec.sql_fingerprint(),
        "spark-role": "driver",
    }
    if change_id:
        labels[LABEL_CHANGE] = change_id
    annotations = {EVICTIONS_ANNOTATION: str(evictions)} if evictions else {}
    if base is not None and mode == "bootstrap":
        annotations[BASE_ANNOTATION] = base
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_named,
            "namespace": namespace,
            "labels": labels,
            **({"annotations": annotations} if annotations else {}),
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": KIND,
                    "name": name,
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "restartPolicy": "Never",
            "serviceAccountName": account,
            # only a driver that starts executors talks to the API server
            "automountServiceAccountToken": spec.spark.mode == "kubernetes",
            "terminationGracePeriodSeconds": settings.termination_grace_seconds,
            "securityContext": POD_SECURITY,
            "containers": [
                {
                    "name": "driver",
                    "image": image,
                    "command": command,
                    "env": _env(namespace, name, generation, spec, service_account=account),
                    "resources": _resources(spec.spark.driver.cpu, spec.spark.driver.memory),
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                    "securityContext": CONTAINER_SECURITY,
                }
            ],
        },
    }
    if preview is None:
        container = pod["spec"]["containers"][0]  # type: ignore[index]
        container["ports"] = [{"name": "health", "containerPort": HEALTH_PORT}]
        container["readinessProbe"] = READINESS
    if preview is not None:  # bounded: the driver cancels its jobs at the timeout, this is a net
        deadline = spec.preview.timeout_seconds + PREVIEW_MARGIN_SECONDS
        pod["spec"]["activeDeadlineSeconds"] = deadline  # type: ignore[index]
    return pod


_CANNOT_PULL = (
    "ImagePullFailed",
    "The node cannot pull the driver image ({detail}). Load the image into the nodes, or set "
    "spec.spark.image to an image they can pull.",
)
WAITING_FAILURES: dict[str, tuple[str, str]] = {
    "ErrImagePull": _CANNOT_PULL,
    "ImagePullBackOff": _CANNOT_PULL,
    "InvalidImageName": (
        "ImagePullFailed",
        "The driver image name is invalid ({detail}). Fix spec.spark.image.",
    ),
    "CreateContainerConfigError": (
        "CreateContainerConfigError",
        "The driver container cannot be configured ({detail}). Check that the Secrets and keys "
        "named in spec.storage.credentials exist.",
    ),
}
"""Waiting states that never resolve by themselves: (reason, message template)."""


EVICTIONS = frozenset(
    {"Evicted", "Preempting", "Terminated", "Shutdown", "NodeShutdown"}
    | {"OutOfcpu", "OutOfmemory", "OutOfpods", "NodeAffinity", "UnexpectedAdmissionError"}
)
"""A failed pod's `status.reason` when the kubelet ended it for the node's sake (resource
pressure, a higher-priority pod, the node shutting down) or refused it at admission (the node
had not the room the scheduler counted on)."""


def _evicted(pod: dict[str, Any]) -> str | None:
    """How the cluster stopped the pod (its reason and message), or None."""
    status = pod.get("status") or {}
    disrupted = [
        c
        for c in status.get("conditions") or []
        if c.get("type") == "DisruptionTarget" and c.get("status") == "True"
    ]
    if status.get("reason") in EVICTIONS:
        return f"{status['reason']}: {status.get('message') or 'no message'}"
    if disrupted:
        said = disrupted[0]
        return f"{said.get('reason') or 'DisruptionTarget'}: {said.get('message') or 'no message'}"
    return None


def _failure(pod: dict[str, Any]) -> tuple[str | None, str | None]:
    """Why the driver failed: stopped by the cluster (evicted), killed for memory, its own
    `{"reason", "message"}` line from the termination message, its exit code, or a waiting
    state that will not resolve."""
    evicted = _evicted(pod) if _pod_phase(pod) == "Failed" else None
    if evicted is not None:
        return EVICTED, (
            f"The cluster stopped the driver pod ({evicted.rstrip('.')}); it did not fail on "
            "its own. The next driver starts from the last checkpoint."
        )
    if pod.get("status", {}).get("reason") == "DeadlineExceeded":  # only preview pods have one
        return "PreviewTimedOut", (
            "The preview pod ran past spec.preview.timeoutSeconds (plus "
            f"{PREVIEW_MARGIN_SECONDS}s to start) and was stopped. The pending change is "
            "unchanged: raise the timeout and change the label of spindle.dev/preview, or "
            "approve without a preview."
        )
    for status in pod.get("status", {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated") or {}
        if terminated.get("reason") == "OOMKilled":
            limit = (pod.get("spec", {}).get("containers") or [{}])[0].get("resources") or {}
            memory = (limit.get("limits") or {}).get("memory", "its limit")
            return "OOMKilled", (
                f"The driver used more memory than its limit ({memory}) and was killed. Raise "
                "spec.spark.driver.memory and apply again; the last checkpoint is intact, and "
                "the next driver resumes from it."
            )
        for line in reversed((terminated.get("message") or "").strip().splitlines()):
            try:
                body = json.loads(line)
            except ValueError:
                continue
            if isinstance(body, dict) and "reason" in body:
                return str(body["reason"]), str(body.get("message", ""))
        if terminated.get("exitCode") not in (None, 0):
            return "DriverFailed", (
                f"The driver exited with code {terminated['exitCode']} "
                f"({terminated.get('reason', 'Error')}); see `kubectl logs` of the pod."
            )
        waiting = (status.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in WAITING_FAILURES:
            reason, template = WAITING_FAILURES[waiting["reason"]]
            return reason, template.format(detail=waiting.get("message") or waiting["reason"])
    return None, None


def lingering(pod: dict[str, Any]) -> bool:
    """Whether the pod is Pending with a container that cannot start (a missing Secret, an
    image the kubelet cannot pull): Failed to Spindle, as it will not start by itself, but
    not to the kubelet, which may yet start it (a pull retried). It holds its place, and must
    be gone before another driver of its pipeline starts."""
    return _pod_phase(pod) == "Pending" and _failure(pod)[0] is not None


def driver_phase(pod: dict[str, Any]) -> str:
    """The pod's phase as Spindle reports it: a `lingering` one is Failed."""
    return "Failed" if lingering(pod) else _pod_phase(pod)


def _pod_phase(pod: dict[str, Any]) -> str:
    return pod.get("status", {}).get("phase") or "Pending"


DELETION_OVERDUE_SECONDS = 60
"""How long a deleted driver pod may outlive its grace period before it is reported stalled:
its node does not end it (unreachable, NotReady)."""


def _stalled(pod: dict[str, Any], now: datetime.datetime) -> tuple[str, str] | None:
    """Why the driver pod neither starts nor ends by itself (`ObservedDriver.stalled`)."""
    meta, status = pod["metadata"], pod.get("status") or {}
    name, node = meta.get("name", "?"), (pod.get("spec") or {}).get("nodeName") or "?"
    deleted = meta.get("deletionTimestamp")  # when its grace period ends
    if deleted:
        ends = read_timestamp(deleted)
        assert ends is not None
        overdue = int((now - ends).total_seconds())
        if overdue <= DELETION_OVERDUE_SECONDS:
            return None
        return "DriverTerminating", (
            f"The driver pod {name} was deleted and is still there past its grace period "
            f"(which ended at {deleted}): its node ({node}) does not end it; see `kubectl get "
            f"node {node}`. The "
            "next driver starts once it is gone (two drivers never run at once). If the node "
            "is lost for good, so its container cannot still be running, `kubectl delete pod "
            f"{name} --force --grace-period=0` lets the next one start now."
        )
    if _pod_phase(pod) != "Pending":
        return None
    for condition in status.get("conditions") or []:
        if (condition.get("type"), condition.get("status")) == ("PodScheduled", "False") and (
            condition.get("reason") == "Unschedulable"
        ):
            said = str(condition.get("message") or "no reason given").rstrip(".")
            what = "preview pod" if pod_mode(pod) is DriverMode.PREVIEW else "driver pod"
            return "DriverUnschedulable", (
                f"No node can take the {what} {name} ({said}). Lower spec.spark.driver.cpu "
                "or memory, or add nodes that fit it; it starts as soon as one can."
            )
    return None


EVICTION_BACKOFF_SECONDS = (0, 10, 20, 40, 80, 160, 300)
"""How long after a driver the cluster stopped the next one starts, by how many it stopped in a
row: the first starts at once, then a back-off that doubles up to 5 minutes, as the kubelet's
CrashLoopBackOff does. A node that keeps evicting it, or a pod the kubelet keeps refusing at
admission, would otherwise have a driver created every few seconds."""

EVICTION_RESET_SECONDS = 600
"""A driver that ran this long before the cluster stopped it counts as the first in a row."""


@dataclass(frozen=True)
class Eviction:
    """A driver pod the cluster stopped: the drivers stopped in a row with it, and when the
    next may start."""

    pod: str
    in_a_row: int
    restart_at: datetime.datetime

    def wait(self, now: datetime.datetime) -> float:
        return max(0.0, (self.restart_at - now).total_seconds())


def eviction(pod: dict[str, Any]) -> Eviction | None:
    """The back-off after `pod`, if the cluster stopped it (`EVICTED`); else None."""
    if _pod_phase(pod) != "Failed" or _evicted(pod) is None:
        return None
    meta, status = pod["metadata"], pod.get("status") or {}
    before = _count((meta.get("annotations") or {}).get(EVICTIONS_ANNOTATION))
    started, finished = None, None
    for container in status.get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated") or {}
        started = started or read_timestamp(terminated.get("startedAt"))
        finished = finished or read_timestamp(terminated.get("finishedAt"))
    times = [
        finished,
        read_timestamp(status.get("startTime")),
        read_timestamp(meta.get("creationTimestamp")),
        *[read_timestamp(c.get("lastTransitionTime")) for c in status.get("conditions") or []],
    ]
    # a pod always has its creation time; an evicted container often has no times of its own
    # (ContainerStatusUnknown), so it ran from the pod's start to the last time it shows
    ended = max((t for t in times if t is not None), default=datetime.datetime.now(datetime.UTC))
    started = started or read_timestamp(status.get("startTime"))
    ran = ((finished or ended) - started).total_seconds() if started else 0.0
    in_a_row = 1 if ran >= EVICTION_RESET_SECONDS else before + 1
    delay = EVICTION_BACKOFF_SECONDS[min(in_a_row, len(EVICTION_BACKOFF_SECONDS)) - 1]
    return Eviction(str(meta.get("name", "")), in_a_row, ended + datetime.timedelta(seconds=delay))


def _count(text: Any) -> int:
    """The `EVICTIONS_ANNOTATION` count (0 for one edited into something else)."""
    return int(text) if isinstance(text, str) and text.isdigit() else 0


def _backoff_said(stopped: Eviction | None, now: datetime.datetime) -> str:
    if stopped is None or stopped.in_a_row < 2:
        return ""
    said = f" The cluster stopped {stopped.in_a_row} drivers of this pipeline in a row"
    if stopped.wait(now) <= 0:
        return f"{said}."
    return (
        f"{said}, so the next starts at {timestamp(stopped.restart_at)} (a back-off that "
        f"doubles with each, up to {EVICTION_BACKOFF_SECONDS[-1] // 60} minutes; a driver "
        f"that runs {EVICTION_RESET_SECONDS // 60} minutes ends it). See `kubectl describe "
        "node` for why its node stops it."
    )


def pod_mode(pod: dict[str, Any]) -> DriverMode:
    """What the pod was started to do: the `--mode` of its command, which no one can edit
    (a pod's containers are immutable), else its `LABEL_MODE`, which anyone can. A pod whose
    mode neither says (a label edited into `Run`, say) is taken for a run driver: it holds
    the pipeline's one driver place, so no second driver starts beside it, and the rules
    that stop a driver still reach it. (Read from the label first, a run driver labelled
    `preview` was no driver at all, and the next generation's started beside it.)"""
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    command = containers[0].get("command") or []
    started = str(command[command.index("--mode") + 1]) if "--mode" in command[:-1] else ""
    labelled = str((pod["metadata"].get("labels") or {}).get(LABEL_MODE) or "")
    modes = {mode.value: mode for mode in DriverMode}
    return modes.get(started) or modes.get(labelled) or DriverMode.RUN


def _generation(labels: dict[str, Any]) -> int:
    """The `LABEL_GENERATION` a driver was started for; 0 for one edited into something else
    (as `_count` reads a count): of no generation of the spec, so a failed driver does not
    hold the pipeline `Failed` (no spec change could end that), and is started again once,
    its pod replaced (never beside it)."""
    text = labels.get(LABEL_GENERATION)
    return int(text) if isinstance(text, str) and text.isdigit() else 0


def observed_driver(pod: dict[str, Any], *, now: datetime.datetime | None = None) -> ObservedDriver:
    meta = pod["metadata"]
    labels = meta.get("labels") or {}
    stuck = lingering(pod)
    phase = "Failed" if stuck else _pod_phase(pod)
    reason, message = _failure(pod)
    now = now or datetime.datetime.now(datetime.UTC)
    if reason == EVICTED:
        message = f"{message}{_backoff_said(eviction(pod), now)}"
    return ObservedDriver(
        mode=pod_mode(pod),
        generation=_generation(labels),
        phase=phase,
        change_id=labels.get(LABEL_CHANGE),
        reason=reason,
        message=message,
        paused=labels[LABEL_INGEST] == "paused" if LABEL_INGEST in labels else None,
        spark=labels.get(LABEL_SPARK),
        placement=labels.get(LABEL_PLACEMENT),
        program=labels.get(LABEL_PROGRAM),
        base=(meta.get("annotations") or {}).get(BASE_ANNOTATION),
        retrying="" if phase == "Running" and _unready_since_ready(pod) else None,
        lingering=stuck,
        ending=bool(meta.get("deletionTimestamp")),
        stalled=None if stuck else _stalled(pod, now),
    )


def _unready_since_ready(pod: dict[str, Any]) -> bool:
    """Whether the driver container's readiness probe failed after it was Ready: its driver
    waits to retry a step (`READINESS`, `runtime.health`). A driver still starting has been
    not Ready since before its container started."""
    status = pod.get("status", {})
    conditions: list[dict[str, Any]] = status.get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), {})
    containers: list[dict[str, Any]] = status.get("containerStatuses") or []
    driver = next((c for c in containers if c.get("name") == "driver"), {})
    started = str(((driver.get("state") or {}).get("running") or {}).get("startedAt") or "")
    since = str(ready.get("lastTransitionTime") or "")
    # the container's own readiness: a node gone NotReady marks the pod, not the container
    probed = driver.get("ready") is False
    return ready.get("status") == "False" and probed and bool(started) and since > started


def current_pod(pods: list[dict[str, Any]], *, owner_uid: str) -> dict[str, Any] | None:
    """The pipeline's driver: an active pod if there is one, else the newest (preview pods
    are not drivers)."""
    owned = [
        p
        for p in pods
        if any(o.get("uid") == owner_uid for o in p["metadata"].get("ownerReferences") or [])
        and pod_mode(p) is not DriverMode.PREVIEW
    ]
    active = [p for p in owned if p.get("status", {}).get("phase") in (None, "Pending", "Running")]
    chosen = active or owned
    if not chosen:
        return None
    return max(chosen, key=lambda p: p["metadata"].get("creationTimestamp") or "")
