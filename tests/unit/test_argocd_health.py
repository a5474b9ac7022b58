"""The Argo CD health check (docs/argocd/health.lua), run by a real Lua interpreter (lupa)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.lua import run

SCRIPT = Path("docs/argocd/health.lua").read_text()


def health(obj: dict[str, Any]) -> tuple[str, str]:
    result = run(SCRIPT, obj=obj)
    return result["status"], result["message"]


def pipeline(phase: str | None, *, generation: int = 2, observed: int = 2, **status: Any) -> Any:
    body: dict[str, Any] = {"metadata": {"name": "p", "generation": generation}}
    if phase is not None:
        body["status"] = {
            "phase": phase,
            "observedGeneration": observed,
            "conditions": [{"type": "Ready", "reason": phase, "message": f"{phase} now"}],
            **status,
        }
    return body


@pytest.mark.parametrize(
    ("phase", "expected"),
    [
        ("Pending", "Progressing"),
        ("Bootstrapping", "Progressing"),
        ("Running", "Healthy"),
        ("Paused", "Suspended"),
        ("Stopping", "Progressing"),
        ("Stopped", "Suspended"),
        ("Failed", "Degraded"),
    ],
)
def test_every_phase(phase: str, expected: str) -> None:
    status, message = health(pipeline(phase))
    assert status == expected
    if phase == "Failed":
        assert "Failed now" in message


def test_a_running_pipeline_whose_driver_retries_a_step_is_degraded_with_the_reason() -> None:
    retrying = pipeline("Running")
    retrying["status"]["conditions"] = [
        {"type": "Ready", "status": "False", "reason": "StepRetrying", "message": "Retry 1 of 5"}
    ]
    assert health(retrying) == ("Degraded", "StepRetrying: Retry 1 of 5")
    retrying["status"]["conditions"][0].update(status="True", reason="Running")
    assert health(retrying) == ("Healthy", "Running")


def test_a_paused_pipeline_whose_driver_retries_a_step_is_degraded_too() -> None:
    retrying = pipeline("Paused")
    retrying["status"]["conditions"] = [
        {"type": "Ready", "status": "False", "reason": "StepRetrying", "message": "Retry 2 of 5"}
    ]
    assert health(retrying) == ("Degraded", "StepRetrying: Retry 2 of 5")


def test_a_change_that_bootstrap_policy_rejected_is_degraded_with_the_reason() -> None:
    rejected = pipeline("Stopped")
    rejected["status"]["conditions"] = [
        {"type": "Ready", "status": "False", "reason": "BootstrapRejected", "message": "Revert"}
    ]
    assert health(rejected) == ("Degraded", "BootstrapRejected: Revert")


@pytest.mark.parametrize("phase", ["Pending", "Bootstrapping"])
@pytest.mark.parametrize("reason", ["DriverUnschedulable", "DriverTerminating"])
def test_a_driver_no_node_can_take_or_end_is_degraded_with_the_reason(
    phase: str, reason: str
) -> None:
    stalled = pipeline(phase)
    stalled["status"]["conditions"] = [
        {"type": "Ready", "status": "False", "reason": reason, "message": "No node"}
    ]
    assert health(stalled) == ("Degraded", f"{reason}: No node")


def test_awaiting_approval_is_suspended_with_the_change_id() -> None:
    status, message = health(pipeline("AwaitingApproval", pendingChange={"id": "b77cf0f27757"}))
    assert status == "Suspended"
    assert "b77cf0f27757" in message and "spindle.dev/approve=b77cf0f27757" in message


def test_generation_mismatch_and_no_status_are_progressing() -> None:
    assert health(pipeline("Running", generation=3, observed=2))[0] == "Progressing"
    assert health(pipeline("Failed", generation=3, observed=2))[0] == "Progressing"
    assert health(pipeline(None))[0] == "Progressing"


def test_the_argocd_cm_snippet_carries_the_same_script() -> None:
    cm = yaml.safe_load(Path("docs/argocd/argocd-cm.yaml").read_text())
    assert cm["data"]["resource.customizations.health.spindle.dev_Pipeline"] == SCRIPT


def test_awaiting_approval_shows_the_estimate_headline() -> None:
    headline = "3 views to evaluate, 10 stored rows to read, duration ~2s"
    pending = {"id": "b77cf0f27757", "estimate": {"headline": headline}}
    status, message = health(pipeline("AwaitingApproval", pendingChange=pending))
    assert status == "Suspended"
    assert message.endswith(f"spindle.dev/approve=b77cf0f27757 ({headline})")
