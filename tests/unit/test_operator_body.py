"""The operator body against a fake API server: the API calls each decision turns into.

As in sample-controller's controller tests: set up objects, run one reconcile, compare the
recorded actions. Storage is a local directory, so checkpoints are real.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from spindle.api.types import StorageSpec
from spindle.checkpoint.store import CheckpointStore, open_store
from spindle.k8s.pods import EVICTIONS_ANNOTATION, DriverSettings
from spindle.k8s.reconcile import Reconciler, Settings
from spindle.plan.preview import PreviewReport
from tests.checkpoints import seed
from tests.fake_cluster import FakeCluster
from tests.unit.test_lifecycle import V1, V2

GRACE = 120


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster()


@pytest.fixture
def reconciler(cluster: FakeCluster) -> Reconciler:
    return reconciler_of(cluster)


def reconciler_of(fake: FakeCluster) -> Reconciler:
    """The operator's body over `fake` (a FakeCluster, or one that refuses as a test needs)."""
    driver = DriverSettings(image="spindle:test", termination_grace_seconds=GRACE)
    return Reconciler(cluster=fake, settings=Settings(driver=driver, shared_files=True))  # type: ignore[arg-type]


def unschedulable(message: str) -> dict[str, Any]:
    """The status of a pod no node can take, with the scheduler's `message`."""
    scheduled = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    return {"phase": "Pending", "conditions": [{**scheduled, "message": message}]}


def spec(tmp_path: Path, sql: str, **fields: Any) -> dict[str, Any]:
    return {"sql": sql, "storage": {"uri": tmp_path.as_uri()}, **fields}


def seeded(tmp_path: Path, sql: str = V1) -> str:
    store = open_store(tmp_path.as_uri(), namespace="default", name="grades")
    return seed(store, namespace="default", name="grades", program=sql).id


def running(cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path) -> None:
    """Pipeline grades of V1 over a checkpoint of V1, its run driver's pod Running."""
    seeded(tmp_path)
    cluster.apply("grades", spec(tmp_path, V1))
    reconciler.reconcile("default", "grades")
    cluster.set_pod_phase("grades-g1-driver", "Running")


def test_a_new_pipeline_starts_a_run_driver(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path
) -> None:
    cluster.apply("grades", spec(tmp_path, V1))
    outcome = reconciler.reconcile("default", "grades")
    # no timed requeue (the new pod's watch event reconciles again), and never settled while
    # a driver is active, so re-lists keep reconciling it
    assert outcome is not None and outcome.requeue_after is None and not outcome.quiet
    assert cluster.take_calls() == [("create_pod", "grades-g1-driver"), ("write_status", "Pending")]
    status = cluster.status("grades")
    assert status["driverPod"] == {"name": "grades-g1-driver", "mode": "run", "phase": "Pending"}
    pod = cluster.pods[("default", "grades-g1-driver")]
    assert pod["spec"]["containers"][0]["command"][:4] == ["spindle", "driver", "--mode", "run"]


def test_a_second_reconcile_adopts_the_pod_and_writes_nothing(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path
) -> None:
    cluster.apply("grades", spec(tmp_path, V1))
    reconciler.reconcile("default", "grades")
    cluster.take_calls()
    cluster.set_pod_phase("grades-g1-driver", "Running")
    reconciler.reconcile("default", "grades")
    assert cluster.take_calls() == [("write_status", "Running")]
    reconciler.reconcile("default", "grades")
    assert cluster.take_calls() == []  # level-based: nothing changed, nothing is written


def test_a_change_awaits_approval_then_the_approved_id_starts_a_bootstrap_pod(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path
) -> None:
    seeded(tmp_path)
    cluster.apply("grades", spec(tmp_path, V2))
    reconciler.reconcile("default", "grades")
    assert cluster.take_calls() == [("write_status", "AwaitingApproval")]
    change = cluster.status("grades")["pendingChange"]["id"]
    cluster.annotate("grades", "spindle.dev/approve", "0123456789ab")
    reconciler.reconcile("default", "grades")
    assert cluster.take_calls() == [
        ("event", "Warning", "ApprovalIgnored"),
        ("write_status", "AwaitingApproval"),
    ]
    reconciler.reconcile("default", "grades")
    assert cluster.take_calls() == []  # the ignored approval is announced once
    cluster.annotate("grades", "spindle.dev/approve", change)
    reconciler.reconcile("default", "grades")
    name = f"grades-{change}-driver"
    assert cluster.take_calls() == [("create_pod", name), ("write_status", "Bootstrapping")]
    command = cluster.pods[("default", name)]["spec"]["containers"][0]["command"]
    assert command[command.index("--change-id") + 1] == change
    assert command[command.index("--approved-by") + 1] == "annotation spindle.dev/approve"


