"""Operator benchmark: apply N pipelines at once (default 200) against a real API server and S3.

The API server (etcd, kube-apiserver, controller manager, scheduler: `tests.harness`) runs with
no node, so driver pods stay Pending: this measures the operator, not Spark. The operator runs
as a process here, as its own service account, so its CPU time and peak RSS are read from /proc.
Each pipeline already has a checkpoint of the grades v1 program in S3, and is applied with v2,
so the operator must read the Secret, read the checkpoint, plan, and record AwaitingApproval.
Each pipeline's tables have their own names, so that no two plan the same statements (runs
before stop 25 gave all pipelines the same program, whose analysis the operator memoizes).

Figures, each against the baseline of one pipeline alone in the same run: the median of
`--baselines` pipelines applied and approved one after another, after a first pipeline has
warmed the operator up (one alone takes a few hundredths of a second, so a single sample is
noise):
- apply → AwaitingApproval (p50, p95), and approval → driver pod (p50, p95);
- a re-list of the quiet fleet (all awaiting approval): the operator's CPU seconds per resync,
  and reconciles per resync;
- a re-list of the fleet with active drivers (after approval every pipeline has a driver pod,
  which stays Pending: each re-list checks its checkpoint): CPU seconds, checks and reconciles
  per resync; and what the quiet fleet costs on average when each pipeline
  is also reconciled once per `--recheck` seconds;
- one change at a time in the fleet (`--singles` new pipelines, each applied once the last
  reached its driver pod, while the whole fleet has driver pods and is checked at every
  re-list): apply → AwaitingApproval and approval → driver pod, against the same baselines.
  This is the latency a platform team lives with; the crowd above is its worst case;
- where the machine's CPU went while the crowd was first reconciled: the operator, the API
  server, etcd, the S3 server, and the rest of the control plane (all on the same cores);
- the operator's peak RSS, and the machine's load average.

    SPINDLE_CLUSTER_INDEX=7 python bench/operator_load.py [--pipelines 200]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import urllib3  # noqa: E402
from kubernetes import client, config, watch  # noqa: E402
from tests.checkpoints import seed  # noqa: E402
from tests.conftest import Kube  # noqa: E402
from tests.e2e.conftest import (  # noqa: E402
    DRIVER_IMAGE,
    SYSTEM,
    apply_documents,
    token_kubeconfig,
)
from tests.harness import binaries, cluster, network, processes  # noqa: E402
from tests.harness.control_plane import ControlPlane  # noqa: E402
from tests.harness.s3 import start as start_s3  # noqa: E402
from tests.waiting import wait_for  # noqa: E402

from spindle.checkpoint.objects import S3Options  # noqa: E402
from spindle.checkpoint.store import open_store  # noqa: E402

V1 = (ROOT / "examples/grades/v1.sql").read_text()
V2 = (ROOT / "examples/grades/v2.sql").read_text()
_TABLES = re.compile(r"\b(students|grades)\b")


def program(sql: str, name: str) -> str:
    """The grades program with its tables renamed for pipeline `name`: every statement's text
    is its own, as in a fleet of distinct pipelines, so no pipeline's planning is another's
    cached analysis."""
    suffix = re.sub(r"\W", "_", name)
    return _TABLES.sub(lambda found: f"{found.group(1)}_{suffix}", sql)


NAMESPACE = "bench"
ISSUE_200 = {"to_awaiting_p50_s": 4.92, "to_awaiting_p95_s": 9.35, "approval_to_pod_p95_s": 9.14}
"""The figures of issue #17 (200 pipelines, before this benchmark's changes)."""
ISSUE_200_RSS_MB = 235.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of the process (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_by_part(parts: dict[str, list[int]]) -> dict[str, float]:
    """CPU seconds so far of each part of the machine (a part is one or more processes)."""
    return {part: sum(cpu_seconds(pid) for pid in pids) for part, pids in parts.items()}


def counted(port: int) -> dict[str, float]:
    """`spindle_reconciles_total` by result, from the operator's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    pattern = r'^spindle_reconciles_total\{result="([^"]*)"\} (\S+)$'
    return {m.group(1): float(m.group(2)) for m in re.finditer(pattern, text, re.M)}


def reconciles(port: int) -> float:
    """Full reconciles so far (a re-list's check that found nothing changed is not one)."""
    return sum(count for result, count in counted(port).items() if result != "unchanged")


def checks(port: int) -> float:
    """Re-list checks so far that found a pipeline's checkpoint unchanged."""
    return counted(port).get("unchanged", 0.0)


class Reached:
    """When (monotonic) each object first met a condition, from a watch in a thread:
    `name_of(object)` is the pipeline's name once the object (a dict: the list function is a
    lambda, so the client does not build models) meets it, else None."""

    def __init__(self, list_objects: Any, name_of: Any) -> None:
        self.at: dict[str, float] = {}
        self.error: Exception | None = None
        self._list, self._name_of = list_objects, name_of
        threading.Thread(target=self._follow, daemon=True).start()

    def _follow(self) -> None:
        try:
            while True:
                self._watch()
        except Exception as error:  # the benchmark's own bug: `wait` says what it was
            self.error = error

    def _watch(self) -> None:
        stream = watch.Watch()  # type: ignore[no-untyped-call]
        try:
            for event in stream.stream(self._list, timeout_seconds=60):  # type: ignore[no-untyped-call]
                name = self._name_of(event["object"])
                if name is not None:
                    self.at.setdefault(name, time.monotonic())
        except (client.ApiException, urllib3.exceptions.HTTPError, OSError):
            time.sleep(0.2)  # a dropped watch: the next one sends every object again

    def wait(self, wanted: set[str], started: dict[str, float]) -> dict[str, float]:
        """Seconds from `started[name]` to when each wanted pipeline met the condition."""
        deadline = time.monotonic() + 900
        while not wanted <= self.at.keys() and time.monotonic() < deadline:
            if self.error is not None:
                raise SystemExit(f"watching failed: {self.error!r}")
            time.sleep(0.1)
        missing = wanted - self.at.keys()
        if missing:
            raise SystemExit(f"only {len(wanted) - len(missing)}/{len(wanted)} finished")
        return {name: self.at[name] - started[name] for name in wanted}


def healthy(port: int) -> bool:
    try:
        return processes.http_ok(f"http://127.0.0.1:{port}/healthz")
    except OSError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pipelines", type=int, default=200)
    parser.add_argument("--resync", type=float, default=10.0, help="the operator's --resync")
    parser.add_argument("--recheck", type=float, default=300.0, help="the operator's --recheck")
    parser.add_argument("--windows", type=int, default=3, help="resync periods per CPU window")
    parser.add_argument(
        "--singles", type=int, default=20, help="pipelines applied one at a time in the fleet"
    )
    parser.add_argument(
        "--baselines", type=int, default=5, help="pipelines applied alone, before the fleet"
    )
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped"))  # clean up, as on Ctrl-C
    load_before = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="spindle-bench-operator-"))
    layout = network.Layout(int(os.environ.get("SPINDLE_CLUSTER_INDEX", "0")))
    registry = cluster.registry(layout)
    cluster.reap(layout)
    network.teardown(layout)
    network.setup(layout)
    plane = ControlPlane(work / "kube", layout, registry)
    s3 = None
    try:
        plane.start()
        s3 = start_s3(work / "s3")
        run(args, work=work, plane=plane, s3=s3, registry=registry, load_before=load_before)
    finally:
        processes.kill_registered(registry)
        if s3 is not None:
            s3.stop()
        plane.stop()
        network.teardown(layout)
        shutil.rmtree(work, ignore_errors=True)  # etcd's and the S3 server's data


