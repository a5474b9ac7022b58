"""End-to-end wiring: the CRD, the operator under its own service account, pipeline namespaces.

The operator runs as a local process (no image can run here) with a kubeconfig holding only its
service account's token, so every request it makes is checked against deploy/rbac. Pipeline
namespaces enforce the restricted Pod Security profile, so a driver pod that does not meet it is
rejected by the API server. With KUBECONFIG naming a real cluster the same tests run there (the
driver image must be loadable by its nodes and the S3 endpoint reachable from its pods).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, Kube

DRIVER_IMAGE = "ghcr.io/spindle-dev/spindle-spark:0.1.0"
SYSTEM = "spindle-system"


def apply_documents(kube: Kube, path: Path, **replace: str) -> None:
    text = path.read_text()
    for key, value in replace.items():
        text = text.replace(key, value)
    kube.kubectl("apply", "-f", "-", input=text)


def wait_for(what: str, check: Callable[[], Any], *, timeout: float = 240.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")


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
class OperatorProcess:
    kubeconfig: Path
    log: Path
    args: list[str]
    port: int
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    env: dict[str, str] = field(default_factory=dict)

    def start(self) -> OperatorProcess:
        env = {**os.environ, **self.env, "KUBECONFIG": str(self.kubeconfig)}
        with self.log.open("ab") as out:
            out.write(f"\n===== operator start {self.starts + 1} =====\n".encode())
            self.process = subprocess.Popen(
                [sys.executable, "-m", "spindle.cli.main", "operator", *self.args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=ROOT,
                start_new_session=True,
            )
        self.starts += 1
        wait_for("the operator's /healthz", self.healthy, timeout=60)
        return self

    def healthy(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"the operator exited:\n{self.log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
            return str(r.read().decode())

    def kill(self) -> None:
        """SIGKILL: no chance to clean up, like a node loss."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture(scope="session")
def crd(kube: Kube) -> None:
    kube.kubectl("apply", "-f", str(ROOT / "crds" / "pipeline.yaml"))
    kube.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", "crd/pipelines.spindle.dev"
    )


@pytest.fixture(scope="session")
def operator(
    kube: Kube, crd: None, node_agent: Any, s3: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    from tests.harness import processes

    kube.kubectl("create", "namespace", SYSTEM, check=False)
    apply_documents(kube, ROOT / "deploy" / "rbac" / "operator.yaml", SPINDLE_NAMESPACE=SYSTEM)
    workdir = tmp_path_factory.mktemp("operator")
    kubeconfig = token_kubeconfig(kube, SYSTEM, "spindle-operator", workdir / "kubeconfig")
    port = processes.free_port()
    handle = OperatorProcess(
        kubeconfig=kubeconfig,
        log=workdir / "operator.log",
        port=port,
        args=[
            "--all-namespaces",
            "--resync",
            "3",
            "--port",
            str(port),
            "--stop-grace",
            "90",
            "--driver-image",
            DRIVER_IMAGE,
        ],
    ).start()
    pytest.operator_log = handle.log  # type: ignore[attr-defined]
    try:
        yield handle
    finally:
        handle.stop()


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

    def wait_phase(self, name: str, phase: str, *, timeout: float = 240.0, **extra: Any) -> Any:
        def reached() -> dict[str, Any] | None:
            status = self.status(name)
            if status.get("phase") != phase:
                return None
            if status.get("observedGeneration") != self.get(name)["metadata"]["generation"]:
                return None
            for key, predicate in extra.items():
                if not predicate(status.get(key)):
                    return None
            return status

        return wait_for(f"{self.name}/{name} to be {phase}", reached, timeout=timeout)

    def pods(self) -> list[dict[str, Any]]:
        body = json.loads(self.kube.kubectl("get", "pods", "-n", self.name, "-o", "json"))
        return list(body["items"])

    def events(self, reason: str) -> list[dict[str, Any]]:
        body = json.loads(self.kube.kubectl("get", "events", "-n", self.name, "-o", "json"))
        return [e for e in body["items"] if e.get("reason") == reason]


@pytest.fixture
def space(kube: Kube, s3: Any, operator: OperatorProcess) -> Iterator[Space]:
    from kubernetes import client

    name = kube.namespace("e2e")
    core = client.CoreV1Api(kube.api)
    core.patch_namespace(
        name,
        {
            "metadata": {
                "labels": {
                    "pod-security.kubernetes.io/enforce": "restricted",
                    "pod-security.kubernetes.io/enforce-version": "latest",
                }
            }
        },
    )
    apply_documents(kube, ROOT / "deploy" / "rbac" / "driver.yaml", PIPELINE_NAMESPACE=name)
    core.create_namespaced_secret(
        name,
        client.V1Secret(
            metadata=client.V1ObjectMeta(name="s3"),
            string_data={"accessKeyId": s3.access_key, "secretAccessKey": s3.secret_key},
        ),
    )
    yield Space(kube, name, s3.bucket("e2e"), s3)
    # Stop this test's drivers (Spark processes) before the next test starts its own.
    kube.kubectl("delete", "pipelines", "--all", "-n", name, "--wait=false", check=False)
    kube.kubectl("delete", "pods", "--all", "-n", name, "--grace-period=5", check=False)
    kube.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    log = getattr(pytest, "operator_log", None)
    if report.failed and log is not None and Path(log).exists():
        report.sections.append(("operator log", Path(log).read_text()[-6000:]))
