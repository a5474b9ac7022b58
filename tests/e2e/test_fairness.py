"""Fairness: one pipeline whose checkpoint store hangs does not hold up fifty others.

The fifty each have a checkpoint of grades v1 and are applied with v2, so the operator pod reads
their Secret and checkpoint and records AwaitingApproval (no driver pod starts). The odd one is
applied first; its storage endpoint is a proxy in front of the same S3 server that accepts every
request and never answers. The fifty all reach AwaitingApproval, the odd one ends with the
reason StorageUnavailable naming its store, and the operator never restarts.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from tests.checkpoints import seed
from tests.e2e.conftest import Operator, Space, wait_for
from tests.e2e.pipelines import grades, root, store
from tests.harness.fault_proxy import FaultProxy
from tests.unit.test_lifecycle import V1

pytestmark = [pytest.mark.kube, pytest.mark.s3]
NORMAL = [f"n{i:02d}" for i in range(50)]


def _statuses(space: Space) -> dict[str, dict[str, Any]]:
    body = json.loads(space.kube.kubectl("get", "pipelines", "-n", space.name, "-o", "json"))
    return {
        item["metadata"]["name"]: item.get("status") or {}
        for item in body["items"]
        if (item.get("status") or {}).get("observedGeneration") == item["metadata"]["generation"]
    }


def _reason(status: dict[str, Any]) -> str | None:
    conditions = status.get("conditions") or [{}]
    return conditions[0].get("reason")


def test_a_hung_store_does_not_hold_up_fifty_other_pipelines(
    space: Space, operator: Operator
) -> None:
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(
                lambda name: seed(store(space, name), namespace=space.name, name=name, program=V1),
                NORMAL,
            )
        )
    hung = FaultProxy(
        space.s3.endpoint, default="slow:3600", host=str(urlparse(space.s3.endpoint).hostname)
    ).start()
    try:
        stuck = grades("v2", space, name="stuck")
        stuck["spec"]["storage"]["endpoint"] = hung.endpoint
        documents = [stuck] + [grades("v2", space, name=name) for name in NORMAL]
        for document in documents:
            document["metadata"]["namespace"] = space.name
        space.kube.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(documents))

        def all_awaiting() -> dict[str, dict[str, Any]] | None:
            statuses = _statuses(space)
            waiting = [n for n in NORMAL if statuses.get(n, {}).get("phase") == "AwaitingApproval"]
            return statuses if len(waiting) == len(NORMAL) else None

        statuses = wait_for("the fifty to await approval", all_awaiting, timeout=240)
        # the odd one is still blocked on its store, or already says why
        assert _reason(statuses.get("stuck", {})) in (None, "StorageUnavailable")
        assert hung.seen, "the operator never asked the hung store"

        status = wait_for(
            "the odd one to report its store",
            lambda: (
                (s := _statuses(space).get("stuck")) and _reason(s) == "StorageUnavailable" and s
            ),
            timeout=120,
        )
        message = status["conditions"][0]["message"]
        assert root(space, "stuck") in message and "Check the endpoint" in message
        assert status["phase"] == "Failed"
        warned = {e["involvedObject"]["name"] for e in space.events("StorageUnavailable")}
        assert warned == {"stuck"}
        assert all(_statuses(space)[n]["phase"] == "AwaitingApproval" for n in NORMAL)
    finally:
        hung.stop()
    assert operator.healthy()
