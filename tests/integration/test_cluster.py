"""The test cluster is a real one: kubelet on containerd + runc, kube-proxy, CoreDNS, bridge CNI,
memory limits enforced by cgroups, and a network from which nothing leaves the machine. Also:
a run killed with SIGKILL leaves nothing that stops the next one from starting."""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, Kube
from tests.waiting import wait_for

pytestmark = [pytest.mark.kube]
IMAGE = "ghcr.io/spindle-dev/spindle-operator:0.1.0"  # has bash and python3; runs as 10001


def pod(name: str, command: list[str], **container: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 10,
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "main",
                    "image": IMAGE,
                    "command": command,
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "capabilities": {"drop": ["ALL"]},
                    },
                    **container,
                }
            ],
        },
    }


def create(kube: Kube, namespace: str, document: dict[str, Any]) -> None:
    kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(document))


def get_pod(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    return dict(json.loads(kube.kubectl("get", "pod", name, "-n", namespace, "-o", "json")))


def finished(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    return dict(
        wait_for(
            f"pod {name} to finish",
            lambda: (
                (p := get_pod(kube, namespace, name))["status"].get("phase")
                in ("Succeeded", "Failed")
                and p
            ),
        )
    )


def running(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    return dict(
        wait_for(
            f"pod {name} to be ready",
            lambda: (
                (p := get_pod(kube, namespace, name))["status"].get("phase") == "Running"
                and all(c.get("ready") for c in p["status"].get("containerStatuses", []))
                and p
            ),
        )
    )


def test_the_node_is_real_and_reports_the_pinned_version(kube: Kube) -> None:
    server = json.loads(kube.kubectl("version", "-o", "json"))["serverVersion"]
    assert server["gitVersion"] == "v1.34.4"
    [node] = json.loads(kube.kubectl("get", "nodes", "-o", "json"))["items"]
    info = node["status"]["nodeInfo"]
    assert info["kubeletVersion"] == "v1.34.4"
    assert info["containerRuntimeVersion"].startswith("containerd://1.")
    ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert ready["Ready"] == "True"
    assert not node["spec"].get("taints")
    dns = json.loads(
        kube.kubectl("get", "deployment", "coredns", "-n", "kube-system", "-o", "json")
    )
    assert dns["status"].get("readyReplicas") == 1


def test_a_pod_runs_with_its_env_and_secret_and_reports_its_exit_code(kube: Kube) -> None:
    namespace = kube.namespace("pod")
    kube.kubectl("create", "secret", "generic", "s", "-n", namespace, "--from-literal=token=sekret")
    body = pod("exits", ["bash", "-c", 'echo "name=$POD token=$TOKEN uid=$(id -u)"; exit 3'])
    body["spec"]["containers"][0]["env"] = [
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "token"}}},
    ]
    create(kube, namespace, body)
    done = finished(kube, namespace, "exits")
    assert done["status"]["phase"] == "Failed"
    assert done["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3
    address = ipaddress.ip_address(done["status"]["podIP"])
    assert kube.cluster is None or address in ipaddress.ip_network(
        kube.cluster.layout.node_pod_cidr
    )
    assert "name=exits token=sekret uid=10001" in kube.kubectl("logs", "exits", "-n", namespace)


def test_deleting_a_pod_delivers_sigterm(kube: Kube) -> None:
    namespace = kube.namespace("term")
    script = "trap 'echo got-sigterm; exit 0' TERM; echo started; while true; do sleep 0.1; done"
    create(kube, namespace, pod("sleeper", ["bash", "-c", script]))
    running(kube, namespace, "sleeper")
    binary = str(kube.kubectl_bin or "kubectl")
    follow = subprocess.Popen(
        [binary, "--kubeconfig", str(kube.kubeconfig), "logs", "-f", "sleeper", "-n", namespace],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert follow.stdout is not None
        assert follow.stdout.readline().strip() == "started"
        kube.kubectl("delete", "pod", "sleeper", "-n", namespace, "--wait=false")
        assert follow.stdout.readline().strip() == "got-sigterm"
    finally:
        follow.kill()


def test_pods_reach_pods_and_services_by_name_and_exec_works(kube: Kube) -> None:
    namespace = kube.namespace("net")
    server = pod(
        "web",
        ["python3", "-m", "http.server", "8080", "--directory", "/etc"],
        readinessProbe={"tcpSocket": {"port": 8080}, "periodSeconds": 1},
    )
    create(kube, namespace, server)
    create(
        kube,
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
        },
    )
    web_ip = running(kube, namespace, "web")["status"]["podIP"]
    # a new Service answers once kube-proxy has programmed it (until then its address hits the
    # node's `unreachable` route): a client retries, as any would
    fetch = (
        "import sys, time, urllib.request\n"
        "for url in sys.argv[1:]:\n"
        "    deadline = time.monotonic() + 120\n"
        "    while True:\n"
        "        try:\n"
        "            body = urllib.request.urlopen(url, timeout=10).read()\n"
        "            break\n"
        "        except OSError:\n"
        "            if time.monotonic() > deadline:\n"
        "                raise\n"
        "            time.sleep(1)\n"
        "    print(url, 'hostname' in body.decode())\n"
    )
    urls = [
        f"http://{web_ip}:8080/",
        f"http://web.{namespace}.svc.cluster.local/",
        "http://web/",
    ]
    create(kube, namespace, pod("client", ["python3", "-c", fetch, *urls]))
    done = finished(kube, namespace, "client")
    logs = kube.kubectl("logs", "client", "-n", namespace)
    assert done["status"]["phase"] == "Succeeded", logs
    assert logs.split() == [word for url in urls for word in (url, "True")]
    assert kube.kubectl("exec", "web", "-n", namespace, "--", "id", "-u").strip() == "10001"


def test_unowned_addresses_fail_at_once_and_no_route_leaves_the_node(kube: Kube) -> None:
    if kube.cluster is None:
        pytest.skip("the node's network is the harness's own")
    layout = kube.cluster.layout
    unused_service = str(ipaddress.ip_network(layout.service_cidr)[222])
    unused_pod = str(ipaddress.ip_network(layout.node_pod_cidr)[222])
    probe = (
        "import socket, sys, time\n"
        "for host in sys.argv[1:]:\n"
        "    start = time.monotonic()\n"
        "    try:\n"
        "        socket.create_connection((host, 80), timeout=20)\n"
        "        result = 'connected'\n"
        "    except OSError as error:\n"
        "        result = type(error).__name__ + ':' + str(error.errno)\n"
        "    print(host, result, round(time.monotonic() - start, 2))\n"
        "try:\n"
        "    socket.getaddrinfo('outside.invalid', 80)\n"
        "    print('dns resolved')\n"
        "except OSError:\n"
        "    print('dns refused')\n"
    )
    namespace = kube.namespace("fence")
    create(kube, namespace, pod("probe", ["python3", "-c", probe, unused_service, unused_pod]))
    finished(kube, namespace, "probe")
    lines = kube.kubectl("logs", "probe", "-n", namespace).splitlines()
    for line, host in zip(lines, (unused_service, unused_pod), strict=False):
        target, result, seconds = line.split()
        assert target == host and result != "connected", line
        assert float(seconds) < 5, f"{line}: the connection hung instead of failing at once"
    assert lines[-1] == "dns refused"
    routes = subprocess.run(
        ["ip", "netns", "exec", layout.netns, "ip", "route"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "default" not in routes, routes
    assert f"unreachable {layout.service_cidr}" in routes, routes
    assert f"unreachable {layout.pod_cidr}" in routes, routes


def test_memory_limits_are_enforced_by_the_cgroup(kube: Kube) -> None:
    namespace = kube.namespace("mem")
    limits = {"limits": {"memory": "96Mi", "cpu": "500m"}, "requests": {"memory": "96Mi"}}
    create(kube, namespace, pod("capped", ["sleep", "300"], resources=limits))
    running(kube, namespace, "capped")
    limit = kube.kubectl(
        "exec",
        "capped",
        "-n",
        namespace,
        "--",
        "cat",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    )
    assert int(limit) == 96 * 1024 * 1024
    hog = pod("hog", ["python3", "-c", "x = bytearray(400 * 1024 * 1024); print(len(x))"])
    hog["spec"]["containers"][0]["resources"] = limits
    create(kube, namespace, hog)
    state = finished(kube, namespace, "hog")["status"]["containerStatuses"][0]["state"]
    assert state["terminated"]["reason"] == "OOMKilled", state


def test_a_killed_run_leaves_nothing_that_blocks_the_next(tmp_path: Path, kube: Kube) -> None:
    """A second cluster (its own names and ranges) is started by a process that is then killed
    with SIGKILL, like an interrupted `make test`; starting it again must clean up and work,
    and stopping it must leave no process, namespace, mount or cgroup behind."""
    if kube.cluster is None:
        pytest.skip("the harness's own cluster only")
    from tests.harness import cluster, node
    from tests.harness.network import Layout

    layout = Layout(kube.cluster.layout.index + 1)
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path\n"
            "from tests.harness import cluster\n"
            "from tests.harness.network import Layout\n"
            "c = cluster.start(Path(sys.argv[1]), layout=Layout(int(sys.argv[3])), minimal=True)\n"
            "c.kubectl('run', 'left', '--image', sys.argv[2], '--restart=Never', '--command',"
            " '--', 'sleep', '600')\n"
            "c.kubectl('wait', '--for=condition=Ready', 'pod/left', '--timeout=180s')\n"
            "print('ready', flush=True)\n"
            "time.sleep(600)\n",
            str(tmp_path / "first"),
            IMAGE,
            str(layout.index),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    leftovers = [p for p in cluster.registry(layout).glob("*")]
    assert leftovers, "the killed run should have left registered processes behind"

    second = cluster.start(tmp_path / "second", layout=layout, minimal=True)
    try:
        assert any("cluster processes" in r for r in second.reaped), second.reaped
        assert any(r.startswith("netns") for r in second.reaped), second.reaped
        assert any("node processes" in r for r in second.reaped), second.reaped  # pod "left"
        second.kubectl(
            "run", "again", "--image", IMAGE, "--restart=Never", "--command", "--", "true"
        )
        wait_for(
            "the new cluster to run a pod",
            lambda: (
                "Succeeded"
                in second.kubectl("get", "pod", "again", "-o", "jsonpath={.status.phase}")
            ),
        )
    finally:
        second.stop()
    assert not layout.netns_path.exists()
    assert not list(cluster.registry(layout).glob("*"))
    assert not node.run_dir(layout).exists() and not node.lib_dir(layout).exists()
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(node.lib_dir(layout)) not in mounts and str(node.run_dir(layout)) not in mounts
    assert not list(Path("/sys/fs/cgroup").glob(f"*/{node.cgroup_parent(layout)}"))
