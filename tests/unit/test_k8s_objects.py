"""The generated CRD, driver pods and the status report: pure functions, checked exhaustively."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import kopf
import pytest

from spindle.api import PipelineSpec
from spindle.api.crd import crd, render
from spindle.api.status import PipelineStatus
from spindle.api.types import RESTATE_ANNOTATION as RESTATE
from spindle.k8s.operator import configure
from spindle.k8s.pods import DriverSettings, current_pod, driver_pod, observed_driver, pod_name
from spindle.lifecycle import Observation, conclude, decide
from tests.unit.test_lifecycle import V1, V2, checkpoint

SETTINGS = DriverSettings(image="ghcr.io/spindle-dev/spindle-spark:0.1.0")
PIPELINE = {"metadata": {"namespace": "ns", "name": "grades", "generation": 3, "uid": "u-1"}}


def test_committed_crd_is_the_generated_one() -> None:
    committed = Path("crds/pipeline.yaml").read_text()
    assert committed == render(), "crds/pipeline.yaml is stale: run `make crds`"


def _patterns(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Every schema node of the CRD with a pattern, by its dotted path."""
    if isinstance(node, list):
        return [found for item in node for found in _patterns(item, path)]
    if not isinstance(node, dict):
        return []
    found = [(path, node)] if "pattern" in node else []
    for key, value in node.items():
        found += _patterns(value, f"{path}.{key}" if key not in ("properties",) else path)
    return found


def test_every_repeating_pattern_of_the_spec_has_a_length_bound() -> None:
    """A pattern with `+` or `*` and no maxLength let a 310-digit memory quantity through the
    API server, and every reconcile failed on it."""
    spec = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    unbounded = [
        path
        for path, node in _patterns(spec)
        if re.search(r"[+*]", node["pattern"]) and "maxLength" not in node
    ]
    assert unbounded == []
    assert len(_patterns(spec)) >= 6  # quantities, the endpoint, minAge, Secret references


def test_crd_contract() -> None:
    version = crd()["spec"]["versions"][0]
    assert crd()["spec"]["names"]["shortNames"] == ["spl"]
    assert crd()["spec"]["names"]["categories"] == ["spindle"]
    assert version["subresources"] == {"status": {}}
    assert [c["name"] for c in version["additionalPrinterColumns"]] == [
        "Phase",
        "Change",
        "Checkpoint",
        "Age",
    ]
    schema = version["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]
    assert spec["properties"]["bootstrapPolicy"]["enum"] == ["await_approval", "allow", "reject"]
    assert "Stopping" in schema["properties"]["status"]["properties"]["phase"]["enum"]
    credentials = spec["properties"]["storage"]["properties"]["credentials"]["properties"]
    assert set(credentials["accessKeyId"]["properties"]) == {"name", "key"}  # references only

    def walk(node: dict[str, Any], path: str) -> None:
        assert "$ref" not in node and "anyOf" not in node, path
        if path.startswith(".spec") and path.count(".") > 1:
            assert node.get("description"), f"{path} has no description"
        for key, child in node.get("properties", {}).items():
            walk(child, f"{path}.{key}")

    walk(spec, ".spec")


def _spec(**extra: Any) -> PipelineSpec:
    return PipelineSpec.model_validate(
        {
            "sql": V1,
            "storage": {
                "uri": "s3://b/p",
                "endpoint": "http://s3:9000",
                "credentials": {
                    "accessKeyId": {"name": "s3", "key": "id"},
                    "secretAccessKey": {"name": "s3", "key": "secret"},
                },
            },
            **extra,
        }
    )


def test_driver_pod_meets_the_restricted_profile_and_uses_secret_refs() -> None:
    pod = driver_pod(
        pipeline=PIPELINE, spec=_spec(), mode="bootstrap", change_id="abc", settings=SETTINGS
    )
    assert pod["metadata"]["name"] == "grades-abc-driver"
    assert (
        pod["metadata"]["ownerReferences"][0] | {"uid": "u-1", "controller": True}
        == pod["metadata"]["ownerReferences"][0]
    )
    spec = pod["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = spec["containers"][0]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["command"][:6] == [
        "spindle",
        "driver",
        "--mode",
        "bootstrap",
        "--change-id",
        "abc",
    ]
    env = {e["name"]: e for e in container["env"]}
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"] == {
        "secretKeyRef": {"name": "s3", "key": "secret"}
    }
    assert "value" not in env["AWS_ACCESS_KEY_ID"]
    carried = json.loads(env["SPINDLE_PIPELINE"]["value"])
    assert carried["generation"] == 3 and carried["spec"]["sql"] == V1


