"""The local body's files under `--home`: generations, the observed run, the recorded status."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spindle.api import PipelineManifest
from spindle.api.status import PipelineStatus
from spindle.errors import SpindleError
from spindle.lifecycle import DriverMode
from spindle.local.home import LocalPipeline, default_home, home_path
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


def test_applies_at_once_each_get_a_generation_and_a_run_recording_loses_none(
    tmp_path: Path,
) -> None:
    """Two `local apply` at once each read the same generation, and the first's manifest was
    lost without a word (7 of 20 pairs, measured); a run recording its bootstrap meanwhile
    could drop an apply alike. Each read-modify-write of `pipeline.json` holds its lock."""
    import threading

    pipeline = LocalPipeline(tmp_path, "grades")
    pipeline.save(manifest(V1))
    programs = [V2.replace("2026-06-10", f"2026-06-{10 + i}") for i in range(8)]
    barrier = threading.Barrier(len(programs) + 1)
    generations: list[int] = []

    def apply(sql: str) -> None:
        barrier.wait()
        generations.append(LocalPipeline(tmp_path, "grades").save(manifest(sql)))

    def record() -> None:
        barrier.wait()
        LocalPipeline(tmp_path, "grades").update(lastBootstrap="0123456789ab")

    threads = [threading.Thread(target=apply, args=(sql,)) for sql in programs]
    threads.append(threading.Thread(target=record))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(generations) == list(range(2, 2 + len(programs)))  # each its own
    latest = pipeline.record()
    assert latest["generation"] == 1 + len(programs)
    assert latest["lastBootstrap"] == "0123456789ab"
    assert pipeline.manifest().spec.sql in programs


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


# -- the home a command uses, and files damaged outside Spindle ------------------------------------


def test_an_empty_spindle_home_is_the_default_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`SPINDLE_HOME=` means unset (`~/.spindle`), as `--help` and the warm server's client
    read it, never the current directory; `~` in it is the user's home there too."""
    from spindle.cli.warm_client import home_of

    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("SPINDLE_HOME", "")
    assert default_home() == home_path(None) == tmp_path / "user" / ".spindle"
    assert home_of([]) == str(default_home())
    monkeypatch.setenv("SPINDLE_HOME", "~/elsewhere")
    assert default_home() == tmp_path / "user" / "elsewhere"
    assert home_of([]) == str(default_home())


DAMAGED = {
    "truncated": b'{\n  "manifest": {\n    "apiVersion": "spindle.dev/v1alpha1",\n    "ki',
    "not UTF-8": b'{"generation": 1, "manifest": "\xff"}',
    "not an object": b"[]",
    "no manifest": b'{"generation": 1}',
    "no generation": b'{"manifest": {}}',
    "invalid manifest": b'{"generation": 1, "manifest": {"kind": "Pipeline"}}',
}


@pytest.mark.parametrize("damage", DAMAGED)
def test_a_damaged_pipeline_record_is_a_user_error_naming_the_file(
    tmp_path: Path, damage: str
) -> None:
    """Not an internal error: the file, what is wrong with it, and what to do. Applying again
    is refused too (it would lose the generation and last bootstrap), unless only the
    manifest in it is invalid: the one applied replaces it."""
    pipeline = LocalPipeline(tmp_path, "grades")
    pipeline.save(manifest(V1))
    path, content = pipeline.directory / "pipeline.json", DAMAGED[damage]
    path.write_bytes(content)
    again = [] if damage == "invalid manifest" else [lambda: pipeline.save(manifest(V1))]
    for read in (pipeline.manifest, *again):
        with pytest.raises(SpindleError) as refused:
            read()
        error = refused.value
        assert error.reason == "LocalStateUnreadable"
        assert error.message.startswith(f"Cannot read {path}, which records pipeline 'grades'")
        assert f"Restore the file from a backup, or remove {pipeline.directory} and apply" in (
            error.message
        )
        assert "checkpoints and stored state, which live in its storage, are kept" in (
            error.message
        )
        assert error.details == {"name": "grades", "path": str(path)}
    assert path.read_bytes() == content  # nothing was overwritten


def test_a_damaged_run_record_is_a_user_error_naming_the_file(tmp_path: Path) -> None:
    pipeline = LocalPipeline(tmp_path, "grades")
    pipeline.save(manifest(V1))
    path = pipeline.directory / "driver.json"
    path.write_text('{"mode": "run", "phase": "Fai')
    with pytest.raises(SpindleError) as refused:
        pipeline.driver()
    assert refused.value.reason == "LocalStateUnreadable"
    assert refused.value.message.startswith(f"Cannot read {path}")
    assert "Remove the file: that loses only how the last run ended" in refused.value.message


