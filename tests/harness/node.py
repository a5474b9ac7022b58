"""The test cluster's one node: containerd + runc, kubelet and kube-proxy, in the node's network
namespace (see `network`), with the settings this sandbox needs (it withholds CAP_SYS_RESOURCE;
cgroups are hybrid v1 without systemd).

Everything a node writes lives under two directories named by its `Layout` (`/run/spindle-nodeN`,
`/var/lib/spindle-nodeN`) and one cgroup parent (`/spindleN`), so `reap()` can find and remove
what a killed run left behind: container shims and the processes in the node's cgroups (by
PID), mounts, the network namespace and the cgroups themselves.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import Popen

import yaml

from tests.harness import binaries, network, pki, processes
from tests.harness.network import Layout

NODE_NAME = "spindle-node"
CNI_BIN = Path("/usr/lib/cni")
CGROUP_ROOT = Path("/sys/fs/cgroup")


def run_dir(layout: Layout) -> Path:
    return Path(f"/run/spindle-node{layout.index}")


def lib_dir(layout: Layout) -> Path:
    return Path(f"/var/lib/spindle-node{layout.index}")


def socket(layout: Layout) -> Path:
    return run_dir(layout) / "containerd.sock"


def cgroup_parent(layout: Layout) -> str:
    return f"spindle{layout.index}"


def containerd_config(layout: Layout, *, pause_image: str) -> str:
    run, lib, sock = run_dir(layout), lib_dir(layout), socket(layout)
    return f"""version = 2
root = "{lib / "containerd"}"
state = "{run / "containerd"}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
oom_score = 0

[grpc]
  address = "{sock}"

[ttrpc]
  address = "{sock}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "{lib / "opt"}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause_image}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "{shutil.which("runc") or "/usr/sbin/runc"}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{run / "cni"}"
"""


def cni_config(layout: Layout) -> dict[str, object]:
    return {
        "cniVersion": "1.0.0",
        "name": "spindle",
        "plugins": [
            {
                "type": "bridge",
                "bridge": layout.bridge,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": layout.node_pod_cidr, "gateway": layout.pod_gateway}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(run_dir(layout) / "ipam"),
                },
            }
        ],
    }


def kubelet_config(layout: Layout, *, ca: Path, serving: pki.Pair) -> dict[str, object]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cgroupDriver": "cgroupfs",
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{socket(layout)}",
        "address": layout.node_ip,
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": layout.node_ip,
        "healthzPort": 10248,
        "tlsCertFile": str(serving.cert),
        "tlsPrivateKeyFile": str(serving.key),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(ca)},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "clusterDomain": "cluster.local",
        "clusterDNS": [layout.dns_service_ip],
        "resolvConf": str(run_dir(layout) / "resolv.conf"),
        # A full disk must fail a test with a message, not evict its pods halfway through.
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        "cgroupRoot": f"/{cgroup_parent(layout)}",
        "cgroupsPerQOS": True,
        "enforceNodeAllocatable": ["pods"],
        "protectKernelDefaults": False,
        "nodeStatusReportFrequency": "10s",
        "syncFrequency": "5s",
        "fileCheckFrequency": "5s",
        "staticPodPath": "",
        "failCgroupV1": False,  # this machine's cgroups are hybrid v1
        "podLogsDir": str(lib_dir(layout) / "pod-logs"),
    }


def proxy_config(layout: Layout, *, kubeconfig: Path) -> dict[str, object]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clusterCIDR": layout.pod_cidr,
        "hostnameOverride": NODE_NAME,
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "conntrack": {"maxPerCore": 0, "min": 0},  # leave the host's conntrack table alone
        "healthzBindAddress": f"{layout.node_ip}:10256",
        "metricsBindAddress": f"{layout.node_ip}:10249",
        "iptables": {"masqueradeAll": False, "syncPeriod": "10s", "minSyncPeriod": "0s"},
    }


@dataclass
class Node:
    """containerd, kubelet and kube-proxy for one cluster run."""

    layout: Layout
    kubelet_kubeconfig: Path
    proxy_kubeconfig: Path
    authority: pki.Authority
    pause_image: str
    logs: Path
    registry: Path
    _processes: list[Popen[bytes]] = field(default_factory=list)

    def start_containerd(self) -> None:
        run = run_dir(self.layout)
        for directory in (run / "cni", run / "ipam", lib_dir(self.layout)):
            directory.mkdir(parents=True, exist_ok=True)
        config = run / "containerd.toml"
        config.write_text(containerd_config(self.layout, pause_image=self.pause_image))
        (run / "cni" / "10-spindle.conflist").write_text(
            json.dumps(cni_config(self.layout), indent=2)
        )
        (run / "resolv.conf").write_text("# pods resolve cluster names through CoreDNS only\n")
        log = self.logs / "containerd.log"
        process = processes.start(
            network.in_node(
                self.layout, ["containerd", "--config", str(config), "--log-level", "warn"]
            ),
            log=log,
            registry=self.registry,
        )
        self._processes.append(process)
        processes.wait_until(
            lambda: ctr(self.layout, "version").returncode == 0,
            timeout=60,
            what="containerd",
            process=process,
            log=log,
        )

    def start_kubelet(self) -> None:
        serving = self.authority.issue(
            "kubelet-serving",
            common=NODE_NAME,
            server=True,
            hosts=(self.layout.node_ip, NODE_NAME),
        )
        for hierarchy in CGROUP_ROOT.iterdir():
            if (hierarchy / "cgroup.procs").exists():
                (hierarchy / cgroup_parent(self.layout)).mkdir(exist_ok=True)
        config = run_dir(self.layout) / "kubelet.yaml"
        config.write_text(
            yaml.safe_dump(kubelet_config(self.layout, ca=self.authority.cert, serving=serving))
        )
        log = self.logs / "kubelet.log"
        process = processes.start(
            network.in_node(
                self.layout,
                [
                    str(binaries.ensure("kubelet")),
                    f"--config={config}",
                    f"--kubeconfig={self.kubelet_kubeconfig}",
                    f"--hostname-override={NODE_NAME}",
                    f"--node-ip={self.layout.node_ip}",
                    f"--root-dir={lib_dir(self.layout) / 'kubelet'}",
                    "--v=1",
                ],
            ),
            log=log,
            registry=self.registry,
        )
        self._processes.append(process)
        processes.wait_until(
            lambda: processes.http_ok(f"http://{self.layout.node_ip}:10248/healthz"),
            timeout=120,
            what="kubelet",
            process=process,
            log=log,
        )

    def start_proxy(self) -> None:
        config = run_dir(self.layout) / "kube-proxy.yaml"
        config.write_text(
            yaml.safe_dump(proxy_config(self.layout, kubeconfig=self.proxy_kubeconfig))
        )
        self._processes.append(
            processes.start(
                network.in_node(
                    self.layout,
                    [str(binaries.ensure("kube-proxy")), f"--config={config}", "--v=1"],
                ),
                log=self.logs / "kube-proxy.log",
                registry=self.registry,
            )
        )

    def stop(self) -> None:
        for process in reversed(self._processes):
            processes.stop(process, grace=3.0)  # reap() removes the rest
        self._processes.clear()


def ctr(layout: Layout, *args: str, stdin: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`ctr` against the node's containerd, in the `k8s.io` namespace the CRI uses."""
    with contextlib.ExitStack() as stack:
        handle = stack.enter_context(stdin.open("rb")) if stdin else None
        return subprocess.run(
            ["ctr", "--address", str(socket(layout)), "--namespace", "k8s.io", *args],
            stdin=handle,
            capture_output=True,
            text=handle is None,
            check=False,
        )


