"""The operator's metrics, as `/metrics` serves them, after reconciles run by the operator's own
worker against a fake API server (storage is a local directory, so checkpoints are real)."""

from __future__ import annotations

import asyncio
import datetime
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from spindle.checkpoint import BootstrapRecord, Manifest, PipelineRef
from spindle.checkpoint.records import next_manifest
from spindle.checkpoint.store import CheckpointStore, open_store
from spindle.k8s.metrics import Key, Metrics
from spindle.k8s.operator import Operator, WorkQueue
from spindle.k8s.pods import DriverSettings
from spindle.k8s.reconcile import Reconciler, Settings
from spindle.program import parse_program
from tests.checkpoints import seed as seeded
from tests.fake_cluster import FakeCluster
from tests.unit.test_lifecycle import V1, V2
from tests.unit.test_operator_body import spec

KEY: Key = ("default", "grades")
GRADES = {"namespace": "default", "name": "grades"}
Labels = tuple[tuple[str, str], ...]


@dataclass
class Clock:
    now: datetime.datetime = field(default_factory=lambda: datetime.datetime.now(datetime.UTC))

    def later(self, seconds: float) -> None:
        self.now += datetime.timedelta(seconds=seconds)


@dataclass
class Harness:
    cluster: FakeCluster
    operator: Operator
    clock: Clock

    def reconcile(self) -> None:
        """Queue the pipeline and let one worker of the operator reconcile it."""

        async def drive() -> None:
            work = self.operator.work = WorkQueue()
            worker = asyncio.create_task(self.operator._worker())
            work.add(KEY)
            while work.queued or work.busy:
                await asyncio.sleep(0.01)
            worker.cancel()

        asyncio.run(drive())

    def samples(self) -> dict[tuple[str, Labels], float]:
        text = self.operator.metrics.exposition().decode()
        return {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }

    def value(self, metric: str, **labels: str) -> float | None:
        return self.samples().get((metric, tuple(sorted(labels.items()))))

    def phase(self) -> str:
        return str(self.cluster.status("grades")["phase"])


def harness(clock: Clock, cluster: FakeCluster | None = None) -> Harness:
    cluster = cluster or FakeCluster()
    settings = Settings(driver=DriverSettings(image="spindle:test"), shared_files=True)
    metrics = Metrics(clock=lambda: clock.now)
    operator = Operator(settings=settings, namespaces=None, metrics=metrics)
    operator.leading = True  # what start() does without leader election
    operator.reconciler = Reconciler(
        cluster=cluster,  # type: ignore[arg-type]
        settings=settings,
        on_outcome=operator._outcome,
        on_create=operator._creating,
    )
    return Harness(cluster, operator, clock)


@pytest.fixture
def run() -> Harness:
    return harness(Clock())


def store(tmp_path: Path) -> CheckpointStore:
    return open_store(tmp_path.as_uri(), namespace="default", name="grades")


def seed(tmp_path: Path, sql: str) -> Manifest:
    return seeded(store(tmp_path), program=sql, **GRADES)


def test_a_pending_change_shows_its_age_until_it_is_approved(run: Harness, tmp_path: Path) -> None:
    seed(tmp_path, V1)
    run.cluster.apply("grades", spec(tmp_path, V2))
    run.reconcile()
    assert run.phase() == "AwaitingApproval"
    since = run.cluster.status("grades")["conditions"][0]["lastTransitionTime"]
    run.clock.now = datetime.datetime.fromisoformat(since) + datetime.timedelta(seconds=90)
    assert run.value("spindle_pending_changes_age_seconds", **GRADES) == 90.0
    run.clock.later(30)  # computed when scraped, not when reconciled
    assert run.value("spindle_pending_changes_age_seconds", **GRADES) == 120.0
    assert run.value("spindle_pipelines", phase="AwaitingApproval") == 1.0
    assert run.value("spindle_pipelines", phase="Running") == 0.0
    assert run.value("spindle_reconciles_total", result="ok") == 1.0
    assert run.value("spindle_reconcile_duration_seconds_count", result="ok") == 1.0
    assert (run.value("spindle_reconcile_duration_seconds_sum", result="ok") or 0.0) > 0.0

    change = run.cluster.status("grades")["pendingChange"]["id"]
    run.cluster.annotate("grades", "spindle.dev/approve", change)
    run.reconcile()
    assert run.phase() == "Bootstrapping"
    assert run.value("spindle_pending_changes_age_seconds", **GRADES) is None
    assert run.value("spindle_pipelines", phase="AwaitingApproval") == 0.0
    assert run.value("spindle_pipelines", phase="Bootstrapping") == 1.0
    assert run.value("spindle_reconcile_duration_seconds_count", result="ok") == 2.0


