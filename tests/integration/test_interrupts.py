"""Ctrl-C while a local command starts Spark, with a real JVM: the command says it heard it,
stops once Spark has started (exit 130), and leaves no JVM and no Java stack trace behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from spindle.cli.main import main
from spindle.local.warm import alive

MANIFEST = Path("examples/grades/pipeline-v1.yaml")


def jvms(app: str) -> list[int]:
    """The Java processes (not zombies) started for the Spark application `app`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            arguments = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        java = arguments[0].endswith(b"java")
        if java and f"spark.app.name={app}".encode() in arguments and alive(int(entry)):
            found.append(int(entry))
    return found


@pytest.fixture
def app() -> Iterator[str]:
    """A pipeline name of this test alone; a JVM it left is killed when the test ends."""
    name = f"ctrl-c-{uuid.uuid4().hex[:8]}"
    yield name
    for pid in jvms(f"spindle-default-{name}"):
        os.kill(pid, signal.SIGKILL)


def test_ctrl_c_while_spark_starts_stops_once_it_has_and_leaves_no_jvm(
    tmp_path: Path, app: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Ctrl-C in PySpark's wait for its JVM's port left that JVM running for good (its
    parent PID 1, 400 MB), a Java `NoSuchFileException` stack trace on the terminal, nothing
    of Spindle's, and the run recorded as running."""
    home = tmp_path / "home"
    manifest = tmp_path / "pipeline.yaml"
    manifest.write_text(MANIFEST.read_text().replace("name: grades", f"name: {app}", 1))
    assert main(["local", "apply", "-f", str(manifest), "--home", str(home), "--no-server"]) == 0
    capsys.readouterr()
    output = tmp_path / "output"  # a file: a JVM left behind would hold a pipe open
    with output.open("w") as written:
        run = subprocess.Popen(
            [sys.executable, "-m", "spindle.cli.main", "local", "run", app, "--home", str(home)],
            stdout=written,
            stderr=subprocess.STDOUT,
            env={**os.environ, "SPINDLE_NO_SERVER": "1", "PYTHONUNBUFFERED": "1"},
        )
    try:
        deadline = time.monotonic() + 300  # a class archive to make first, on a busy machine
        while not jvms(f"spindle-default-{app}") and run.poll() is None:
            assert time.monotonic() < deadline, f"no JVM started: {output.read_text()}"
            time.sleep(0.02)
        run.send_signal(signal.SIGINT)  # as PySpark waits for the JVM to say its port
        run.wait(timeout=300)
    finally:
        run.kill()
    assert run.returncode == 130, output.read_text()
    assert jvms(f"spindle-default-{app}") == []  # ended with the command
    time.sleep(2)
    assert jvms(f"spindle-default-{app}") == []  # and none started after it
    said = output.read_text()
    for trace in ("Exception in thread", "NoSuchFileException", "Traceback", "\tat "):
        assert trace not in said
    assert "[spindle] starting Spark (local[2])" in said
    assert "[spindle] stopping once Spark has started" in said
    driver = json.loads((home / "pipelines" / app / "driver.json").read_text())
    assert driver["phase"] != "Running"
    assert main(["local", "status", app, "--json", "--home", str(home), "--no-server"]) == 0
    assert json.loads(capsys.readouterr().out)["phase"] == "Stopped"
