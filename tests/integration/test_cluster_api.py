"""The operator's reads against the real API server: a re-list (`Cluster.pipelines`) reads each
Pipeline's metadata only, and that is enough to tell what a reconcile would read
(`reconcile.inputs`), in one namespace or across all of them; a pipeline's pods are read from
the API server's cache and include every pod the operator created (`Cluster.driver_pods`)."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from kubernetes import client

from spindle.api.types import GROUP, VERSION
from spindle.k8s.cluster import Cluster
from spindle.k8s.pods import LABEL_PIPELINE, MANAGED
from spindle.k8s.reconcile import inputs
from tests.conftest import ROOT, Kube

pytestmark = [pytest.mark.kube]


def _pipeline(namespace: str, name: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Pipeline",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {"sql": "CREATE TABLE t (x INT);", "storage": {"uri": "file:///tmp/x"}},
    }


def test_a_relist_reads_each_pipelines_metadata_and_what_decides_a_reconcile(kube: Kube) -> None:
    kube.apply_crd(ROOT / "crds/pipeline.yaml")
    namespace = f"relist-{uuid.uuid4().hex[:6]}"
    kube.kubectl("create", "namespace", namespace)
    custom = client.CustomObjectsApi(kube.api)
    try:
        for name, annotations in [("a", {}), ("b", {"spindle.dev/approve": "c-123"})]:
            custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, "pipelines", _pipeline(namespace, name, annotations)
            )
        custom.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            namespace,
            "pipelines",
            "b",
            {"status": {"phase": "Running", "observedGeneration": 1}},
        )
        cluster = Cluster(kube.api)
        full = {
            item["metadata"]["name"]: item
            for item in custom.list_namespaced_custom_object(
                GROUP, VERSION, namespace, "pipelines"
            )["items"]
        }
        listed = {item["metadata"]["name"]: item for item in cluster.pipelines([namespace])}
        assert sorted(listed) == ["a", "b"]
        for name, item in listed.items():
            assert "spec" not in item and "status" not in item
            assert item["metadata"]["resourceVersion"] == full[name]["metadata"]["resourceVersion"]
            assert inputs(item) == inputs(full[name])
        assert inputs(listed["b"])[2] == "c-123"  # the approval is in the metadata
        everywhere = {
            (item["metadata"]["namespace"], item["metadata"]["name"])
            for item in cluster.pipelines(None)
        }
        assert {(namespace, "a"), (namespace, "b")} <= everywhere
    finally:
        kube.kubectl("delete", "namespace", namespace, "--wait=false")


def _pod(namespace: str, name: str, pipeline: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**MANAGED, LABEL_PIPELINE: pipeline},
        },
        "spec": {"containers": [{"name": "driver", "image": "spindle.test/none:0"}]},
    }


def test_a_pipelines_pods_are_read_from_the_cache_and_always_show_the_operators_own_creates(
    kube: Kube,
) -> None:
    """A reconcile reads its pipeline's pods from the API server's cache (no quorum read, which
    waits up to 100 ms for the cache to prove itself fresh), yet never misses a pod the
    operator has just created, though other writes move etcd on meanwhile: a missed driver
    would be created twice."""
    namespace = kube.namespace("pods")
    core = client.CoreV1Api(kube.api)
    stop = threading.Event()

    def churn() -> None:  # writes elsewhere, so that etcd's revision is ahead of the pods
        number = 0
        while not stop.is_set():
            number += 1
            body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"c{number}"))
            core.create_namespaced_config_map(namespace, body)

    churning = threading.Thread(target=churn, daemon=True)
    try:
        cluster = Cluster(kube.api)
        assert cluster.driver_pods(namespace, "p0") == []
        churning.start()
        created: dict[str, set[str]] = {}
        for number in range(60):
            pipeline = f"p{number % 3}"
            name = f"{pipeline}-driver-{number}"
            assert cluster.create_pod(_pod(namespace, name, pipeline))
            created.setdefault(pipeline, set()).add(name)
            listed = {p["metadata"]["name"] for p in cluster.driver_pods(namespace, pipeline)}
            assert listed == created[pipeline], number
        assert not cluster.create_pod(_pod(namespace, "p0-driver-0", "p0"))  # 409: adopted
    finally:
        stop.set()
        churning.join(timeout=10)
        kube.kubectl("delete", "namespace", namespace, "--wait=false")
