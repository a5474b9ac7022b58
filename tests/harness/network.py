"""The test node's network: a network namespace of its own, so no packet can leave the machine.

```
 host netns                         node netns "spindle-n0" (no default route)
 ───────────                        ─────────────────────────────────────────────
 kube-apiserver, etcd, S3           containerd, kubelet, kube-proxy
 spx0h 10.243.0.1/30     ◄─veth─►   spx0n 10.243.0.2/30     (the node's InternalIP)
 routes: 10.244.0.0/16, 10.96.0.0/24 spindle0 10.244.0.1/24  (bridge CNI, pods' gateway)
         via 10.243.0.2             each pod: a network namespace made by CNI, on spindle0
                                    unreachable 10.244.0.0/16, unreachable 10.96.0.0/24
```

The node namespace has no default route and no interface but the veth and the pods' bridge:
a packet for anything that is not this machine, a pod or a Service fails at once with
"network unreachable" instead of leaving. Addresses in the pod and service ranges that nothing
owns hit `unreachable` routes (a blackhole that answers, so a connection fails immediately
rather than hanging). The host routes only the pod and service ranges into the node; its own
routes, sysctls and iptables are not touched, and everything here disappears with the node
namespace (`teardown`).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Layout:
    """Names and address ranges of one test node. Instance 0 is the session's cluster; another
    index gives a second, disjoint one (the restart test runs one beside the session's)."""

    index: int = 0

    @property
    def netns(self) -> str:
        return f"spindle-n{self.index}"

    @property
    def netns_path(self) -> Path:
        return Path("/var/run/netns") / self.netns

    @property
    def host_link(self) -> str:
        return f"spx{self.index}h"

    @property
    def node_link(self) -> str:
        return f"spx{self.index}n"

    @property
    def host_ip(self) -> str:
        return f"10.243.{self.index}.1"

    @property
    def node_ip(self) -> str:
        return f"10.243.{self.index}.2"

    @property
    def pod_cidr(self) -> str:
        return f"10.{244 + self.index}.0.0/16"

    @property
    def node_pod_cidr(self) -> str:
        return f"10.{244 + self.index}.0.0/24"

    @property
    def pod_gateway(self) -> str:
        return f"10.{244 + self.index}.0.1"

    @property
    def service_cidr(self) -> str:
        return f"10.{96 + self.index}.0.0/24"

    @property
    def api_service_ip(self) -> str:
        return f"10.{96 + self.index}.0.1"

    @property
    def dns_service_ip(self) -> str:
        return f"10.{96 + self.index}.0.10"

    @property
    def bridge(self) -> str:
        return f"spindle{self.index}"


def _ip(
    layout: Layout, *args: str, netns: bool = False, check: bool = True
) -> subprocess.CompletedProcess[str]:
    prefix = ["ip", "netns", "exec", layout.netns] if netns else []
    return subprocess.run([*prefix, "ip", *args], capture_output=True, text=True, check=check)


def exists(layout: Layout) -> bool:
    return layout.netns_path.exists()


def setup(layout: Layout) -> None:
    """Create the node namespace and its link to the host (after a `teardown`)."""
    _ip(layout, "netns", "add", layout.netns)
    _ip(layout, "link", "add", layout.host_link, "type", "veth", "peer", "name", layout.node_link)
    _ip(layout, "link", "set", layout.node_link, "netns", layout.netns)
    _ip(layout, "addr", "add", f"{layout.host_ip}/30", "dev", layout.host_link)
    _ip(layout, "link", "set", layout.host_link, "up")
    _ip(layout, "addr", "add", f"{layout.node_ip}/30", "dev", layout.node_link, netns=True)
    _ip(layout, "link", "set", layout.node_link, "up", netns=True)
    _ip(layout, "link", "set", "lo", "up", netns=True)
    for cidr in (layout.pod_cidr, layout.service_cidr):
        _ip(layout, "route", "add", "unreachable", cidr, netns=True)
        _ip(layout, "route", "add", cidr, "via", layout.node_ip, "dev", layout.host_link)
    # Inside the node only: forwarding for Service DNAT, bridged pod traffic through iptables.
    for key, value in (
        ("net.ipv4.ip_forward", "1"),
        ("net.bridge.bridge-nf-call-iptables", "1"),
    ):
        subprocess.run(
            ["ip", "netns", "exec", layout.netns, "sysctl", "-qw", f"{key}={value}"],
            capture_output=True,
            check=False,
        )


def teardown(layout: Layout) -> None:
    """Remove the node namespace (and with it the veth pair, the bridge, kube-proxy's iptables
    rules and the node's routes) and the host routes into it. Safe to call at any time."""
    for cidr in (layout.pod_cidr, layout.service_cidr):
        _ip(layout, "route", "del", cidr, "via", layout.node_ip, check=False)
    _ip(layout, "link", "del", layout.host_link, check=False)
    if exists(layout):
        _ip(layout, "netns", "del", layout.netns, check=False)


def in_node(layout: Layout, args: list[str]) -> list[str]:
    """A command line that runs `args` in the node's network namespace, and only that: the
    mount namespace stays the host's, so kubelet, containerd and runc see the same mounts."""
    return ["nsenter", f"--net={layout.netns_path}", "--", *args]
