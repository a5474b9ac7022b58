"""Kill -9 the operator in every phase and restart it: one driver pod per run, no bootstrap runs
twice, no approval is lost."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.e2e.conftest import Operator, Space, wait_for
from tests.e2e.pipelines import grades, ingest_grades, query, store

pytestmark = [pytest.mark.kube, pytest.mark.s3, pytest.mark.spark, pytest.mark.slow]


def _uids(space: Space) -> dict[str, str]:
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in space.pods()}


def test_operator_killed_in_each_phase(space: Space, operator: Operator, spark: Any) -> None:
    seen: dict[str, set[str]] = {}

    def record() -> dict[str, str]:
        uids = _uids(space)
        for name, uid in uids.items():
            seen.setdefault(name, set()).add(uid)
        return uids

    # Applying: killed right after the apply, before or after it acted.
    ingest_grades(space)
    space.apply(grades("v1", space))
    operator.kill()
    record()
    operator.start()
    space.wait_phase("grades", "Running", lastCheckpoint=lambda c: bool(c) and c["tableRows"] == 10)
    assert list(record()) == ["grades-g1-driver"]

    # Awaiting approval: killed, approved while it is down, restarted: the approval holds.
    space.apply(grades("v2", space))
    change = space.wait_phase("grades", "AwaitingApproval")["pendingChange"]["id"]
    record()
    operator.kill()
    space.kube.kubectl(
        "annotate", "pipeline", "grades", "-n", space.name, f"spindle.dev/approve={change}"
    )
    operator.start()

    # Bootstrapping: killed mid-bootstrap and restarted: the same pod finishes it, once.
    wait_for("Bootstrapping", lambda: space.status("grades").get("phase") == "Bootstrapping")
    before = record()
    operator.kill()
    time.sleep(2)
    operator.start()
    space.wait_phase(
        "grades", "Running", lastBootstrap=lambda b: bool(b) and b["changeId"] == change
    )
    after = record()
    assert after[f"grades-{change}-driver"] == before[f"grades-{change}-driver"]

    # Running: killed and restarted: the driver keeps running, untouched.
    operator.kill()
    operator.start()
    time.sleep(8)  # a few resyncs
    assert space.status("grades")["phase"] == "Running"
    assert record() == after

    assert {name: len(uids) for name, uids in seen.items()} == {name: 1 for name in seen}, (
        "a driver pod was created twice"
    )
    assert f"grades-{change}-driver" in seen
    history = store(space).history()
    assert [m.bootstrap.change_id for m in history if m.bootstrap] == [change]
    assert query(spark, space, "SELECT count(*) FROM avg_grade_all_courses") == [(2,)]
