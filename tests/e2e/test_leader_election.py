"""Two operator replicas behind a Lease, on the real API server: only the holder reconciles, and
force-deleting the leader pod mid-bootstrap hands the lease to the standby, which finishes the
pipeline with the same driver pod: one driver per run, the approval kept. Prints the takeover
time (kill → the Lease names another holder, and → the new leader's `spindle_leader` is 1).

A forced delete still lets the kubelet send SIGTERM, so the leader usually releases the lease
and the takeover takes about one retry period; the expiry path (a leader that never releases)
is `tests/integration/test_leader_lease.py`'s."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Kube
from tests.e2e.conftest import Operator, Space, restricted
from tests.e2e.pipelines import grades, ingest_grades, store
from tests.e2e.test_helm import CHART, run_helm
from tests.waiting import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.s3, pytest.mark.spark, pytest.mark.slow]
LEASE_SECONDS = 15


def _lease(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    body = kube.kubectl("get", "lease", name, "-n", namespace, "-o", "json", check=False)
    return json.loads(body) if body.lstrip().startswith("{") else None


def _leader_metric(kube: Kube, namespace: str, pod: str) -> float | None:
    path = f"/api/v1/namespaces/{namespace}/pods/{pod}:8080/proxy/metrics"
    text = kube.kubectl("get", "--raw", path, check=False)
    for line in text.splitlines():
        if line.startswith("spindle_leader "):
            return float(line.split()[1])
    return None


def _live(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def _ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_the_standby_takes_over_a_killed_leader_mid_bootstrap(
    helm: Path, kube: Kube, space: Space, operator: Operator, spark: Any
) -> None:
    release = f"le{space.name[-8:]}"
    lease_name = f"{release}-spindle-operator"
    system = kube.namespace("spindle-le")
    restricted(kube, system)
    pair = Operator(kube, namespace=system)
    values = [
        "replicas=2",
        f"watchNamespaces={{{space.name}}}",
        "driver.serviceAccountName=spindle-le-driver",
        "operator.resyncSeconds=3",
        "driver.stopGraceSeconds=90",
        f"leaderElection.leaseDurationSeconds={LEASE_SECONDS}",
    ]
    sets = [part for value in values for part in ("--set", value)]
    run_helm(helm, kube, "install", release, str(CHART), "-n", system, *sets)
    operator.kill()  # the session's operator is down meanwhile: only the pair can reconcile
    try:
        both = wait_for(
            "two ready operator pods",
            lambda: (pods := _live(pair.pods())) and len(pods) == 2 and all(map(_ready, pods)),
            timeout=180,
        )
        assert both
        lease = wait_for(
            "a Lease holder", lambda: (_lease(kube, system, lease_name) or {}).get("spec")
        )
        leader = lease["holderIdentity"].rsplit("_", 1)[0]
        names = {p["metadata"]["name"] for p in _live(pair.pods())}
        [standby] = names - {leader}
        assert wait_for("the leader's metric", lambda: _leader_metric(kube, system, leader)) == 1
        assert _leader_metric(kube, system, standby) == 0
        args = _live(pair.pods())[0]["spec"]["containers"][0]["args"]
        assert "--leader-election" in args and f"--lease-name={lease_name}" in args

        # v1 Running, v2 AwaitingApproval, approved: the bootstrap driver starts.
        ingest_grades(space)
        space.apply(grades("v1", space))
        space.wait_phase(
            "grades", "Running", lastCheckpoint=lambda c: bool(c) and c["tableRows"] == 10
        )
        space.apply(grades("v2", space))
        change = space.wait_phase("grades", "AwaitingApproval")["pendingChange"]["id"]
        driver = f"grades-{change}-driver"
        space.kube.kubectl(
            "annotate", "pipeline", "grades", "-n", space.name, f"spindle.dev/approve={change}"
        )

        def driver_running() -> dict[str, Any] | None:
            pods = [p for p in space.pods() if p["metadata"]["name"] == driver]
            return pods[0] if pods and pods[0]["status"].get("phase") == "Running" else None

        uid = wait_for("the bootstrap driver to run", driver_running, timeout=180)["metadata"][
            "uid"
        ]
        assert space.status("grades")["phase"] == "Bootstrapping"

        # Kill the leader: no grace, no chance to release the lease.
        transitions = int(lease.get("leaseTransitions") or 0)
        kube.kubectl(
            "delete", "pod", leader, "-n", system, "--grace-period=0", "--force", check=False
        )
        killed = time.monotonic()

        def new_holder() -> dict[str, Any] | None:
            spec = (_lease(kube, system, lease_name) or {}).get("spec") or {}
            holder = spec.get("holderIdentity") or ""
            return spec if holder and holder.rsplit("_", 1)[0] != leader else None

        taken = wait_for("another holder of the Lease", new_holder, timeout=120)
        lease_takeover = time.monotonic() - killed
        successor = taken["holderIdentity"].rsplit("_", 1)[0]
        wait_for("the successor to lead", lambda: _leader_metric(kube, system, successor) == 1)
        acting_takeover = time.monotonic() - killed
        print(
            f"\ntakeover: the Lease moved from {leader} to {successor} {lease_takeover:.1f}s "
            f"after the kill; its spindle_leader was 1 after {acting_takeover:.1f}s "
            f"(lease duration {LEASE_SECONDS}s)"
        )
        assert int(taken["leaseTransitions"]) == transitions + 1
        assert successor in {standby} | {p["metadata"]["name"] for p in _live(pair.pods())}

        # The approval is not lost, and the same driver pod finished the bootstrap.
        status = space.wait_phase(
            "grades", "Running", lastBootstrap=lambda b: bool(b) and b["changeId"] == change
        )
        assert status["driverPod"]["name"] == driver
        pods = {p["metadata"]["name"]: p["metadata"]["uid"] for p in space.pods()}
        assert pods == {driver: uid}, pods  # one driver pod, never recreated
        history = store(space).history()
        assert [m.bootstrap.change_id for m in history if m.bootstrap] == [change]
        log = kube.kubectl("logs", successor, "-n", system, "--tail=2000")
        assert "started leading" in log, log[-3000:]
    finally:
        run_helm(helm, kube, "uninstall", release, "-n", system, check=False)
        wait_for("the pair to go", lambda: not pair.pods(), timeout=120)
        operator.start()
