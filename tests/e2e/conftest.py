"""End-to-end wiring: the CRD, the operator installed by `helm install charts/spindle` and
running as a pod from the operator image, pipeline namespaces.

Tests talk to the operator only through the API server, as a user does. The operator's and the
pipelines' namespaces enforce the restricted Pod Security profile, so a pod that does not meet
it is rejected by the API server. The S3 server is reached by pods through a relay on the
host's end of the node's link. With KUBECONFIG naming another real cluster the same tests run
there: load the two images into its nodes and point SPINDLE_TEST_S3_ENDPOINT at an S3 server
its pods can reach.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, Kube
from tests.waiting import wait_for

DRIVER_IMAGE = "ghcr.io/spindle-dev/spindle-spark:0.1.0"
SYSTEM = "spindle-system"


def apply_documents(kube: Kube, path: Path, **replace: str) -> None:
    text = path.read_text()
    for key, value in replace.items():
        text = text.replace(key, value)
    kube.kubectl("apply", "-f", "-", input=text)


def token_kubeconfig(kube: Kube, namespace: str, account: str, target: Path) -> Path:
    """A kubeconfig that authenticates as `namespace/account` only (a bound token)."""
    from kubernetes import client

    core = client.CoreV1Api(kube.api)
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=86400)
    )
    token = core.create_namespaced_service_account_token(account, namespace, request).status.token
    admin = yaml.safe_load(kube.kubeconfig.read_text())
    context = next(c["context"] for c in admin["contexts"] if c["name"] == admin["current-context"])
    cluster = next(c["cluster"] for c in admin["clusters"] if c["name"] == context["cluster"])
    cluster = dict(cluster)
    if "certificate-authority" in cluster:
        data = Path(cluster.pop("certificate-authority")).read_bytes()
        cluster["certificate-authority-data"] = base64.b64encode(data).decode()
    target.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": account, "user": {"token": token}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": account}}],
                "current-context": "c",
            }
        )
    )
    return target


@dataclass
class Operator:
    """The operator as users run it: a pod of the chart's Deployment, from the operator image.
    Tests reach it only through the API server (get, logs, the service proxy, scale)."""

    kube: Kube
    namespace: str = SYSTEM
    deployment: str = "spindle-operator"

    def pods(self) -> list[dict[str, Any]]:
        body = self.kube.kubectl(
            "get",
            "pods",
            "-n",
            self.namespace,
            "-l",
            "app.kubernetes.io/name=spindle",
            "-o",
            "json",
        )
        return list(json.loads(body)["items"])

    def ready(self) -> bool:
        pods = [p for p in self.pods() if not p["metadata"].get("deletionTimestamp")]
        return len(pods) == 1 and any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in pods[0]["status"].get("conditions", [])
        )

    def healthy(self) -> bool:
        """Ready, and its container never restarted (the operator never crashed)."""
        assert self.ready(), "the operator pod is not ready"
        [pod] = self.pods()
        restarts = [s["restartCount"] for s in pod["status"]["containerStatuses"]]
        assert restarts == [0], f"the operator restarted: {self.logs(previous=True)[-3000:]}"
        return True

    def logs(self, *, previous: bool = False) -> str:
        args = ["logs", f"deployment/{self.deployment}", "-n", self.namespace, "--tail=400"]
        return self.kube.kubectl(*args, *(["--previous"] if previous else []), check=False)

    def metrics(self) -> str:
        path = (
            f"/api/v1/namespaces/{self.namespace}/services/"
            f"{self.deployment}-metrics:8080/proxy/metrics"
        )
        return self.kube.kubectl("get", "--raw", path)

    def kill(self) -> None:
        """Down at once, with no chance to clean up (like a node loss): scale to zero and
        force-delete the pod."""
        self.kube.kubectl(
            "scale", f"deployment/{self.deployment}", "-n", self.namespace, "--replicas=0"
        )
        for pod in self.pods():
            self.kube.kubectl(
                "delete",
                "pod",
                pod["metadata"]["name"],
                "-n",
                self.namespace,
                "--grace-period=0",
                "--force",
                check=False,
            )
        wait_for("the operator pod to go", lambda: not self.pods(), timeout=60)

    def start(self) -> Operator:
        self.kube.kubectl(
            "scale", f"deployment/{self.deployment}", "-n", self.namespace, "--replicas=1"
        )
        wait_for("the operator pod to be ready", self.ready, timeout=120)
        return self


def restricted(kube: Kube, namespace: str) -> None:
    """Enforce the restricted Pod Security profile in `namespace`."""
    from kubernetes import client

    client.CoreV1Api(kube.api).patch_namespace(
        namespace,
        {
            "metadata": {
                "labels": {
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "pod-security.kubernetes.io/enforce-version": "latest",
                }
            }
        },
    )


@pytest.fixture(scope="session")
def crd(kube: Kube) -> None:
    kube.apply_crd(ROOT / "crds" / "pipeline.yaml")


@pytest.fixture(scope="session")
def pod_s3(kube: Kube, s3: Any) -> Iterator[Any]:
    """The S3 server at an address the cluster's pods reach (the same server as `s3`)."""
    if kube.cluster is None:
        yield s3  # SPINDLE_TEST_S3_ENDPOINT must then be reachable from the cluster's pods
        return
    from tests.harness import cluster

    relay = s3.reachable_at(
        kube.cluster.layout.host_ip, registry=cluster.registry(kube.cluster.layout)
    )
    try:
        yield relay
    finally:
        relay.stop()