def test_a_bootstrap_pod_says_which_checkpoint_its_change_was_planned_from() -> None:
    pod = driver_pod(
        pipeline=PIPELINE,
        spec=_spec(),
        mode="bootstrap",
        change_id="abc",
        settings=SETTINGS,
        base="00000007-abcdef",
    )
    assert pod["metadata"]["annotations"] == {"spindle.dev/checkpoint": "00000007-abcdef"}
    assert observed_driver(pod).base == "00000007-abcdef"
    run = driver_pod(
        pipeline=PIPELINE, spec=_spec(), mode="run", change_id=None, settings=SETTINGS, base="x"
    )
    assert "annotations" not in run["metadata"] and observed_driver(run).base is None


def test_kubernetes_mode_configures_client_mode_spark() -> None:
    spec = _spec(
        spark={"mode": "kubernetes", "executorInstances": 3, "executor": {"memory": "2Gi"}}
    )
    pod = driver_pod(pipeline=PIPELINE, spec=spec, mode="run", change_id=None, settings=SETTINGS)
    command = pod["spec"]["containers"][0]["command"]
    assert pod["metadata"]["name"] == "grades-g3-driver"
    assert command[command.index("--master") + 1] == "k8s://https://kubernetes.default.svc"
    conf = {
        command[i + 1].split("=", 1)[0]: command[i + 1].split("=", 1)[1]
        for i, a in enumerate(command)
        if a == "--conf"
    }
    assert conf["spark.kubernetes.driver.pod.name"] == "$(SPINDLE_POD_NAME)"
    assert conf["spark.driver.host"] == "$(SPINDLE_POD_IP)"
    assert conf["spark.executor.instances"] == "3"
    assert conf["spark.executor.memory"] == "2048m"
    assert conf["spark.kubernetes.container.image"] == SETTINGS.image
    env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    template = json.loads(env["SPINDLE_EXECUTOR_POD_TEMPLATE"]["value"])
    assert template["spec"]["securityContext"] == pod["spec"]["securityContext"]
    [executor] = template["spec"]["containers"]
    assert executor["securityContext"] == pod["spec"]["containers"][0]["securityContext"]


@pytest.mark.parametrize(
    "name", ["grades", "a" * 28, "a" * 63, "team.grades.v2", "x" * 30 + "-" + "y" * 32]
)
def test_executors_are_named_as_spark_accepts_whatever_the_pipelines_name(name: str) -> None:
    """Spark refuses an executor pod name prefix over 47 characters or with a dot, and no
    executor started: a bootstrap pod's name is that long from a 28-character pipeline name."""
    spec = _spec(spark={"mode": "kubernetes"})
    pipeline = {**PIPELINE, "metadata": {**PIPELINE["metadata"], "name": name}}
    pods = [
        driver_pod(pipeline=pipeline, spec=spec, mode=m, change_id=c, settings=SETTINGS, preview=p)
        for m, c, p in (("run", None, None), ("bootstrap", "0123456789ab", None))
    ] + [
        driver_pod(
            pipeline=pipeline,
            spec=spec,
            mode="run",
            change_id="0123456789ab",
            settings=SETTINGS,
            preview="0123456789ab@diff",
        )
    ]
    prefixes = set()
    for pod in pods:
        command = pod["spec"]["containers"][0]["command"]
        conf = dict(command[i + 1].split("=", 1) for i, a in enumerate(command) if a == "--conf")
        prefix = conf["spark.kubernetes.executor.podNamePrefix"]
        assert len(prefix) <= 47 and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", prefix)
        if len(pod["metadata"]["name"]) <= 47 and "." not in name:
            assert prefix == pod["metadata"]["name"]
        prefixes.add(prefix)
    assert len(prefixes) == len(pods)  # executors of different drivers never share names


