"""Reviewing a change on real Spark and storage (a local directory and the S3 server): the
estimate's rows equal what the bootstrap then reads, silent bootstraps leave outputs alone, and
a restatement recomputes the named view once, through the same approval; and the data-diff
preview of grades v2 (`check_preview`, called from the grades flow in test_grades.py)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from spindle.checkpoint.file_store import FileStore
from spindle.checkpoint.store import CheckpointStore
from spindle.cli import served
from spindle.local.home import LocalPipeline
from spindle.runtime import storage as delta
from tests.integration.test_bootstrap_scope import (
    checksums,
    program,
    storage,  # noqa: F401 (the fixture: file and s3)
    write_rows,
)
from tests.integration.test_grades import Cli


def manifest(tmp_path: Path, sql: str, store: dict[str, str] | None, **spec: Any) -> str:
    body: dict[str, Any] = {"sql": sql, **spec}
    if store:
        body["storage"] = store
    path = tmp_path / "pipeline.yaml"
    document = {
        "apiVersion": "spindle.dev/v1alpha1",
        "kind": "Pipeline",
        "metadata": {"name": "scope"},
        "spec": body,
    }
    path.write_text(yaml.safe_dump(document))
    return str(path)


def counted(spark: Any, root: str, record: Any) -> int:
    """Rows of a stored relation at its checkpointed version, counted by Spark."""
    uri = delta.spark_uri(delta.join(root, record.path))
    return int(spark.read.format("delta").option("versionAsOf", record.version).load(uri).count())


def test_estimate_equals_what_the_bootstrap_reads_and_silent_leaves_outputs_alone(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    storage: dict[str, str] | None,  # noqa: F811
    spark: Any,
) -> None:
    cli = Cli(tmp_path / "home", capsys)
    write_rows(tmp_path / "in_a", "1.json", [{"id": 1, "v": 5}, {"id": 2, "v": -1}])
    write_rows(tmp_path / "in_b", "1.json", [{"id": 1, "w": 10}, {"id": 2, "w": 20}])
    sql = program(tmp_path)
    cli("local", "apply", "-f", manifest(tmp_path, sql, storage))
    cli("local", "run", "scope", "--until-idle")
    write_rows(tmp_path / "in_a", "2.json", [{"id": 3, "v": 7}, {"id": 4, "v": 1}])
    cli("local", "run", "scope", "--until-idle")  # a has several Delta versions now
    pipeline = LocalPipeline(tmp_path / "home", "scope")
    store = pipeline.store()
    before = store.latest()
    assert before is not None and before.throughput["step"].rows > 0
    va_files = checksums(tmp_path / "out_va")

    changed = sql.replace("where v > 0", "where v > 1")
    silent = {"outputs": {"onBootstrap": "silent"}}
    status = cli.json("local", "apply", "-f", manifest(tmp_path, changed, storage, **silent))
    estimate = status["pendingChange"]["estimate"]
    assert estimate["viewsToEvaluate"] == ["va"]
    assert estimate["storedRelationsRead"] == ["a"]
    assert estimate["inputRows"] == counted(spark, store.uri, before.state["a"]) == 4
    assert estimate["inputBytes"] > 0 and estimate["sizesUnknown"] == []
    assert estimate["connectorRows"] == 0
    assert estimate["outputs"] == ["va.out"] and estimate["outputsOnBootstrap"] == "silent"
    assert estimate["throughput"]["from"] == "step" and estimate["duration"] != "unknown"
    printed = cli("local", "status", "scope")
    assert f"Estimate: {estimate['headline']}" in printed
    assert "outputs left alone (silent): va.out" in printed

    cli("local", "approve", "scope", status["pendingChange"]["id"])
    cli("local", "run", "scope", "--until-idle")
    booted = next(m for m in store.history() if m.bootstrap is not None)
    assert booted.bootstrap is not None and booted.bootstrap.views_evaluated == ["va"]
    assert booted.bootstrap.state_rows_read == estimate["inputRows"]
    assert booted.throughput["bootstrap"].rows == estimate["inputRows"]
    assert checksums(tmp_path / "out_va") == va_files  # silent: nothing written to the output
    assert cli.json("query", "scope", "SELECT id FROM va ORDER BY id") == [{"id": 1}, {"id": 3}]

    # a restatement of vb: its own change id, the same estimate, approved like any change
    status = cli.json("local", "restate", "scope", "vb")
    pending = status["pendingChange"]
    assert pending["reason"] == "restate"
    assert pending["changes"] == {
        "vb": {"kind": "view", "status": "modified", "reasons": ["restate"], "category": "breaking"}
    }
    latest = store.latest()
    assert latest is not None
    assert pending["estimate"]["storedRelationsRead"] == ["b"]
    assert pending["estimate"]["inputRows"] == counted(spark, store.uri, latest.state["b"]) == 2
    assert pending["estimate"]["throughput"]["from"] == "bootstrap"
    cli("local", "restate", "scope", "nope", expect=1)
    assert cli.json("local", "status", "scope")["pendingChange"]["id"] == pending["id"]
    cli("local", "approve", "scope", pending["id"])
    cli("local", "run", "scope", "--until-idle")
    restated = next(m for m in store.history() if m.bootstrap is not None)
    assert restated.bootstrap is not None and restated.bootstrap.change_id == pending["id"]
    assert restated.bootstrap.views_evaluated == ["vb"]
    assert restated.bootstrap.state_rows_read == 2
    assert restated.state["va"] == booted.state["va"]  # untouched
    after = cli.json("local", "status", "scope")
    assert "pendingChange" not in after  # served once: not asked again
    assert cli.json("query", "scope", "SELECT n, total FROM vb") == [{"n": 2, "total": 30}]


def check_preview(cli: Cli, store: CheckpointStore, pending: dict[str, Any]) -> dict[str, Any]:
    """Grades v2 awaiting approval (called from the grades flow in test_grades.py, on file and
    S3 storage): a failed preview changes nothing; a preview reports the real rows added,
    removed and changed, commits nothing and leaves no scratch state. Returns the report."""
    committed = store.latest()
    assert committed is not None

    # a preview that fails (here its scratch space holds a corrupt Delta log) changes nothing
    corrupt = f"scratch/preview-{pending['id']}/views/avg_grade@2/_delta_log/{0:020d}.json"
    store.objects.write(corrupt, b"not a delta log")
    cli("local", "preview", "grades", expect=1)
    # one its served client stopped (Ctrl-C, or gone) keeps no report: a cancelled job's
    # error was kept as PreviewFailed, saying approving would fail
    kept = store.objects.read(f"previews/{pending['id']}.json")
    stopped = threading.Event()
    stopped.set()
    token = served.STOP.set(stopped)
    try:
        cli("local", "preview", "grades", expect=130)
    finally:
        served.STOP.reset(token)
    assert store.objects.read(f"previews/{pending['id']}.json") == kept
    failed = cli.json("local", "status", "grades")
    assert failed["pendingChange"] == pending
    [condition] = [c for c in failed["conditions"] if c["type"] == "Previewed"]
    assert (condition["status"], condition["reason"]) == ("False", "PreviewFailed")
    assert f"preview of change {pending['id']} failed" in condition["message"]
    report = cli.json("local", "preview", "grades")
    assert report["changeId"] == pending["id"] and report["checkpoint"] == committed.id
    views = {v["name"]: v for v in report["views"]}
    assert list(views) == ["avg_grade", "avg_grade_enriched", "avg_grade_all_courses"]
    counts = {
        n: {k: v for k, v in view.items() if k not in ("name", "samples")}
        for n, view in views.items()
    }
    assert counts == {
        "avg_grade": {
            "status": "modified",
            "matchedBy": ["student_id", "class"],
            "rowsBefore": 4,
            "rowsAfter": 4,
            "added": 0,
            "removed": 0,
            "changed": 4,
            "changedColumns": ["class_avg"],
        },
        "avg_grade_enriched": {
            "status": "modified",
            "matchedBy": [],
            "rowsBefore": 4,
            "rowsAfter": 4,
            "added": 4,
            "removed": 4,
            "changed": 0,
            "changedColumns": [],
        },
        "avg_grade_all_courses": {
            "status": "added",
            "matchedBy": ["student_id"],
            "rowsBefore": 0,
            "rowsAfter": 2,
            "added": 2,
            "removed": 0,
            "changed": 0,
            "changedColumns": [],
        },
    }
    assert views["avg_grade"]["samples"]["changed"][0] == {
        "before": {"student_id": 1, "class": "algebra", "class_avg": "97.00"},
        "after": {"student_id": 1, "class": "algebra", "class_avg": "96.00"},
    }
    assert views["avg_grade_all_courses"]["samples"]["added"] == [
        {"student_id": 1, "avg": "92.00"},
        {"student_id": 2, "avg": "91.75"},
    ]
    assert len(views["avg_grade_enriched"]["samples"]["removed"]) == 4

    status = cli.json("local", "status", "grades")
    assert status["pendingChange"]["preview"]["views"] == counts
    assert {k: v for k, v in status["pendingChange"].items() if k != "preview"} == pending
    [condition] = [c for c in status["conditions"] if c["type"] == "Previewed"]
    assert (condition["status"], condition["reason"]) == ("True", "PreviewReady")
    assert store.latest() == committed  # nothing committed
    assert store.objects.scan("scratch/") == []  # scratch space removed
    if isinstance(store.objects, FileStore):  # and its directories, Delta's empty ones too
        assert not (store.objects.root / "scratch").exists()
    assert [i.key for i in store.objects.scan("previews/")] == [f"previews/{pending['id']}.json"]
    assert "avg_grade_all_courses" in cli("local", "status", "grades")
    return report