def test_a_bootstrap_the_policy_allows_records_the_policy_as_its_approver(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path
) -> None:
    seeded(tmp_path)
    cluster.apply("grades", spec(tmp_path, V2, bootstrapPolicy="allow"))
    reconciler.reconcile("default", "grades")
    [pod] = cluster.pods.values()
    command = pod["spec"]["containers"][0]["command"]
    assert command[command.index("--mode") + 1] == "bootstrap"
    assert command[command.index("--approved-by") + 1] == "spec.bootstrapPolicy: allow"


def test_a_driver_pod_deleted_by_hand_is_stopping_until_gone_then_started_again(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path
) -> None:
    running(cluster, reconciler, tmp_path)
    reconciler.reconcile("default", "grades")
    cluster.take_calls()
    ends = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=GRACE)
    pod = cluster.pods[("default", "grades-g1-driver")]
    pod["metadata"]["deletionTimestamp"] = ends.strftime("%Y-%m-%dT%H:%M:%SZ")
    reconciler.reconcile("default", "grades")
    assert cluster.take_calls() == [("write_status", "Stopping")]  # no second delete
    assert cluster.status("grades")["conditions"][0]["reason"] == "DriverDeleted"
    cluster.pods.clear()  # its kubelet ended it
    reconciler.reconcile("default", "grades")
    assert cluster.take_calls() == [("create_pod", "grades-g1-driver"), ("write_status", "Pending")]


def test_a_program_change_stops_the_running_driver_gracefully(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path
) -> None:
    running(cluster, reconciler, tmp_path)
    cluster.apply("grades", spec(tmp_path, V2))
    cluster.take_calls()
    outcome = reconciler.reconcile("default", "grades")
    assert outcome is not None and outcome.phase == "Stopping"
    assert cluster.take_calls() == [
        ("delete_pod", "grades-g1-driver", GRACE),
        ("write_status", "Stopping"),
    ]


def test_an_invalid_spec_fails_with_one_warning_event(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path
) -> None:
    cluster.apply("grades", spec(tmp_path, V1, runtimeVersion="v9"))
    reconciler.reconcile("default", "grades")
    assert cluster.take_calls() == [
        ("event", "Warning", "InvalidSpec"),
        ("write_status", "Failed"),
    ]
    assert "spec.runtimeVersion" in cluster.status("grades")["conditions"][0]["message"]
    reconciler.reconcile("default", "grades")
    assert cluster.take_calls() == []


@pytest.mark.parametrize(
    ("storage", "named"),
    [
        ({"uri": "file:///var/spindle"}, "spec.storage.uri"),
        ({"uri": "/var/spindle"}, "spec.storage.uri"),
        ({"uri": "s3://b/p", "startFrom": "file:///old/default/grades#00000001-a"}, "startFrom"),
        (None, "--default-storage-uri"),
    ],
)
def test_local_storage_on_a_cluster_fails_before_any_driver_starts(
    cluster: FakeCluster, storage: dict[str, str] | None, named: str
) -> None:
    """The operator and the driver pods each have a file system: the operator never saw the
    driver's checkpoints, and restarted every edit without approval."""
    default = StorageSpec(uri="file:///var/spindle")
    settings = Settings(driver=DriverSettings(image="spindle:test"), default_storage=default)
    reconciler = Reconciler(cluster=cluster, settings=settings)  # type: ignore[arg-type]
    cluster.apply("grades", {"sql": V1} | ({"storage": storage} if storage else {}))
    reconciler.reconcile("default", "grades")
    assert cluster.take_calls() == [
        ("event", "Warning", "StorageNotShared"),
        ("write_status", "Failed"),
    ]
    message = cluster.status("grades")["conditions"][0]["message"]
    assert named in message and "s3://bucket/prefix" in message


def test_a_missing_secret_fails_without_touching_pods(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path
) -> None:
    ref = {"name": "s3", "key": "id"}
    storage = {
        "uri": tmp_path.as_uri(),
        "credentials": {"accessKeyId": ref, "secretAccessKey": ref},
    }
    cluster.apply("grades", {"sql": V1, "storage": storage})
    reconciler.reconcile("default", "grades")
    assert cluster.take_calls() == [
        ("event", "Warning", "SecretNotFound"),
        ("write_status", "Failed"),
    ]


def test_a_refused_driver_pod_is_a_failure_naming_the_service_account(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path
) -> None:
    cluster.refuse_pods = 403
    cluster.apply("grades", spec(tmp_path, V1))
    outcome = reconciler.reconcile("default", "grades")
    assert outcome is not None and outcome.requeue_after == 30.0
    assert cluster.take_calls() == [
        ("create_pod", "grades-g1-driver"),
        ("event", "Warning", "DriverPodRejected"),
        ("write_status", "Failed"),
    ]
    assert "serviceAccountName" in cluster.status("grades")["conditions"][0]["message"]