@pytest.mark.parametrize(("cpu", "cores"), [("250m", "1"), ("1", "1"), ("1500m", "2"), ("3", "3")])
def test_executor_cpu_is_requested_as_given_and_counted_in_whole_cores(
    cpu: str, cores: str
) -> None:
    spec = _spec(spark={"mode": "kubernetes", "executor": {"cpu": cpu}})
    pod = driver_pod(pipeline=PIPELINE, spec=spec, mode="run", change_id=None, settings=SETTINGS)
    command = pod["spec"]["containers"][0]["command"]
    conf = dict(command[i + 1].split("=", 1) for i, a in enumerate(command) if a == "--conf")
    assert conf["spark.executor.cores"] == cores
    assert conf["spark.kubernetes.executor.request.cores"] == cpu


@pytest.mark.parametrize(
    ("memory", "spark"),
    [("1.5Gi", "1536m"), ("2G", "1908m"), ("512Mi", "512m"), ("1Ti", "1048576m")],
)
def test_executor_memory_reaches_spark_in_whole_mebibytes(memory: str, spark: str) -> None:
    spec = _spec(spark={"mode": "kubernetes", "executor": {"memory": memory}})
    pod = driver_pod(pipeline=PIPELINE, spec=spec, mode="run", change_id=None, settings=SETTINGS)
    command = pod["spec"]["containers"][0]["command"]
    conf = dict(command[i + 1].split("=", 1) for i, a in enumerate(command) if a == "--conf")
    assert conf["spark.executor.memory"] == spark


@pytest.mark.parametrize(
    ("spark", "heap"),
    [
        ({"driver": {"memory": "8Gi"}}, "4915m"),
        ({"driver": {"memory": "4Gi"}, "mode": "kubernetes"}, "2457m"),
        ({"driver": {"memory": "1536Mi"}}, None),  # Spark's 1g is never lowered
        ({"driver": {"memory": "8Gi"}, "conf": {"spark.driver.memory": "6g"}}, None),  # theirs
        ({}, None),
    ],
)
def test_the_driver_heap_follows_its_memory(spark: dict[str, Any], heap: str | None) -> None:
    pod = driver_pod(
        pipeline=PIPELINE, spec=_spec(spark=spark), mode="run", change_id=None, settings=SETTINGS
    )
    command = pod["spec"]["containers"][0]["command"]
    conf = dict(command[i + 1].split("=", 1) for i, a in enumerate(command) if a == "--conf")
    assert conf.get("spark.driver.memory") == heap


@pytest.mark.parametrize("memory", ["512m", "1000", "0"])
def test_a_memory_under_a_mebibyte_is_refused_with_the_suffix_to_use(memory: str) -> None:
    with pytest.raises(ValueError, match=r"less than 1Mi.*'512Mi'"):
        _spec(spark={"driver": {"memory": memory}})


def test_only_a_driver_that_starts_executors_mounts_a_service_account_token() -> None:
    for mode, mounted in (("local", False), ("kubernetes", True)):
        spec = _spec(spark={"mode": mode})
        pod = driver_pod(
            pipeline=PIPELINE, spec=spec, mode="run", change_id=None, settings=SETTINGS
        )
        assert pod["spec"]["automountServiceAccountToken"] is mounted


def test_the_pod_watch_asks_the_api_server_for_the_pods_the_operator_creates() -> None:
    settings = kopf.OperatorSettings()
    configure(settings)
    [selector] = settings.watching.label_selectors.values()
    wanted = dict(term.split("=") for term in selector.split(","))
    spec = _spec(spark={"mode": "kubernetes"})
    driver = driver_pod(pipeline=PIPELINE, spec=spec, mode="run", change_id=None, settings=SETTINGS)
    preview = driver_pod(
        pipeline=PIPELINE, spec=spec, mode="run", change_id="abc", settings=SETTINGS, preview="abc"
    )
    for pod in (driver, preview):
        assert wanted.items() <= pod["metadata"]["labels"].items()
    executor = json.loads(
        {e["name"]: e for e in driver["spec"]["containers"][0]["env"]}[
            "SPINDLE_EXECUTOR_POD_TEMPLATE"
        ]["value"]
    )
    assert not wanted.items() <= executor["metadata"]["labels"].items()  # Spark's, not ours


