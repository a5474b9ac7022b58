"""The Helm chart: lint and template with the harness's helm, install into the real API server,
an operator running under the chart's service account and RBAC reconciles a Pipeline to
AwaitingApproval, and the optional ValidatingAdmissionPolicy separates approving from editing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.checkpoints import seed
from tests.conftest import ROOT, Kube
from tests.e2e.conftest import Operator, Space, restricted, wait_for
from tests.e2e.pipelines import EXAMPLE, grades, store

pytestmark = [pytest.mark.kube, pytest.mark.s3]
CHART = ROOT / "charts" / "spindle"


def run_helm(binary: Path, kube: Kube | None, *args: str, check: bool = True) -> str:
    command = [str(binary), *args]
    if kube is not None:
        command += ["--kubeconfig", str(kube.kubeconfig)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if check:
        assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def rendered(binary: Path, *sets: str) -> list[dict[str, Any]]:
    args = ["template", "spindle", str(CHART), "-n", "spindle-system"]
    for value in sets:
        args += ["--set", value]
    return [d for d in yaml.safe_load_all(run_helm(binary, None, *args)) if d]


def test_lint_and_template(helm: Path) -> None:
    assert "0 chart(s) failed" in helm_lint(helm)
    cluster = {(d["kind"], d["metadata"]["name"]) for d in rendered(helm)}
    assert ("ClusterRoleBinding", "spindle-spindle-operator") in cluster
    assert not any(kind == "ValidatingAdmissionPolicy" for kind, _ in cluster)  # off by default
    scoped = rendered(helm, "watchNamespaces={team-a,team-b}", "approval.restrictToGroup=ops")
    bindings = {
        d["metadata"]["namespace"]
        for d in scoped
        if d["kind"] == "RoleBinding" and d["roleRef"]["name"] == "spindle-spindle-operator"
    }
    assert bindings == {"team-a", "team-b"}
    assert not [
        d
        for d in scoped
        if d["kind"] == "ClusterRoleBinding" and "discovery" not in d["metadata"]["name"]
    ]
    [deployment] = [d for d in scoped if d["kind"] == "Deployment"]
    spec = deployment["spec"]
    assert spec["replicas"] == 1 and spec["strategy"]["type"] == "Recreate"
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert "--namespace=team-a" in container["args"] and "--all-namespaces" not in container["args"]
    assert {d["kind"] for d in scoped} >= {"ValidatingAdmissionPolicy", "ServiceAccount", "Service"}
    assert "--leader-election" not in container["args"]  # one replica: no Lease, no Role
    assert not [d for d in scoped if d["kind"] == "Role" and "leader" in d["metadata"]["name"]]
    pair = rendered(helm, "replicas=2")
    [deployment] = [d for d in pair if d["kind"] == "Deployment"]
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--leader-election" in args and "--lease-name=spindle-spindle-operator" in args
    [role] = [d for d in pair if d["kind"] == "Role" and "leader" in d["metadata"]["name"]]
    assert role["metadata"]["namespace"] == "spindle-system"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["spindle-spindle-operator"],
            "verbs": ["get", "update"],
        },
    ]
    assert not [d for d in pair if d["kind"] == "ClusterRole" and "lease" in json.dumps(d)]
    single = rendered(helm, "leaderElection.enabled=true")  # a Lease with one replica too
    assert any(d["kind"] == "Role" and "leader" in d["metadata"]["name"] for d in single)
    refused = run_helm(
        helm,
        None,
        "template",
        "spindle",
        str(CHART),
        "--set",
        "replicas=2",
        "--set",
        "leaderElection.enabled=false",
        check=False,
    )
    assert "leaderElection.enabled=false needs replicas: 1" in refused, refused
    for values, said in (
        (["leaderElection.enabled=off"], 'must be auto, true or false (got "off")'),
        (["watchNamespaces=team-a"], "watchNamespaces must be a list, e.g. --set 'watchNamespaces"),
        (["leaderElection.leaseDurationSeconds=5"], "retryPeriodSeconds < renewDeadlineSeconds <"),
        # values the operator would refuse at its start, and crash-loop on
        (["leaderElection.retryPeriodSeconds=0"], "0 < retryPeriodSeconds"),
        (["defaultStorage.endpoint=minio:9000"], "defaultStorage.endpoint must be a URL"),
        (["defaultStorage.uri=file:///data"], "defaultStorage.uri must be object storage"),
    ):
        args = [a for value in values for a in ("--set", value)]
        refused = run_helm(helm, None, "template", "spindle", str(CHART), *args, check=False)
        assert said in refused, refused
    assert not any("drivers" in d["metadata"]["name"] for d in rendered(helm))  # off by default
    limited = rendered(
        helm,
        "driver.allowedImagePrefixes={registry.corp/spark/}",
        "driver.allowedServiceAccounts={s3-driver}",
    )
    [policy] = [d for d in limited if d["kind"] == "ValidatingAdmissionPolicy"]
    images, accounts = (v["expression"] for v in policy["spec"]["validations"])
    # the chart's own defaults stay allowed, by repository and tag or digest only
    assert '["registry.corp/spark/","ghcr.io/spindle-dev/spindle-spark:",' in images
    assert '["s3-driver","spindle-driver"]' in accounts
    monitored = rendered(helm, "metrics.serviceMonitor.enabled=true")
    assert any(d["kind"] == "ServiceMonitor" for d in monitored)
    assert (CHART / "crds" / "pipeline.yaml").read_text() == (
        ROOT / "crds/pipeline.yaml"
    ).read_text()


def test_pull_secrets_affinity_and_priority(helm: Path) -> None:
    """The operator pod's pull secrets, affinity and priority class, and the driver service
    account's pull secrets (Kubernetes gives them to the pods that run as it): none by default."""

    def placed(documents: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        [deployment] = [d for d in documents if d["kind"] == "Deployment"]
        accounts = [
            d
            for d in documents
            if d["kind"] == "ServiceAccount" and d["metadata"]["name"] == "spindle-driver"
        ]
        return deployment["spec"]["template"]["spec"], accounts

    default, accounts = placed(rendered(helm))
    assert not {"imagePullSecrets", "affinity", "priorityClassName"} & default.keys()
    assert [a["metadata"]["namespace"] for a in accounts] == ["spindle-system"]
    assert "imagePullSecrets" not in accounts[0]
    match = (
        "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchExpressions[0]"
    )
    sets = [
        "watchNamespaces={team-a,team-b}",
        "imagePullSecrets[0].name=regcred",
        "driver.imagePullSecrets[0].name=spark-pull",
        "driver.imagePullSecrets[1].name=mirror-pull",
        "priorityClassName=spindle-critical",
        f"{match}.key=pool",
        f"{match}.operator=In",
        f"{match}.values={{system}}",
    ]
    lint = run_helm(
        helm, None, "lint", str(CHART), "--strict", *(a for s in sets for a in ("--set", s))
    )
    assert "0 chart(s) failed" in lint, lint
    pod, accounts = placed(rendered(helm, *sets))
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["priorityClassName"] == "spindle-critical"
    required = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    expression = {"key": "pool", "operator": "In", "values": ["system"]}
    assert required == {"nodeSelectorTerms": [{"matchExpressions": [expression]}]}
    # still the restricted profile
    assert pod["securityContext"] == default["securityContext"]
    assert pod["containers"][0]["securityContext"] == default["containers"][0]["securityContext"]
    assert {a["metadata"]["namespace"] for a in accounts} == {"team-a", "team-b"}
    for account in accounts:
        assert account["imagePullSecrets"] == [{"name": "spark-pull"}, {"name": "mirror-pull"}]
    for value, said in (
        ("imagePullSecrets=regcred", "imagePullSecrets must be a list of Secret names as {name"),
        ("driver.imagePullSecrets={regcred}", "--set 'driver.imagePullSecrets[0].name=regcred'"),
    ):
        refused = run_helm(
            helm, None, "template", "spindle", str(CHART), "--set", value, check=False
        )
        assert said in refused, refused


def helm_lint(binary: Path) -> str:
    return run_helm(binary, None, "lint", str(CHART), "--strict") + run_helm(
        binary,
        None,
        "lint",
        str(CHART),
        "--strict",
        "--set",
        "watchNamespaces={a,b}",
        "--set",
        "approval.restrictToGroup=ops",
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--set",
        "replicas=2",
    )


def test_install_reconcile_under_the_charts_rbac_and_approval_policy(
    helm: Path, kube: Kube, space: Space, operator: Operator, tmp_path: Path
) -> None:
    release = f"r{space.name[-8:]}"
    system = kube.namespace("spindle-helm")
    restricted(kube, system)
    older = grades("v1", space, name="older", desiredState="Stopped")  # made before the policy
    older["spec"]["spark"] = {"image": "registry.example/miner:1"}
    space.apply(older)
    run_helm(
        helm,
        kube,
        "install",
        release,
        str(CHART),
        "-n",
        system,
        "--set",
        f"watchNamespaces={{{space.name}}}",
        "--set",
        "driver.serviceAccountName=spindle-helm-driver",
        "--set",
        "approval.restrictToGroup=spindle-approvers",
        "--set",
        "driver.allowedImagePrefixes={ghcr.io/spindle-dev/}",
        "--set",
        "driver.allowedServiceAccounts={spindle-s3-driver}",
    )
    try:
        for kind, name, namespace in [
            ("deployment", "spindle-operator", system),
            ("serviceaccount", "spindle-operator", system),
            ("service", "spindle-operator-metrics", system),
            ("clusterrole", f"{release}-spindle-operator", None),
            ("clusterrolebinding", f"{release}-spindle-operator-discovery", None),
            ("rolebinding", f"{release}-spindle-operator", space.name),
            ("serviceaccount", "spindle-helm-driver", space.name),
            ("validatingadmissionpolicy", f"{release}-spindle-approval", None),
            ("validatingadmissionpolicybinding", f"{release}-spindle-approval", None),
            ("validatingadmissionpolicy", f"{release}-spindle-drivers", None),
        ]:
            scope = ["-n", namespace] if namespace else []
            kube.kubectl("get", kind, name, *scope)

        # Editing a Pipeline is no way to run another image, or as another service account
        # (a server-side dry run: admission runs, nothing is stored).
        def admitted(*flags: str, **spec: Any) -> str:
            document = grades("v1", space, name="elsewhere", **spec)
            document["metadata"]["namespace"] = space.name
            dry = ("apply", "--dry-run=server", *flags, "-f", "-")
            return kube.kubectl(*dry, input=yaml.safe_dump(document), check=False)

        said = "spec.spark.image registry.example/miner:1 is not an image this cluster"
        wait_for(  # the API server loads a new policy within a second or so
            "the driver policy in force",
            lambda: said in admitted(spark={"image": "registry.example/miner:1"}),
            timeout=60,
        )
        refused = admitted(serviceAccountName="default")
        assert "spec.serviceAccountName default is not a service account this" in refused
        allowed = admitted(
            spark={"image": "ghcr.io/spindle-dev/spindle-spark:0.1.0"},
            serviceAccountName="spindle-s3-driver",
        )
        assert "created (server dry run)" in allowed, allowed
        # an explicit null is the default, as the CRD and the operator read it (it was a 422
        # "no such overload" from the policy's expression)
        nulls = admitted("--server-side", spark={"image": None}, serviceAccountName=None)
        assert "serverside-applied (server dry run)" in nulls, nulls
        # a Pipeline made before the policy keeps its image through other updates (its
        # deletion's finalizer removal is one), and cannot take another disallowed one
        kube.kubectl("label", "pipeline", "older", "-n", space.name, "team=data")
        moved = kube.kubectl(
            "patch",
            "pipeline",
            "older",
            "-n",
            space.name,
            "--type",
            "merge",
            "--dry-run=server",
            "-p",
            json.dumps({"spec": {"spark": {"image": "registry.example/miner:2"}}}),
            check=False,
        )
        assert "spec.spark.image registry.example/miner:2 is not an image this" in moved, moved

        # The chart's own operator pod, namespaced, under the chart's RBAC: the session's
        # cluster-wide operator is down meanwhile, so only this one can reconcile.
        operator.kill()
        try:
            charted = Operator(kube, namespace=system)
            wait_for("the namespaced operator to be ready", charted.ready, timeout=180)
            [pod] = charted.pods()
            args = pod["spec"]["containers"][0]["args"]
            assert f"--namespace={space.name}" in args and "--all-namespaces" not in args
            seed(
                store(space),
                namespace=space.name,
                name="grades",
                program=(EXAMPLE / "v1.sql").read_text(),
            )
            space.apply(grades("v2", space))
            status = space.wait_phase("grades", "AwaitingApproval", timeout=120)
            change = status["pendingChange"]["id"]
            charted.healthy()
        finally:
            Operator(kube, namespace=system).kill()
            operator.start()

        # Approving is separate from editing: only the named group may set the annotation.
        kube.kubectl(
            "create",
            "rolebinding",
            "editors",
            "-n",
            space.name,
            "--clusterrole",
            f"{release}-spindle-operator",
            "--user",
            "alice",
            "--user",
            "bob",
        )
        approve = ("annotate", "pipeline", "grades", "-n", space.name)
        denied = kube.kubectl(*approve, f"spindle.dev/approve={change}", "--as", "bob", check=False)
        assert "only members of group spindle-approvers" in denied, denied
        assert "spindle.dev/approve" not in space.get("grades")["metadata"].get("annotations", {})
        member = ("--as", "alice", "--as-group", "spindle-approvers")
        kube.kubectl(*approve, f"spindle.dev/approve={change}", *member)
        assert space.get("grades")["metadata"]["annotations"]["spindle.dev/approve"] == change
        # Editing the SQL without touching the approval stays open to editors.
        kube.kubectl("label", "pipeline", "grades", "-n", space.name, "team=data", "--as", "bob")
    finally:
        run_helm(helm, kube, "uninstall", release, "-n", system, check=False)
