"""A real cluster as tests use it: its kubeconfig, a client, kubectl, and (for the harness's own
cluster) the `Cluster` that runs it."""

from __future__ import annotations

import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Kube:
    kubeconfig: Path
    api: Any
    external: bool
    kubectl_bin: Path | None
    cluster: Any = None
    """The harness's `Cluster` (None on an external cluster)."""

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> str:
        binary = str(self.kubectl_bin) if self.kubectl_bin else "kubectl"
        result = subprocess.run(
            [binary, "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True,
            text=True,
            input=input,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{result.stderr}")
        return result.stdout if check else result.stdout + result.stderr

    def namespace(self, prefix: str = "t") -> str:
        """A fresh namespace whose default service account exists (pods can be created)."""
        from kubernetes import client

        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        core = client.CoreV1Api(self.api)
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if core.list_namespaced_service_account(name).items:
                return name
            time.sleep(0.1)
        raise TimeoutError(f"no default service account in {name}")

    def apply_crd(self, manifest: Path) -> None:
        """Apply a CustomResourceDefinition and wait until its API is served (Established).
        Not `kubectl wait`: it fails at once on a CRD the API server has not given a status
        yet ("<nil> is of the type <nil>")."""
        import json

        from tests.waiting import wait_for

        body = json.loads(self.kubectl("apply", "-f", str(manifest), "-o", "json"))
        name = body["metadata"]["name"]

        def established() -> bool:
            crd = json.loads(self.kubectl("get", "crd", name, "-o", "json"))
            conditions = (crd.get("status") or {}).get("conditions") or []
            return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

        wait_for(f"the CRD {name} to be established", established, timeout=60)
