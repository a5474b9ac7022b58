"""Bad input never crashes the operator: clear reasons, no pods, other pipelines still served."""

from __future__ import annotations

import json
from typing import Any

import pytest

from spindle.checkpoint.objects import open_objects
from spindle.local.adhoc import write_batch
from tests import soak
from tests.e2e.conftest import SYSTEM, Operator, Space, wait_for
from tests.e2e.pipelines import grades, root, s3_options
from tests.e2e.storm import Storm
from tests.fuzz.manifests import manifest_mutant

pytestmark = [pytest.mark.kube, pytest.mark.s3]


def test_invalid_sql_and_missing_secret_fail_clearly_and_others_are_served(
    space: Space, operator: Operator
) -> None:
    broken = grades("v1", space, name="broken")
    broken["spec"]["sql"] = "create table t (id bigint);\n\ncreate view v as select idd frm t;\n"
    space.apply(broken)
    no_secret = grades("v1", space, name="nosecret")
    no_secret["spec"]["storage"]["credentials"]["accessKeyId"]["name"] = "missing"
    space.apply(no_secret)
    space.apply(grades("v1", space, name="healthy", desiredState="Stopped"))
    space.apply(grades("v1", space, name="noaccount", serviceAccountName="nobody"))

    failed = space.wait_phase("broken", "Failed")
    condition = failed["conditions"][0]
    assert condition["reason"] == "InvalidProgram"
    assert "line 3" in condition["message"] and "col" in condition["message"], condition
    [event] = wait_for("an InvalidProgram event", lambda: space.events("InvalidProgram"))
    assert event["involvedObject"]["name"] == "broken"

    missing = space.wait_phase("nosecret", "Failed")["conditions"][0]
    assert missing["reason"] == "SecretNotFound"
    assert f"{space.name}/missing" in missing["message"], missing

    refused = space.wait_phase("noaccount", "Failed")["conditions"][0]
    assert refused["reason"] == "DriverPodRejected" and "nobody" in refused["message"], refused
    assert space.wait_phase("healthy", "Stopped")["conditions"][0]["reason"] == "Stopped"
    assert space.pods() == []
    operator.healthy()


STORM = soak.count(ci=1000, soak=1000)
STORM_SEED = 15


def test_a_storm_of_mutated_manifests_ends_in_refusals_and_reasons_and_others_are_served(
    space: Space, operator: Operator
) -> None:
    """The fuzzer's manifest mutants (tests/fuzz/manifests.py), sent with kubectl: each is
    refused by the API server (or by kubectl, for a YAML bomb) or gets a condition with a
    CamelCase reason; afterwards a healthy pipeline still runs and the operator never
    restarted."""
    base = grades("v1", space, name="base")
    base["metadata"]["namespace"] = space.name
    mutants = [manifest_mutant(i, seed=STORM_SEED, base=base) for i in range(STORM)]
    storm = Storm(space.kube, space.name)
    storm.send(mutants)
    print(storm.report())
    assert sum(storm.refused.values()) + sum(storm.reasons.values()) == STORM, storm.report()
    assert not storm.unexplained, storm.report()
    assert storm.refused["api:Invalid"] > 0 and storm.refused["kubectl:excessive aliasing"] > 0
    assert {"InvalidProgram", "SecretNotFound", "Stopped"} <= set(storm.reasons), storm.report()

    space.apply(grades("v1", space, name="healthy"))
    space.wait_phase("healthy", "Running", timeout=300)
    assert space.pods() and operator.healthy()


def test_an_image_that_cannot_be_pulled_and_executors_that_cannot_start_fail_clearly(
    space: Space, operator: Operator
) -> None:
    unpullable = grades("v1", space, name="unpullable")
    unpullable["spec"]["spark"] = {"image": "registry.invalid/spindle/nope:1.0"}
    space.apply(unpullable)
    starved = grades("v1", space, name="starved")
    starved["spec"]["spark"] = {
        "mode": "kubernetes",
        "executorInstances": 1,
        "executor": {"memory": "512Gi"},  # no node has that much
        "conf": {"spindle.executors.startTimeoutSeconds": "20"},
    }
    space.apply(starved)

    pulled = space.wait_phase("unpullable", "Failed", timeout=180)["conditions"][0]
    assert pulled["reason"] == "ImagePullFailed", pulled
    assert "registry.invalid/spindle/nope:1.0" in pulled["message"]
    assert "spec.spark.image" in pulled["message"]
    started = space.wait_phase("starved", "Failed", timeout=300)["conditions"][0]
    assert started["reason"] == "ExecutorsNotStarted", started
    assert "spec.spark.executor" in started["message"]
    assert operator.healthy()


def test_the_crd_rejects_a_malformed_spec(space: Space, operator: Operator) -> None:
    document = grades("v1", space, name="malformed", bootstrapPolicy="sometimes")
    document["metadata"]["namespace"] = space.name
    result = space.kube.kubectl("apply", "-f", "-", input=json.dumps(document), check=False)
    assert "Unsupported value" in result and "sometimes" in result, result
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    custom = client.CustomObjectsApi(space.kube.api)
    document["spec"]["bootstrapPolicy"] = "allow"
    document["spec"]["spark"] = {"executorInstances": 0}
    with pytest.raises(ApiException) as error:
        custom.create_namespaced_custom_object(
            "spindle.dev", "v1alpha1", space.name, "pipelines", document
        )
    assert error.value.status == 422
    explained = space.kube.kubectl("explain", "pipeline.spec.storage.credentials")
    assert "only as references to a Secret" in explained, explained
    assert "Running, Paused or Stopped" in space.kube.kubectl(
        "explain", "pipeline.spec.desiredState"
    )


def test_delete_on_pipeline_deletion_removes_the_data_and_nothing_else_blocks(
    space: Space, operator: Operator
) -> None:
    doomed = grades("v1", space, name="doomed", desiredState="Stopped")
    doomed["spec"]["storage"]["deleteOnPipelineDeletion"] = True
    space.apply(doomed)
    space.apply(grades("v1", space, name="kept", desiredState="Stopped"))
    for name in ("doomed", "kept"):
        write_batch(open_objects(root(space, name), s3=s3_options(space)), "students", [{"id": 1}])
        space.wait_phase(name, "Stopped")
    finalizers = space.get("doomed")["metadata"].get("finalizers", [])
    assert finalizers == ["spindle.dev/finalizer"]
    assert space.get("kept")["metadata"].get("finalizers") in (None, [])

    space.kube.kubectl("delete", "pipeline", "doomed", "kept", "-n", space.name, "--timeout=60s")
    assert open_objects(root(space, "doomed"), s3=s3_options(space)).scan("") == []
    assert open_objects(root(space, "kept"), s3=s3_options(space)).scan("") != []


def test_the_operator_holds_only_its_own_rights(kube: Any, operator: Operator) -> None:
    [pod] = operator.pods()
    assert pod["spec"]["serviceAccountName"] == "spindle-operator"
    account = f"system:serviceaccount:{SYSTEM}:spindle-operator"

    def can(*args: str) -> bool:
        return kube.kubectl("auth", "can-i", *args, "--as", account, check=False).startswith("yes")

    assert can("create", "pods", "-n", "default")
    assert can("patch", "pipelines.spindle.dev", "--subresource=status", "-n", "default")
    assert can("get", "secrets", "-n", "default")
    assert not can("list", "secrets", "-n", "default")
    assert not can("create", "secrets", "-n", "default")
    assert not can("delete", "pipelines.spindle.dev", "-n", "default")
    assert not can("update", "pipelines.spindle.dev", "-n", "default")
    assert not can("create", "deployments.apps", "-n", "default")
