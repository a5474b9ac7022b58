"""Shared pytest wiring: session fixtures for the real parts, and CI strictness.

Fixtures: `kube` (a real one-node cluster started by `tests.harness.cluster`, one per test run,
or the cluster `KUBECONFIG` names), `s3` (versitygw, or the server `SPINDLE_TEST_S3_ENDPOINT`
names), `spark` (a local SparkSession with Delta and S3A on `s3`) and `helm`. With CI=true a
skipped test fails: a test that cannot run is not a passing test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kube import Kube

__all__ = ["ROOT", "Kube"]  # e2e tests import both from here

ROOT = Path(__file__).resolve().parent.parent
os.chdir(ROOT)
os.environ.setdefault("SPINDLE_CACHE", str(Path.home() / ".cache" / "spindle"))
# local commands run in the test's own process (cold, or on the `spark` fixture's session); the
# warm server's tests (tests/integration/test_warm_server.py) start servers and stop them
os.environ.setdefault("SPINDLE_NO_SERVER", "1")
# the JIT's first tier only for the commands tests start: such a JVM lives a few steps, and C2
# compiled code it never ran long enough to use (a third of its CPU). The `spark` fixture's
# session, benchmarks and driver pods keep C2
os.environ.setdefault("SPINDLE_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")


@pytest.fixture(scope="session")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    from kubernetes import config

    external = os.environ.get("KUBECONFIG")
    if external and Path(external).exists():
        yield Kube(Path(external), config.new_client_from_config(external), True, None)
        return
    from tests.harness import binaries, cluster
    from tests.harness.network import Layout

    # SPINDLE_CLUSTER_INDEX picks another set of names and ranges, so two runs can share a machine
    index = int(os.environ.get("SPINDLE_CLUSTER_INDEX", "0"))
    running = cluster.start(tmp_path_factory.mktemp("cluster"), layout=Layout(index))
    try:
        yield Kube(
            running.kubeconfig,
            config.new_client_from_config(str(running.kubeconfig)),
            False,
            binaries.ensure("kubectl"),
            running,
        )
    finally:
        running.stop()


@pytest.fixture(scope="session")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.harness.s3 import S3Server

    endpoint = os.environ.get("SPINDLE_TEST_S3_ENDPOINT")
    if endpoint:
        yield S3Server(
            Path("."),
            endpoint=endpoint,
            access_key=os.environ["SPINDLE_TEST_S3_ACCESS_KEY"],
            secret_key=os.environ["SPINDLE_TEST_S3_SECRET_KEY"],
        )
        return
    server = S3Server(tmp_path_factory.mktemp("s3")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def spark(s3: Any) -> Iterator[Any]:
    from spindle.checkpoint.objects import S3Options
    from spindle.runtime.session import spark_session

    # this JVM serves every test of the run, long enough for C2's code to pay for itself: the
    # first tier only is for the JVMs of the commands tests start
    jit = os.environ.pop("SPINDLE_JAVA_OPTIONS", None)
    try:
        session = spark_session(
            app="spindle-tests",
            s3=S3Options(
                endpoint=s3.endpoint,
                region=s3.region,
                access_key=s3.access_key,
                secret_key=s3.secret_key,
            ),
        )
    finally:
        if jit is not None:
            os.environ["SPINDLE_JAVA_OPTIONS"] = jit
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def helm() -> Path:
    from tests.harness import binaries

    return binaries.ensure("helm")


MARKED_BY_FIXTURE = {"spark": "spark", "s3": "s3", "kube": "kube"}
"""A test that uses one of these fixtures gets the marker of the same name, so `-m "not spark"`
skips every Spark test without each one having to say so."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for fixture, marker in MARKED_BY_FIXTURE.items():
            if fixture in used:
                item.add_marker(getattr(pytest.mark, marker))
    # The tests of the cluster last, the unit tests first: the cluster (its control plane,
    # node and operator) starts at its first test and runs until the last test ends, taking
    # CPU from every test that runs meanwhile; and a unit test's failure shows in minutes.
    rank = {"unit": 0, "fuzz": 1, "integration": 2, "e2e": 3}
    items.sort(
        key=lambda item: (
            "kube" in getattr(item, "fixturenames", ()),
            rank.get(item.path.parent.name, 2),
        )
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI", "").lower() == "true" and report.skipped and call.when != "teardown":
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, which counts as a failure: {report.longrepr}"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    from tests.harness import cache

    if cache.TIMINGS:
        terminalreporter.section("harness: built versus reused")
        for what, how, seconds in cache.TIMINGS:
            terminalreporter.write_line(f"{how:>8} {what:<40} {seconds:7.1f}s")
