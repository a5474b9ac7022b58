"""GitOps approval: the change id computed offline (`spindle plan`) and committed with the SQL
bootstraps on a single apply; a stale id waits; the kubectl plugin approves; the operator writes
nothing outside status, so a Git tool sees no drift."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import Operator, Space
from tests.e2e.pipelines import grades, ingest_grades, query

pytestmark = [pytest.mark.kube, pytest.mark.s3, pytest.mark.spark, pytest.mark.slow]


def _plan(space: Space, document: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "pipeline.yaml"
    document = {**document, "metadata": {**document["metadata"], "namespace": space.name}}
    path.write_text(yaml.safe_dump(document))
    env = {**os.environ, **space.s3.env()}
    result = subprocess.run(
        [sys.executable, "-m", "spindle.cli.main", "plan", "-f", str(path), "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return dict(json.loads(result.stdout))


def test_committed_approval_bootstraps_and_the_plugin_approves(
    space: Space, operator: Operator, spark: Any, tmp_path: Path
) -> None:
    ingest_grades(space)
    space.apply(grades("v1", space))
    space.wait_phase("grades", "Running", lastCheckpoint=lambda c: bool(c) and c["tableRows"] == 10)

    # The id, offline, from the manifest and the checkpoint; committed with the SQL change.
    v2 = grades("v2", space)
    planned = _plan(space, v2, tmp_path)
    assert planned["needsApproval"] and planned["changeId"] == "b77cf0f27757"
    v2["metadata"]["annotations"] = {"spindle.dev/approve": planned["changeId"]}
    space.apply(v2)
    status = space.wait_phase(
        "grades", "Running", lastBootstrap=lambda b: bool(b) and b["changeId"] == "b77cf0f27757"
    )
    assert query(spark, space, "SELECT count(*) FROM avg_grade_all_courses") == [(2,)]

    # A later SQL change committed with the stale id waits for approval.
    v3 = grades("v2", space)
    v3["spec"]["sql"] = v3["spec"]["sql"].replace("2026-06-10", "2026-06-30")
    v3["metadata"]["annotations"] = {"spindle.dev/approve": "b77cf0f27757"}
    space.apply(v3)
    status = space.wait_phase("grades", "AwaitingApproval")
    pending = status["pendingChange"]["id"]
    assert pending != "b77cf0f27757"
    assert _plan(space, v3, tmp_path)["changeId"] == pending

    # The kubectl plugin shows the diff and approves exactly the pending id.
    assert "avg_grade" in space.plugin("diff", "grades")
    assert "AwaitingApproval" in space.plugin("status", "grades")
    assert f"spindle.dev/approve={pending}" in space.plugin("approve", "grades", "--yes")
    space.wait_phase(
        "grades", "Running", lastBootstrap=lambda b: bool(b) and b["changeId"] == pending
    )

    # No drift: the operator wrote nothing but status.
    live = space.get("grades")
    annotations = set(live["metadata"].get("annotations", {}))
    assert annotations <= {
        "spindle.dev/approve",
        "kubectl.kubernetes.io/last-applied-configuration",
    }, annotations
    assert not live["metadata"].get("finalizers")
    assert not live["metadata"].get("labels")
    assert {k: live["spec"][k] for k in v3["spec"]} == {k: v for k, v in v3["spec"].items()} | {
        "storage": live["spec"]["storage"]
    }
    assert live["spec"]["storage"]["uri"] == v3["spec"]["storage"]["uri"]
