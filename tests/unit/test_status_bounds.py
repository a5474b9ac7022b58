"""A large program's status stays within what the API server stores: each list of the pending
change and of `maintenance` keeps its first 100 entries and counts the rest, `kubectl spindle
diff` says what it does not show, and a status the API server still refuses as too large is
written small, saying why, instead of failing every reconcile."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from spindle.api.status import PipelineStatus
from spindle.k8s import reconcile
from spindle.k8s.reconcile import Reconciler
from spindle.lifecycle import conclude, decide
from spindle.lifecycle.status import STATUS_LIST_LIMIT
from spindle.plan.preview import PreviewReport, ViewPreview
from tests.fake_cluster import FakeCluster
from tests.unit.test_lifecycle import checkpoint, observe
from tests.unit.test_lifecycle import spec as pipeline_spec
from tests.unit.test_operator_body import (  # noqa: F401 (fixtures: cluster, reconciler)
    cluster,
    reconciler,
    reconciler_of,
    seeded,
    spec,
)


def views(count: int, *, column: str = "b") -> str:
    """Table t and `count` views reading it, then view z_own, whose own query the edit
    changes: a table edit modifies every view, a reader wants z_own shown."""
    return (
        "CREATE TABLE t (a INT, b INT) WITH ('materialized' = 'true');\n"
        + "".join(f"CREATE VIEW v_{i:05d} AS SELECT a, b FROM t;\n" for i in range(count))
        + f"CREATE VIEW z_own AS SELECT a, {column} FROM t;\n"
    )


OLD = views(400)
NEW = views(400, column="a AS c").replace("(a INT, b INT)", "(a INT, b INT, d INT)")


def test_a_large_change_keeps_100_entries_of_each_list_and_counts_the_rest() -> None:
    observed = observe(spec=pipeline_spec(NEW), checkpoint=checkpoint(OLD))
    decision = decide(observed)
    status = conclude(decision, observed, driver=None, now="2026-01-01T00:00:00Z").status
    body = status.to_json()
    pending = body["pendingChange"]
    assert len(pending["changes"]) == STATUS_LIST_LIMIT == 100
    assert {"t", "z_own"} <= set(pending["changes"])  # changed themselves: shown first
    assert pending["omitted"] == {
        "changes": 402 - 100,
        "diff.program_diff.modified_views": 401 - 100,
        "estimate.viewsToEvaluate": 401 - 100,
    }
    assert len(pending["diff"]["program_diff"]["modified_views"]) == 100
    assert pending["diff"]["program_diff"]["modified_tables"] == ["t"]
    assert len(body["maintenance"]) == 100 and body["maintenanceOmitted"] == 401 - 100
    assert len(json.dumps(body)) < 30_000  # it was 85 KB, and grows with the program
    # the bound is the status's only: the decision (what `spindle plan` prints) is whole
    assert decision.pending_change is not None and len(decision.pending_change.changes) == 402


def test_kubectl_spindle_diff_says_what_the_status_left_out_and_where_the_whole_change_is(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from spindle.cli.kubectl_plugin import _show

    observed = observe(spec=pipeline_spec(NEW), checkpoint=checkpoint(OLD))
    status = conclude(decide(observed), observed, driver=None, now="t").status
    assert status.pending_change is not None
    _show(status.pending_change.model_dump(mode="json"))
    out = capsys.readouterr().out
    assert "Not shown: 302 of changes, 301 of diff.program_diff.modified_views" in out
    assert "`spindle plan -f pipeline.yaml` shows the whole change" in out


def _previewed(request: str | None = None) -> dict[str, Any]:
    """The status of NEW with a preview of its 401 views, of which only z_own's rows differ
    (the last view)."""
    change = decide(observe(spec=pipeline_spec(NEW), checkpoint=checkpoint(OLD))).change_id
    assert change is not None
    same = {"status": "modified", "matched_by": (), "rows_before": 10, "rows_after": 10}
    views = [
        ViewPreview(name=f"v_{i:05d}", added=0, removed=0, changed=0, **same) for i in range(400)
    ]
    views.append(ViewPreview(name="z_own", added=0, removed=6, changed=3, **same))
    report = PreviewReport(
        change_id=change, checkpoint="c", created_at="t", sample_rows=0, views=tuple(views)
    )
    observed = observe(
        spec=pipeline_spec(NEW),
        checkpoint=checkpoint(OLD),
        preview=replace(report, request=request),
        preview_request=request,
    )
    return conclude(decide(observed), observed, driver=None, now="t").status.to_json()


def test_a_preview_of_many_views_keeps_those_whose_rows_differ() -> None:
    preview = _previewed()["pendingChange"]["preview"]
    assert len(preview["views"]) == 100
    assert preview["views"]["z_own"]["removed"] == 6  # it was cut: 100 views of no difference


def test_kubectl_spindle_preview_says_what_the_status_left_out(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from spindle.cli import kubectl_plugin

    asked: list[str] = []
    monkeypatch.setattr(kubectl_plugin, "_annotate", lambda args, key, value: asked.append(value))
    monkeypatch.setattr(
        kubectl_plugin,
        "_pipeline",
        lambda args: {"status": _previewed(asked[-1] if asked else None)},
    )
    assert kubectl_plugin.main(["preview", "grades"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "z_own" in out
    assert "Not shown: 301 of preview.views (the status keeps 100 of each list)." in out
    change = _previewed()["pendingChange"]["id"]
    assert f"The whole preview report is previews/{change}.json" in out


def test_a_small_status_says_it_keeps_no_list(capsys: pytest.CaptureFixture[str]) -> None:
    """The note said "the status keeps the first 100 of each list" of a status that kept none."""
    from spindle.cli.kubectl_plugin import _show
    from spindle.lifecycle.status import oversized

    status = PipelineStatus.model_validate(_previewed())
    small = oversized(status, detail="refused", previous=None, now="t")
    assert small.pending_change is not None
    _show(small.pending_change.model_dump(mode="json"))
    out = " ".join(capsys.readouterr().out.split())
    assert "Not shown: 402 of changes," in out and "401 of preview.views" in out
    assert "(the status is too large to keep these lists: see its Recorded condition)" in out
    assert "keeps the first 100" not in out


ETCD_TOO_LARGE = json.dumps({"kind": "Status", "message": "etcdserver: request is too large"})


@dataclass
class Etcd(FakeCluster):
    """Refuses a status write whose object is over `limit` bytes as etcd stores it (compact
    JSON, UTF-8), as etcd does (a 500)."""

    limit: int = 1_572_864  # etcd's --max-request-bytes default
    said: list[str] = field(default_factory=list)
    """The messages of the Events posted."""

    def event(self, pipeline: dict[str, Any], *, type: str, reason: str, message: str) -> None:
        self.said.append(message)
        super().event(pipeline, type=type, reason=reason, message=message)

    def write_status(self, pipeline: dict[str, Any], status: dict[str, Any]) -> None:
        stored = json.dumps(
            {**pipeline, "status": status}, ensure_ascii=False, separators=(",", ":")
        )
        if len(stored.encode()) > self.limit:
            self.calls.append(("write_status refused", status["phase"]))
            error = ApiException(status=500, reason="Internal Server Error")
            error.body = ETCD_TOO_LARGE
            raise error
        super().write_status(pipeline, status)


def test_a_status_etcd_refuses_is_written_small_saying_why_and_approving_works(
    tmp_path: Path,
) -> None:
    """The operator raised at every reconcile: no status, no Event, no change id to approve."""
    etcd = Etcd()
    operator = reconciler_of(etcd)
    seeded(tmp_path, OLD)
    pipeline = etcd.apply("grades", spec(tmp_path, NEW))
    etcd.limit = len(json.dumps(pipeline)) + 10_000  # a spec near it: no full status fits
    operator.reconcile("default", "grades")
    assert etcd.take_calls() == [
        ("write_status refused", "AwaitingApproval"),
        ("write_status", "AwaitingApproval"),
        ("event", "Warning", "StatusTooLarge"),
    ]
    small = etcd.status("grades")
    assert small["phase"] == "AwaitingApproval"
    pending = small["pendingChange"]
    assert pending["changes"] == {} and pending["omitted"]["changes"] > 0
    ready, recorded = small["conditions"]
    assert ready["reason"] == "AwaitingApproval" and pending["id"] in ready["message"]
    assert (recorded["type"], recorded["status"]) == ("Recorded", "False")
    assert recorded["reason"] == "StatusTooLarge"
    assert "etcdserver: request is too large" in recorded["message"]
    assert "kubectl apply --server-side" in recorded["message"]

    operator.reconcile("default", "grades")  # the same: said once, written once
    assert etcd.take_calls() == [("write_status refused", "AwaitingApproval")]
    etcd.annotate("grades", "spindle.dev/approve", pending["id"])
    operator.reconcile("default", "grades")
    calls = etcd.take_calls()
    assert ("create_pod", f"grades-{pending['id']}-driver") in calls
    assert etcd.status("grades")["phase"] == "Bootstrapping"


def test_an_object_too_large_for_etcd_gets_the_small_status_without_a_refused_write(
    cluster: FakeCluster,  # noqa: F811
    reconciler: Reconciler,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seeded(tmp_path, OLD)
    pipeline = cluster.apply("grades", spec(tmp_path, NEW))
    monkeypatch.setattr(reconcile, "OBJECT_BYTES_LIMIT", len(json.dumps(pipeline)) + 10_000)
    reconciler.reconcile("default", "grades")
    assert cluster.take_calls() == [
        ("write_status", "AwaitingApproval"),
        ("event", "Warning", "StatusTooLarge"),
    ]
    recorded = cluster.status("grades")["conditions"][-1]
    assert recorded["reason"] == "StatusTooLarge"
    assert "it would be over" in recorded["message"]
    monkeypatch.undo()  # a smaller object (applied server-side, say) gets its whole status
    reconciler.reconcile("default", "grades")
    assert cluster.take_calls() == [("write_status", "AwaitingApproval")]
    status = cluster.status("grades")
    assert [c["type"] for c in status["conditions"]] == ["Ready"]
    assert len(status["pendingChange"]["changes"]) == 100


def test_a_program_with_720_kb_of_cjk_comments_gets_its_whole_status(tmp_path: Path) -> None:
    """Measured with `\\uXXXX` escapes the object was 1.44 MB, over the operator's 1.4 MB
    pre-check: the status kept no list and said StatusTooLarge of an object etcd stores."""
    comment = "-- " + "数据" * 120_000 + "\n"  # 240,000 characters, 720 KB of UTF-8
    etcd = Etcd()
    operator = reconciler_of(etcd)
    seeded(tmp_path, comment + OLD)
    etcd.apply("grades", spec(tmp_path, comment + NEW))
    operator.reconcile("default", "grades")
    assert etcd.take_calls() == [("write_status", "AwaitingApproval")]
    status = etcd.status("grades")
    assert [c["type"] for c in status["conditions"]] == ["Ready"]
    assert len(status["pendingChange"]["changes"]) == 100


def _near_the_limit(tmp_path: Path, etcd: Etcd) -> Reconciler:
    """A Pipeline whose spec leaves no room for even the small status."""
    operator = reconciler_of(etcd)
    seeded(tmp_path, OLD)
    pipeline = etcd.apply("grades", spec(tmp_path, NEW))
    etcd.limit = len(json.dumps(pipeline)) + 500
    return operator


def test_a_status_refused_even_small_is_said_once_not_at_every_reconcile(tmp_path: Path) -> None:
    etcd = Etcd()
    operator = _near_the_limit(tmp_path, etcd)
    calls = []
    for _ in range(3):  # each is retried: no status to show
        with pytest.raises(ApiException):
            operator.reconcile("default", "grades")
        calls += etcd.take_calls()
    events = [c for c in calls if c[0] == "event"]
    assert events == [("event", "Warning", "StatusTooLarge")]
    said = etcd.said[-1]
    assert "refused even the status without the lists" in said
    assert "etcdserver: request is too large" in said and "--server-side" in said


@dataclass
class Flaky(Etcd):
    """Etcd that fails the first write of a small status for another reason (a conflict)."""

    failed: bool = False

    def write_status(self, pipeline: dict[str, Any], status: dict[str, Any]) -> None:
        small = any(c["type"] == "Recorded" for c in status.get("conditions") or [])
        if small and not self.failed:
            self.failed = True
            self.calls.append(("write_status failed", status["phase"]))
            raise ApiException(status=409, reason="Conflict")
        super().write_status(pipeline, status)


def test_a_small_status_that_fails_for_another_reason_is_said_once_it_is_written(
    tmp_path: Path,
) -> None:
    etcd = Flaky()
    operator = reconciler_of(etcd)
    seeded(tmp_path, OLD)
    pipeline = etcd.apply("grades", spec(tmp_path, NEW))
    etcd.limit = len(json.dumps(pipeline)) + 10_000
    with pytest.raises(ApiException):
        operator.reconcile("default", "grades")
    assert etcd.take_calls() == [
        ("write_status refused", "AwaitingApproval"),
        ("write_status failed", "AwaitingApproval"),
    ]
    operator.reconcile("default", "grades")
    operator.reconcile("default", "grades")
    assert [c for c in etcd.take_calls() if c[0] == "event"] == [
        ("event", "Warning", "StatusTooLarge")
    ]


@pytest.mark.slow
def test_the_status_of_a_program_of_7000_views_is_written(tmp_path: Path) -> None:
    """docs/limits.md allows 10,000 views; at 7,000 (371 KB of SQL) the status was 1.4 MB, the
    object past etcd's limit, and the operator raised at every reconcile."""
    old = views(7000)
    new = old.replace("(a INT, b INT)", "(a INT, c INT, b INT)")
    etcd = Etcd()
    operator = reconciler_of(etcd)
    seeded(tmp_path, old)
    etcd.apply("grades", spec(tmp_path, new))
    operator.reconcile("default", "grades")
    assert etcd.take_calls() == [("write_status", "AwaitingApproval")]
    pending = etcd.status("grades")["pendingChange"]
    assert pending["omitted"]["changes"] == 7002 - 100
    assert len(json.dumps(etcd.status("grades"))) < 50_000


def test_bounding_twice_counts_what_both_left_out() -> None:
    """The small status bounds a bounded one to nothing: its counts are the whole lists'."""
    from spindle.lifecycle.status import bounded

    observed = observe(spec=pipeline_spec(NEW), checkpoint=checkpoint(OLD))
    status = conclude(decide(observed), observed, driver=None, now="t").status
    none = bounded(copy.deepcopy(status), limit=0)
    assert none.pending_change is not None and none.pending_change.omitted is not None
    assert none.pending_change.omitted["changes"] == 402
    assert none.maintenance == {} and none.maintenance_omitted == 401
