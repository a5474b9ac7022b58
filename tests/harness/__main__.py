"""`python -m tests.harness build` builds or reuses every cached part, printing the time each
took; `python -m tests.harness up` (make dev-cluster) starts the control plane, the node agent
and the S3 server, prints how to reach them, and runs until interrupted."""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from pathlib import Path

from tests.harness import binaries, cache


def build() -> None:
    from spindle.runtime.jars import ensure_jars

    start = time.monotonic()
    binaries.ensure_all()
    with cache.timed("Spark jars (hadoop-aws, AWS SDK bundle, Delta)", "ready"):
        ensure_jars()
    built = sum(s for _, how, s in cache.TIMINGS if how == "built")
    cache.say(
        f"harness ready in {time.monotonic() - start:.1f}s "
        f"({built:.1f}s building, the rest reused from {cache.root()})"
    )


def up() -> None:
    from tests.harness import control_plane, s3
    from tests.harness.node_agent import NodeAgent

    build()
    workdir = Path(tempfile.mkdtemp(prefix="spindle-dev-"))
    plane = control_plane.start(workdir / "kube")
    agent = NodeAgent(plane.kubeconfig, workdir / "node").start()
    server = s3.start(workdir / "s3")
    print(f"export KUBECONFIG={plane.kubeconfig}")
    print(f"export SPINDLE_TEST_S3_ENDPOINT={server.endpoint}")
    print(f"export SPINDLE_TEST_S3_ACCESS_KEY={server.access_key}")
    print(f"export SPINDLE_TEST_S3_SECRET_KEY={server.secret_key}")
    print(f"# kubectl: {binaries.path_of('kubectl')}   logs: {workdir}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while True:
            time.sleep(3600)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.stop()
        agent.stop()
        plane.stop()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.harness")
    parser.add_argument("action", choices=["build", "up"])
    {"build": build, "up": up}[parser.parse_args().action]()


if __name__ == "__main__":
    main()
