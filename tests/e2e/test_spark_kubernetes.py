"""Spark on Kubernetes for real: the grades scenario with `spark.mode: kubernetes`, executors as
pods owned by the driver, tasks on both of them, an executor deleted in the middle of a bootstrap
(Spark replaces it, the numbers hold), and a driver killed for memory with nothing lost."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.conftest import Operator, Space, wait_for
from tests.e2e.pipelines import (
    ALL_COURSES,
    ENRICHED,
    V1_ENRICHED,
    V2_ALL_COURSES,
    V2_ENRICHED,
    grades,
    ingest_grades,
    query,
    store,
)

pytestmark = [pytest.mark.kube, pytest.mark.s3, pytest.mark.spark, pytest.mark.slow]
KUBERNETES = {
    "mode": "kubernetes",
    "executorInstances": 2,
    "executor": {"cpu": "250m", "memory": "512Mi"},
    "driver": {"memory": "1536Mi"},
}


def executors(space: Space, driver: str) -> list[dict[str, Any]]:
    return [
        p
        for p in space.pods()
        if p["metadata"].get("labels", {}).get("spark-role") == "executor"
        and any(o["name"] == driver for o in p["metadata"].get("ownerReferences") or [])
    ]


def running_executors(space: Space, driver: str, count: int) -> list[dict[str, Any]]:
    def ready() -> list[dict[str, Any]] | None:
        pods = [p for p in executors(space, driver) if p["status"].get("phase") == "Running"]
        return pods if len(pods) >= count else None

    return list(wait_for(f"{count} running executors of {driver}", ready, timeout=300))


def test_grades_on_executor_pods(space: Space, operator: Operator, spark: Any) -> None:
    ingest_grades(space)
    space.apply(grades("v1", space, spark=KUBERNETES))
    status = space.wait_phase(
        "grades",
        "Running",
        lastCheckpoint=lambda c: bool(c) and c["tableRows"] == 10,
        timeout=420,
    )
    driver = status["driverPod"]["name"]
    assert driver == "grades-g1-driver"
    pods = running_executors(space, driver, 2)
    assert len(pods) == 2
    for pod in pods:
        [owner] = pod["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"]) == ("Pod", driver)
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True  # restricted namespace
        logs = space.kube.kubectl("logs", pod["metadata"]["name"], "-n", space.name)
        assert "Running task" in logs, f"no task ran on {pod['metadata']['name']}"
    limit = space.kube.kubectl(
        "exec", driver, "-n", space.name, "--", "cat", "/sys/fs/cgroup/memory/memory.limit_in_bytes"
    )
    assert int(limit) == 1536 * 1024 * 1024
    assert query(spark, space, ENRICHED) == V1_ENRICHED

    space.apply(grades("v2", space, spark=KUBERNETES))
    change = space.wait_phase("grades", "AwaitingApproval")["pendingChange"]["id"]
    assert change == "b77cf0f27757"
    wait_for("the v1 driver's executors to go", lambda: not executors(space, driver), timeout=120)
    space.kube.kubectl(
        "annotate", "pipeline", "grades", "-n", space.name, f"spindle.dev/approve={change}"
    )
    bootstrap = f"grades-{change}-driver"
    wait_for("Bootstrapping", lambda: space.status("grades").get("phase") == "Bootstrapping")
    [victim, *_] = running_executors(space, bootstrap, 2)
    space.kube.kubectl(
        "delete", "pod", victim["metadata"]["name"], "-n", space.name, "--wait=false"
    )
    status = space.wait_phase(
        "grades",
        "Running",
        lastBootstrap=lambda b: bool(b) and b["changeId"] == change,
        timeout=420,
    )
    assert status["lastBootstrap"]["inputRecordsRead"] == 0
    replaced = running_executors(space, bootstrap, 2)
    assert victim["metadata"]["name"] not in {p["metadata"]["name"] for p in replaced}
    assert query(spark, space, ENRICHED) == V2_ENRICHED
    assert query(spark, space, ALL_COURSES) == V2_ALL_COURSES
    space.kube.kubectl("delete", "pipeline", "grades", "-n", space.name, "--wait=true")
    wait_for("the executors to go with their driver", lambda: not space.pods(), timeout=120)


def test_a_driver_killed_for_memory_says_so_and_loses_nothing(
    space: Space, operator: Operator, spark: Any
) -> None:
    ingest_grades(space)
    enough = {"driver": {"memory": "1536Mi"}}
    space.apply(grades("v1", space, spark=enough))
    space.wait_phase("grades", "Running", lastCheckpoint=lambda c: bool(c) and c["tableRows"] == 10)
    before = store(space).latest()
    assert before is not None

    # New spark settings roll the driver: a JVM that touches 1 GiB at start-up in a 400 MiB
    # container, which the kernel kills.
    hungry = {
        "driver": {"memory": "400Mi"},
        "conf": {"spark.driver.extraJavaOptions": "-Xms1g -XX:+AlwaysPreTouch"},
    }
    space.apply(grades("v1", space, spark=hungry))
    failed = space.wait_phase("grades", "Failed", timeout=300)
    condition = failed["conditions"][0]
    assert condition["reason"] == "OOMKilled", json.dumps(failed, indent=1)
    assert "400Mi" in condition["message"] and "spec.spark.driver.memory" in condition["message"]
    assert failed["driverPod"]["name"] == "grades-g2-driver"
    after = store(space).latest()
    assert after is not None and [m.sequence for m in store(space).history()][-1] == 0
    assert after.sequence >= before.sequence  # the stopped driver's checkpoint, complete

    space.apply(grades("v1", space, spark=enough))
    space.wait_phase("grades", "Running")
    assert query(spark, space, ENRICHED) == V1_ENRICHED  # every input row, each once
    assert operator.healthy()
