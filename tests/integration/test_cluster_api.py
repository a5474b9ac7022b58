"""The operator's re-list (`Cluster.pipelines`) against the real API server: it reads each
Pipeline's metadata only, and that is enough to tell what a reconcile would read
(`reconcile.inputs`), in one namespace or across all of them."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kubernetes import client

from spindle.api.types import GROUP, VERSION
from spindle.k8s.cluster import Cluster
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
    kube.kubectl("apply", "-f", str(ROOT / "crds/pipeline.yaml"))
    kube.kubectl("wait", "--for=condition=Established", "crd/pipelines.spindle.dev")
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
