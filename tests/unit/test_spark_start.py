"""Spark's start in a local command, as a user sees it: a line saying it starts, and a Ctrl-C
meanwhile that is heard, said, and acted on once Spark has started (exit 130), leaving no JVM
and no run recorded as running. `tests/integration/test_interrupts.py` does it with a JVM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from spindle.cli.main import main
from spindle.runtime import session

MANIFEST = "examples/grades/pipeline-v1.yaml"


class FakeSession:
    """What `SparkSession` is to `session._started`: a builder, and the session it made."""

    _instantiatedSession: FakeSession | None = None
    stopped: list[FakeSession] = []
    interrupt = False
    """Send this process a Ctrl-C while the session is made, on the context that started."""

    def __init__(self) -> None:
        self.builder = self

    def config(self, **_: Any) -> FakeSession:
        return self

    def getOrCreate(self) -> FakeSession:
        if FakeSession.interrupt:
            signal.raise_signal(signal.SIGINT)
        made = FakeSession()
        FakeSession._instantiatedSession = made
        return made

    def stop(self) -> None:
        FakeSession.stopped.append(self)
        FakeSession._instantiatedSession = None


def pyspark_handler(*_: Any) -> None:
    """Stands for the handler PySpark's context sets as it starts."""
    raise AssertionError("PySpark's handler ran")


@pytest.fixture
def jvm() -> Iterator[subprocess.Popen[bytes]]:
    """A process that, like PySpark's JVM, ends when its standard input does."""
    process = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    yield process
    process.kill()
    process.wait()


@pytest.fixture
def spark(monkeypatch: pytest.MonkeyPatch, jvm: subprocess.Popen[bytes]) -> SimpleNamespace:
    """PySpark's classes as `session._started` uses them; `interrupt` sends this process a
    Ctrl-C while the JVM starts (before the context sets its own handler)."""
    spark = SimpleNamespace(interrupt=False)

    class FakeContext:
        _active_spark_context: Any = None
        _gateway: Any = None
        _jvm: Any = None

        @classmethod
        def getOrCreate(cls, _: object) -> None:
            if spark.interrupt:
                signal.raise_signal(signal.SIGINT)  # in PySpark's wait for the JVM's port
            signal.signal(signal.SIGINT, pyspark_handler)
            cls._gateway = SimpleNamespace(proc=jvm, jvm=object())
            cls._active_spark_context = SimpleNamespace(stop=lambda: None)

    FakeSession.stopped = []
    FakeSession._instantiatedSession = None
    FakeSession.interrupt = False
    monkeypatch.setattr(session, "SparkContext", FakeContext)
    monkeypatch.setattr(session, "SparkSession", FakeSession())
    spark.context = FakeContext
    return spark


def said(capsys: pytest.CaptureFixture[str], line: str) -> str:
    """Standard error once it holds `line` (a thread prints it), within a few seconds."""
    err = ""
    deadline = time.monotonic() + 5
    while line not in err and time.monotonic() < deadline:
        err += capsys.readouterr().err
        time.sleep(0.01)
    return err


@pytest.mark.parametrize("moment", ["the JVM starts", "the session is made"])
def test_a_ctrl_c_while_spark_starts_is_said_then_stops_spark_and_its_jvm(
    moment: str,
    spark: SimpleNamespace,
    jvm: subprocess.Popen[bytes],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A Ctrl-C in PySpark's wait for its JVM left the JVM running for good (parent PID 1),
    printing a Java stack trace, and Spindle exited saying nothing. One after the context had
    started ran PySpark's handler, and py4j's "reentrant call" traceback."""
    spark.interrupt = moment == "the JVM starts"
    FakeSession.interrupt = moment == "the session is made"
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        session._started({"spark.master": "local[2]"})
    assert "[spindle] stopping once Spark has started" in said(capsys, "stopping once")
    assert len(FakeSession.stopped) == 1  # the session that started, stopped
    assert jvm.poll() == 0  # and its JVM ended before the command did
    assert spark.context._gateway is None  # a later session would start a new one
    assert signal.getsignal(signal.SIGINT) is before


def test_spark_started_without_a_ctrl_c_keeps_the_handler_there_was(
    spark: SimpleNamespace, jvm: subprocess.Popen[bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    """PySpark's own handler cancelled the jobs from inside the call that waited for them:
    py4j printed a "reentrant call" traceback at a cold `spindle query`'s Ctrl-C."""
    before = signal.getsignal(signal.SIGINT)
    started = session._started({"spark.master": "local[2]"})
    assert started is FakeSession._instantiatedSession and not FakeSession.stopped
    assert signal.getsignal(signal.SIGINT) is before
    assert jvm.poll() is None and capsys.readouterr().err == ""


def test_spark_started_on_another_thread_leaves_the_signals_alone(
    spark: SimpleNamespace,
) -> None:
    """The warm server starts Spark on a command's thread: signals are its main thread's."""
    spark.interrupt = False
    made: list[Any] = []
    thread = threading.Thread(target=lambda: made.append(session._started({})))
    before = signal.getsignal(signal.SIGINT)
    thread.start()
    thread.join()
    assert made and signal.getsignal(signal.SIGINT) is before


def test_a_run_says_spark_starts_and_one_interrupted_meanwhile_is_not_left_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run in its own process said nothing of Spindle's for the ~30 s Spark took to start;
    interrupted there it exited 130 and left `driver.json` saying `Running`."""
    from spindle.runtime import factory

    def interrupted(**_: Any) -> Any:  # as `_started` raises a Ctrl-C once Spark started
        raise KeyboardInterrupt

    monkeypatch.setattr(factory, "open_runtime", interrupted)
    monkeypatch.setattr(session, "running", lambda: False)
    home = ["--home", str(tmp_path / "home"), "--no-server"]
    assert main(["local", "apply", "-f", MANIFEST, *home]) == 0
    capsys.readouterr()
    assert main(["local", "run", "grades", *home]) == 130
    assert "[spindle] starting Spark (local[2])" in capsys.readouterr().err
    driver = json.loads((tmp_path / "home" / "pipelines" / "grades" / "driver.json").read_text())
    assert driver["phase"] == "Succeeded"
    assert main(["local", "status", "grades", "--json", *home]) == 0
    assert json.loads(capsys.readouterr().out)["phase"] == "Stopped"


def test_spark_is_said_to_start_only_when_it_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A command on a warm server whose Spark runs says nothing of it."""
    from spindle.local import runner
    from spindle.local.home import LocalPipeline
    from spindle.runtime import factory
    from tests.unit.test_lifecycle import V1
    from tests.unit.test_local_home import manifest

    pipeline = LocalPipeline(tmp_path / "home", "grades")
    pipeline.save(manifest(V1))
    monkeypatch.setattr(factory, "open_runtime", lambda **_: "runtime")
    for running, line in [(True, ""), (False, "[spindle] starting Spark (local[2])\n")]:
        monkeypatch.setattr(session, "running", lambda running=running: running)
        assert runner.open_runtime(pipeline, report=lambda *_, **__: None) == "runtime"
        assert capsys.readouterr().err == line
