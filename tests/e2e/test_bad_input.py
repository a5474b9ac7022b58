"""Bad input never crashes the operator: clear reasons, no pods, other pipelines still served."""

from __future__ import annotations

import json
import time
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


STORM = soak.count(ci=200, soak=1000)
STORM_SEED = 15


def test_a_storm_of_mutated_manifests_ends_in_refusals_and_reasons_and_others_are_served(
    space: Space, operator: Operator
) -> None:
    """The fuzzer's manifest mutants (tests/fuzz/manifests.py), sent with kubectl: each is
    refused by the API server (or by kubectl, for a YAML bomb) or gets a condition with a
    CamelCase reason. A healthy pipeline started beside the storm keeps running, still follows
    its spec afterwards, and the operator never restarted. CI sends 200, `make soak` 1,000."""
    started = time.monotonic()
    space.apply(grades("v1", space, name="healthy"))
    base = grades("v1", space, name="base")
    base["metadata"]["namespace"] = space.name
    mutants = [manifest_mutant(i, seed=STORM_SEED, base=base) for i in range(STORM)]
    storm = Storm(space.kube, space.name)
    storm.send(mutants)
    storm.gone()
    print(f"{STORM} manifests in {time.monotonic() - started:.0f}s\n{storm.report()}")
    assert storm.outcomes == STORM, storm.report()
    assert not storm.unexplained, storm.report()
    assert sum(storm.reasons.values()) == len(storm.accepted), storm.report()
    assert storm.refused["api:Invalid"] > 0 and storm.refused["kubectl:excessive aliasing"] > 0
    assert {"SecretNotFound", "Stopped"} <= set(storm.reasons), storm.report()

    space.wait_phase("healthy", "Running", timeout=300)
    space.apply(grades("v1", space, name="healthy", desiredState="Stopped"))
    space.wait_phase("healthy", "Stopped", timeout=150)
    assert operator.healthy()


OPERATOR_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "create", "delete"]},
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["s3"]},
]
"""Of the operator's rules (charts/spindle/templates/rbac.yaml), those its reads here need, with
Secrets narrowed to one name as an administrator may narrow them."""


def test_a_secret_the_operator_may_not_read_is_a_reason_not_a_retry(kube: Any) -> None:
    """The API server's 403 for a Secret (an empty name once made the GET a forbidden LIST, and
    the operator retried it forever with no condition) is the user's SecretForbidden, as a
    service account with the operator's rules sees it from the real API server. The body turns
    it into a Failed condition written once (tests/unit/test_operator_body.py); no Pipeline is
    made here, so the session's operator, which may read every Secret, does not race this."""
    from kubernetes import config

    from spindle.api import StorageSpec
    from spindle.errors import SpindleError
    from spindle.k8s.cluster import Cluster, SecretUnreadable
    from spindle.k8s.pods import DriverSettings
    from spindle.k8s.reconcile import Reconciler, Settings

    namespace = kube.namespace("forbidden")
    account = f"system:serviceaccount:{namespace}:operator"
    documents = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "operator"}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "operator"},
            "rules": OPERATOR_RULES,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "operator"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "operator",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": namespace}],
        },
    ]
    for document in documents:
        kube.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(document))
    wait_for(
        "the Role to take effect",
        lambda: kube.kubectl(
            "auth", "can-i", "get", "secrets/s3", "-n", namespace, "--as", account, check=False
        ).startswith("yes"),
        timeout=30,
    )
    api = config.new_client_from_config(str(kube.kubeconfig))
    api.set_default_header("Impersonate-User", account)
    cluster = Cluster(api)
    with pytest.raises(SecretUnreadable) as empty:  # the GET of "" is a LIST
        cluster.secret_data(namespace, "")
    assert empty.value.status == 403 and "list" in empty.value.detail, empty.value.detail

    reconciler = Reconciler(cluster=cluster, settings=Settings(driver=DriverSettings(image="x")))
    ref = {"name": "other", "key": "accessKeyId"}
    storage = StorageSpec.model_validate(
        {"uri": "s3://bucket/p", "credentials": {"accessKeyId": ref, "secretAccessKey": ref}}
    )
    with pytest.raises(SpindleError) as refused:
        reconciler.s3(namespace, storage)
    assert refused.value.reason == "SecretForbidden", refused.value
    message = refused.value.message
    assert f"{namespace}/other" in message and "forbidden" in message, message
    assert "spec.storage.credentials" in message and "service account may get" in message
    kube.kubectl("delete", "namespace", namespace, "--wait=false")


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
    # the pod stays Pending to the kubelet, which retries the pull: Stopped deletes it, so a
    # pull that succeeds late starts no driver
    unpullable["spec"]["desiredState"] = "Stopped"
    space.apply(unpullable)
    space.wait_phase("unpullable", "Stopped", timeout=180)
    left = space.kube.kubectl(
        "get", "pods", "-n", space.name, "-l", "spindle.dev/pipeline=unpullable", "-o", "name"
    )
    assert left.strip() == "", left
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
    document["spec"]["spark"] = {}
    document["spec"]["retry"] = {"initialDelaySeconds": 120}  # the default max is 60
    with pytest.raises(ApiException) as error:
        custom.create_namespaced_custom_object(
            "spindle.dev", "v1alpha1", space.name, "pipelines", document
        )
    assert error.value.status == 422
    assert "initialDelaySeconds is longer than maxDelaySeconds" in str(error.value.body)
    document["spec"].pop("retry")
    document["metadata"]["name"] = "n" * 64
    with pytest.raises(ApiException) as error:
        custom.create_namespaced_custom_object(
            "spindle.dev", "v1alpha1", space.name, "pipelines", document
        )
    assert error.value.status == 422
    assert "name is at most 63 characters" in str(error.value.body)
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
    # kopf's bookkeeping stays off the object GitOps applied: no last-handled configuration
    annotations = space.get("doomed")["metadata"].get("annotations") or {}
    assert not [a for a in annotations if a.startswith("spindle.dev/")], annotations

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
    assert not can("get", "pods", "-n", "default")  # it lists and watches its drivers
    assert can("patch", "pipelines.spindle.dev", "--subresource=status", "-n", "default")
    assert can("get", "secrets", "-n", "default")
    assert not can("list", "secrets", "-n", "default")
    assert not can("create", "secrets", "-n", "default")
    assert not can("delete", "pipelines.spindle.dev", "-n", "default")
    assert not can("update", "pipelines.spindle.dev", "-n", "default")
    assert not can("create", "deployments.apps", "-n", "default")
    # a driver pod's owner reference blocks the pipeline's deletion: what admission checks
    assert can("update", "pipelines.spindle.dev", "--subresource=finalizers", "-n", "default")
    assert can("create", "events", "-n", "default")
    assert not can("patch", "events", "-n", "default")


