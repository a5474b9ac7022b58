"""The reference's student-grades scenario through the Kubernetes API: apply, approve, bootstrap."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spindle.cli.kubectl_plugin import main as kubectl_spindle
from tests.e2e.conftest import Operator, Space, token_kubeconfig, wait_for
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
from tests.unit.test_plan_golden import REFERENCE_DIFF

pytestmark = [pytest.mark.kube, pytest.mark.s3, pytest.mark.spark, pytest.mark.slow]


def sample(operator: Operator, series: str) -> Callable[[], float | None]:
    """The value of one series (its name and labels, as /metrics writes them), or None."""
    line = re.compile(rf"^{re.escape(series)} (\S+)$", re.M)

    def value() -> float | None:
        found = line.search(operator.metrics())
        return None if found is None else float(found.group(1))

    return value


def annotate(space: Space, key: str, value: str) -> None:
    space.kube.kubectl(
        "annotate", "--overwrite", "pipeline", "grades", "-n", space.name, f"{key}={value}"
    )


def viewer(space: Space, target: Path) -> Path:
    """A kubeconfig of a service account bound, in the pipeline's namespace only, to the
    chart's viewer role: get pipelines, pods/portforward, nothing else."""
    space.kube.kubectl("create", "serviceaccount", "viewer", "-n", space.name)
    space.kube.kubectl(
        "create",
        "rolebinding",
        "viewer",
        "--clusterrole=spindle-spindle-viewer",
        f"--serviceaccount={space.name}:viewer",
        "-n",
        space.name,
    )
    return token_kubeconfig(space.kube, space.name, "viewer", target)


def ask(kubeconfig: Path, space: Space, sql: str, capsys: Any, *, as_json: bool = True) -> Any:
    """`kubectl spindle query grades SQL [--json]` as the viewer: the output, parsed."""
    capsys.readouterr()
    flags = ["--json"] if as_json else []
    code = kubectl_spindle(
        ["--kubeconfig", str(kubeconfig), "query", "grades", sql, "-n", space.name, *flags]
    )
    out = capsys.readouterr().out
    assert code == 0 or as_json, out
    return json.loads(out) if as_json else out


