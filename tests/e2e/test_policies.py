"""Bootstrap policies, desired states and deletion, through the API with real driver pods."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import Operator, Space, wait_for
from tests.e2e.pipelines import grades, ingest_grades, query, store

pytestmark = [pytest.mark.kube, pytest.mark.s3, pytest.mark.spark, pytest.mark.slow]


def _active(space: Space, name: str) -> list[dict[str, Any]]:
    return [
        p
        for p in space.pods()
        if p["metadata"]["labels"].get("spindle.dev/pipeline") == name
        and p["status"].get("phase") in ("Pending", "Running")
    ]


def test_allow_bootstraps_and_reject_stops_with_the_checkpoint_untouched(
    space: Space, operator: Operator, spark: Any
) -> None:
    for name in ("allowed", "rejected"):
        ingest_grades(space, name)
        space.apply(grades("v1", space, name=name))
    for name in ("allowed", "rejected"):
        space.wait_phase(name, "Running", lastCheckpoint=lambda c: bool(c) and c["tableRows"] == 10)

    space.apply(grades("v2", space, name="allowed", bootstrapPolicy="allow"))
    space.apply(grades("v2", space, name="rejected", bootstrapPolicy="reject"))

    rejected = space.wait_phase("rejected", "Stopped")
    assert rejected["conditions"][0]["reason"] == "BootstrapRejected"
    assert rejected["pendingChange"]["id"] in rejected["conditions"][0]["message"]
    kept = store(space, "rejected").latest()
    assert "2025-12-15" in kept.program.text and kept.bootstrap is None  # still v1

    allowed = space.wait_phase(
        "allowed", "Running", lastBootstrap=lambda b: bool(b) and b["inputRecordsRead"] == 0
    )
    assert "approvedBy" in allowed["lastBootstrap"]
    assert query(spark, space, "SELECT count(*) FROM avg_grade_all_courses", "allowed") == [(2,)]
    # Rejected stays rejected: no pod, the same checkpoint, resync after resync.
    assert _active(space, "rejected") == []
    assert store(space, "rejected").latest().id == kept.id

    # desiredState: Paused restarts the driver paused, Stopped stops it gracefully.
    space.apply(grades("v2", space, name="allowed", bootstrapPolicy="allow", desiredState="Paused"))
    paused = space.wait_phase("allowed", "Paused")
    [driver] = _active(space, "allowed")
    assert driver["metadata"]["labels"]["spindle.dev/ingest"] == "paused"
    assert paused["driverPod"]["name"] == driver["metadata"]["name"]
    space.apply(
        grades("v2", space, name="allowed", bootstrapPolicy="allow", desiredState="Stopped")
    )
    space.wait_phase("allowed", "Stopped")
    wait_for("the driver to stop", lambda: _active(space, "allowed") == [])

    # Deleting pipelines deletes their pods, never their checkpoints (by default).
    space.kube.kubectl("delete", "pipeline", "allowed", "rejected", "-n", space.name)
    wait_for("the pods to go", lambda: space.pods() == [], timeout=60)
    assert store(space, "allowed").latest() is not None
    assert store(space, "rejected").latest().id == kept.id
