"""Operator benchmark: apply N pipelines at once (default 200) against a real API server and S3.

Each pipeline already has a checkpoint of the grades v1 program in S3, and is applied with v2,
so the operator must read the Secret, read the checkpoint, plan, and record AwaitingApproval.
Then all are approved at once and the time until each driver pod exists is measured (no node
agent runs, so the pods stay Pending: this measures the operator, not Spark).
Baseline, in the same run: one pipeline applied alone. Prints p50/p95 and their ratio to it,
and the operator's peak RSS.

    python bench/operator_load.py [--pipelines 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kubernetes import client, config  # noqa: E402
from tests.checkpoints import seed  # noqa: E402
from tests.conftest import Kube  # noqa: E402
from tests.e2e.conftest import (  # noqa: E402
    DRIVER_IMAGE,
    SYSTEM,
    OperatorProcess,
    apply_documents,
    token_kubeconfig,
)
from tests.harness import binaries, control_plane, processes  # noqa: E402
from tests.harness.s3 import start as start_s3  # noqa: E402

from spindle.checkpoint.objects import S3Options  # noqa: E402
from spindle.checkpoint.store import open_store  # noqa: E402

V1 = (ROOT / "examples/grades/v1.sql").read_text()
V2 = (ROOT / "examples/grades/v2.sql").read_text()
NAMESPACE = "bench"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pipelines", type=int, default=200)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="spindle-bench-operator-"))
    plane = control_plane.start(work / "kube")
    s3 = start_s3(work / "s3")
    operator: OperatorProcess | None = None
    try:
        api = config.new_client_from_config(str(plane.kubeconfig))
        kube = Kube(plane.kubeconfig, api, False, binaries.ensure("kubectl"))
        kube.kubectl("apply", "-f", str(ROOT / "crds/pipeline.yaml"))
        kube.kubectl("wait", "--for=condition=Established", "crd/pipelines.spindle.dev")
        kube.kubectl("create", "namespace", SYSTEM)
        kube.kubectl("create", "namespace", NAMESPACE)
        apply_documents(kube, ROOT / "deploy/rbac/operator.yaml", SPINDLE_NAMESPACE=SYSTEM)
        apply_documents(kube, ROOT / "deploy/rbac/driver.yaml", PIPELINE_NAMESPACE=NAMESPACE)
        core = client.CoreV1Api(api)
        core.create_namespaced_secret(
            NAMESPACE,
            client.V1Secret(
                metadata=client.V1ObjectMeta(name="s3"),
                string_data={"accessKeyId": s3.access_key, "secretAccessKey": s3.secret_key},
            ),
        )
        bucket = s3.bucket("bench")
        options = S3Options(s3.endpoint, s3.region, s3.access_key, s3.secret_key)
        names = ["baseline"] + [f"p{i:04d}" for i in range(args.pipelines)]

        def seed_one(name: str) -> None:
            store = open_store(
                f"s3://{bucket}/pipelines", namespace=NAMESPACE, name=name, s3=options
            )
            seed(store, namespace=NAMESPACE, name=name, program=V1)

        with ThreadPoolExecutor(16) as pool:
            list(pool.map(seed_one, names))
        port = processes.free_port()
        operator = OperatorProcess(
            kubeconfig=token_kubeconfig(kube, SYSTEM, "spindle-operator", work / "sa.kubeconfig"),
            log=work / "operator.log",
            port=port,
            args=["--all-namespaces", "--port", str(port), "--driver-image", DRIVER_IMAGE],
        ).start()
        custom = client.CustomObjectsApi(api)

        def document(name: str) -> dict[str, Any]:
            return {
                "apiVersion": "spindle.dev/v1alpha1",
                "kind": "Pipeline",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "spec": {
                    "sql": V2,
                    "storage": {
                        "uri": f"s3://{bucket}/pipelines",
                        "endpoint": s3.endpoint,
                        "region": s3.region,
                        "credentials": {
                            "accessKeyId": {"name": "s3", "key": "accessKeyId"},
                            "secretAccessKey": {"name": "s3", "key": "secretAccessKey"},
                        },
                    },
                },
            }

        def phases() -> dict[str, str]:
            items = custom.list_namespaced_custom_object(
                "spindle.dev", "v1alpha1", NAMESPACE, "pipelines"
            )["items"]
            return {i["metadata"]["name"]: (i.get("status") or {}).get("phase", "") for i in items}

        def wait(wanted: set[str], done: Any, started: dict[str, float]) -> dict[str, float]:
            reached: dict[str, float] = {}
            deadline = time.monotonic() + 900
            while len(reached) < len(wanted) and time.monotonic() < deadline:
                now = time.monotonic()
                for name in done() & wanted:
                    reached.setdefault(name, now - started[name])
                time.sleep(0.1)
            if len(reached) < len(wanted):
                raise SystemExit(f"only {len(reached)}/{len(wanted)} finished")
            return reached

        def awaiting() -> set[str]:
            return {n for n, p in phases().items() if p == "AwaitingApproval"}

        def with_pods() -> set[str]:
            pods = core.list_namespaced_pod(NAMESPACE).items
            return {p.metadata.labels["spindle.dev/pipeline"] for p in pods}

        # Baseline: one pipeline alone.
        started = {"baseline": time.monotonic()}
        custom.create_namespaced_custom_object(
            "spindle.dev", "v1alpha1", NAMESPACE, "pipelines", document("baseline")
        )
        baseline = wait({"baseline"}, awaiting, started)["baseline"]

        crowd = set(names[1:])
        started = {}

        def create(name: str) -> None:
            started[name] = time.monotonic()
            custom.create_namespaced_custom_object(
                "spindle.dev", "v1alpha1", NAMESPACE, "pipelines", document(name)
            )

        with ThreadPoolExecutor(32) as pool:
            list(pool.map(create, sorted(crowd)))
        to_awaiting = list(wait(crowd, awaiting, started).values())

        changes = {
            i["metadata"]["name"]: i["status"]["pendingChange"]["id"]
            for i in custom.list_namespaced_custom_object(
                "spindle.dev", "v1alpha1", NAMESPACE, "pipelines"
            )["items"]
        }
        approved: dict[str, float] = {}

        def approve(name: str) -> None:
            approved[name] = time.monotonic()
            custom.patch_namespaced_custom_object(
                "spindle.dev",
                "v1alpha1",
                NAMESPACE,
                "pipelines",
                name,
                {"metadata": {"annotations": {"spindle.dev/approve": changes[name]}}},
            )

        with ThreadPoolExecutor(32) as pool:
            list(pool.map(approve, sorted(crowd)))
        to_pod = list(wait(crowd, with_pods, approved).values())
        assert operator.process is not None
        peak = rss_mb(operator.process.pid)

        result = {
            "pipelines": args.pipelines,
            "baseline_one_pipeline_to_awaiting_s": round(baseline, 2),
            "to_awaiting_p50_s": round(statistics.median(to_awaiting), 2),
            "to_awaiting_p95_s": round(percentile(to_awaiting, 0.95), 2),
            "approval_to_pod_p50_s": round(statistics.median(to_pod), 2),
            "approval_to_pod_p95_s": round(percentile(to_pod, 0.95), 2),
            "operator_peak_rss_mb": round(peak, 1),
        }
        print(f"operator benchmark: {args.pipelines} pipelines applied at once")
        print(f"  baseline, one pipeline alone → AwaitingApproval: {baseline:6.2f} s")
        print(
            f"  → AwaitingApproval  p50 {result['to_awaiting_p50_s']:6.2f} s   "
            f"p95 {result['to_awaiting_p95_s']:6.2f} s   "
            f"(p95 / baseline x{result['to_awaiting_p95_s'] / max(baseline, 1e-3):.1f})"
        )
        print(
            f"  approval → driver pod p50 {result['approval_to_pod_p50_s']:6.2f} s   "
            f"p95 {result['approval_to_pod_p95_s']:6.2f} s"
        )
        print(f"  operator peak RSS: {peak:.0f} MB")
        print(json.dumps(result))
    finally:
        if operator is not None:
            operator.stop()
        s3.stop()
        plane.stop()


if __name__ == "__main__":
    main()
