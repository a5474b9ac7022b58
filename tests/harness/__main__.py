"""The harness from the command line.

- `python -m tests.harness build` builds or reuses every cached part (binaries, Spark jars,
  images), printing the time each took.
- `python -m tests.harness up` (`make dev-cluster`) starts the one-node cluster and the S3
  server, installs the CRD and the operator with Helm, prepares the namespace `demo` (driver
  RBAC, S3 Secret, bucket) and writes the grades example's manifests with their storage filled
  in; it prints how to use them and runs until Ctrl-C, then stops everything.
- `python -m tests.harness down` removes whatever a killed `up` or test run left behind.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from tests.harness import binaries, cache
from tests.harness.s3 import S3Server

ROOT = Path(__file__).resolve().parents[2]
DEMO = "demo"


def build() -> None:
    from spindle.runtime.jars import ensure_jars
    from spindle.runtime.session import ensure_class_archive
    from tests.harness import images

    start = time.monotonic()
    # The project's images need no Go binary: on a cold machine they download and build
    # (network-bound) while the Go builds (CPU-bound) run.
    with ThreadPoolExecutor(max_workers=1) as pool:
        project_images = pool.submit(images.project_images)
        binaries.ensure_all()
        with cache.timed("Spark jars (hadoop-aws, AWS SDK bundle, Delta)", "ready"):
            ensure_jars()
        with cache.timed("Spark's class archive", "ready"):
            ensure_class_archive()
        project_images.result()
    images.ensure_all()
    built = sum(s for _, how, s in cache.TIMINGS if how == "built")
    cache.say(
        f"harness ready in {time.monotonic() - start:.1f}s "
        f"({built:.1f}s building, the rest reused from {cache.root()})"
    )


def _demo_manifests(workdir: Path, endpoint: str, bucket: str, region: str) -> list[Path]:
    written = []
    for version in ("v1", "v2"):
        document = yaml.safe_load(
            (ROOT / "examples" / "grades" / f"pipeline-{version}.yaml").read_text()
        )
        document["metadata"]["namespace"] = DEMO
        document["spec"]["storage"] = {
            "uri": f"s3://{bucket}/pipelines",
            "endpoint": endpoint,
            "region": region,
            "credentials": {
                "accessKeyId": {"name": "s3", "key": "accessKeyId"},
                "secretAccessKey": {"name": "s3", "key": "secretAccessKey"},
            },
        }
        path = workdir / f"grades-{version}.yaml"
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        written.append(path)
    return written


def _seed_grades(server: S3Server, root: str) -> None:
    """The reference's students and grades, as ad-hoc input batches of pipeline demo/grades."""
    from spindle.checkpoint.objects import S3Options, open_objects
    from spindle.local.adhoc import write_batch
    from tests.e2e.pipelines import GRADES, STUDENTS

    objects = open_objects(
        root,
        s3=S3Options(
            endpoint=server.endpoint,
            region=server.region,
            access_key=server.access_key,
            secret_key=server.secret_key,
        ),
    )
    write_batch(objects, "students", STUDENTS)
    write_batch(objects, "grades", GRADES)


def up() -> None:
    from tests.harness import cluster, s3

    build()
    workdir = Path(tempfile.mkdtemp(prefix="spindle-dev-"))
    from tests.harness.network import Layout

    index = int(os.environ.get("SPINDLE_CLUSTER_INDEX", "0"))
    running = cluster.start(workdir / "cluster", layout=Layout(index))
    server = s3.start(workdir / "s3")
    relay = server.reachable_at(running.layout.host_ip, registry=cluster.registry(running.layout))
    try:
        kubectl = binaries.ensure("kubectl")
        print(cluster.install_operator(running.kubeconfig, "spindle-system"), flush=True)
        running.kubectl("create", "namespace", DEMO)
        text = (ROOT / "deploy" / "rbac" / "driver.yaml").read_text()
        running.kubectl("apply", "-f", "-", input=text.replace("PIPELINE_NAMESPACE", DEMO))
        running.kubectl(
            "create",
            "secret",
            "generic",
            "s3",
            "-n",
            DEMO,
            f"--from-literal=accessKeyId={relay.access_key}",
            f"--from-literal=secretAccessKey={relay.secret_key}",
        )
        bucket = relay.bucket("demo")
        _seed_grades(relay, f"s3://{bucket}/pipelines/{DEMO}/grades")
        v1, v2 = _demo_manifests(workdir, relay.endpoint, bucket, relay.region)
        print(
            f"""
The cluster is up (one node, the operator installed by Helm); the grades example's students
and grades are waiting as input batches. In another shell:

  export KUBECONFIG={running.kubeconfig}
  alias kubectl={kubectl}
  kubectl apply -f {v1}          # the grades example, storage filled in
  kubectl get spl -n {DEMO} -w
  kubectl apply -f {v2}          # AwaitingApproval, with the diff in .status.pendingChange
  .venv/bin/kubectl-spindle approve grades -n {DEMO}

S3 for pods: {relay.endpoint} (keys in Secret {DEMO}/s3); logs: {workdir}
Stop with Ctrl-C (or `make dev-cluster-down` if this process was killed).""",
            flush=True,
        )
        for stop in (signal.SIGTERM, signal.SIGINT):  # SIGINT too, even if inherited ignored
            signal.signal(stop, lambda *_: sys.exit(0))
        while True:
            time.sleep(3600)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        relay.stop()
        server.stop()
        running.stop()


def down() -> None:
    """Reap this session's cluster (SPINDLE_CLUSTER_INDEX, default 0) and the one the restart
    test runs beside it (index + 1). Other sessions' clusters on the machine are left alone."""
    from tests.harness import cluster
    from tests.harness.network import Layout

    session = int(os.environ.get("SPINDLE_CLUSTER_INDEX", "0"))
    for index in (session, session + 1):
        removed = cluster.reap(Layout(index))
        cache.say(f"cluster {index}: removed {', '.join(removed) or 'nothing'}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.harness")
    parser.add_argument("action", choices=["build", "up", "down"])
    {"build": build, "up": up, "down": down}[parser.parse_args().action]()


if __name__ == "__main__":
    main()