def run(
    args: argparse.Namespace,
    *,
    work: Path,
    plane: ControlPlane,
    s3: Any,
    registry: Path,
    load_before: tuple[float, float, float],
) -> None:
    api = config.new_client_from_config(str(plane.kubeconfig))
    kube = Kube(plane.kubeconfig, api, False, binaries.ensure("kubectl"))
    kube.kubectl("apply", "-f", str(ROOT / "crds/pipeline.yaml"))
    kube.kubectl("wait", "--for=condition=Established", "crd/pipelines.spindle.dev")
    kube.kubectl("create", "namespace", SYSTEM)
    kube.kubectl("create", "namespace", NAMESPACE)
    wait_for(
        "the namespace's service account",
        lambda: kube.kubectl("get", "serviceaccount", "default", "-n", NAMESPACE, check=False),
    )
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
    alone_names = ["warmup"] + [f"baseline-{i}" for i in range(args.baselines)]
    names = alone_names + [f"p{i:04d}" for i in range(args.pipelines)]
    singles = [f"single-{i}" for i in range(args.singles)]

    def seed_one(name: str) -> None:
        store = open_store(f"s3://{bucket}/pipelines", namespace=NAMESPACE, name=name, s3=options)
        seed(store, namespace=NAMESPACE, name=name, program=program(V1, name))

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(seed_one, names + singles))
    port = processes.free_port()
    kubeconfig = token_kubeconfig(kube, SYSTEM, "spindle-operator", work / "sa.kubeconfig")
    operator = processes.start(
        [
            sys.executable,
            "-m",
            "spindle.cli.main",
            "operator",
            "--all-namespaces",
            "--port",
            str(port),
            "--driver-image",
            DRIVER_IMAGE,
            "--resync",
            str(args.resync),
            "--recheck",
            str(args.recheck),
        ],
        log=work / "operator.log",
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        cwd=ROOT,
        registry=registry,
    )
    wait_for("the operator's /healthz", lambda: healthy(port), timeout=120)
    custom = client.CustomObjectsApi(api)

    def document(name: str) -> dict[str, Any]:
        return {
            "apiVersion": "spindle.dev/v1alpha1",
            "kind": "Pipeline",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "sql": program(V2, name),
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

    # What each pipeline reached, and when: from watches started before anything is applied,
    # so the figures do not wait on a poll, and measuring puts no LIST of the fleet on the API
    # server every tenth of a second.
    awaiting = Reached(
        lambda **kw: custom.list_namespaced_custom_object(
            "spindle.dev", "v1alpha1", NAMESPACE, "pipelines", **kw
        ),
        lambda item: (
            item["metadata"]["name"]
            if (item.get("status") or {}).get("phase") == "AwaitingApproval"
            else None
        ),
    )
    with_pods = Reached(
        lambda **kw: core.list_namespaced_pod(NAMESPACE, **kw),
        lambda pod: (pod["metadata"].get("labels") or {}).get("spindle.dev/pipeline"),
    )

    def create(name: str, started: dict[str, float]) -> None:
        started[name] = time.monotonic()
        custom.create_namespaced_custom_object(
            "spindle.dev", "v1alpha1", NAMESPACE, "pipelines", document(name)
        )

    def approve(name: str, changes: dict[str, str], approved: dict[str, float]) -> None:
        approved[name] = time.monotonic()
        custom.patch_namespaced_custom_object(
            "spindle.dev",
            "v1alpha1",
            NAMESPACE,
            "pipelines",
            name,
            {"metadata": {"annotations": {"spindle.dev/approve": changes[name]}}},
        )

    def pending_changes() -> dict[str, str]:
        return {
            i["metadata"]["name"]: i["status"]["pendingChange"]["id"]
            for i in custom.list_namespaced_custom_object(
                "spindle.dev", "v1alpha1", NAMESPACE, "pipelines"
            )["items"]
            if (i.get("status") or {}).get("pendingChange")
        }

    def settled(quiet_for: float = 3.0, at_most: float = 60.0) -> None:
        """Wait until no reconcile has run for `quiet_for` seconds (the last wave's tail: the
        scheduler marks 500 new driver pods Unschedulable over several seconds, and each is
        a change of its pipeline's status, not a cost of re-lists)."""
        started = time.monotonic()
        count, since = reconciles(port), started
        while time.monotonic() - since < quiet_for and time.monotonic() - started < at_most:
            time.sleep(0.5)
            if (now := reconciles(port)) != count:
                count, since = now, time.monotonic()

    def window() -> tuple[float, float, float]:
        """CPU seconds, reconciles and checks of the operator per resync, over `--windows`
        periods, once what the last step queued is done (`settled`)."""
        settled()
        cpu, count, checked = cpu_seconds(operator.pid), reconciles(port), checks(port)
        time.sleep(args.windows * args.resync)
        return (
            (cpu_seconds(operator.pid) - cpu) / args.windows,
            (reconciles(port) - count) / args.windows,
            (checks(port) - checked) / args.windows,
        )

    def alone(name: str) -> tuple[float, float]:
        """One pipeline applied, then approved: seconds to AwaitingApproval, and from its
        approval to its driver pod."""
        started: dict[str, float] = {}
        approved: dict[str, float] = {}
        create(name, started)
        to_awaiting = awaiting.wait({name}, started)[name]
        item = custom.get_namespaced_custom_object(
            "spindle.dev", "v1alpha1", NAMESPACE, "pipelines", name
        )
        approve(name, {name: item["status"]["pendingChange"]["id"]}, approved)
        return to_awaiting, with_pods.wait({name}, approved)[name]

    # Baselines: one pipeline alone, applied, then approved, once the operator has served one
    # (its clients connected, its modules loaded).
    alone("warmup")
    baselines = [alone(name) for name in alone_names[1:]]
    baseline = statistics.median(apply for apply, _ in baselines)
    baseline_pod = statistics.median(pod for _, pod in baselines)

    crowd = set(names[len(alone_names) :])
    started = {}
    parts = {
        "operator": [operator.pid],
        "kube-apiserver": [plane.pids()["kube-apiserver"]],
        "etcd": [plane.pids()["etcd"]],
        "S3 server": [s3.pid],
        "controllers and scheduler": [
            pid for name, pid in plane.pids().items() if name not in ("kube-apiserver", "etcd")
        ],
    }
    cpu_at_start, reconciled_at_start = cpu_by_part(parts), reconciles(port)
    bench_at_start, wall_at_start = sum(os.times()[:2]), time.monotonic()
    with ThreadPoolExecutor(32) as pool:
        list(pool.map(lambda name: create(name, started), sorted(crowd)))
    to_awaiting = list(awaiting.wait(crowd, started).values())
    crowd_wall = time.monotonic() - wall_at_start
    crowd_cpu = {part: seconds - cpu_at_start[part] for part, seconds in cpu_by_part(parts).items()}
    crowd_cpu["this benchmark"] = sum(os.times()[:2]) - bench_at_start
    first_pass_cpu = crowd_cpu["operator"]
    first_pass_reconciles = reconciles(port) - reconciled_at_start
    quiet_cpu, quiet_reconciles, _ = window()

    changes = pending_changes()
    approved = {}
    reconciled_at_approval = reconciles(port)
    with ThreadPoolExecutor(32) as pool:
        list(pool.map(lambda name: approve(name, changes, approved), sorted(crowd)))
    to_pod = list(with_pods.wait(crowd, approved).values())
    approval_pass_reconciles = reconciles(port) - reconciled_at_approval
    full_cpu, full_reconciles, full_checks = window()

    # One change at a time in the fleet, which keeps being reconciled at every re-list.
    single_awaiting: list[float] = []
    single_pod: list[float] = []
    for name in singles:
        seconds_to_awaiting, seconds_to_pod = alone(name)
        single_awaiting.append(seconds_to_awaiting)
        single_pod.append(seconds_to_pod)
    peak = rss_mb(operator.pid)
    load_after = os.getloadavg()

    per_reconcile = first_pass_cpu / max(first_pass_reconciles, 1.0)
    per_visit = full_cpu / max(full_reconciles + full_checks, 1.0)
    quiet_average = quiet_cpu + per_reconcile * len(names) * args.resync / args.recheck
    result = {
        "pipelines": args.pipelines,
        "resync_s": args.resync,
        "recheck_s": args.recheck,
        "baseline_to_awaiting_s": round(baseline, 3),
        "baselines_s": [[round(apply, 3), round(pod, 3)] for apply, pod in baselines],
        "to_awaiting_p50_s": round(statistics.median(to_awaiting), 2),
        "to_awaiting_p95_s": round(percentile(to_awaiting, 0.95), 2),
        "baseline_approval_to_pod_s": round(baseline_pod, 3),
        "approval_to_pod_p50_s": round(statistics.median(to_pod), 2),
        "approval_to_pod_p95_s": round(percentile(to_pod, 0.95), 2),
        "first_pass_cpu_s": round(first_pass_cpu, 2),
        "first_pass_reconciles": round(first_pass_reconciles),
        "approval_pass_reconciles": round(approval_pass_reconciles),
        "crowd_wall_s": round(crowd_wall, 2),
        "crowd_cpu_s": {part: round(seconds, 2) for part, seconds in crowd_cpu.items()},
        "single_to_awaiting_s": [round(x, 3) for x in single_awaiting],
        "single_approval_to_pod_s": [round(x, 3) for x in single_pod],
        "quiet_resync_cpu_s": round(quiet_cpu, 3),
        "quiet_resync_reconciles": round(quiet_reconciles, 1),
        "quiet_average_cpu_s_per_resync": round(quiet_average, 3),
        "full_resync_cpu_s": round(full_cpu, 3),
        "full_resync_reconciles": round(full_reconciles, 1),
        "full_resync_checks": round(full_checks, 1),
        "operator_peak_rss_mb": round(peak, 1),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
    }
    share = 100.0 / args.resync
    print(f"operator benchmark: {args.pipelines} pipelines applied at once")
    print(
        f"  apply → AwaitingApproval  baseline {baseline:6.3f} s   "
        f"p50 {result['to_awaiting_p50_s']:6.2f} s   p95 {result['to_awaiting_p95_s']:6.2f} s   "
        f"(p95 / baseline x{result['to_awaiting_p95_s'] / max(baseline, 1e-3):.1f}; "
        f"p95 / issue's 200 x{result['to_awaiting_p95_s'] / ISSUE_200['to_awaiting_p95_s']:.2f})"
    )
    print(
        f"  approval → driver pod     baseline {baseline_pod:6.3f} s   "
        f"p50 {result['approval_to_pod_p50_s']:6.2f} s   "
        f"p95 {result['approval_to_pod_p95_s']:6.2f} s   "
        f"(p95 / baseline x{result['approval_to_pod_p95_s'] / max(baseline_pod, 1e-3):.1f}; "
        f"p95 / issue's 200 "
        f"x{result['approval_to_pod_p95_s'] / ISSUE_200['approval_to_pod_p95_s']:.2f})"
    )
    print(
        f"  first pass of the crowd: {first_pass_cpu:.2f} CPU s "
        f"({1000 * first_pass_cpu / args.pipelines:.1f} ms a pipeline), "
        f"{first_pass_reconciles:.0f} reconciles; the approvals until each had its pod: "
        f"{approval_pass_reconciles:.0f} reconciles"
    )
    total, cores = sum(crowd_cpu.values()), os.cpu_count() or 1
    print(
        f"  the machine while the crowd was first reconciled ({crowd_wall:.1f} s, "
        f"{total:.1f} CPU s of {cores * crowd_wall:.1f} on {cores} cores): "
        + ", ".join(
            f"{part} {seconds:.1f} s ({100 * seconds / max(total, 1e-9):.0f} %)"
            for part, seconds in sorted(crowd_cpu.items(), key=lambda item: -item[1])
        )
    )
    for what, values, base in (
        ("apply → AwaitingApproval", single_awaiting, baseline),
        ("approval → driver pod    ", single_pod, baseline_pod),
    ):
        if values:
            p95 = percentile(values, 0.95)
            print(
                f"  one at a time in the fleet, {what}: p50 {statistics.median(values):.2f} s, "
                f"p95 {p95:.2f} s, max {max(values):.2f} s of {len(values)} (p95 / baseline "
                f"x{p95 / max(base, 1e-3):.1f})"
            )
    print(
        f"  re-list of the quiet fleet: {quiet_cpu:.3f} CPU s a resync "
        f"({quiet_cpu * share:.2f} % of a core), {quiet_reconciles:.0f} reconciles a resync"
    )
    print(
        f"  re-list of the fleet with active drivers (checkpoints unchanged): {full_cpu:.3f} "
        f"CPU s a resync ({full_cpu * share:.1f} % of a core), {full_checks:.0f} checks and "
        f"{full_reconciles:.0f} reconciles a resync, {1000 * per_visit:.2f} ms each"
    )
    print(
        f"  quiet fleet on average, with a recheck every {args.recheck:.0f} s: "
        f"{quiet_average:.3f} CPU s a resync ({quiet_average * share:.2f} % of a core)"
    )
    print(f"  operator peak RSS: {peak:.0f} MB (/ issue's 200: x{peak / ISSUE_200_RSS_MB:.2f})")
    print(f"  load average before {load_before}, after {load_after}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
