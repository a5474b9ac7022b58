"""The sandbox settings the test node needs (measured on this machine kind, listed in DESIGN.md)
stay in the harness's generated configuration, and each cluster instance keeps to its own names
and address ranges."""

from __future__ import annotations

import ipaddress
import tomllib
from pathlib import Path

from tests.harness import images, node, pki
from tests.harness.network import Layout


def test_containerd_gets_the_settings_this_sandbox_needs() -> None:
    config = tomllib.loads(node.containerd_config(Layout(0), pause_image=images.PAUSE_IMAGE))
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["restrict_oom_score_adj"] is True
    assert cri["sandbox_image"] == images.PAUSE_IMAGE and ":latest" not in images.PAUSE_IMAGE
    runc = cri["containerd"]["runtimes"]["runc"]
    assert runc["options"]["SystemdCgroup"] is False
    assert config["grpc"]["address"].startswith("/run/spindle-node0/")


def test_kubelet_gets_the_settings_this_sandbox_needs(tmp_path: Path) -> None:
    authority = pki.Authority(tmp_path)
    serving = authority.issue("kubelet", common="node", server=True, hosts=("10.243.0.2",))
    config = node.kubelet_config(Layout(0), ca=authority.cert, serving=serving)
    assert config["cgroupDriver"] == "cgroupfs"
    assert config["failSwapOn"] is False
    assert config["clusterDNS"] == ["10.96.0.10"]
    assert str(config["podLogsDir"]).startswith("/var/lib/spindle-node0/")


def test_podman_gets_the_settings_this_sandbox_needs() -> None:
    env = images._podman_env()
    conf = tomllib.loads(Path(env["CONTAINERS_CONF"]).read_text())
    assert conf["engine"]["cgroup_manager"] == "cgroupfs"
    assert conf["engine"]["events_logger"] == "file"
    assert conf["engine"]["runtime"] == "runc"
    assert conf["containers"]["default_ulimits"] == ["nofile=20000:20000", "nproc=20000:20000"]


def test_two_cluster_instances_share_no_name_and_no_address() -> None:
    first, second = Layout(0), Layout(1)
    assert {first.netns, first.bridge, first.host_link} & {
        second.netns,
        second.bridge,
        second.host_link,
    } == set()
    ranges = [
        ipaddress.ip_network(cidr, strict=False)
        for layout in (first, second)
        for cidr in (layout.pod_cidr, layout.service_cidr, f"{layout.host_ip}/30")
    ]
    assert not any(a.overlaps(b) for i, a in enumerate(ranges) for b in ranges[i + 1 :])
    assert node.run_dir(first) != node.run_dir(second)
    assert node.cgroup_parent(first) != node.cgroup_parent(second)


def test_every_image_is_tagged_with_a_version() -> None:
    for reference in (
        images.PAUSE_IMAGE,
        images.COREDNS_IMAGE,
        images.OPERATOR_IMAGE,
        images.SPARK_IMAGE,
    ):
        name, _, tag = reference.rpartition(":")
        assert name and tag and tag != "latest", reference