def _node_cgroups(layout: Layout) -> list[Path]:
    """Every cgroup directory of the node, deepest first, across the v1 hierarchies."""
    found: list[Path] = []
    if CGROUP_ROOT.exists():
        for hierarchy in CGROUP_ROOT.iterdir():
            top = hierarchy / cgroup_parent(layout)
            if top.is_dir():
                found.extend(p for p in top.rglob("*") if p.is_dir())
                found.append(top)
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def _pids_in_cgroups(layout: Layout) -> set[int]:
    pids: set[int] = set()
    for group in _node_cgroups(layout):
        with contextlib.suppress(OSError):
            pids.update(int(x) for x in (group / "cgroup.procs").read_text().split())
    return pids


def _shim_pids(layout: Layout) -> set[int]:
    """The node's container shims: from their pid files, and, for shims whose state directory
    is already gone, from the containerd address on their command line."""
    pids: set[int] = set()
    for pid_file in (run_dir(layout) / "containerd").glob(
        "io.containerd.runtime.v2.task/*/*/shim.pid"
    ):
        with contextlib.suppress(OSError, ValueError):
            pids.add(int(pid_file.read_text().strip()))
    address = f"-address\0{socket(layout)}\0".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if address in (entry / "cmdline").read_bytes():
                    pids.add(int(entry.name))
    return pids


def _our_mounts(layout: Layout) -> list[str]:
    roots = (str(run_dir(layout)), str(lib_dir(layout)))
    mounts = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            target = line.split()[4].replace("\\040", " ")
            if target.startswith(roots):
                mounts.append(target)
    return mounts


def reap(layout: Layout) -> list[str]:
    """Remove whatever a previous node left: shims and pod processes (by PID), mounts, cgroups,
    the network namespace and both directories. Returns what it removed, for the log."""
    removed: list[str] = []
    for _ in range(3):
        pids = _shim_pids(layout) | _pids_in_cgroups(layout)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        removed.append(f"{len(pids)} node processes")
        time.sleep(0.5)
    for target in sorted(set(_our_mounts(layout)), key=len, reverse=True):
        subprocess.run(["umount", "-l", target], capture_output=True, check=False)
        removed.append(f"mount {target}")
    for group in _node_cgroups(layout):
        with contextlib.suppress(OSError):
            group.rmdir()
    if network.exists(layout):
        removed.append(f"netns {layout.netns}")
    network.teardown(layout)
    for directory in (run_dir(layout), lib_dir(layout)):
        if directory.exists():
            shutil.rmtree(directory, ignore_errors=True)
            removed.append(str(directory))
    return removed
