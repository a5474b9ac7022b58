"""Errors of the machine, not of Spindle: each was an `InternalError` ("This is a Spindle
bug") and says what to fix instead; a checkpoint id that names no checkpoint is not found; a
write a full disk refuses leaves no partial file."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spindle.checkpoint.blobs import ObjectNotFound
from spindle.checkpoint.file_store import FileStore
from spindle.errors import internal


def test_a_missing_runtime_or_jvm_or_a_refusing_disk_says_what_to_fix() -> None:
    from pyspark.errors import PySparkRuntimeError

    missing = ModuleNotFoundError("No module named 'pyspark'", name="pyspark")
    assert internal(missing).reason == "SparkUnavailable"
    assert "pip install 'spindle[runtime]'" in internal(missing).message
    no_jvm = PySparkRuntimeError(errorClass="JAVA_GATEWAY_EXITED", messageParameters={})
    assert (internal(no_jvm).reason, "JAVA_HOME" in internal(no_jvm).message) == (
        "SparkUnavailable",
        True,
    )
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/data/x.json")
    refused = internal(full)
    assert refused.reason == "FileSystemRefused"
    assert "No space left on device (/data/x.json). Free space" in refused.message
    assert internal(ModuleNotFoundError("No module named 'yaml'", name="yaml")).reason == (
        "InternalError"  # one of Spindle's own dependencies: a broken install is its bug
    )
    assert internal(ValueError("x")).reason == "InternalError"


def test_a_wrong_java_home_is_spark_unavailable_not_a_spindle_bug(tmp_path: Path) -> None:
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-java"), "SPINDLE_NO_SERVER": "1"}
    home = tmp_path / "home"
    manifest = Path("examples/grades/pipeline-v1.yaml").resolve()
    spindle = [sys.executable, "-m", "spindle.cli.main"]
    subprocess.run(
        [*spindle, "local", "apply", "-f", str(manifest), "--home", str(home)],
        env=env,
        check=True,
        capture_output=True,
    )
    run = subprocess.run(
        [*spindle, "local", "run", "grades", "--until-idle", "--home", str(home)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1, run.stderr
    assert "error SparkUnavailable: Spark's JVM did not start" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_key_outside_the_store_names_no_object(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "store")
    with pytest.raises(ObjectNotFound):
        store.read("../../etc/passwd")


def test_a_write_the_disk_refuses_leaves_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk left a `.tmp` file beside the object at each attempt. Here the write's
    temporary file is /dev/full, whose every write is ENOSPC."""
    from spindle.checkpoint import file_store

    root = tmp_path / "store"
    root.mkdir()
    os.symlink("/dev/full", root / ".x.json.full.tmp")

    class Full:
        hex = "full"

    monkeypatch.setattr(file_store.uuid, "uuid4", lambda: Full)
    with pytest.raises(OSError) as refused:
        FileStore(root).write("x.json", b"{}")
    assert refused.value.errno == errno.ENOSPC
    assert [p.name for p in root.iterdir() if p.name.endswith(".tmp")] == []