def test_a_running_pipeline_shows_its_checkpoint_age(run: Harness, tmp_path: Path) -> None:
    checkpoint = seed(tmp_path, V1)
    run.cluster.apply("grades", spec(tmp_path, V1))
    run.reconcile()
    assert run.value("spindle_checkpoint_age_seconds", **GRADES) is None  # not Running yet
    run.cluster.set_pod_phase("grades-g1-driver", "Running")
    run.reconcile()
    assert run.phase() == "Running"
    run.clock.now = checkpoint.created_at + datetime.timedelta(seconds=42)
    assert run.value("spindle_checkpoint_age_seconds", **GRADES) == 42.0


def test_a_bootstrap_is_counted_once_and_not_again_after_a_restart(
    run: Harness, tmp_path: Path
) -> None:
    first = seed(tmp_path, V1)
    run.cluster.apply("grades", spec(tmp_path, V2))
    run.reconcile()
    change = run.cluster.status("grades")["pendingChange"]["id"]
    run.cluster.annotate("grades", "spindle.dev/approve", change)
    run.reconcile()
    started = datetime.datetime.now(datetime.UTC)
    record = BootstrapRecord(
        change_id=change, started_at=started, finished_at=started + datetime.timedelta(seconds=12)
    )
    store(tmp_path).commit(
        next_manifest(
            parent=first,
            pipeline=PipelineRef(**GRADES),
            program=parse_program(V2),
            connectors={},
            state={},
            spark_version="4.2.0",
            bootstrap=record,
        )
    )
    run.cluster.set_pod_phase(f"grades-{change}-driver", "Running")
    run.reconcile()
    run.reconcile()
    assert run.value("spindle_bootstrap_duration_seconds_count") == 1.0
    assert run.value("spindle_bootstrap_duration_seconds_sum") == 12.0

    restarted = harness(Clock(record.finished_at + datetime.timedelta(seconds=1)), run.cluster)
    restarted.reconcile()  # a new operator process reads the same checkpoint
    assert restarted.phase() == run.phase()
    assert restarted.value("spindle_bootstrap_duration_seconds_count") == 0.0


def test_a_deleted_pipeline_leaves_no_series(run: Harness, tmp_path: Path) -> None:
    seed(tmp_path, V1)
    run.cluster.apply("grades", spec(tmp_path, V1))
    run.reconcile()
    run.cluster.set_pod_phase("grades-g1-driver", "Running")
    run.reconcile()
    assert run.value("spindle_checkpoint_age_seconds", **GRADES) is not None
    del run.cluster.pipelines[KEY]
    run.reconcile()
    assert run.value("spindle_reconciles_total", result="gone") == 1.0
    assert run.value("spindle_reconcile_duration_seconds_count", result="gone") == 1.0
    assert run.value("spindle_pipelines", phase="Running") == 0.0
    assert run.value("spindle_checkpoint_age_seconds", **GRADES) is None


def test_series_of_a_pipeline_a_re_list_no_longer_has_go_and_a_standby_serves_none(
    run: Harness, tmp_path: Path
) -> None:
    """A DELETED event that came while the pipeline's reconcile ran was undone when that
    reconcile recorded its outcome, and the series stayed until a restart; a reconcile that
    outlived its process's leadership put its pipeline's series back on a standby (counted
    twice on a dashboard's sum, beside the leader's)."""
    seed(tmp_path, V1)
    run.cluster.apply("grades", spec(tmp_path, V1))
    run.reconcile()
    run.cluster.set_pod_phase("grades-g1-driver", "Running")
    run.reconcile()
    run.operator.metrics.keep({KEY}, listed_at=time.monotonic())
    assert run.value("spindle_pipelines", phase="Running") == 1.0
    before = time.monotonic() - 3600  # a list taken before it was recorded: it is newer
    run.operator.metrics.keep(set(), listed_at=before)
    assert run.value("spindle_pipelines", phase="Running") == 1.0
    run.operator.metrics.keep(set(), listed_at=time.monotonic())  # the re-list found it gone
    assert run.value("spindle_pipelines", phase="Running") == 0.0
    assert run.value("spindle_checkpoint_age_seconds", **GRADES) is None
    run.operator._stop_leading()
    assert run.operator.reconciler is not None
    run.operator.reconciler.reconcile("default", "grades")  # one already in its thread
    assert run.value("spindle_pipelines", phase="Running") == 0.0
    assert run.value("spindle_leader") == 0.0


def test_a_failing_reconcile_is_timed_as_an_error(run: Harness, tmp_path: Path) -> None:
    run.cluster.apply("grades", spec(tmp_path, V1))
    run.cluster.refuse_pod_list = 500  # not a refusal for good: the worker retries it
    run.reconcile()
    assert run.value("spindle_reconciles_total", result="error") == 1.0
    assert run.value("spindle_reconcile_duration_seconds_count", result="error") == 1.0
    assert run.value("spindle_reconciles_total", result="ok") == 0.0
    assert run.value("spindle_pipelines", phase="Pending") == 0.0  # nothing was found out