def test_an_event_that_repeats_a_condition_the_command_shows_is_not_said_again(
    tmp_path: Path,
) -> None:
    from spindle.lifecycle import Event
    from spindle.local.runner import LocalBody

    pipeline = LocalPipeline(tmp_path, "grades")
    pipeline.save(manifest(V1))
    ready = {"type": "Ready", "status": "False", "reason": "Bad", "message": "it is bad"}
    status = PipelineStatus.model_validate(
        {
            "phase": "Failed",
            "observedGeneration": 1,
            "conditions": [{**ready, "lastTransitionTime": "2026-11-22T00:00:00Z"}],
        }
    )
    events = [Event("Warning", "Bad", "it is bad"), Event("Warning", "Other", "news")]
    for shown, said in [(True, ["Warning Other: news"]), (False, ["Warning Bad: it is bad"])]:
        lines: list[str] = []
        LocalBody(pipeline, say=lines.append, shown=shown).record(status, events)
        assert lines[:1] == said and len(lines) == (1 if shown else 2)
        assert pipeline.status() == status


def test_a_run_pid_another_process_took_is_not_a_run(tmp_path: Path) -> None:
    """After a reboot or kill -9, `run.pid` could name an unrelated process: runs were refused
    as AlreadyRunning and `spindle local stop` killed that process."""
    pipeline = LocalPipeline(tmp_path, "grades")
    pipeline.save(manifest(V1))
    pipeline.mark_running()
    assert pipeline.running_pid() == os.getpid()
    (pipeline.directory / "run.pid").write_text(f"{os.getpid()} 1\n")  # started at another time
    assert pipeline.running_pid() is None
    (pipeline.directory / "run.pid").write_text(f"{os.getpid()}\n")  # an older Spindle's record
    assert pipeline.running_pid() == os.getpid()


def test_only_one_run_of_a_pipeline_holds_its_lock(tmp_path: Path) -> None:
    """Two runs started together both found no `run.pid` before either wrote one."""
    pipeline = LocalPipeline(tmp_path, "grades")
    pipeline.save(manifest(V1))
    with pipeline.running_lock():
        with (
            pytest.raises(SpindleError) as refused,
            LocalPipeline(tmp_path, "grades").running_lock(),
        ):
            pass
        assert refused.value.reason == "AlreadyRunning"
    with pipeline.running_lock():  # released with the run
        pass


def test_a_pipeline_directory_that_cannot_be_made_is_refused_by_a_run_and_an_apply(
    tmp_path: Path,
) -> None:
    """A run ended in a traceback (FileExistsError) where an apply said InvalidHome."""
    pipeline = LocalPipeline(tmp_path, "grades")
    pipeline.directory.parent.mkdir(parents=True, exist_ok=True)
    pipeline.directory.write_text("")  # a file where the pipeline's directory goes
    for locked in (pipeline.running_lock, lambda: pipeline._recording()):
        with pytest.raises(SpindleError) as refused, locked():
            pass
        assert refused.value.reason == "InvalidHome"
        assert str(pipeline.directory) in refused.value.message


def test_a_stop_the_run_does_not_heed_in_time_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said "Stopped" and exited 0 while the run went on. It waits saying for what: it
    waited up to 120 s in silence."""
    from spindle.local import runner

    pipeline = LocalPipeline(tmp_path, "grades")
    pipeline.save(manifest(V1))
    deaf = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\n"
            "time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert deaf.stdout is not None and deaf.stdout.readline() == b"ready\n"
        (pipeline.directory / "run.pid").write_text(str(deaf.pid))
        with pytest.raises(SpindleError) as timed_out:
            runner.stop(pipeline, force=False, timeout=0.5)
        assert timed_out.value.reason == "StopTimedOut" and "--force" in timed_out.value.message
        waiting = f"[spindle] waiting for the step in progress to commit (PID {deaf.pid})\n"
        assert capsys.readouterr().err == waiting
        assert runner.stop(pipeline, force=True, timeout=10)
        assert capsys.readouterr().err == ""  # killed: nothing to wait for
        assert deaf.wait(timeout=10) == -9
    finally:
        deaf.kill()
