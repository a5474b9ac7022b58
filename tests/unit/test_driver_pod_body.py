"""The driver-pod body, up to the point where it would open Spark: it observes its environment
and checkpoint, decides again, and refuses (with the termination message the operator reads)
anything but the start it was created for."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spindle.api import PipelineSpec
from spindle.checkpoint.store import open_store
from spindle.cli.main import main
from spindle.errors import SpindleError
from spindle.lifecycle import decide
from spindle.lifecycle.observation import Observation
from tests.unit.test_lifecycle import V1, V2, checkpoint
from tests.unit.test_operator_body import seeded


def in_pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sql: str) -> Path:
    """The environment the operator gives a driver pod of pipeline default/grades running
    `sql` with storage under tmp_path; returns where its termination message goes."""
    pipeline = {
        "namespace": "default",
        "name": "grades",
        "generation": 2,
        "spec": {"sql": sql, "storage": {"uri": (tmp_path / "storage").as_uri()}},
    }
    monkeypatch.setenv("SPINDLE_PIPELINE", json.dumps(pipeline))
    log = tmp_path / "termination-log"
    monkeypatch.setenv("SPINDLE_TERMINATION_LOG", str(log))
    return log


def driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sql: str, *args: str) -> dict[str, str]:
    """Run `spindle driver ARGS` as the pod would; returns its termination message."""
    log = in_pod(tmp_path, monkeypatch, sql)
    assert main(["driver", *args]) == 1
    message: dict[str, str] = json.loads(log.read_text())
    return message


def test_a_bootstrap_of_a_change_that_moved_is_refused_before_spark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seeded(tmp_path / "storage")
    failure = driver(
        tmp_path, monkeypatch, V2, "--mode", "bootstrap", "--change-id", "0123456789ab"
    )
    change = decide(
        Observation(spec=PipelineSpec(sql=V2), generation=2, checkpoint=checkpoint(V1))
    ).change_id
    assert failure["reason"] == "ChangeMoved" and change in failure["message"]


def test_a_preview_of_a_change_that_moved_reports_it_without_starting_spark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pod a preview request started finds another change pending (the program or the
    checkpoint moved since): it leaves a `ChangeMoved` report for the request and ends, and
    opens no Spark session for a change it will not evaluate."""
    checkpoint_id = seeded(tmp_path / "storage")

    def no_spark(**_: object) -> None:
        raise AssertionError("a Spark session was opened")

    monkeypatch.setattr("spindle.runtime.pod.open_runtime", no_spark)
    in_pod(tmp_path, monkeypatch, V2)
    arguments = ["--change-id", "0123456789ab", "--preview-request", "r-1"]
    assert main(["driver", "--mode", "preview", *arguments]) == 0
    store = open_store((tmp_path / "storage").as_uri(), namespace="default", name="grades")
    report = store.latest_preview()
    assert report is not None and report.error is not None
    assert report.error.reason == "ChangeMoved" and "0123456789ab" in report.error.message
    assert (report.change_id, report.checkpoint, report.request) == (
        "0123456789ab",
        checkpoint_id,
        "r-1",
    )


def test_a_preview_of_a_restatement_evaluates_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given the request (`--restate`), the pod plans the restatement the operator asked it to
    preview, and goes on to evaluate it (it used to report every one as `ChangeMoved`)."""
    seeded(tmp_path / "storage")

    def spark(**_: object) -> None:
        raise SpindleError(reason="SparkOpened", message="the preview went on to evaluate")

    monkeypatch.setattr("spindle.runtime.pod.open_runtime", spark)
    request = "avg_grade@1"
    restating = Observation(
        spec=PipelineSpec(sql=V1), generation=2, checkpoint=checkpoint(V1), restate=request
    )
    change = decide(restating).change_id
    arguments = ["--change-id", change, "--preview-request", change, "--restate", request]
    failure = driver(tmp_path, monkeypatch, V1, "--mode", "preview", *arguments)
    assert failure["reason"] == "SparkOpened"


def test_a_run_of_a_change_awaiting_approval_is_refused_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seeded(tmp_path / "storage")
    failure = driver(tmp_path, monkeypatch, V2, "--mode", "run")
    assert failure["reason"] == "AwaitingApproval"


def test_a_pod_without_its_pipeline_says_it_is_misconfigured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPINDLE_PIPELINE", raising=False)
    log = tmp_path / "termination-log"
    monkeypatch.setenv("SPINDLE_TERMINATION_LOG", str(log))
    assert main(["driver", "--mode", "run"]) == 1
    assert json.loads(log.read_text())["reason"] == "DriverMisconfigured"
