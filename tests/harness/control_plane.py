"""A real Kubernetes control plane on loopback: etcd, kube-apiserver (RBAC enforced) and
kube-controller-manager (garbage collection, namespaces, service accounts).

There is no kubelet and no scheduler; `node_agent` plays both for the tests.
"""

from __future__ import annotations

import ssl
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import Popen

import yaml

from tests.harness import binaries, cache, pki, processes


@dataclass
class ControlPlane:
    workdir: Path
    kubeconfig: Path = field(init=False)
    server: str = field(init=False)
    ca: Path = field(init=False)
    _processes: list[Popen[bytes]] = field(default_factory=list)

    def _write_kubeconfig(self, path: Path, user: str, pair: pki.Pair) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "spindle-test",
                    "cluster": {"server": self.server, "certificate-authority": str(self.ca)},
                }
            ],
            "users": [
                {
                    "name": user,
                    "user": {
                        "client-certificate": str(pair.cert),
                        "client-key": str(pair.key),
                    },
                }
            ],
            "contexts": [
                {"name": "spindle-test", "context": {"cluster": "spindle-test", "user": user}}
            ],
            "current-context": "spindle-test",
        }
        path.write_text(yaml.safe_dump(config))

    def start(self) -> ControlPlane:
        etcd_bin = binaries.ensure("etcd")
        apiserver_bin = binaries.ensure("kube-apiserver")
        manager_bin = binaries.ensure("kube-controller-manager")
        pki_dir = self.workdir / "pki"
        authority = pki.Authority(pki_dir)
        self.ca = authority.cert
        serving = authority.issue(
            "apiserver",
            common="kube-apiserver",
            server=True,
            hosts=(
                "127.0.0.1",
                "localhost",
                "10.0.0.1",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ),
        )
        admin = authority.issue("admin", common="admin", org="system:masters")
        manager = authority.issue("manager", common="system:kube-controller-manager")
        sa = pki.service_account_keys(pki_dir)

        with cache.timed("control plane start", "started"):
            client, peer = processes.free_port(), processes.free_port()
            etcd_log = self.workdir / "logs" / "etcd.log"
            etcd = processes.start(
                [
                    str(etcd_bin),
                    "--name=default",
                    f"--data-dir={self.workdir / 'etcd'}",
                    f"--listen-client-urls=http://127.0.0.1:{client}",
                    f"--advertise-client-urls=http://127.0.0.1:{client}",
                    f"--listen-peer-urls=http://127.0.0.1:{peer}",
                    f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                    f"--initial-cluster=default=http://127.0.0.1:{peer}",
                    "--unsafe-no-fsync",
                    "--log-level=warn",
                ],
                log=etcd_log,
            )
            self._processes.append(etcd)
            processes.wait_until(
                lambda: processes.http_ok(f"http://127.0.0.1:{client}/health"),
                timeout=30,
                what="etcd",
                process=etcd,
                log=etcd_log,
            )
            port = processes.free_port()
            self.server = f"https://127.0.0.1:{port}"
            api_log = self.workdir / "logs" / "kube-apiserver.log"
            apiserver = processes.start(
                [
                    str(apiserver_bin),
                    f"--etcd-servers=http://127.0.0.1:{client}",
                    "--bind-address=127.0.0.1",
                    "--advertise-address=127.0.0.1",
                    f"--secure-port={port}",
                    f"--cert-dir={self.workdir / 'certs'}",
                    f"--tls-cert-file={serving.cert}",
                    f"--tls-private-key-file={serving.key}",
                    f"--client-ca-file={self.ca}",
                    f"--service-account-key-file={sa.cert}",
                    f"--service-account-signing-key-file={sa.key}",
                    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                    "--api-audiences=https://kubernetes.default.svc.cluster.local",
                    "--authorization-mode=RBAC",
                    "--service-cluster-ip-range=10.0.0.0/24",
                    "--allow-privileged=false",
                    "--enable-priority-and-fairness=false",
                    "--profiling=false",
                    "--v=1",
                ],
                log=api_log,
            )
            self._processes.append(apiserver)
            admin_config = self.workdir / "admin.kubeconfig"
            self._write_kubeconfig(admin_config, "admin", admin)
            self.kubeconfig = admin_config
            context = ssl.create_default_context(cafile=str(self.ca))
            context.load_cert_chain(str(admin.cert), str(admin.key))
            processes.wait_until(
                lambda: processes.http_ok(f"{self.server}/readyz", context=context),
                timeout=120,
                what="kube-apiserver",
                process=apiserver,
                log=api_log,
            )
            manager_config = self.workdir / "manager.kubeconfig"
            self._write_kubeconfig(manager_config, "manager", manager)
            manager_log = self.workdir / "logs" / "kube-controller-manager.log"
            self._processes.append(
                processes.start(
                    [
                        str(manager_bin),
                        f"--kubeconfig={manager_config}",
                        f"--authentication-kubeconfig={manager_config}",
                        f"--authorization-kubeconfig={manager_config}",
                        "--controllers=garbage-collector-controller,namespace-controller,"
                        "serviceaccount-controller,serviceaccount-token-controller",
                        f"--service-account-private-key-file={sa.key}",
                        f"--root-ca-file={self.ca}",
                        "--leader-elect=false",
                        "--secure-port=0",
                        "--v=1",
                    ],
                    log=manager_log,
                )
            )
        return self

    def stop(self) -> None:
        for process in reversed(self._processes):
            processes.stop(process)
        self._processes.clear()


def start(workdir: Path | None = None) -> ControlPlane:
    return ControlPlane(workdir or Path(tempfile.mkdtemp(prefix="spindle-kube-"))).start()
