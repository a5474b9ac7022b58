"""A real one-node Kubernetes cluster for the tests: the control plane (`control_plane`), one
node on containerd + runc with kubelet and kube-proxy (`node`) in a network namespace of its own
(`network`), the images the tests run (`images`), and CoreDNS.

`start()` first removes whatever a killed earlier run left (`reap`), so an interrupted
`make test` never blocks the next one. One cluster per `Layout` runs at a time on a machine; a
lock file says which process owns it.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from tests.harness import binaries, cache, images, network, node, processes
from tests.harness.control_plane import ControlPlane
from tests.harness.network import Layout

ADDONS = Path(__file__).parent / "addons"
CHART = Path(__file__).resolve().parents[2] / "charts" / "spindle"


def registry(layout: Layout) -> Path:
    """Where the cluster's processes are recorded by PID (survives a kill -9 of the test run)."""
    return Path(f"/run/spindle-cluster{layout.index}")


def reap(layout: Layout) -> list[str]:
    """Stop and remove everything an earlier run of this layout left behind."""
    removed = []
    killed = processes.kill_registered(registry(layout))
    if killed:
        removed.append(f"{killed} cluster processes")
        time.sleep(0.5)
    return removed + node.reap(layout)


@dataclass
class Cluster:
    workdir: Path
    layout: Layout = field(default_factory=Layout)
    plane: ControlPlane | None = None
    node: node.Node | None = None
    minimal: bool = False
    """Only the pause and operator images and no CoreDNS: a second cluster for the restart test."""
    reaped: list[str] = field(default_factory=list)
    _lock: IO[str] | None = None

    @property
    def kubeconfig(self) -> Path:
        assert self.plane is not None
        return self.plane.kubeconfig

    def kubectl(self, *args: str, input: str | None = None) -> str:
        result = subprocess.run(
            [str(binaries.ensure("kubectl")), "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True,
            text=True,
            input=input,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def _take_lock(self) -> None:
        path = Path(f"/run/spindle-cluster{self.layout.index}.lock")
        handle = path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            raise RuntimeError(
                f"another test run owns cluster {self.layout.index} (pid {handle.read().strip()}); "
                "wait for it, or stop it, before starting this one"
            ) from None
        handle.truncate(0)
        handle.write(str(os.getpid()))
        handle.flush()
        self._lock = handle

    def start(self) -> Cluster:
        self._take_lock()
        self.reaped = reap(self.layout)
        if self.reaped:
            cache.say(f"removed what an interrupted run left: {', '.join(self.reaped)}")
        built = images.ensure_all()
        if self.minimal:
            wanted = (images.PAUSE_IMAGE, images.OPERATOR_IMAGE)
            built = [image for image in built if image.reference in wanted]
        with cache.timed(f"cluster {self.layout.index} start", "started"):
            network.setup(self.layout)
            self.plane = ControlPlane(
                self.workdir / "control-plane", self.layout, registry(self.layout)
            ).start()
            self.node = node.Node(
                layout=self.layout,
                kubelet_kubeconfig=self.plane.kubeconfig_for(
                    "kubelet", common=f"system:node:{node.NODE_NAME}", org="system:nodes"
                ),
                proxy_kubeconfig=self.plane.kubeconfig_for("proxy", common="system:kube-proxy"),
                authority=self.plane.authority,
                pause_image=images.PAUSE_IMAGE,
                logs=self.workdir / "logs",
                registry=registry(self.layout),
            )
            self.node.start_containerd()
            for image in built:
                result = node.ctr(self.layout, "images", "import", str(image.archive))
                if result.returncode != 0:
                    raise RuntimeError(f"importing {image.reference}: {result.stderr}")
            self.node.start_kubelet()
            self.node.start_proxy()
            self._wait_ready()
            if not self.minimal:
                self._install_coredns()
        return self

    def _wait_ready(self) -> None:
        def ready() -> bool:
            body = json.loads(self.kubectl("get", "node", node.NODE_NAME, "-o", "json"))
            conditions = {c["type"]: c["status"] for c in body["status"].get("conditions", [])}
            taints = body["spec"].get("taints") or []
            return conditions.get("Ready") == "True" and not taints

        processes.wait_until(ready, timeout=180, what="the node to be Ready and untainted")

    def _install_coredns(self) -> None:
        text = (ADDONS / "coredns.yaml").read_text()
        text = text.replace("COREDNS_IMAGE", images.COREDNS_IMAGE)
        text = text.replace("DNS_SERVICE_IP", self.layout.dns_service_ip)
        self.kubectl("apply", "-f", "-", input=text)
        self.kubectl(
            "rollout", "status", "deployment/coredns", "-n", "kube-system", "--timeout=180s"
        )

    def stop(self) -> None:
        """Stop every process by PID and remove the node's network, mounts and cgroups."""
        if self.node is not None:
            self.node.stop()
        if self.plane is not None:
            self.plane.stop()
        reap(self.layout)
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def install_operator(kubeconfig: Path, namespace: str, *sets: str) -> str:
    """`helm upgrade --install` this checkout's chart into `namespace` (created if missing) and
    wait for the operator; the chart's default images are the ones `images` built. Returns
    Helm's output; raises with it when Helm fails."""
    command = [
        str(binaries.ensure("helm")),
        "upgrade",
        "--install",
        "spindle",
        str(CHART),
        "-n",
        namespace,
        "--create-namespace",
        "--kubeconfig",
        str(kubeconfig),
        "--wait",
        "--timeout",
        "180s",
    ]
    for value in sets:
        command += ["--set", value]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"helm install failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def start(
    workdir: Path | None = None, *, layout: Layout | None = None, minimal: bool = False
) -> Cluster:
    workdir = workdir or Path(tempfile.mkdtemp(prefix="spindle-cluster-"))
    cluster = Cluster(workdir, layout or Layout(), minimal=minimal)
    try:
        return cluster.start()
    except BaseException:
        cluster.stop()
        raise