@pytest.mark.parametrize(
    ("status", "reason"), [(403, "SecretForbidden"), (422, "SecretUnreadable")]
)
def test_a_secret_the_api_server_refuses_fails_once_with_a_reason(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path, status: int, reason: str
) -> None:
    """A refused GET of the Secret (once: an empty name made it a forbidden LIST) is a
    condition, not an error retried forever; the next reconcile writes nothing new."""
    cluster.refuse_secrets = status
    ref = {"name": "s3", "key": "id"}
    storage = {
        "uri": tmp_path.as_uri(),
        "credentials": {"accessKeyId": ref, "secretAccessKey": ref},
    }
    cluster.apply("grades", {"sql": V1, "storage": storage})
    outcome = reconciler.reconcile("default", "grades")
    assert outcome is not None and outcome.phase == "Failed" and outcome.requeue_after is None
    assert cluster.take_calls() == [("event", "Warning", reason), ("write_status", "Failed")]
    [condition] = cluster.status("grades")["conditions"]
    assert condition["reason"] == reason and "default/s3" in condition["message"], condition
    assert "spec.storage.credentials" in condition["message"]
    reconciler.reconcile("default", "grades")
    assert cluster.take_calls() == []


def test_a_refused_pod_list_is_a_condition_and_a_throttle_is_retried(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path
) -> None:
    cluster.refuse_pod_list = 403
    cluster.apply("grades", spec(tmp_path, V1))
    reconciler.reconcile("default", "grades")
    assert cluster.take_calls() == [
        ("event", "Warning", "ApiRequestRefused"),
        ("write_status", "Failed"),
    ]
    assert "HTTP 403" in cluster.status("grades")["conditions"][0]["message"]
    cluster.refuse_pod_list = 429  # may pass on a retry: the worker retries, no condition
    with pytest.raises(ApiException):
        reconciler.reconcile("default", "grades")


def test_a_restate_annotation_awaits_approval_and_the_bootstrap_pod_carries_it(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path
) -> None:
    seeded(tmp_path)
    cluster.apply("grades", spec(tmp_path, V1))
    cluster.annotate("grades", "spindle.dev/restate", "avg_grade_enriched,nope")
    reconciler.reconcile("default", "grades")
    assert cluster.take_calls() == [
        ("event", "Warning", "UnknownRelation"),
        ("write_status", "Failed"),
    ]
    assert "'nope'" in cluster.status("grades")["conditions"][0]["message"]
    cluster.annotate("grades", "spindle.dev/restate", "avg_grade_enriched")
    reconciler.reconcile("default", "grades")
    assert cluster.take_calls() == [("write_status", "AwaitingApproval")]
    pending = cluster.status("grades")["pendingChange"]
    assert pending["reason"] == "restate"
    assert pending["diff"]["program_diff"]["modified_views"] == ["avg_grade_enriched"]
    assert pending["estimate"]["viewsToEvaluate"] == ["avg_grade_enriched"]
    assert pending["estimate"]["connectorRows"] == 0
    cluster.annotate("grades", "spindle.dev/approve", pending["id"])
    reconciler.reconcile("default", "grades")
    name = f"grades-{pending['id']}-driver"
    assert cluster.take_calls() == [("create_pod", name), ("write_status", "Bootstrapping")]
    command = cluster.pods[("default", name)]["spec"]["containers"][0]["command"]
    assert command[command.index("--restate") + 1] == "avg_grade_enriched"