def test_executors_run_as_the_drivers_account_without_its_token() -> None:
    """Executors never call the API server; under the driver's account they get its image pull
    secrets (Spark ran them as the namespace's `default` account, its token mounted)."""
    for named, account in ((None, SETTINGS.service_account), ("team-spark", "team-spark")):
        spec = _spec(
            spark={"mode": "kubernetes"}, **({"serviceAccountName": named} if named else {})
        )
        pod = driver_pod(
            pipeline=PIPELINE, spec=spec, mode="run", change_id=None, settings=SETTINGS
        )
        env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
        executor = json.loads(env["SPINDLE_EXECUTOR_POD_TEMPLATE"]["value"])["spec"]
        assert pod["spec"]["serviceAccountName"] == executor["serviceAccountName"] == account
        assert executor["automountServiceAccountToken"] is False


def test_local_mode_carries_no_executor_template() -> None:
    pod = driver_pod(pipeline=PIPELINE, spec=_spec(), mode="run", change_id=None, settings=SETTINGS)
    names = {e["name"] for e in pod["spec"]["containers"][0]["env"]}
    assert "SPINDLE_EXECUTOR_POD_TEMPLATE" not in names


@pytest.mark.parametrize(
    ("status", "phase", "reason"),
    [
        ({"phase": "Running"}, "Running", None),
        (
            {
                "phase": "Failed",
                "containerStatuses": [
                    {
                        "state": {
                            "terminated": {
                                "exitCode": 1,
                                "message": 'log line\n{"reason": "ChangeMoved", "message": "m"}',
                            }
                        }
                    }
                ],
            },
            "Failed",
            "ChangeMoved",
        ),
        (
            {
                "phase": "Failed",
                "containerStatuses": [{"state": {"terminated": {"exitCode": 137}}}],
            },
            "Failed",
            "DriverFailed",
        ),
        (
            {
                "phase": "Pending",
                "containerStatuses": [
                    {"state": {"waiting": {"reason": "CreateContainerConfigError", "message": "x"}}}
                ],
            },
            "Failed",
            "CreateContainerConfigError",
        ),
        (
            {
                "phase": "Failed",
                "containerStatuses": [
                    {"state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}
                ],
            },
            "Failed",
            "OOMKilled",
        ),
        (
            {
                "phase": "Pending",
                "containerStatuses": [
                    {"state": {"waiting": {"reason": "ImagePullBackOff", "message": "no such"}}}
                ],
            },
            "Failed",
            "ImagePullFailed",
        ),
    ],
)
def test_observed_driver(status: dict[str, Any], phase: str, reason: str | None) -> None:
    pod = {
        "metadata": {"labels": {"spindle.dev/mode": "run", "spindle.dev/generation": "2"}},
        "status": status,
    }
    driver = observed_driver(pod)
    assert (driver.phase, driver.reason, driver.generation) == (phase, reason, 2)


def _readiness(
    ready: str, since: str, started: str = "2026-01-01T00:00:10Z", *, container: bool = False
) -> dict[str, Any]:
    driver = {"name": "driver", "ready": container, "state": {"running": {"startedAt": started}}}
    sidecar = {"name": "a-mesh", "ready": True, "state": {"running": {"startedAt": since}}}
    return {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": since}],
        "containerStatuses": [sidecar, driver],  # sorted by name: another container first
    }


@pytest.mark.parametrize(
    ("status", "retrying"),
    [
        ({"phase": "Running"}, None),  # no readiness reported yet
        (_readiness("False", "2026-01-01T00:00:02Z"), None),  # starting: never Ready yet
        (_readiness("False", "2026-01-01T00:00:10Z"), None),  # the second it started
        (_readiness("True", "2026-01-01T00:00:30Z", container=True), None),  # stepping
        (_readiness("False", "2026-01-01T00:01:00Z"), ""),  # Ready once, no longer: retrying
        # the node went NotReady: the pod is marked not Ready, its container still is
        (_readiness("False", "2026-01-01T00:01:00Z", container=True), None),
        (dict(_readiness("False", "2026-01-01T00:01:00Z"), phase="Succeeded"), None),
    ],
)
def test_a_driver_pod_that_was_ready_and_is_no_longer_is_retrying_a_step(
    status: dict[str, Any], retrying: str | None
) -> None:
    """The driver pod's readiness probe fails while its driver waits to retry a step
    (`runtime.health`); a driver still starting is not Ready either, and is not retrying."""
    pod = {"metadata": {"labels": {"spindle.dev/mode": "run"}}, "status": status}
    assert observed_driver(pod).retrying == retrying


def test_driver_pods_answer_readiness_on_the_health_port_and_preview_pods_do_not() -> None:
    driver = driver_pod(
        pipeline=PIPELINE, spec=_spec(), mode="run", change_id=None, settings=SETTINGS
    )
    [container] = driver["spec"]["containers"]
    assert container["ports"] == [{"name": "health", "containerPort": 4048}]
    probe = container["readinessProbe"]
    assert probe["httpGet"] == {"path": "/readyz", "port": "health"}
    assert "readinessProbe" not in _preview_pod("abc")["spec"]["containers"][0]


def _preview_pod(request: str) -> dict[str, Any]:
    """The preview pod of change `abc` for `request`."""
    return driver_pod(
        pipeline=PIPELINE,
        spec=_spec(),
        mode="preview",
        change_id="abc",
        settings=SETTINGS,
        preview=request,
    )


def test_current_pod_prefers_the_active_one_of_this_owner() -> None:
    def pod(name: str, phase: str, created: str, uid: str = "u-1") -> dict[str, Any]:
        meta = {"name": name, "creationTimestamp": created, "ownerReferences": [{"uid": uid}]}
        return {"metadata": meta, "status": {"phase": phase}}

    pods = [
        pod("old", "Succeeded", "2026-01-02T00:00:00Z"),
        pod("live", "Running", "2026-01-01T00:00:00Z"),
        pod("stranger", "Running", "2026-01-03T00:00:00Z", uid="u-2"),
    ]
    assert current_pod(pods, owner_uid="u-1")["metadata"]["name"] == "live"
    assert current_pod(pods[:1], owner_uid="u-1")["metadata"]["name"] == "old"
    assert current_pod(pods[2:], owner_uid="u-1") is None
    assert pod_name("p", mode="run", generation=7, change_id="c") == "p-g7-driver"


def test_status_keeps_transition_times_and_announces_an_ignored_approval_once() -> None:
    observed = Observation(
        spec=PipelineSpec(sql=V2),
        generation=2,
        checkpoint=checkpoint(V1),
        approval="nope",
        checkpoint_uri="s3://b/r/checkpoints/00000001-aaaaaa/manifest.json",
    )
    decision = decide(observed)
    first = conclude(decision, observed, driver=None, now="t1")
    body = first.status.to_json()
    assert body["phase"] == "AwaitingApproval" and body["ignoredApproval"] == "nope"
    assert body["pendingChange"]["diff"]["program_diff_error"] is None
    assert body["lastCheckpoint"]["uri"] == observed.checkpoint_uri
    assert [e.reason for e in first.events] == ["ApprovalIgnored"]
    again = replace(observed, previous=PipelineStatus.model_validate(body))
    second = conclude(decision, again, driver=None, now="t2")
    assert second.status.conditions[0].last_transition_time == "t1"
    assert second.events == ()
    # the same wrong id, left in place, for another change is announced again
    v3 = V2.replace("2026-06-10", "2026-06-30")
    other = replace(again, spec=PipelineSpec(sql=v3), generation=3)
    third = conclude(decide(other), other, driver=None, now="t3")
    assert [e.reason for e in third.events] == ["ApprovalIgnored"]


def test_a_failure_is_announced_once_per_reason() -> None:
    observed = Observation(spec=PipelineSpec(sql="create view"), generation=1, checkpoint=None)
    decision = decide(observed)
    first = conclude(decision, observed, driver=None, now="t1")
    assert [(e.type, e.reason) for e in first.events] == [("Warning", decision.reason)]
    again = replace(observed, previous=first.status)
    assert conclude(decision, again, driver=None, now="t2").events == ()


def test_watchdog_fails_liveness_when_the_watch_stops_delivering(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from spindle.k8s import metrics

    clock = [100.0]
    monkeypatch.setattr(metrics.time, "monotonic", lambda: clock[0])
    dog = metrics.Watchdog(stall_after=30)
    dog.delivered(("ns", "a"), "5")
    dog.listed({("ns", "a"): "5"})
    assert dog.problem() is None
    dog.listed({("ns", "a"): "7"})  # the re-list saw a change the watch has not delivered
    clock[0] += 20
    dog.listed({("ns", "a"): "7"})
    assert dog.problem() is None  # not late yet
    clock[0] += 15
    dog.listed({("ns", "a"): "7"})
    assert "ns/a" in (dog.problem() or "")
    dog.delivered(("ns", "a"), "7")
    assert dog.problem() is None
    clock[0] += 31  # and no re-list at all for too long
    assert "re-list" in (dog.problem() or "")


def test_a_driver_killed_for_memory_says_which_limit_to_raise() -> None:
    pod = {
        "metadata": {"labels": {"spindle.dev/mode": "run", "spindle.dev/generation": "1"}},
        "spec": {"containers": [{"resources": {"limits": {"memory": "300Mi"}}}]},
        "status": {
            "phase": "Failed",
            "containerStatuses": [
                {"state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}
            ],
        },
    }
    driver = observed_driver(pod)
    assert driver.reason == "OOMKilled"
    assert driver.message is not None
    assert "300Mi" in driver.message and "spec.spark.driver.memory" in driver.message


def test_a_deleted_driver_is_stalled_only_a_minute_past_its_grace_period() -> None:
    """A deleted pod stays listed while its kubelet ends it; one still there a minute after
    its grace period ended (`deletionTimestamp`) has a node that does not end it."""
    import datetime

    ends = datetime.datetime(2026, 12, 2, 3, 0, tzinfo=datetime.UTC)
    pod = {
        "metadata": {
            "name": "p-g1-driver",
            "labels": {"spindle.dev/mode": "run", "spindle.dev/generation": "1"},
            "deletionTimestamp": "2026-12-02T03:00:00Z",
        },
        "spec": {"nodeName": "node-a"},
        "status": {"phase": "Running"},
    }
    for past, stalled in ((-20, False), (60, False), (61, True), (3600, True)):
        now = ends + datetime.timedelta(seconds=past)
        driver = observed_driver(pod, now=now)
        assert (driver.stalled is not None) == stalled, past
        assert driver.ending
    reason, message = observed_driver(pod, now=ends + datetime.timedelta(minutes=5)).stalled or (
        "",
        "",
    )
    assert reason == "DriverTerminating"
    assert "node-a" in message and "--force --grace-period=0" in message


def test_a_program_past_the_kernels_limit_for_one_variable_reaches_the_driver_whole() -> None:
    """Linux refuses to exec a process with one environment string of 128 KiB or more (the
    driver pod would end with StartError and no log): the pipeline's JSON is cut into parts,
    which the driver joins back. The pod's variables are given to a real exec here."""
    from spindle.runtime.pod import pipeline_from_env

    views = "".join(
        f"create view v{i} as select id, '€{i} $$ $(SPINDLE_PIPELINE)' as note from students;\n"
        for i in range(3_000)
    )
    spec = _spec(sql=V1 + views)
    assert len(spec.sql.encode()) > 131_072
    pod = driver_pod(pipeline=PIPELINE, spec=spec, mode="run", change_id=None, settings=SETTINGS)
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"] if "value" in e}
    assert len([n for n in env if n.startswith("SPINDLE_PIPELINE")]) > 2
    assert all(len(f"{n}={v}".encode()) < 131_072 for n, v in env.items())
    # Kubernetes expands $(NAME) and reads $$ as $ in a value: none is left for it to read
    assert not [n for n, v in env.items() if n.startswith("SPINDLE_PIPELINE") and "$" in v]
    subprocess.run(["true"], env=env, check=True)  # E2BIG with the JSON in one variable
    ref, generation, carried = pipeline_from_env(env)
    assert (ref.name, generation, carried.sql) == ("grades", 3, spec.sql)


def test_kopf_keeps_no_last_handled_configuration_on_pipelines() -> None:
    """The docs promise GitOps tools no annotation Spindle did not need: kopf's diff base
    (written for every pipeline its delete handler's filter passes) is stored nowhere."""
    settings = kopf.OperatorSettings()
    configure(settings)
    body = kopf.Body({"metadata": {"name": "p", "annotations": {}}, "spec": {"sql": V1}})
    patch = kopf.Patch()
    storage = settings.persistence.diffbase_storage
    storage.store(body=body, patch=patch, essence=storage.build(body=body))
    assert dict(patch) == {} and storage.fetch(body=body) is None
    older = {"spindle.dev/last-handled-configuration": "{}"}  # an older operator's: removed
    body = kopf.Body({"metadata": {"name": "p", "annotations": older}, "spec": {"sql": V1}})
    storage.store(body=body, patch=patch, essence=storage.build(body=body))
    assert dict(patch) == {
        "metadata": {"annotations": {"spindle.dev/last-handled-configuration": None}}
    }


def test_a_users_request_reaches_the_driver_as_written() -> None:
    """Kubernetes expands $(NAME) and reads $$ as $ in a container's args: a restatement or
    preview request's label is passed so that it arrives as the user wrote it (else the
    driver recorded another request than the one the operator waits to see served)."""
    pipeline = {
        "metadata": dict(PIPELINE["metadata"], annotations={"spindle.dev/restate": "v@$$x$(HOME)"})
    }
    pod = driver_pod(
        pipeline=pipeline, spec=_spec(), mode="bootstrap", change_id="abc", settings=SETTINGS
    )
    command = pod["spec"]["containers"][0]["command"]
    assert command[command.index("--restate") + 1] == "v@$$$$x$$(HOME)"
    command = _preview_pod("abc@$1")["spec"]["containers"][0]["command"]
    assert command[command.index("--preview-request") + 1] == "abc@$$1"


def test_a_preview_of_a_restatement_plans_the_restatement() -> None:
    """Without the request, the preview pod planned no change and refused every preview of a
    restatement as a change that moved."""
    pipeline = {**PIPELINE, "metadata": {**PIPELINE["metadata"], "annotations": {RESTATE: "v@1"}}}
    previewing = driver_pod(
        pipeline=pipeline,
        spec=_spec(),
        mode="preview",
        change_id="a",
        settings=SETTINGS,
        preview="a",
    )
    command = previewing["spec"]["containers"][0]["command"]
    assert command[command.index("--restate") + 1] == "v@1"
    running = driver_pod(
        pipeline=pipeline, spec=_spec(), mode="run", change_id=None, settings=SETTINGS
    )
    assert "--restate" not in running["spec"]["containers"][0]["command"]


ENDED, STARTED, CREATED = "2026-12-02T03:00:00Z", "2026-12-02T02:50:00Z", "2026-12-02T02:00:00Z"


@pytest.mark.parametrize(
    ("before", "status", "in_a_row", "restart_at"),
    [
        # refused at admission: it never started, and its creation is the last time known
        ({}, {"phase": "Failed", "reason": "OutOfmemory"}, 1, CREATED),
        (
            {"spindle.dev/evictions": "3"},
            {"phase": "Failed", "reason": "OutOfcpu", "startTime": ENDED},
            4,
            "2026-12-02T03:00:40Z",
        ),
        (  # the back-off stops growing at 5 minutes
            {"spindle.dev/evictions": "40"},
            {"phase": "Failed", "reason": "Evicted", "startTime": ENDED},
            41,
            "2026-12-02T03:05:00Z",
        ),
        (  # a count edited into something else counts as none
            {"spindle.dev/evictions": "many"},
            {"phase": "Failed", "reason": "Evicted", "startTime": ENDED},
            1,
            ENDED,
        ),
        (  # an evicted container often shows no times (ContainerStatusUnknown): the pod's own
            {"spindle.dev/evictions": "5"},
            {
                "phase": "Failed",
                "reason": "Evicted",
                "startTime": CREATED,
                "conditions": [{"type": "Ready", "lastTransitionTime": ENDED}],
                "containerStatuses": [
                    {"state": {"terminated": {"reason": "ContainerStatusUnknown"}}}
                ],
            },
            1,
            ENDED,
        ),
        (  # it ran 10 minutes before the node stopped it: counted as the first again
            {"spindle.dev/evictions": "5"},
            {
                "phase": "Failed",
                "reason": "Shutdown",
                "containerStatuses": [
                    {"state": {"terminated": {"startedAt": STARTED, "finishedAt": ENDED}}}
                ],
            },
            1,
            ENDED,
        ),
    ],
)
def test_an_evicted_driver_backs_off_by_how_many_the_cluster_stopped_in_a_row(
    before: dict[str, str], status: dict[str, Any], in_a_row: int, restart_at: str
) -> None:
    from spindle.k8s.pods import eviction
    from spindle.lifecycle import timestamp

    pod = {"metadata": {"annotations": before, "creationTimestamp": CREATED}, "status": status}
    stopped = eviction(pod)
    assert stopped is not None and stopped.in_a_row == in_a_row
    assert timestamp(stopped.restart_at) == restart_at
    assert eviction({"metadata": {}, "status": {"phase": "Failed", "reason": "Error"}}) is None