def test_a_namespace_without_pipelines_or_drivers_lists_none(kube: Any, crd: None) -> None:
    """The API server answers an empty metadata-only list with `"items": null`: the re-list
    failed on it, and the operator went unhealthy and restarted every two minutes where a
    namespace it watches had no Pipeline (a fresh install's)."""
    from kubernetes import config

    from spindle.k8s.cluster import Cluster

    namespace = kube.namespace("empty")
    cluster = Cluster(config.new_client_from_config(str(kube.kubeconfig)))
    assert cluster.pipelines([namespace]) == []
    assert cluster.driver_pods(namespace, "none") == []
    kube.kubectl("delete", "namespace", namespace, "--wait=false")


def test_an_unreadable_input_fails_the_driver_with_its_reason_and_a_restart_nonce_retries(
    space: Space, operator: Operator
) -> None:
    """A driver whose input bucket does not exist retries its step as `spec.retry` allows,
    which the status shows while it waits (`Running`, not Ready: `StepRetrying`, seen through
    the driver pod's readiness, and a Warning Event), then fails with `InputUnreadable` in the
    status, naming the connector, the location and the retries, and stays `Failed`; once the
    bucket exists,
    `kubectl spindle restart` (one more `spec.restartNonce`, and nothing else) starts a driver
    again, which ingests the input."""
    bucket = f"{space.bucket}-inbox"
    location = f"s3a://{bucket}/events"
    connectors = json.dumps(
        [
            {
                "name": "inbox",
                "transport": {"name": "file_input", "config": {"path": location}},
                "format": {"name": "json"},
            }
        ]
    )
    sql = (
        f"create table events (id bigint, k int) with ('connectors' = '{connectors}');\n"
        "create materialized view counts as select k, count(*) as n from events group by k;\n"
    )
    retry = {"attempts": 1, "initialDelaySeconds": 30}  # the default waits 62 s in all
    space.apply(grades("v1", space, name="inbox", sql=sql, retry=retry))
    retrying = space.wait_phase(
        "inbox", "Running", timeout=300, conditions=lambda c: c[0]["reason"] == "StepRetrying"
    )
    assert retrying["conditions"][0]["status"] == "False", json.dumps(retrying, indent=1)
    assert "waiting to retry a step" in retrying["conditions"][0]["message"]
    events = space.kube.kubectl(
        "get", "events", "-n", space.name, "--field-selector", "reason=StepRetrying", "-o", "json"
    )
    assert [e["type"] for e in json.loads(events)["items"]] == ["Warning"], events
    failed = space.wait_phase("inbox", "Failed", timeout=300)
    condition = failed["conditions"][0]
    assert condition["reason"] == "InputUnreadable", json.dumps(failed, indent=1)
    assert f"Input connector events.inbox cannot read {location}: " in condition["message"]
    assert "The step failed 2 times: its first attempt and 1 retry" in condition["message"]
    assert "spec.restartNonce" in condition["message"]
    logs = space.kube.kubectl("logs", "inbox-g1-driver", "-n", space.name)
    assert "Step 1 failed (InputUnreadable)" in logs and "Retry 1 of 1 in 30 s" in logs
    time.sleep(5)  # a failed driver is not restarted in a loop
    assert space.status("inbox")["phase"] == "Failed"
    assert [p["metadata"]["name"] for p in space.pods()] == ["inbox-g1-driver"]

    space.s3.client().create_bucket(Bucket=bucket)
    lines = [json.dumps({"id": i, "k": i % 2}) for i in range(5)]
    space.s3.client().put_object(Bucket=bucket, Key="events/a.json", Body="\n".join(lines))
    assert "spec.restartNonce=1" in space.plugin("restart", "inbox")
    running = space.wait_phase(
        "inbox", "Running", timeout=300, lastCheckpoint=lambda c: bool(c) and c["tableRows"] == 5
    )
    assert running["driverPod"]["name"] == "inbox-g2-driver"
    assert "NothingToRestart" in space.plugin("restart", "inbox", check=False)  # it runs
    assert space.get("inbox")["spec"]["restartNonce"] == 1
    assert operator.healthy()
