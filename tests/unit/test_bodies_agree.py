"""The operator and the local CLI record the same status for the same pipeline, field by field
(transition times aside): `spindle local status --json` is what the operator writes to
`.status`, so one parser reads both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from spindle.api.status import PipelineStatus
from spindle.cli.main import main
from spindle.k8s.pods import DriverSettings
from spindle.k8s.reconcile import Reconciler, Settings
from tests.fake_cluster import FakeCluster
from tests.unit.test_lifecycle import V2
from tests.unit.test_operator_body import seeded


def without_times(status: dict[str, Any]) -> dict[str, Any]:
    for condition in status.get("conditions", []):
        condition.pop("lastTransitionTime")
    return status


def operator_status(spec: dict[str, Any]) -> dict[str, Any]:
    cluster = FakeCluster()
    cluster.apply("grades", spec)
    reconciler = Reconciler(
        cluster=cluster,  # type: ignore[arg-type]
        settings=Settings(driver=DriverSettings(image="spindle:test"), shared_files=True),
    )
    reconciler.reconcile("default", "grades")
    return without_times(cluster.status("grades"))


def local_status(spec: dict[str, Any], home: Path, capsys: pytest.CaptureFixture[str]) -> Any:
    manifest = home.parent / "pipeline.yaml"
    document = {
        "apiVersion": "spindle.dev/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": "grades"},
        "spec": spec,
    }
    manifest.write_text(yaml.safe_dump(document))
    applied = main(["local", "apply", "-f", str(manifest), "--home", str(home)])
    capsys.readouterr()
    assert main(["local", "status", "grades", "--json", "--home", str(home)]) == 0
    status = json.loads(capsys.readouterr().out)
    assert applied == (1 if status["phase"] == "Failed" else 0)  # a failed apply fails a script
    return status


@pytest.mark.parametrize(
    ("extra", "phase"),
    [({}, "AwaitingApproval"), ({"runtimeVersion": "v9"}, "Failed")],
    ids=["awaiting-approval", "invalid-spec"],
)
def test_local_status_json_equals_the_operator_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: dict[str, Any], phase: str
) -> None:
    storage = tmp_path / "storage"
    seeded(storage)
    spec = {"sql": V2, "storage": {"uri": storage.as_uri()}, **extra}
    operator = operator_status(spec)
    local = local_status(spec, tmp_path / "home", capsys)
    PipelineStatus.model_validate(local)  # the operator's own model reads it
    assert operator["phase"] == phase
    assert without_times(local) == operator


def test_a_restatement_gives_the_same_status_locally_and_in_the_operator(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from spindle.local.home import LocalPipeline
    from tests.fake_cluster import FakeCluster as Cluster
    from tests.unit.test_lifecycle import V1

    storage = tmp_path / "storage"
    seeded(storage)
    spec = {"sql": V1, "storage": {"uri": storage.as_uri()}}
    cluster = Cluster()
    cluster.apply("grades", spec)
    cluster.annotate("grades", "spindle.dev/restate", "avg_grade")
    reconciler = Reconciler(
        cluster=cluster,  # type: ignore[arg-type]
        settings=Settings(driver=DriverSettings(image="spindle:test"), shared_files=True),
    )
    reconciler.reconcile("default", "grades")
    operator = without_times(cluster.status("grades"))
    home = tmp_path / "home"
    local_status(spec, home, capsys)
    LocalPipeline(home, "grades").request_restate("avg_grade")
    assert main(["local", "status", "grades", "--json", "--home", str(home)]) == 0
    local = without_times(json.loads(capsys.readouterr().out))
    assert operator["pendingChange"]["reason"] == "restate"
    assert operator["pendingChange"]["estimate"]["viewsToEvaluate"] == [
        "avg_grade",
        "avg_grade_enriched",
    ]
    assert local == operator
