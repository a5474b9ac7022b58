"""The data-diff preview's pure parts: how rows are matched (a GROUP BY's keys, or the whole
row), the report's one JSON form, and how the status shows a preview of the pending change (a
failed one leaves the change exactly as it was)."""

from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from spindle.api import PipelineSpec
from spindle.api.types import PREVIEW_ANNOTATION
from spindle.checkpoint.store import open_store
from spindle.cli.kubectl_plugin import served
from spindle.k8s.pods import PREVIEW_MARGIN_SECONDS, preview_pod_name
from spindle.k8s.reconcile import Reconciler
from spindle.lifecycle import conclude, decide
from spindle.plan.preview import (
    Changed,
    PreviewError,
    PreviewReport,
    ViewPreview,
    key_columns,
    plain,
)
from spindle.program import parse_program
from tests.checkpoints import manifest as next_checkpoint
from tests.fake_cluster import FakeCluster
from tests.unit.test_lifecycle import V1, V2
from tests.unit.test_operator_body import (  # noqa: F401 (fixtures: cluster, reconciler)
    cluster,
    reconciler,
    reconciler_of,
    seeded,
    spec,
    unschedulable,
)
from tests.unit.test_review import observed


def test_rows_are_matched_on_the_group_by_keys_when_all_are_selected() -> None:
    program = parse_program(
        """
        create table t (k bigint, j varchar, v int) with ('materialized' = 'true');
        create view by_key as select k, j as name, sum(v) as total from t group by k, j;
        create view partly as select k, sum(v) as total from t group by k, j;
        create view plain as select k, v from t;
        """
    )
    assert key_columns(program.views["by_key"]) == ("k", "name")
    assert key_columns(program.views["partly"]) == ()  # k alone is not unique
    assert key_columns(program.views["plain"]) == ()


VIEW = ViewPreview(
    name="avg_grade",
    status="modified",
    matched_by=("student_id", "class"),
    rows_before=4,
    rows_after=4,
    added=0,
    removed=0,
    changed=1,
    changed_columns=("class_avg",),
    changed_samples=(
        Changed(
            before={"student_id": 1, "class": "algebra", "class_avg": "97.00"},
            after={"student_id": 1, "class": "algebra", "class_avg": "96.00"},
        ),
    ),
)


def test_the_report_has_one_json_form_and_reads_back_equal() -> None:
    report = PreviewReport(
        change_id="b77cf0f27757",
        checkpoint="00000001-be17b8",
        created_at="2026-01-01T00:00:00Z",
        sample_rows=10,
        views=(VIEW,),
    )
    body = report.to_json()
    assert PreviewReport.from_json(body) == report
    assert body["views"][0]["samples"]["changed"][0]["after"]["class_avg"] == "96.00"
    assert report.summary()["views"] == {"avg_grade": VIEW.counts()}
    assert report.headline() == (
        "Preview of change b77cf0f27757: 1 view, 0 rows added, 0 removed, 1 changed"
    )
    assert plain({"d": Decimal("1.50"), "t": datetime.date(2026, 1, 2)}) == {
        "d": "1.50",
        "t": "2026-01-02",
    }


@pytest.mark.parametrize("error", [None, PreviewError("PreviewTimedOut", "Too slow.")])
def test_the_status_shows_a_preview_of_the_pending_change_only(
    error: PreviewError | None,
) -> None:
    checkpoint = next_checkpoint(None, program=V1)
    decision = decide(observed(checkpoint, V2))
    pending = decision.pending_change
    assert pending is not None
    report = PreviewReport(
        change_id=pending.id,
        checkpoint=checkpoint.id,
        created_at="t0",
        sample_rows=10,
        views=() if error else (VIEW,),
        error=error,
    )
    status = conclude(
        decision, observed(checkpoint, V2, preview=report), driver=None, now="t1"
    ).status
    ready, previewed = status.conditions
    assert ready.type == "Ready" and ready.reason == "AwaitingApproval"
    assert previewed.type == "Previewed"
    if error is None:
        assert (previewed.status, previewed.reason) == ("True", "PreviewReady")
        assert status.pending_change == pending.model_copy(update={"preview": report.summary()})
    else:  # a failed preview: the change exactly as it was, and a condition saying why
        assert (previewed.status, previewed.reason) == ("False", "PreviewTimedOut")
        assert previewed.message == "Too slow."
        assert status.pending_change == pending
    other = PreviewReport(change_id="0123456789ab", checkpoint="x", created_at="t", sample_rows=1)
    stale = conclude(decision, observed(checkpoint, V2, preview=other), driver=None, now="t2")
    assert stale.status.pending_change == pending
    assert [c.type for c in stale.status.conditions] == ["Ready"]


