"""The Argo CD resource actions (docs/argocd/actions): which are offered in which state, and
that each changes exactly one thing, run by a real Lua interpreter (lupa) on Pipelines whose
status the operator body wrote."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from spindle.api.types import APPROVE_ANNOTATION, DesiredState, Phase
from spindle.k8s.pods import DriverSettings
from spindle.k8s.reconcile import Reconciler, Settings
from tests.fake_cluster import FakeCluster
from tests.lua import LuaError, run
from tests.unit.test_lifecycle import V1, V2
from tests.unit.test_operator_body import seeded, spec

ACTIONS = Path("docs/argocd/actions")
DISCOVERY = (ACTIONS / "discovery.lua").read_text()
NAMES = ("approve", "pause", "resume", "restart")


def offered(obj: dict[str, Any]) -> set[str]:
    actions = run(DISCOVERY, obj=obj)
    assert set(actions) == set(NAMES)  # always listed, disabled when not applicable
    return {name for name, action in actions.items() if not action["disabled"]}


def act(name: str, obj: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = run((ACTIONS / name / "action.lua").read_text(), obj=obj)
    return result


def same(value: Any) -> Any:
    """What survives a trip through Lua, as through Argo CD's: an empty list and an empty dict
    are one empty table, and a key whose value is null is no key (a table cannot hold nil)."""
    if isinstance(value, dict | list) and not value:
        return {}
    if isinstance(value, dict):
        return {key: same(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [same(item) for item in value]
    return value


def reconciled(tmp_path: Path, *, running: bool) -> dict[str, Any]:
    """A Pipeline as the operator leaves it: Running on v1, or AwaitingApproval for v2."""
    cluster = FakeCluster()
    driver = DriverSettings(image="spindle:test", termination_grace_seconds=120)
    reconciler = Reconciler(cluster=cluster, settings=Settings(driver=driver, shared_files=True))  # type: ignore[arg-type]
    if running:
        cluster.apply("grades", spec(tmp_path, V1))
        reconciler.reconcile("default", "grades")
        cluster.set_pod_phase("grades-g1-driver", "Running")
    else:
        seeded(tmp_path)
        cluster.apply("grades", spec(tmp_path, V2))
    reconciler.reconcile("default", "grades")
    pipeline = cluster.pipelines[("default", "grades")]
    assert pipeline["status"]["phase"] == ("Running" if running else "AwaitingApproval")
    return pipeline


def test_approve_is_offered_while_a_change_awaits_and_sets_only_the_annotation(
    tmp_path: Path,
) -> None:
    pipeline = reconciled(tmp_path, running=False)
    change = pipeline["status"]["pendingChange"]["id"]
    assert offered(pipeline) == {"approve", "pause"}
    approved = act("approve", pipeline)
    expected = copy.deepcopy(pipeline)
    expected["metadata"]["annotations"][APPROVE_ANNOTATION] = change
    assert same(approved) == same(expected)
    assert offered(approved) == {"pause"}  # approved already: nothing more to approve


def test_approve_replaces_a_stale_approval_and_creates_the_annotations(tmp_path: Path) -> None:
    pipeline = reconciled(tmp_path, running=False)
    change = pipeline["status"]["pendingChange"]["id"]
    pipeline["metadata"]["annotations"] = {APPROVE_ANNOTATION: "0123456789ab", "team": "data"}
    assert "approve" in offered(pipeline)
    stale = act("approve", pipeline)["metadata"]["annotations"]
    assert stale == {APPROVE_ANNOTATION: change, "team": "data"}
    del pipeline["metadata"]["annotations"]
    assert act("approve", pipeline)["metadata"]["annotations"] == {APPROVE_ANNOTATION: change}


def test_approve_waits_until_the_operator_has_seen_the_latest_spec(tmp_path: Path) -> None:
    pipeline = reconciled(tmp_path, running=False)
    pipeline["metadata"]["generation"] += 1  # edited again: the pending id may be stale
    assert "approve" not in offered(pipeline)


@pytest.mark.parametrize("phase", [p.value for p in Phase if p is not Phase.AWAITING_APPROVAL])
def test_approve_is_disabled_in_every_other_phase(phase: str) -> None:
    pipeline = {
        "metadata": {"name": "p", "generation": 1, "annotations": {}},
        "spec": {"sql": "create table t (x int)"},
        "status": {
            "phase": phase,
            "observedGeneration": 1,
            "pendingChange": {"id": "b77cf0f27757"},  # even a left-over id offers nothing
        },
    }
    assert "approve" not in offered(pipeline)
    with pytest.raises(LuaError, match="no change awaits approval"):
        act("approve", pipeline)


def test_no_status_offers_pause_only() -> None:
    assert offered({"metadata": {"name": "p", "generation": 1}, "spec": {"sql": ""}}) == {"pause"}


def test_pause_and_resume_follow_desired_state_and_set_only_it(tmp_path: Path) -> None:
    running = reconciled(tmp_path, running=True)
    assert "desiredState" not in running["spec"]  # the default, Running
    assert offered(running) == {"pause"}
    paused = act("pause", running)
    expected = copy.deepcopy(running)
    expected["spec"]["desiredState"] = DesiredState.PAUSED.value
    assert same(paused) == same(expected)
    assert offered(paused) == {"resume"}
    resumed = act("resume", paused)
    expected["spec"]["desiredState"] = DesiredState.RUNNING.value
    assert same(resumed) == same(expected)
    assert offered(resumed) == {"pause"}


def test_a_stopped_pipeline_is_neither_paused_nor_resumed_from_argo_cd(tmp_path: Path) -> None:
    stopped = reconciled(tmp_path, running=True)
    stopped["spec"]["desiredState"] = DesiredState.STOPPED.value
    assert offered(stopped) == set()


def test_the_argocd_cm_snippet_carries_the_same_scripts() -> None:
    cm = yaml.safe_load(Path("docs/argocd/argocd-cm.yaml").read_text())
    actions = yaml.safe_load(cm["data"]["resource.customizations.actions.spindle.dev_Pipeline"])
    assert actions["discovery.lua"] == DISCOVERY
    definitions = {d["name"]: d["action.lua"] for d in actions["definitions"]}
    assert definitions == {name: (ACTIONS / name / "action.lua").read_text() for name in NAMES}


def test_restart_is_offered_once_the_latest_specs_driver_failed_and_bumps_only_the_nonce(
    tmp_path: Path,
) -> None:
    cluster = FakeCluster()
    driver = DriverSettings(image="spindle:test", termination_grace_seconds=120)
    reconciler = Reconciler(cluster=cluster, settings=Settings(driver=driver, shared_files=True))  # type: ignore[arg-type]
    cluster.apply("grades", spec(tmp_path, V1))
    reconciler.reconcile("default", "grades")
    cluster.set_pod_phase("grades-g1-driver", "Failed")
    reconciler.reconcile("default", "grades")
    failed = cluster.pipelines[("default", "grades")]
    assert failed["status"]["phase"] == "Failed"
    assert offered(failed) == {"restart", "pause"}
    restarted = act("restart", failed)
    expected = copy.deepcopy(failed)
    expected["spec"]["restartNonce"] = 1
    assert same(restarted) == same(expected)
    assert act("restart", restarted)["spec"]["restartNonce"] == 2

    failed["metadata"]["generation"] += 1  # edited since: the operator starts it again itself
    assert "restart" not in offered(failed)
    with pytest.raises(LuaError, match="no driver of the current spec has failed"):
        act("restart", failed)  # run though not offered (`argocd app actions run`)
    running = reconciled(tmp_path / "running", running=True)
    assert "restart" not in offered(running)
    with pytest.raises(LuaError, match="no driver of the current spec has failed"):
        act("restart", running)


def test_restart_is_not_offered_for_a_failure_no_driver_had() -> None:
    invalid = {
        "metadata": {"name": "p", "generation": 1},
        "spec": {"sql": "create view v as select idd frm t"},
        "status": {"phase": "Failed", "observedGeneration": 1},
    }
    assert offered(invalid) == {"pause"}
    with pytest.raises(LuaError, match="no driver of the current spec has failed"):
        act("restart", invalid)
