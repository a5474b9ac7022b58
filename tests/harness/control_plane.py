"""A real Kubernetes control plane: etcd, kube-apiserver (Node + RBAC authorization, the
NodeRestriction admission plugin), kube-controller-manager (every default controller, each with
its own service account) and kube-scheduler.

The API server listens on the host end of the node's veth (`Layout.host_ip`), so the host's
tests, the kubelet and pods (through the `kubernetes` Service) all reach it on an address of
this machine; etcd listens on loopback only.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import Popen

import yaml

from tests.harness import binaries, cache, pki, processes
from tests.harness.network import Layout


@dataclass
class ControlPlane:
    workdir: Path
    layout: Layout
    registry: Path
    kubeconfig: Path = field(init=False)
    server: str = field(init=False)
    ca: Path = field(init=False)
    authority: pki.Authority = field(init=False)
    _processes: list[Popen[bytes]] = field(default_factory=list)
    _pids: dict[str, int] = field(default_factory=dict)

    def kubeconfig_for(self, name: str, *, common: str, org: str | None = None) -> Path:
        """A kubeconfig holding a client certificate for `common` (in group `org`)."""
        pair = self.authority.issue(name, common=common, org=org)
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
                    "name": common,
                    "user": {"client-certificate": str(pair.cert), "client-key": str(pair.key)},
                }
            ],
            "contexts": [
                {"name": "spindle-test", "context": {"cluster": "spindle-test", "user": common}}
            ],
            "current-context": "spindle-test",
        }
        path = self.workdir / f"{name}.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        return path

    def _start(self, name: str, args: list[str]) -> Popen[bytes]:
        process = processes.start(
            args, log=self.workdir / "logs" / f"{name}.log", registry=self.registry
        )
        self._processes.append(process)
        self._pids[name] = process.pid
        return process

    def pids(self) -> dict[str, int]:
        """Each running part's process id, by name (etcd, kube-apiserver, ...)."""
        return dict(self._pids)

    def start(self) -> ControlPlane:
        etcd_bin = binaries.ensure("etcd")
        apiserver_bin = binaries.ensure("kube-apiserver")
        manager_bin = binaries.ensure("kube-controller-manager")
        scheduler_bin = binaries.ensure("kube-scheduler")
        pki_dir = self.workdir / "pki"
        self.authority = pki.Authority(pki_dir)
        self.ca = self.authority.cert
        serving = self.authority.issue(
            "apiserver",
            common="kube-apiserver",
            server=True,
            hosts=(
                self.layout.host_ip,
                self.layout.api_service_ip,
                "127.0.0.1",
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ),
        )
        kubelet_client = self.authority.issue(
            "apiserver-kubelet-client", common="kube-apiserver-kubelet-client"
        )
        sa = pki.service_account_keys(pki_dir)

        with cache.timed("control plane start", "started"):
            client, peer = processes.free_port(), processes.free_port()
            etcd = self._start(
                "etcd",
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
            )
            processes.wait_until(
                lambda: processes.http_ok(f"http://127.0.0.1:{client}/health"),
                timeout=30,
                what="etcd",
                process=etcd,
                log=self.workdir / "logs" / "etcd.log",
            )
            port = processes.free_port()
            self.server = f"https://{self.layout.host_ip}:{port}"
            apiserver = self._start(
                "kube-apiserver",
                [
                    str(apiserver_bin),
                    f"--etcd-servers=http://127.0.0.1:{client}",
                    f"--bind-address={self.layout.host_ip}",
                    f"--advertise-address={self.layout.host_ip}",
                    f"--secure-port={port}",
                    f"--cert-dir={self.workdir / 'certs'}",
                    f"--tls-cert-file={serving.cert}",
                    f"--tls-private-key-file={serving.key}",
                    f"--client-ca-file={self.ca}",
                    f"--kubelet-client-certificate={kubelet_client.cert}",
                    f"--kubelet-client-key={kubelet_client.key}",
                    "--kubelet-preferred-address-types=InternalIP",
                    f"--service-account-key-file={sa.cert}",
                    f"--service-account-signing-key-file={sa.key}",
                    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                    "--api-audiences=https://kubernetes.default.svc.cluster.local",
                    "--authorization-mode=Node,RBAC",
                    "--enable-admission-plugins=NodeRestriction",
                    f"--service-cluster-ip-range={self.layout.service_cidr}",
                    "--allow-privileged=false",
                    "--enable-priority-and-fairness=false",
                    "--profiling=false",
                    "--v=1",
                ],
            )
            admin = self.authority.issue("admin", common="admin", org="system:masters")
            self.kubeconfig = self.kubeconfig_for("admin", common="admin", org="system:masters")
            context = ssl.create_default_context(cafile=str(self.ca))
            context.load_cert_chain(str(admin.cert), str(admin.key))
            processes.wait_until(
                lambda: processes.http_ok(f"{self.server}/readyz", context=context),
                timeout=120,
                what="kube-apiserver",
                process=apiserver,
                log=self.workdir / "logs" / "kube-apiserver.log",
            )
            manager = self.kubeconfig_for("manager", common="system:kube-controller-manager")
            self._start(
                "kube-controller-manager",
                [
                    str(manager_bin),
                    f"--kubeconfig={manager}",
                    f"--authentication-kubeconfig={manager}",
                    f"--authorization-kubeconfig={manager}",
                    "--use-service-account-credentials=true",
                    f"--service-account-private-key-file={sa.key}",
                    f"--root-ca-file={self.ca}",
                    f"--service-cluster-ip-range={self.layout.service_cidr}",
                    f"--cluster-cidr={self.layout.pod_cidr}",
                    "--allocate-node-cidrs=false",
                    "--leader-elect=false",
                    "--secure-port=0",
                    "--node-monitor-grace-period=40s",
                    "--v=1",
                ],
            )
            scheduler = self.kubeconfig_for("scheduler", common="system:kube-scheduler")
            self._start(
                "kube-scheduler",
                [
                    str(scheduler_bin),
                    f"--kubeconfig={scheduler}",
                    f"--authentication-kubeconfig={scheduler}",
                    f"--authorization-kubeconfig={scheduler}",
                    "--leader-elect=false",
                    "--secure-port=0",
                    "--v=1",
                ],
            )
        return self

    def stop(self) -> None:
        for process in reversed(self._processes):
            processes.stop(process, grace=5.0)
        self._processes.clear()
        self._pids.clear()