def test_previews_are_listed_only_while_one_is_requested_and_remembered_after(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fleet of pending changes costs no LIST of previews at each reconcile."""
    listed: list[str] = []
    latest = CheckpointStore.latest_preview

    def counted(store: CheckpointStore) -> PreviewReport | None:
        listed.append(store.uri)
        return latest(store)

    monkeypatch.setattr(CheckpointStore, "latest_preview", counted)
    checkpoint = seeded(tmp_path)
    cluster.apply("grades", spec(tmp_path, V2))
    for _ in range(3):
        reconciler.reconcile("default", "grades")
    assert len(listed) == 1  # once for this checkpoint and program: none since
    change = cluster.status("grades")["pendingChange"]["id"]
    request = f"{change}@first"
    cluster.annotate("grades", "spindle.dev/preview", request)
    reconciler.reconcile("default", "grades")  # starts the preview pod
    report = PreviewReport(
        change_id=change, checkpoint=checkpoint, created_at="t", sample_rows=1, request=request
    )
    open_store(tmp_path.as_uri(), namespace="default", name="grades").write_preview(report)
    reconciler.reconcile("default", "grades")
    assert len(listed) == 3  # read at each reconcile while requested
    assert cluster.status("grades")["pendingChange"]["preview"]["checkpoint"] == checkpoint
    del cluster.pipelines[("default", "grades")]["metadata"]["annotations"]["spindle.dev/preview"]
    reconciler.reconcile("default", "grades")
    assert len(listed) == 3
    assert cluster.status("grades")["pendingChange"]["preview"]["checkpoint"] == checkpoint


def test_a_spark_setting_that_belongs_to_the_runtime_is_an_invalid_spec(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path
) -> None:
    conf = {"conf": {"spark.sql.ansi.enabled": "true"}}
    cluster.apply("grades", spec(tmp_path, V1, spark=conf))
    reconciler.reconcile("default", "grades")
    status = cluster.status("grades")
    ready = status["conditions"][0]
    assert status["phase"] == "Failed" and ready["reason"] == "InvalidSpec"
    assert ready["message"] == (
        "spec.spark.conf: spark.sql.ansi.enabled belongs to the runtime's semantics; pin "
        "spec.runtimeVersion (v1, v2) instead. Fix the Pipeline spec."
    )
    assert cluster.pods == {}


@pytest.mark.parametrize(
    ("key", "instead"),
    [
        ("spark.kubernetes.executor.container.image", "spec.spark.image"),
        ("spark.kubernetes.driver.container.image", "spec.spark.image"),
        ("spark.kubernetes.authenticate.executor.serviceAccountName", "spec.serviceAccountName"),
        ("spark.kubernetes.executor.podTemplateFile", "executor pod template"),
        ("spark.kubernetes.executor.volumes.hostPath.root.mount.path", "executor pod template"),
        ("spark.kubernetes.driver.podTemplateFile", "the driver pod the operator makes"),
        ("spark.kubernetes.executor.pod.excludedFeatureSteps", "executor pod template"),
        ("spark.kubernetes.driver.master", "spec.spark.mode"),
        ("spark.kubernetes.executor.secrets.other", "spec.storage.credentials"),
        ("spark.kubernetes.namespace", "namespace"),
        ("spark.master", "spec.spark.mode"),
    ],
)
def test_a_spark_setting_the_operator_sets_is_an_invalid_spec(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path, key: str, instead: str
) -> None:
    """The cluster's checks on drivers (allowed images and service accounts) look at
    spec.spark.image and spec.serviceAccountName: spec.spark.conf may not go around them, nor
    around the restricted executor pod template."""
    cluster.apply("grades", spec(tmp_path, V1, spark={"mode": "kubernetes", "conf": {key: "x"}}))
    reconciler.reconcile("default", "grades")
    ready = cluster.status("grades")["conditions"][0]
    assert ready["reason"] == "InvalidSpec", ready
    assert f"spec.spark.conf: {key} is the operator's to set" in ready["message"]
    assert instead in ready["message"]
    assert cluster.pods == {}


def test_a_spark_setting_of_the_executors_resources_is_the_users(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path
) -> None:
    conf = {
        "spark.kubernetes.executor.limit.cores": "2",
        "spark.kubernetes.container.image.pullPolicy": "Always",
        "spark.kubernetes.executor.volumes.emptyDir.scratch.mount.path": "/scratch",
        "spark.kubernetes.executor.volumes.persistentVolumeClaim.data.options.claimName": "d",
    }
    cluster.apply("grades", spec(tmp_path, V1, spark={"mode": "kubernetes", "conf": conf}))
    reconciler.reconcile("default", "grades")
    assert cluster.status("grades")["phase"] == "Pending"


def stuck_pulling(cluster: FakeCluster, name: str) -> None:
    """The driver pod `name` as a kubelet leaves one whose image it cannot pull: Pending, and
    waiting to retry (it may yet start, when the registry answers)."""
    cluster.pods[("default", name)]["status"] = {
        "phase": "Pending",
        "containerStatuses": [
            {
                "name": "driver",
                "state": {"waiting": {"reason": "ImagePullBackOff", "message": "not found"}},
            }
        ],
    }


def test_a_driver_stuck_pulling_is_deleted_before_the_next_generation_starts(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path
) -> None:
    """Two drivers of one pipeline write one checkpoint store: the stuck pod (Failed in the
    status, Pending to the kubelet, which may yet start it) makes way as a finished one does."""
    cluster.apply("grades", spec(tmp_path, V1))
    reconciler.reconcile("default", "grades")
    stuck_pulling(cluster, "grades-g1-driver")
    reconciler.reconcile("default", "grades")
    status = cluster.status("grades")
    assert status["phase"] == "Failed" and status["driverPod"]["phase"] == "Failed", status
    cluster.take_calls()
    cluster.apply("grades", spec(tmp_path, V1, restartNonce=1))
    cluster.terminating = True
    reconciler.reconcile("default", "grades")
    calls = cluster.take_calls()  # deleted with a grace: listed until its kubelet ended it
    assert ("delete_pod", "grades-g1-driver", 1) in calls, calls
    assert not [c for c in calls if c[0] == "create_pod"], calls
    reconciler.reconcile("default", "grades")
    assert not [c for c in cluster.take_calls() if c[0] in ("create_pod", "delete_pod")]
    cluster.pods.clear()  # the kubelet ended it
    reconciler.reconcile("default", "grades")
    assert ("create_pod", "grades-g2-driver") in cluster.take_calls()
    assert [name for _, name in cluster.pods] == ["grades-g2-driver"]


def test_stopping_deletes_a_driver_stuck_pulling(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path
) -> None:
    cluster.apply("grades", spec(tmp_path, V1))
    reconciler.reconcile("default", "grades")
    stuck_pulling(cluster, "grades-g1-driver")
    reconciler.reconcile("default", "grades")
    cluster.apply("grades", spec(tmp_path, V1, desiredState="Stopped"))
    cluster.take_calls()
    reconciler.reconcile("default", "grades")
    assert ("delete_pod", "grades-g1-driver", GRACE) in cluster.take_calls()
    reconciler.reconcile("default", "grades")
    assert cluster.status("grades")["phase"] == "Stopped"
    assert not cluster.pods


def test_stopped_is_honoured_while_the_pipeline_cannot_be_observed(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path
) -> None:
    """desiredState: Stopped stops the driver even when its Secret is gone (the storage, the
    spec: whatever keeps the operator from reading the rest)."""
    ref = {"name": "s3", "key": "id"}
    storage = {
        "uri": tmp_path.as_uri(),
        "credentials": {"accessKeyId": ref, "secretAccessKey": ref},
    }
    cluster.secrets[("default", "s3")] = {"id": "x"}
    cluster.apply("grades", {"sql": V1, "storage": storage})
    reconciler.reconcile("default", "grades")
    cluster.set_pod_phase("grades-g1-driver", "Running")
    del cluster.secrets[("default", "s3")]
    cluster.apply("grades", {"sql": V1, "storage": storage, "desiredState": "Stopped"})
    cluster.take_calls()
    reconciler.reconcile("default", "grades")
    calls = cluster.take_calls()
    assert ("delete_pod", "grades-g1-driver", GRACE) in calls, calls
    assert cluster.status("grades")["conditions"][0]["reason"] == "SecretNotFound"


def test_deleting_the_data_waits_until_the_driver_pods_are_gone(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path
) -> None:
    """deleteOnPipelineDeletion: a running driver would commit a checkpoint into the emptied
    prefix, so its pod is deleted first, and the data only once no pod is left."""
    running(cluster, reconciler, tmp_path)
    cluster.take_calls()
    pipeline = cluster.pipeline("default", "grades")
    assert pipeline is not None
    cluster.terminating = True  # a deleted pod stays until its kubelet has ended it
    pod = cluster.pods[("default", "grades-g1-driver")]
    pod["metadata"] |= {"deletionTimestamp": "t", "deletionGracePeriodSeconds": GRACE}
    assert reconciler.delete_data(pipeline) is None  # a graceful stop under way is cut short
    assert cluster.take_calls() == [("delete_pod", "grades-g1-driver", 1)]  # not forced
    pod["metadata"]["deletionGracePeriodSeconds"] = 1
    assert any(tmp_path.rglob("*.json")), "nothing is deleted while a driver may write"
    assert reconciler.delete_data(pipeline) is None
    assert cluster.take_calls() == []  # asked once
    cluster.pods.clear()  # the kubelet ended it
    count = reconciler.delete_data(pipeline)
    assert count and not [p for p in tmp_path.rglob("*") if p.is_file()]


def approved_bootstrap(cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path) -> str:
    """A pipeline seeded with V1, changed to V2 and approved: its bootstrap pod's name."""
    seeded(tmp_path)
    cluster.apply("grades", spec(tmp_path, V2))
    reconciler.reconcile("default", "grades")
    change = cluster.status("grades")["pendingChange"]["id"]
    cluster.annotate("grades", "spindle.dev/approve", change)
    reconciler.reconcile("default", "grades")
    return f"grades-{change}-driver"


def test_a_bootstrap_pod_stuck_pulling_makes_way_for_its_namesake(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path
) -> None:
    """A new image keeps the change id, so the next bootstrap pod has the stuck one's name:
    that one is deleted with a grace and waited for too, never forced away while it may
    still start."""
    name = approved_bootstrap(cluster, reconciler, tmp_path)
    change = name.removeprefix("grades-").removesuffix("-driver")
    stuck_pulling(cluster, name)
    reconciler.reconcile("default", "grades")
    assert cluster.status("grades")["phase"] == "Failed"
    cluster.apply(
        "grades",
        spec(tmp_path, V2, spark={"image": "spindle:fixed"}),
        **{"spindle.dev/approve": change},
    )
    cluster.terminating = True
    cluster.take_calls()
    reconciler.reconcile("default", "grades")
    calls = cluster.take_calls()
    assert ("delete_pod", name, 1) in calls and ("create_pod", name) in calls, calls
    reconciler.reconcile("default", "grades")  # its create meets the ending pod: AlreadyExists
    assert not [c for c in cluster.take_calls() if c[0] == "delete_pod"]
    assert cluster.pods[("default", name)]["metadata"]["deletionTimestamp"]
    cluster.pods.clear()  # the kubelet ended it
    reconciler.reconcile("default", "grades")
    assert ("create_pod", name) in cluster.take_calls()
    assert "deletionTimestamp" not in cluster.pods[("default", name)]["metadata"]


def test_a_driver_no_node_can_take_or_end_is_not_ready_and_says_why(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path
) -> None:
    """Both showed Running and Ready (Healthy in Argo CD), with driverPod Pending or
    Terminating and nothing saying why no step ran."""
    cluster.apply("grades", spec(tmp_path, V1))
    reconciler.reconcile("default", "grades")
    pod = cluster.pods[("default", "grades-g1-driver")]
    reconciler.reconcile("default", "grades")
    starting = cluster.status("grades")
    assert (starting["phase"], _ready(starting)) == ("Pending", ("False", "Starting"))
    pod["status"] = unschedulable("0/3 nodes are available: 3 Insufficient memory.")
    reconciler.reconcile("default", "grades")
    status = cluster.status("grades")
    assert (status["phase"], _ready(status)) == ("Pending", ("False", "DriverUnschedulable"))
    assert "3 Insufficient memory" in status["conditions"][0]["message"]
    assert "spec.spark.driver" in status["conditions"][0]["message"]

    pod["status"] = {"phase": "Running", "containerStatuses": [{"name": "driver", "ready": True}]}
    reconciler.reconcile("default", "grades")
    assert cluster.status("grades")["phase"] == "Running"
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T01:05:00Z"  # long past: its node is gone
    pod["spec"]["nodeName"] = "node-a"
    cluster.take_calls()
    reconciler.reconcile("default", "grades")
    status = cluster.status("grades")
    assert (status["phase"], _ready(status)) == ("Stopping", ("False", "DriverTerminating"))
    assert status["driverPod"]["phase"] == "Terminating"
    assert "kubectl get node node-a" in status["conditions"][0]["message"]
    assert not [c for c in cluster.take_calls() if c[0] == "create_pod"]  # one driver at a time
    cluster.apply("grades", spec(tmp_path, V1, desiredState="Stopped"))  # a stop it never ends
    reconciler.reconcile("default", "grades")
    status = cluster.status("grades")
    assert (status["phase"], _ready(status)) == ("Stopping", ("False", "DriverTerminating"))


def _ready(status: dict[str, Any]) -> tuple[str, str]:
    [ready] = [c for c in status["conditions"] if c["type"] == "Ready"]
    return ready["status"], ready["reason"]


@pytest.mark.parametrize(
    ("status", "said"),
    [
        (  # the kubelet under memory pressure: the container was killed, exit 137
            {
                "phase": "Failed",
                "reason": "Evicted",
                "message": "The node was low on resource: memory.",
                "containerStatuses": [{"state": {"terminated": {"exitCode": 137}}}],
            },
            "Evicted: The node was low on resource: memory",
        ),
        (  # a graceful node shutdown: the driver stopped cleanly
            {
                "phase": "Failed",
                "reason": "Terminated",
                "message": "Pod was terminated in response to imminent node shutdown.",
                "containerStatuses": [{"state": {"terminated": {"exitCode": 0}}}],
            },
            "Terminated: Pod was terminated in response to imminent node shutdown",
        ),
        (
            {
                "phase": "Failed",
                "conditions": [
                    {
                        "type": "DisruptionTarget",
                        "status": "True",
                        "reason": "PreemptionByScheduler",
                        "message": "Preempted by a higher priority pod",
                    }
                ],
            },
            "PreemptionByScheduler: Preempted by a higher priority pod",
        ),
    ],
)
def test_a_driver_the_cluster_stopped_is_started_again_saying_why(
    cluster: FakeCluster,
    reconciler: Reconciler,
    tmp_path: Path,
    status: dict[str, Any],
    said: str,
) -> None:
    """It failed the pipeline for good (DriverFailed "exited with code 137", or "see its
    logs" for a clean exit), until someone bumped spec.restartNonce."""
    cluster.apply("grades", spec(tmp_path, V1))
    reconciler.reconcile("default", "grades")
    cluster.pods[("default", "grades-g1-driver")]["status"] = status
    cluster.take_calls()
    reconciler.reconcile("default", "grades")
    calls = cluster.take_calls()
    assert ("delete_pod", "grades-g1-driver", 0) in calls, calls
    assert ("event", "Warning", "DriverEvicted") in [c[:3] for c in calls], calls
    restarting = cluster.status("grades")
    assert (restarting["phase"], _ready(restarting)) == ("Pending", ("False", "DriverEvicted"))
    assert said in restarting["conditions"][0]["message"]
    reconciler.reconcile("default", "grades")
    assert ("create_pod", "grades-g1-driver") in cluster.take_calls()


def _evicted_after(seconds: float, *, ended: float) -> dict[str, Any]:
    """An evicted driver's status: it ran `seconds` and ended `ended` seconds ago."""
    now = datetime.datetime.now(datetime.UTC)

    def at(ago: float) -> str:
        return (now - datetime.timedelta(seconds=ago)).strftime("%Y-%m-%dT%H:%M:%SZ")

    state = {"terminated": {"exitCode": 137, "startedAt": at(ended + seconds)}}
    state["terminated"]["finishedAt"] = at(ended)
    return {
        "phase": "Failed",
        "reason": "Evicted",
        "message": "The node was low on resource: memory.",
        "startTime": at(ended + seconds + 5),
        "containerStatuses": [{"name": "driver", "state": state}],
    }


def test_drivers_the_cluster_keeps_stopping_are_started_again_after_a_growing_back_off(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path
) -> None:
    """A node that evicted every driver soon after it started (or a kubelet refusing the pod
    at admission) had the operator create a driver every few seconds, for good."""
    key = ("default", "grades-g1-driver")
    cluster.apply("grades", spec(tmp_path, V1))
    reconciler.reconcile("default", "grades")
    cluster.pods[key]["status"] = _evicted_after(30, ended=1)
    reconciler.reconcile("default", "grades")  # the first is started again at once
    reconciler.reconcile("default", "grades")
    assert ("create_pod", key[1]) in cluster.take_calls()
    assert cluster.pods[key]["metadata"]["annotations"] == {EVICTIONS_ANNOTATION: "1"}

    cluster.pods[key]["status"] = _evicted_after(30, ended=1)  # the second, 30 s in
    outcome = reconciler.reconcile("default", "grades")
    assert outcome is not None and outcome.requeue_after is not None
    assert 5 < outcome.requeue_after <= 10  # kept, and looked at again when its back-off ends
    calls = cluster.take_calls()
    assert not [c for c in calls if c[0] in ("create_pod", "delete_pod")], calls
    status = cluster.status("grades")
    assert (status["phase"], _ready(status)) == ("Pending", ("False", "DriverEvicted"))
    assert (
        "stopped 2 drivers of this pipeline in a row, so the next starts at"
        in (status["conditions"][0]["message"])
    )

    cluster.pods[key]["status"] = _evicted_after(30, ended=11)  # its back-off is over
    reconciler.reconcile("default", "grades")
    reconciler.reconcile("default", "grades")
    assert ("create_pod", key[1]) in cluster.take_calls()
    assert cluster.pods[key]["metadata"]["annotations"] == {EVICTIONS_ANNOTATION: "2"}
    cluster.pods[key]["status"] = _evicted_after(30, ended=11)  # the third waits 20 s
    outcome = reconciler.reconcile("default", "grades")
    assert outcome is not None and outcome.requeue_after is not None
    assert 5 < outcome.requeue_after <= 10

    cluster.pods[key]["status"] = _evicted_after(900, ended=1)  # one that ran 15 minutes
    reconciler.reconcile("default", "grades")  # starts the count again: at once
    reconciler.reconcile("default", "grades")
    assert ("create_pod", key[1]) in cluster.take_calls()
    assert cluster.pods[key]["metadata"]["annotations"] == {EVICTIONS_ANNOTATION: "1"}


def test_a_back_off_outlives_its_pod_and_gives_way_to_a_new_generation(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path
) -> None:
    """The stopped pod can go before its back-off ends (the pod garbage collector, a user's
    `kubectl delete pod`): the next driver still waits. A spec change is the user's fix: its
    driver starts at once."""
    key = ("default", "grades-g1-driver")
    cluster.apply("grades", spec(tmp_path, V1))
    reconciler.reconcile("default", "grades")
    cluster.pods[key]["metadata"]["annotations"] = {EVICTIONS_ANNOTATION: "1"}
    cluster.pods[key]["status"] = _evicted_after(30, ended=1)
    reconciler.reconcile("default", "grades")
    del cluster.pods[key]
    cluster.take_calls()
    outcome = reconciler.reconcile("default", "grades")
    assert outcome is not None and outcome.requeue_after is not None
    assert 5 < outcome.requeue_after <= 10
    assert not [c for c in cluster.take_calls() if c[0] == "create_pod"]

    cluster.apply("grades", spec(tmp_path, V1, restartNonce=1))
    reconciler.reconcile("default", "grades")
    assert ("create_pod", "grades-g2-driver") in cluster.take_calls()
    assert "annotations" not in cluster.pods[("default", "grades-g2-driver")]["metadata"]


def test_the_data_is_deleted_when_the_secret_went_first(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path
) -> None:
    """`kubectl delete namespace`, or an Argo CD app holding the Secret and the Pipeline,
    deletes the Secret first: delete_data failed with SecretNotFound, kopf gave up, and the
    checkpoints stayed. The credentials of the pipeline's last reconcile serve."""
    ref = {"name": "s3", "key": "id"}
    storage = {
        "uri": tmp_path.as_uri(),
        "credentials": {"accessKeyId": ref, "secretAccessKey": ref},
        "deleteOnPipelineDeletion": True,
    }
    cluster.secrets[("default", "s3")] = {"id": "key"}
    seeded(tmp_path)
    cluster.apply("grades", {"sql": V1, "storage": storage})
    reconciler.reconcile("default", "grades")
    cluster.pods.clear()
    del cluster.secrets[("default", "s3")]
    cluster.pipelines[("default", "grades")]["metadata"]["deletionTimestamp"] = "t"
    assert reconciler.reconcile("default", "grades") is None  # deleted: not reconciled
    pipeline = cluster.pipeline("default", "grades")
    assert pipeline is not None
    assert reconciler.delete_data(pipeline)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_an_evicted_bootstrap_pod_is_started_again_saying_why(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path
) -> None:
    name = approved_bootstrap(cluster, reconciler, tmp_path)
    cluster.pods[("default", name)]["status"] = {
        "phase": "Failed",
        "reason": "Evicted",
        "message": "The node was low on resource: ephemeral-storage.",
    }
    cluster.take_calls()
    reconciler.reconcile("default", "grades")
    calls = cluster.take_calls()
    assert ("delete_pod", name, 0) in calls and ("event", "Warning", "DriverEvicted") in calls
    status = cluster.status("grades")
    assert (status["phase"], _ready(status)) == ("Bootstrapping", ("False", "DriverEvicted"))
    assert "ephemeral-storage" in status["conditions"][0]["message"]
    reconciler.reconcile("default", "grades")
    assert ("create_pod", name) in cluster.take_calls()


def test_an_approval_with_whitespace_around_it_approves_the_change_it_names(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path
) -> None:
    """`spindle.dev/approve: |` in YAML adds a newline: the approval was ignored, with an Event
    saying that `<id>` does not name the pending change `<id>`."""
    seeded(tmp_path)
    cluster.apply("grades", spec(tmp_path, V2))
    reconciler.reconcile("default", "grades")
    change = cluster.status("grades")["pendingChange"]["id"]
    cluster.take_calls()
    cluster.annotate("grades", "spindle.dev/approve", f" {change}\n")
    reconciler.reconcile("default", "grades")
    name = f"grades-{change}-driver"
    assert cluster.take_calls() == [("create_pod", name), ("write_status", "Bootstrapping")]
    command = cluster.pods[("default", name)]["spec"]["containers"][0]["command"]
    assert command[command.index("--approved-by") + 1] == "annotation spindle.dev/approve"


@pytest.mark.parametrize(
    ("label", "value"),
    [
        ("spindle.dev/generation", "x"),
        ("spindle.dev/mode", "Run"),
        ("spindle.dev/mode", "preview"),
        ("spindle.dev/mode", "bootstrap"),
    ],
)
def test_a_driver_pod_whose_labels_were_edited_is_still_the_pipelines_driver(
    cluster: FakeCluster, reconciler: Reconciler, tmp_path: Path, label: str, value: str
) -> None:
    """Each reconcile raised (int('x'), DriverMode('Run'), a driverPod mode 'preview'), and a
    run driver labelled `preview` was taken for no driver: a second one started beside it."""
    running(cluster, reconciler, tmp_path)
    reconciler.reconcile("default", "grades")
    cluster.take_calls()
    cluster.pods[("default", "grades-g1-driver")]["metadata"]["labels"][label] = value
    reconciler.reconcile("default", "grades")
    assert cluster.take_calls() == []  # still Running, with the same driver pod
    status = cluster.status("grades")
    assert status["phase"] == "Running"
    assert status["driverPod"] == {"name": "grades-g1-driver", "mode": "run", "phase": "Running"}
    cluster.apply("grades", spec(tmp_path, V1, spark={"driver": {"memory": "2Gi"}}))
    reconciler.reconcile("default", "grades")  # new settings: the one driver is stopped first
    assert cluster.take_calls() == [
        ("delete_pod", "grades-g1-driver", GRACE),
        ("write_status", "Stopping"),
    ]


@pytest.mark.parametrize(
    ("spark", "field"),
    [
        ({"driver": {"memory": "1" * 310 + "Gi"}}, "spec.spark.driver.memory"),
        ({"executor": {"cpu": "9" * 30}}, "spec.spark.executor.cpu"),
        ({"executor": {"memory": "99999999999999999999Ei"}}, "spec.spark.executor.memory"),
    ],
)
def test_a_quantity_larger_than_kubernetes_holds_is_an_invalid_spec(
    cluster: FakeCluster,
    reconciler: Reconciler,
    tmp_path: Path,
    spark: dict[str, Any],
    field: str,
) -> None:
    """It passed validation (its value was infinite) and every reconcile raised OverflowError:
    no status, no Event."""
    cluster.apply("grades", spec(tmp_path, V1, spark={"mode": "kubernetes", **spark}))
    reconciler.reconcile("default", "grades")
    assert cluster.take_calls() == [("event", "Warning", "InvalidSpec"), ("write_status", "Failed")]
    [ready] = cluster.status("grades")["conditions"]
    assert ready["message"].startswith(f"{field}: ") and "Fix the Pipeline spec" in ready["message"]


@pytest.mark.parametrize(
    ("cpu", "allowed"),
    [
        ("9223372036854775807", True),  # 2^63 - 1 itself: in floating point it was 2^63
        ("9223372036854775807000m", True),
        ("9223372036854775808", False),
        ("9223372036854775807001m", False),
    ],
)
def test_a_quantity_is_refused_only_past_2_to_the_63_minus_1(cpu: str, allowed: bool) -> None:
    from spindle.api.types import Resources

    if allowed:
        assert Resources(cpu=cpu).cpu == cpu
    else:
        with pytest.raises(ValueError, match=r"larger than a Kubernetes quantity can be"):
            Resources(cpu=cpu)
