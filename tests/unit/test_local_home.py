"""The local body's files under `--home`: generations, the observed run, the recorded status."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spindle.api import PipelineManifest
from spindle.api.status import PipelineStatus
from spindle.errors import SpindleError
from spindle.lifecycle import DriverMode
from spindle.local.home import LocalPipeline, home_path
from spindle.local.warm import home_problem
from tests.unit.test_lifecycle import V1, V2


def manifest(sql: str) -> PipelineManifest:
    return PipelineManifest.model_validate(
        {
            "apiVersion": "spindle.dev/v1alpha1",
            "kind": "Pipeline",
            "metadata": {"name": "grades"},
            "spec": {"sql": sql},
        }
    )


def test_generation_grows_only_when_the_spec_changes(tmp_path: Path) -> None:
    pipeline = LocalPipeline(tmp_path, "grades")
    assert pipeline.save(manifest(V1)) == 1
    assert pipeline.save(manifest(V1)) == 1
    assert pipeline.save(manifest(V2)) == 2


def test_a_pipeline_applied_again_in_another_namespace_is_refused(tmp_path: Path) -> None:
    pipeline = LocalPipeline(tmp_path, "grades")
    assert pipeline.save(manifest(V1)) == 1
    moved = manifest(V1).model_copy(deep=True)
    moved.metadata.namespace = "other"
    with pytest.raises(SpindleError) as refused:
        pipeline.save(moved)  # its checkpoints live under the namespace: they would be orphaned
    assert refused.value.reason == "PipelineNamespaceChanged"
    assert "'default'" in refused.value.message and "'other'" in refused.value.message
    assert pipeline.manifest().metadata.namespace == "default" and pipeline.generation == 1


def test_a_run_whose_process_is_gone_is_observed_as_finished(tmp_path: Path) -> None:
    pipeline = LocalPipeline(tmp_path, "grades")
    pipeline.save(manifest(V1))
    assert pipeline.driver() is None
    pipeline.set_driver(mode="bootstrap", generation=1, phase="Running", change_id="c")
    pipeline.mark_running()
    driver = pipeline.driver()
    assert driver is not None and driver.active and driver.mode is DriverMode.BOOTSTRAP
    assert pipeline.running_pid() == os.getpid()
    pipeline.clear_running()
    driver = pipeline.driver()
    assert driver is not None and driver.phase == "Succeeded" and not driver.active


def test_default_storage_is_a_directory_under_the_home(tmp_path: Path) -> None:
    pipeline = LocalPipeline(tmp_path, "grades")
    pipeline.save(manifest(V1))
    root, s3 = pipeline.storage_root()
    assert root == f"{(tmp_path / 'storage').resolve().as_uri()}/default/grades" and s3 is None
    assert pipeline.store().uri == root


def test_the_recorded_status_round_trips_and_a_corrupt_one_is_ignored(tmp_path: Path) -> None:
    pipeline = LocalPipeline(tmp_path, "grades")
    pipeline.save(manifest(V1))
    assert pipeline.status() is None
    status = PipelineStatus.model_validate({"phase": "Stopped", "observedGeneration": 1})
    pipeline.save_status(status.to_json())
    assert pipeline.status() == status
    (pipeline.directory / "status.json").write_text("{not json")
    assert pipeline.status() is None


def test_a_home_that_cannot_be_a_directory_is_refused(tmp_path: Path) -> None:
    regular = tmp_path / "file"
    regular.write_text("")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    for home, culprit in [
        (regular, "it is"),
        (regular / "home", f"{regular} is"),
        (tmp_path / "dangling", "it is"),
    ]:
        with pytest.raises(SpindleError) as refused:
            home_path(str(home))
        assert refused.value.reason == "InvalidHome"
        assert f"The home {home} cannot hold" in refused.value.message
        assert f"{culprit} not a directory" in refused.value.message
        assert refused.value.details == {"home": str(home)}
    for usable in (tmp_path, tmp_path / "new" / "home"):  # a missing home is created later
        assert home_path(str(usable)) == usable
        assert home_problem(usable) is None
    assert not (tmp_path / "new").exists()