@pytest.fixture(scope="session")
def operator(kube: Kube, crd: None, pod_s3: Any) -> Iterator[Operator]:
    kube.kubectl("create", "namespace", SYSTEM, check=False)
    restricted(kube, SYSTEM)
    from tests.harness.cluster import install_operator

    install_operator(
        kube.kubeconfig,
        SYSTEM,
        "operator.resyncSeconds=3",
        "driver.stopGraceSeconds=90",
        "resources.limits.memory=768Mi",
    )
    handle = Operator(kube)
    wait_for("the operator pod to be ready", handle.ready, timeout=120)
    pytest.spindle_operator = handle  # type: ignore[attr-defined]
    yield handle


@dataclass
class Space:
    """A pipeline namespace: restricted Pod Security, the driver RBAC, an S3 Secret, a bucket."""

    kube: Kube
    name: str
    bucket: str
    s3: Any

    def storage(self) -> dict[str, Any]:
        return {
            "uri": f"s3://{self.bucket}/pipelines",
            "endpoint": self.s3.endpoint,
            "region": self.s3.region,
            "credentials": {
                "accessKeyId": {"name": "s3", "key": "accessKeyId"},
                "secretAccessKey": {"name": "s3", "key": "secretAccessKey"},
            },
        }

    def apply(self, document: dict[str, Any]) -> None:
        document = json.loads(json.dumps(document))
        document["metadata"]["namespace"] = self.name
        self.kube.kubectl("apply", "-f", "-", input=yaml.safe_dump(document))

    def get(self, name: str) -> dict[str, Any]:
        return json.loads(self.kube.kubectl("get", "pipeline", name, "-n", self.name, "-o", "json"))

    def status(self, name: str) -> dict[str, Any]:
        return dict(self.get(name).get("status") or {})

    def wait_phase(self, name: str, phase: str, *, timeout: float = 600.0, **extra: Any) -> Any:
        def reached() -> dict[str, Any] | None:
            body = self.get(name)
            status = dict(body.get("status") or {})
            if status.get("phase") != phase:
                return None
            if status.get("observedGeneration") != body["metadata"]["generation"]:
                return None
            for key, predicate in extra.items():
                if not predicate(status.get(key)):
                    return None
            return status

        return wait_for(f"{self.name}/{name} to be {phase}", reached, timeout=timeout)

    def pods(self) -> list[dict[str, Any]]:
        body = json.loads(self.kube.kubectl("get", "pods", "-n", self.name, "-o", "json"))
        return list(body["items"])

    def plugin(self, *args: str, check: bool = True) -> str:
        """`kubectl spindle ARGS` in this namespace: its output, which must be a success's
        (`check`), else its output and errors."""
        result = subprocess.run(
            [
                str(Path(sys.executable).parent / "kubectl-spindle"),
                "--kubeconfig",
                str(self.kube.kubeconfig),
                "-n",
                self.name,
                *args,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if not check:
            return result.stdout + result.stderr
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    def events(self, reason: str) -> list[dict[str, Any]]:
        body = json.loads(self.kube.kubectl("get", "events", "-n", self.name, "-o", "json"))
        return [e for e in body["items"] if e.get("reason") == reason]


@pytest.fixture
def space(kube: Kube, pod_s3: Any, operator: Operator) -> Iterator[Space]:
    from kubernetes import client

    name = kube.namespace("e2e")
    restricted(kube, name)
    core = client.CoreV1Api(kube.api)
    apply_documents(kube, ROOT / "deploy" / "rbac" / "driver.yaml", PIPELINE_NAMESPACE=name)
    core.create_namespaced_secret(
        name,
        client.V1Secret(
            metadata=client.V1ObjectMeta(name="s3"),
            string_data={"accessKeyId": pod_s3.access_key, "secretAccessKey": pod_s3.secret_key},
        ),
    )
    yield Space(kube, name, pod_s3.bucket("e2e"), pod_s3)
    # Stop this test's drivers (Spark processes) before the next test starts its own.
    kube.kubectl("delete", "pipelines", "--all", "-n", name, "--wait=false", check=False)
    kube.kubectl("delete", "pods", "--all", "-n", name, "--grace-period=5", check=False)
    kube.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    handle = getattr(pytest, "spindle_operator", None)
    if report.failed and handle is not None:
        report.sections.append(("operator log", handle.logs()[-6000:]))
        spaces = [v for v in getattr(item, "funcargs", {}).values() if isinstance(v, Space)]
        for space in spaces:
            listing = space.kube.kubectl(
                "get", "pods,events", "-n", space.name, "-o", "wide", check=False
            )
            report.sections.append((f"pods and events in {space.name}", listing[-4000:]))
