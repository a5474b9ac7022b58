"""A fake API server for the operator body, in the spirit of sample-controller's fake clientset:
it holds Pipelines, pods and Secrets as dicts and records every call the body makes, so a test
asserts the API calls a decision turns into."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.exceptions import ApiException

from spindle.k8s.cluster import PodVersions, SecretMissing, SecretUnreadable

Call = tuple[Any, ...]


@dataclass
class FakeCluster:
    pipelines: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    pods: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    secrets: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    refuse_pods: int | None = None
    """An HTTP status with which pod creation fails (admission, quota), or None."""
    refuse_secrets: int | None = None
    """An HTTP status with which reading a Secret fails (403: RBAC), or None."""
    refuse_pod_list: int | None = None
    """An HTTP status with which listing driver pods fails (403: RBAC), or None."""
    pod_versions: PodVersions = field(default_factory=PodVersions)
    terminating: bool = False
    """Whether a pod deleted with a grace period stays (Terminating, with a deletionTimestamp)
    until the test removes it, as its kubelet ends it; else it goes at once (as a pod deleted
    with a grace of 0 always does, its container ending later)."""

    # -- what a test sets up -----------------------------------------------------------------

    def apply(
        self, name: str, spec: dict[str, Any], *, namespace: str = "default", **annotations: str
    ) -> dict[str, Any]:
        """Create or change a Pipeline; the generation grows with each spec change."""
        old = self.pipelines.get((namespace, name))
        generation = 1 if old is None else old["metadata"]["generation"] + 1
        pipeline = {
            "apiVersion": "spindle.dev/v1alpha1",
            "kind": "Pipeline",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{name}",
                "generation": generation,
                "annotations": dict(annotations),
            },
            "spec": spec,
            "status": (old or {}).get("status"),
        }
        self.pipelines[(namespace, name)] = pipeline
        return pipeline

    def annotate(self, name: str, key: str, value: str, *, namespace: str = "default") -> None:
        self.pipelines[(namespace, name)]["metadata"]["annotations"][key] = value

    def set_pod_phase(self, name: str, phase: str, *, namespace: str = "default") -> None:
        self.pods[(namespace, name)]["status"] = {"phase": phase}

    def take_calls(self) -> list[Call]:
        calls, self.calls = self.calls, []
        return calls

    # -- the Cluster interface the operator body uses ----------------------------------------

    def pipeline(self, namespace: str, name: str) -> dict[str, Any] | None:
        found = self.pipelines.get((namespace, name))
        return copy.deepcopy(found)

    def driver_pods(self, namespace: str, name: str) -> list[dict[str, Any]]:
        if self.refuse_pod_list is not None:
            raise ApiException(status=self.refuse_pod_list, reason="Forbidden")
        return [
            copy.deepcopy(pod)
            for (ns, _), pod in self.pods.items()
            if ns == namespace and pod["metadata"]["labels"].get("spindle.dev/pipeline") == name
        ]

    def create_pod(self, pod: dict[str, Any]) -> bool:
        meta = pod["metadata"]
        self.calls.append(("create_pod", meta["name"]))
        if self.refuse_pods is not None:
            raise ApiException(status=self.refuse_pods, reason="Forbidden")
        key = (meta["namespace"], meta["name"])
        if key in self.pods:
            return False
        created = copy.deepcopy(pod)
        created["metadata"]["uid"] = f"uid-{meta['name']}"
        created["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:{len(self.pods):02d}Z"
        created["status"] = {"phase": "Pending"}
        self.pods[key] = created
        return True

    def delete_pod(self, pod: dict[str, Any], *, grace_seconds: int | None = None) -> None:
        meta = pod["metadata"]
        self.calls.append(("delete_pod", meta["name"], grace_seconds))
        key = (meta["namespace"], meta["name"])
        if self.terminating and key in self.pods and grace_seconds != 0:  # 0 forces it
            self.pods[key]["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
        else:
            self.pods.pop(key, None)

    def secret_data(self, namespace: str, name: str) -> dict[str, str]:
        if self.refuse_secrets is not None:
            detail = f'secrets "{name}" is forbidden'
            raise SecretUnreadable(name, status=self.refuse_secrets, detail=detail)
        secret = self.secrets.get((namespace, name))
        if secret is None:
            raise SecretMissing(name, None)
        return dict(secret)

    def event(self, pipeline: dict[str, Any], *, type: str, reason: str, message: str) -> None:
        self.calls.append(("event", type, reason))

    def write_status(self, pipeline: dict[str, Any], status: dict[str, Any]) -> None:
        meta = pipeline["metadata"]
        self.calls.append(("write_status", status["phase"]))
        self.pipelines[(meta["namespace"], meta["name"])]["status"] = copy.deepcopy(status)

    def status(self, name: str, *, namespace: str = "default") -> dict[str, Any]:
        found: dict[str, Any] = self.pipelines[(namespace, name)]["status"]
        return found