def test_the_spec_bounds_a_preview() -> None:
    spec = PipelineSpec.model_validate({"sql": "", "preview": {"sampleRows": 3}})
    assert (spec.preview.sample_rows, spec.preview.timeout_seconds) == (3, 600)
    with pytest.raises(ValueError, match="timeoutSeconds"):
        PipelineSpec.model_validate({"sql": "", "preview": {"timeoutSeconds": 0}})


def test_kubectl_spindle_shows_the_preview_before_approving(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from spindle.cli.kubectl_plugin import _show

    checkpoint = next_checkpoint(None, program=V1)
    decision = decide(observed(checkpoint, V2))
    assert decision.pending_change is not None
    report = PreviewReport(
        change_id=decision.pending_change.id,
        checkpoint=checkpoint.id,
        created_at="t0",
        sample_rows=10,
        views=(VIEW,),
    )
    status = conclude(decision, observed(checkpoint, V2, preview=report), driver=None, now="t")
    assert status.status.pending_change is not None
    _show(status.status.pending_change.model_dump(mode="json"))
    out = capsys.readouterr().out
    assert f"Preview of change {report.change_id} from checkpoint {checkpoint.id}" in out
    assert "avg_grade: rows matched by student_id, class; changed columns: class_avg" in out


def test_the_operator_runs_one_preview_pod_per_request_and_shows_its_report(
    cluster: FakeCluster,  # noqa: F811
    reconciler: Reconciler,  # noqa: F811
    tmp_path: Path,
) -> None:
    seeded(tmp_path)
    cluster.apply("grades", spec(tmp_path, V2))
    reconciler.reconcile("default", "grades")
    cluster.take_calls()
    change = cluster.status("grades")["pendingChange"]["id"]
    request = f"{change}@1"
    cluster.annotate("grades", PREVIEW_ANNOTATION, request)
    reconciler.reconcile("default", "grades")
    name = preview_pod_name("grades", request)
    assert cluster.take_calls() == [("create_pod", name), ("write_status", "AwaitingApproval")]
    pod = cluster.pods[("default", name)]
    command = pod["spec"]["containers"][0]["command"]
    assert command[command.index("--mode") + 1] == "preview"
    assert command[command.index("--preview-request") + 1] == request
    assert pod["spec"]["activeDeadlineSeconds"] == 600 + PREVIEW_MARGIN_SECONDS
    status = cluster.status("grades")
    assert "driverPod" not in status  # a preview pod is not the pipeline's driver
    assert status["conditions"][1]["reason"] == "Previewing" and served(status, request) is None
    reconciler.reconcile("default", "grades")
    assert cluster.take_calls() == []  # one pod per request

    # the pod keeps its report beside the checkpoints (runtime.preview does), then ends
    store = open_store(tmp_path.as_uri(), namespace="default", name="grades")
    report = PreviewReport(
        change_id=change,
        checkpoint="c",
        created_at="t",
        sample_rows=10,
        views=(VIEW,),
        request=request,
    )
    store.write_preview(report)
    cluster.set_pod_phase(name, "Succeeded")
    reconciler.reconcile("default", "grades")
    status = cluster.status("grades")
    assert status["phase"] == "AwaitingApproval"
    assert status["pendingChange"]["preview"] == report.summary()
    condition = served(status, request)
    assert condition is not None and condition["reason"] == "PreviewReady"

    # a new label asks again; a pod that fails without a report changes nothing but the condition
    again = f"{change}@2"
    cluster.annotate("grades", PREVIEW_ANNOTATION, again)
    reconciler.reconcile("default", "grades")
    cluster.set_pod_phase(preview_pod_name("grades", again), "Failed")
    reconciler.reconcile("default", "grades")
    failed = cluster.status("grades")
    assert failed["phase"] == "AwaitingApproval"
    assert failed["pendingChange"] == status["pendingChange"]
    condition = served(failed, again)
    assert condition is not None and (condition["status"], condition["reason"]) == (
        "False",
        "PreviewFailed",
    )
    # a request for another change (a stale one, committed to Git, say) is not served, and
    # the condition says so, in the form kubectl spindle preview waits for
    cluster.annotate("grades", PREVIEW_ANNOTATION, "0123456789ab@3")
    cluster.take_calls()
    reconciler.reconcile("default", "grades")
    assert not [c for c in cluster.take_calls() if c[0] == "create_pod"]
    ignored = served(cluster.status("grades"), "0123456789ab@3")
    assert ignored is not None and (ignored["status"], ignored["reason"]) == (
        "False",
        "PreviewIgnored",
    )
    assert f"spindle.dev/preview={change} to preview" in ignored["message"], ignored
    assert cluster.status("grades")["pendingChange"] == status["pendingChange"]


def test_a_preview_pod_past_its_deadline_is_a_timed_out_preview() -> None:
    from spindle.k8s.pods import observed_driver

    pod = {
        "metadata": {"name": "p", "labels": {"spindle.dev/mode": "preview"}},
        "status": {"phase": "Failed", "reason": "DeadlineExceeded"},
    }
    driver = observed_driver(pod)
    assert (driver.mode.value, driver.phase, driver.reason) == (
        "preview",
        "Failed",
        "PreviewTimedOut",
    )
    assert driver.message is not None and "spec.preview.timeoutSeconds" in driver.message


DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@dataclass
class StrictCluster(FakeCluster):
    """Refuses pods as the API server does: one whose name is not a DNS subdomain (422), and
    every one while `quota` holds the namespace's quota message (403), each with its words."""

    quota: str | None = None

    def create_pod(self, pod: dict[str, Any]) -> bool:
        name = pod["metadata"]["name"]
        if not DNS_SUBDOMAIN.fullmatch(name):
            self.calls.append(("create_pod", name))
            raise _refusal(422, f'Pod "{name}" is invalid: metadata.name: Invalid value')
        if self.quota is not None:
            self.calls.append(("create_pod", name))
            raise _refusal(403, f'pods "{name}" is forbidden: {self.quota}')
        return super().create_pod(pod)


def _refusal(status: int, message: str) -> ApiException:
    error = ApiException(status=status, reason="Refused")
    error.body = json.dumps({"kind": "Status", "message": message})
    return error


def _pending_for_preview(fake: FakeCluster, operator: Reconciler, tmp_path: Path) -> str:
    """Pipeline grades awaiting the approval of V2 over a checkpoint of V1: its change id."""
    seeded(tmp_path)
    fake.apply("grades", spec(tmp_path, V2))
    operator.reconcile("default", "grades")
    fake.take_calls()
    change: str = fake.status("grades")["pendingChange"]["id"]
    return change


def test_a_preview_request_with_a_trailing_newline_is_served_as_written_without_it(
    tmp_path: Path,
) -> None:
    """`spindle.dev/preview: |` in YAML adds a newline: the pod's name had it, the API server
    refused the pod, and the pipeline turned Failed (DriverPodRejected)."""
    strict = StrictCluster()
    operator = reconciler_of(strict)
    change = _pending_for_preview(strict, operator, tmp_path)
    strict.annotate("grades", PREVIEW_ANNOTATION, change + "\n")
    operator.reconcile("default", "grades")
    name = preview_pod_name("grades", change)
    assert strict.take_calls() == [("create_pod", name), ("write_status", "AwaitingApproval")]
    command = strict.pods[("default", name)]["spec"]["containers"][0]["command"]
    assert command[command.index("--preview-request") + 1] == change
    status = strict.status("grades")
    assert status["conditions"][1]["reason"] == "Previewing"
    assert status["conditions"][1]["message"].endswith(f"({PREVIEW_ANNOTATION}={change})")


def test_a_preview_pod_the_api_server_refuses_leaves_the_change_pending_and_is_asked_once(
    tmp_path: Path,
) -> None:
    """It turned the pipeline Failed (DriverPodRejected, naming the driver pod), dropped the
    pending change, and was created again every 30 seconds."""
    strict = StrictCluster(quota="exceeded quota: compute, requested: pods=1, limited: pods=4")
    operator = reconciler_of(strict)
    change = _pending_for_preview(strict, operator, tmp_path)
    before = strict.status("grades")
    request = f"{change}@1"
    strict.annotate("grades", PREVIEW_ANNOTATION, request)
    outcome = operator.reconcile("default", "grades")
    name = preview_pod_name("grades", request)
    assert strict.take_calls() == [("create_pod", name), ("write_status", "AwaitingApproval")]
    assert outcome is not None and outcome.requeue_after is None
    status = strict.status("grades")
    assert status["phase"] == "AwaitingApproval"
    assert status["pendingChange"] == before["pendingChange"]
    assert status["conditions"][0] == before["conditions"][0]
    condition = served(status, request)  # kubectl spindle preview ends with it
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", "PreviewPodRejected")
    assert "HTTP 403" in condition["message"] and "exceeded quota: compute" in condition["message"]
    assert "change the label of spindle.dev/preview" in condition["message"]

    operator.reconcile("default", "grades")  # served: not created again, nothing new to say
    assert strict.take_calls() == []
    assert strict.status("grades") == status

    strict.quota = None  # the quota raised; a new label asks again
    again = f"{change}@2"
    strict.annotate("grades", PREVIEW_ANNOTATION, again)
    operator.reconcile("default", "grades")
    assert ("create_pod", preview_pod_name("grades", again)) in strict.take_calls()
    assert strict.status("grades")["conditions"][1]["reason"] == "Previewing"


def test_a_preview_pod_no_node_can_take_says_why_in_the_previewed_condition(
    cluster: FakeCluster,  # noqa: F811
    reconciler: Reconciler,  # noqa: F811
    tmp_path: Path,
) -> None:
    """It said `Previewing` for as long as the pod stayed Pending."""
    change = _pending_for_preview(cluster, reconciler, tmp_path)
    request = f"{change}@1"
    cluster.annotate("grades", PREVIEW_ANNOTATION, request)
    reconciler.reconcile("default", "grades")
    pod = cluster.pods[("default", preview_pod_name("grades", request))]
    pod["status"] = unschedulable("0/1 nodes are available: 1 Insufficient memory.")
    reconciler.reconcile("default", "grades")
    status = cluster.status("grades")
    assert status["phase"] == "AwaitingApproval" and "driverPod" not in status
    condition = served(status, request)
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", "DriverUnschedulable")
    assert "No node can take the preview pod" in condition["message"]
    assert "1 Insufficient memory" in condition["message"]
    pod["status"] = {"phase": "Running"}  # a node freed up: it runs after all
    reconciler.reconcile("default", "grades")
    assert cluster.status("grades")["conditions"][1]["reason"] == "Previewing"


def test_preview_pods_of_a_relabelled_request_or_an_approved_change_are_deleted(
    cluster: FakeCluster,  # noqa: F811
    reconciler: Reconciler,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A preview pod no node took stayed Pending after its request was relabelled (as the
    `DriverUnschedulable` message advises) or its change approved: its deadline never began,
    it held the namespace's quota, and it could start later, beside the driver."""
    change = _pending_for_preview(cluster, reconciler, tmp_path)
    first, second = f"{change}@1", f"{change}@2"
    cluster.annotate("grades", PREVIEW_ANNOTATION, first)
    reconciler.reconcile("default", "grades")
    old = preview_pod_name("grades", first)
    cluster.pods[("default", old)]["status"] = unschedulable("0/1 nodes are available.")
    reconciler.reconcile("default", "grades")
    cluster.take_calls()

    cluster.annotate("grades", PREVIEW_ANNOTATION, second)
    reconciler.reconcile("default", "grades")
    new = preview_pod_name("grades", second)
    assert cluster.take_calls() == [
        ("delete_pod", old, 120),
        ("create_pod", new),
        ("write_status", "AwaitingApproval"),
    ]
    assert sorted(n for _, n in cluster.pods) == [new]
    cluster.set_pod_phase(new, "Running")
    reconciler.reconcile("default", "grades")
    assert cluster.take_calls() == []  # the current request's pod runs on

    cluster.annotate("grades", "spindle.dev/approve", change)
    reconciler.reconcile("default", "grades")
    assert ("delete_pod", new, 120) in cluster.take_calls()
    assert sorted(n for _, n in cluster.pods) == [f"grades-{change}-driver"]


def test_a_preview_pod_is_kept_while_the_pending_change_is_not_known(
    cluster: FakeCluster,  # noqa: F811
    reconciler: Reconciler,  # noqa: F811
    tmp_path: Path,
) -> None:
    """An unreadable Secret says nothing of the pending change: its preview pod stays."""
    ref = {"name": "s3", "key": "id"}
    cluster.secrets[("default", "s3")] = {"id": "x"}
    storage = {
        "uri": tmp_path.as_uri(),
        "credentials": {"accessKeyId": ref, "secretAccessKey": ref},
    }
    seeded(tmp_path)
    cluster.apply("grades", spec(tmp_path, V2, storage=storage))
    reconciler.reconcile("default", "grades")
    request = f"{cluster.status('grades')['pendingChange']['id']}@1"
    cluster.annotate("grades", PREVIEW_ANNOTATION, request)
    reconciler.reconcile("default", "grades")
    cluster.take_calls()
    cluster.refuse_secrets = 403
    reconciler.reconcile("default", "grades")
    assert not [c for c in cluster.take_calls() if c[0] == "delete_pod"]
    assert ("default", preview_pod_name("grades", request)) in cluster.pods