def test_grades_scenario_through_the_api(
    space: Space, operator: Operator, spark: Any, tmp_path: Path, capsys: Any
) -> None:
    # 1. v1: Running, data ingested, results right.
    ingest_grades(space)
    space.apply(grades("v1", space))
    status = space.wait_phase(
        "grades", "Running", lastCheckpoint=lambda c: bool(c) and c["tableRows"] == 10
    )
    assert status["driverPod"]["name"] == "grades-g1-driver"
    assert status["conditions"][0]["reason"] == "Running"
    assert query(spark, space, ENRICHED) == V1_ENRICHED
    [driver] = space.pods()
    spec = driver["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["containers"][0]["command"][:4] == ["spindle", "driver", "--mode", "run"]
    assert driver["metadata"]["ownerReferences"][0]["kind"] == "Pipeline"
    maps = space.kube.kubectl(  # its JVM maps Spark's classes from the image's class archive
        "exec", "grades-g1-driver", "-n", space.name, "--", "sh", "-c",
        "grep -h 'classes/spark-.*jsa' /proc/[0-9]*/maps; true",
    )  # fmt: skip
    assert "/opt/spindle/cache/classes/spark-" in maps, maps

    # 2. v2 while running: the driver stops at a checkpoint, then AwaitingApproval with the diff.
    space.apply(grades("v2", space))
    status = space.wait_phase("grades", "AwaitingApproval")
    change = status["pendingChange"]["id"]
    assert change == "b77cf0f27757"
    assert status["pendingChange"]["diff"] == REFERENCE_DIFF
    estimate = status["pendingChange"]["estimate"]  # from the Delta logs on S3, no Spark job
    assert estimate["storedRelationsRead"] == ["grades", "students"]
    assert (estimate["inputRows"], estimate["connectorRows"]) == (10, 0)
    listing = space.kube.kubectl("get", "spl", "-n", space.name)
    assert "AwaitingApproval" in listing and change in listing, listing
    assert not [p for p in space.pods() if p["status"].get("phase") in ("Pending", "Running")]
    checkpoint_before = store(space).latest().id
    as_viewer = viewer(space, tmp_path / "viewer.kubeconfig")
    not_running = ask(as_viewer, space, ENRICHED, capsys)
    assert not_running["error_code"] == "PipelineNotRunning"
    assert "grades is AwaitingApproval, not Running" in not_running["message"]
    grades_series = f'{{name="grades",namespace="{space.name}"}}'
    pending = sample(operator, "spindle_pending_changes_age_seconds" + grades_series)
    assert wait_for("the pending change's age on /metrics", pending) > 0

    # 3. A wrong id: an Event naming the pending id, and no pod.
    space.kube.kubectl(
        "annotate", "pipeline", "grades", "-n", space.name, "spindle.dev/approve=0123456789ab"
    )
    [event] = wait_for("an ApprovalIgnored event", lambda: space.events("ApprovalIgnored"))
    assert change in event["message"] and "0123456789ab" in event["message"]
    assert space.status("grades")["phase"] == "AwaitingApproval"
    assert not [p for p in space.pods() if p["status"].get("phase") in ("Pending", "Running")]
    assert store(space).latest().id == checkpoint_before

    # 3b. A data-diff preview: `kubectl spindle preview` annotates spindle.dev/preview, the
    # operator's preview pod evaluates in scratch space; counts in the status, nothing committed.
    previewed = json.loads(space.plugin("preview", "grades", "--json"))
    assert {n: (v["added"], v["removed"], v["changed"]) for n, v in previewed["views"].items()} == {
        "avg_grade": (0, 0, 4),
        "avg_grade_enriched": (4, 4, 0),
        "avg_grade_all_courses": (2, 0, 0),
    }
    status = space.status("grades")
    assert status["phase"] == "AwaitingApproval" and status["pendingChange"]["id"] == change
    assert status["pendingChange"]["preview"] == previewed
    assert status["conditions"][1]["reason"] == "PreviewReady"
    assert "driverPod" not in status  # the preview pod is not the pipeline's driver
    assert store(space).latest().id == checkpoint_before
    report = store(space).latest_preview()
    assert report is not None and report.request == previewed["request"]
    assert report.views[0].changed_samples[0].after["class_avg"] == "96.00"

    # 4. The right id: a bootstrap driver, Bootstrapping, then Running with the new results.
    annotate(space, "spindle.dev/approve", change)
    wait_for("Bootstrapping", lambda: space.status("grades").get("phase") == "Bootstrapping")
    status = space.wait_phase(
        "grades", "Running", lastBootstrap=lambda b: bool(b) and b["changeId"] == change
    )
    assert status["lastBootstrap"]["inputRecordsRead"] == 0
    assert "pendingChange" not in status
    assert status["driverPod"]["name"] == f"grades-{change}-driver"
    assert query(spark, space, ENRICHED) == V2_ENRICHED
    assert query(spark, space, ALL_COURSES) == V2_ALL_COURSES
    # The same queries through the running driver, with the viewer's RBAC only.
    enriched = [tuple(row.values()) for row in ask(as_viewer, space, ENRICHED, capsys)]
    assert enriched == V2_ENRICHED
    all_courses = [tuple(row.values()) for row in ask(as_viewer, space, ALL_COURSES, capsys)]
    assert all_courses == V2_ALL_COURSES
    table = ask(as_viewer, space, ALL_COURSES, capsys, as_json=False)
    assert "91.75" in table and "(2 rows)" in table, table
    for refused in ("DROP TABLE grades", "SELECT * FROM grades; DELETE FROM grades"):
        assert ask(as_viewer, space, refused, capsys)["error_code"] == "QueryNotReadOnly"
    # One pod per run: the finished v1 driver was cleaned up, only the bootstrap driver remains.
    assert [p["metadata"]["name"] for p in space.pods()] == [f"grades-{change}-driver"]
    history = store(space).history()
    assert [m.bootstrap.change_id for m in history if m.bootstrap] == [change]
    [booted] = [m.bootstrap for m in history if m.bootstrap]
    assert booted.state_rows_read == estimate["inputRows"]  # the estimate was exact
    assert 'spindle_pipelines{phase="Running"}' in operator.metrics()
    checkpoint_age = sample(operator, "spindle_checkpoint_age_seconds" + grades_series)
    assert wait_for("the checkpoint's age on /metrics", lambda: checkpoint_age() is not None)
    assert pending() is None  # approved: the pending series is gone
    reconciles = sample(operator, 'spindle_reconcile_duration_seconds_count{result="ok"}')
    assert (reconciles() or 0) >= 3
    bootstraps = sample(operator, "spindle_bootstrap_duration_seconds_count")
    assert wait_for("the bootstrap on /metrics", bootstraps) >= 1
    assert space.events("ApprovalIgnored") == [event]  # announced once, not every resync
    annotations = space.get("grades")["metadata"].get("annotations", {})
    assert not [k for k in annotations if "kopf" in k], annotations

    # 5. A restatement through the annotation: reason restate, approved like any change.
    annotate(space, "spindle.dev/restate", "avg_grade_all_courses")
    restating = space.wait_phase("grades", "AwaitingApproval")
    pending = restating["pendingChange"]
    assert pending["reason"] == "restate" and pending["id"] != change
    assert pending["estimate"]["viewsToEvaluate"] == ["avg_grade_all_courses"]
    assert pending["estimate"]["throughput"]["from"] == "bootstrap"
    annotate(space, "spindle.dev/approve", pending["id"])
    status = space.wait_phase(
        "grades", "Running", lastBootstrap=lambda b: bool(b) and b["changeId"] == pending["id"]
    )
    assert "pendingChange" not in status  # served once, though the annotation stays
    assert query(spark, space, ALL_COURSES) == V2_ALL_COURSES
    print(json.dumps(status, indent=1))
