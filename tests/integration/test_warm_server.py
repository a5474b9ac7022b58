"""The warm local Spark server, through the `spindle` command as a user runs it: commands of
one home share one server, two homes have two, a crashed or stale server is replaced, and a
server killed in the middle of a step loses and duplicates nothing."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spindle.local.home import LocalPipeline
from spindle.local.warm import ServerFiles, alive
from tests.integration.test_runtime_crash import FILES, ROWS, prepare, settle


def spindle(home: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "SPINDLE_NO_SERVER"}
    return subprocess.Popen(
        [sys.executable, "-m", "spindle.cli.main", *args, "--home", str(home)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "PYTHONPATH": str(Path.cwd()), "PYTHONUNBUFFERED": "1"},
    )


def call(home: Path, *args: str, expect: int = 0) -> tuple[str, str]:
    process = spindle(home, *args)
    out, err = process.communicate(timeout=900)
    assert process.returncode == expect, out + err
    return out, err


def server_pid(home: Path) -> int | None:
    state = ServerFiles(home).state()
    return int(state["pid"]) if state else None


def served_command(home: Path) -> list[str] | None:
    """The command the home's server runs now (`local server status`)."""
    out, _ = call(home, "local", "server", "status", "--json")
    command: list[str] | None = json.loads(out)["command"]
    return command


def wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 300
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid), f"server {pid} still runs"


@pytest.fixture
def homes(tmp_path: Path) -> Iterator[list[Path]]:
    """Homes whose servers are stopped (by PID) when the test ends, whatever happened."""
    created: list[Path] = []
    yield created
    for home in created:
        pid = server_pid(home)
        if pid is not None and alive(pid):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 120
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def rows(home: Path, relation: str) -> list[Any]:
    out, _ = call(home, "query", "crash", f"SELECT * FROM {relation}", "--json")
    return sorted(json.dumps(row, sort_keys=True) for row in json.loads(out))


def rows_here(home: Path, relation: str, capsys: pytest.CaptureFixture[str]) -> list[Any]:
    """`rows`, answered in this process on the session's Spark (for the reference)."""
    capsys.readouterr()
    settle(home, "query", "crash", f"SELECT * FROM {relation}", "--json")
    return sorted(json.dumps(row, sort_keys=True) for row in json.loads(capsys.readouterr().out))


def test_commands_share_one_server_per_home_and_a_dead_one_is_replaced(
    tmp_path: Path, homes: list[Path]
) -> None:
    first, second = tmp_path / "a" / "home", tmp_path / "b" / "home"
    homes.extend([first, second])
    for home in (first, second):
        manifest = prepare(home.parent, 1)
        _, err = call(home, "local", "apply", "-f", str(manifest))
        assert "starting a Spark server" not in err  # apply needs no Spark: no server for it
        assert server_pid(home) is None
    _, err = call(first, "local", "run", "crsh", "--until-idle", expect=1)  # a misspelt name
    assert "PipelineNotFound" in err and "starting a Spark server" not in err
    assert server_pid(first) is None  # refused without starting a JVM for it
    _, err = call(first, "local", "run", "crash", "--until-idle")
    assert "starting a Spark server" in err and "Stopped at checkpoint" in err
    assert "[spindle] starting Spark (local[2])" in err  # the server's ~45 s are said
    pid = server_pid(first)
    assert pid is not None and alive(pid)

    files = ServerFiles(first)
    assert stat.S_IMODE(files.token_path.stat().st_mode) == 0o600
    socket_path = Path(json.loads(files.state_path.read_text())["socket"])
    assert stat.S_ISSOCK(socket_path.stat().st_mode)
    assert stat.S_IMODE(socket_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(files.directory.stat().st_mode) == 0o700

    _, err = call(first, "query", "crash", "SELECT count(*) AS n FROM events")
    assert "starting a Spark server" not in err and "starting Spark" not in err  # it runs
    out, _ = call(first, "query", "crash", "SELECT count(*) AS n FROM events", "--json")
    assert json.loads(out) == [{"n": FILES * ROWS}]
    out, _ = call(first, "local", "status", "crash", "--json")
    assert json.loads(out)["phase"] == "Stopped"
    out, _ = call(first, "local", "server", "status", "--json")
    status = json.loads(out)
    assert status["running"] and status["pid"] == pid == server_pid(first)
    assert status["socket"] == str(socket_path) and status["memoryBytes"] > 0
    assert status["uptimeSeconds"] >= 0 and status["command"] is None
    out, _ = call(first, "local", "server", "status")
    assert f"PID {pid}" in out and "MiB" in out

    # Ctrl-C cancels a served query at once, its Spark jobs with it: the query went on,
    # holding the server, and a second Ctrl-C left it running there
    crossed = ", ".join(f"events e{n}" for n in range(5))  # 200^5 rows to count
    asked = spindle(first, "query", "crash", f"SELECT count(*) AS n FROM {crossed}")
    deadline = time.monotonic() + 300
    while served_command(first) is None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert served_command(first) is not None
    asked.send_signal(signal.SIGINT)
    assert asked.wait(timeout=60) == 130
    deadline = time.monotonic() + 120
    while served_command(first) is not None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert served_command(first) is None, "the server still runs the query"

    _, err = call(second, "query", "crash", "SELECT count(*) AS n FROM events", expect=1)
    assert "CheckpointNotFound" in err  # an error inside the server reaches the client as such
    other = server_pid(second)
    assert other is not None and other != pid and alive(pid)

    os.kill(pid, signal.SIGKILL)  # a crashed server is detected and replaced
    wait_gone(pid)
    out, err = call(first, "query", "crash", "SELECT count(*) AS n FROM events", "--json")
    assert json.loads(out) == [{"n": FILES * ROWS}] and "starting a Spark server" in err
    replaced = server_pid(first)
    assert replaced not in (None, pid) and server_pid(second) == other

    out, _ = call(first, "local", "server", "stop")
    assert f"PID {replaced}" in out
    assert replaced is not None and not alive(replaced)
    out, _ = call(first, "local", "server", "status", "--json")
    assert json.loads(out) == {"running": False, "home": str(first)}


def test_a_stale_token_is_refused_with_a_reason_and_the_server_can_still_be_stopped(
    tmp_path: Path, homes: list[Path]
) -> None:
    home = tmp_path / "home"
    homes.append(home)
    call(home, "local", "apply", "-f", str(prepare(tmp_path, 1)))
    call(home, "query", "crash", "SELECT 1", expect=1)  # starts the server (no checkpoint yet)
    pid = server_pid(home)
    assert pid is not None
    ServerFiles(home).token_path.write_text("0" * 64 + "\n")
    _, err = call(home, "local", "status", "crash", expect=1)
    assert "ServerTokenRejected" in err and "spindle local server stop" in err
    out, _ = call(home, "local", "status", "crash", "--json", expect=1)
    assert json.loads(out)["error_code"] == "ServerTokenRejected"
    call(home, "local", "server", "stop")
    assert not alive(pid)


@contextlib.contextmanager
def served_from(copy: Path, home: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A real server for `home` running the copy of Spindle at `copy`."""
    files = ServerFiles(home)
    files.prepare()
    files.new_token()
    command = ["-m", "spindle.cli.warm_server", "--home", str(home), "--idle-timeout", "600"]
    process = subprocess.Popen(
        [sys.executable, *command],
        env={**os.environ, "PYTHONPATH": str(copy)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while server_pid(home) != process.pid and time.monotonic() < deadline:
            time.sleep(0.1)
        assert server_pid(home) == process.pid
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_server_of_another_version_is_replaced(tmp_path: Path, homes: list[Path]) -> None:
    """A real server from a copy of Spindle whose version differs."""
    home = tmp_path / "home"
    homes.append(home)
    call(home, "local", "apply", "-f", str(prepare(tmp_path, 1)))
    old = tmp_path / "old"
    shutil.copytree(Path("operator/spindle"), old / "spindle")
    init = old / "spindle" / "__init__.py"
    init.write_text(init.read_text().replace('__version__ = "', '__version__ = "0.0.0-old-'))
    with served_from(old, home) as process:
        _, err = call(home, "local", "status", "crash")  # no Spark needed: here, and it stays
        assert "replacing" not in err and process.poll() is None
        _, err = call(home, "query", "crash", "SELECT 1", expect=1)  # no checkpoint yet
        assert f"replacing the server for {home} (PID {process.pid}, Spindle 0.0.0-old-" in err
        assert "CheckpointNotFound" in err
        assert process.wait(timeout=120) == 0  # it was asked to stop, and did


def test_a_server_whose_sources_changed_since_it_started_is_replaced(
    tmp_path: Path, homes: list[Path]
) -> None:
    """The version a server reports is that of the code it loaded, not of the files on disk
    now: after an edit, the client (of the edited code) replaces it."""
    home = tmp_path / "home"
    homes.append(home)
    call(home, "local", "apply", "-f", str(prepare(tmp_path, 1)))
    copy = tmp_path / "copy"
    shutil.copytree(Path("operator/spindle"), copy / "spindle")
    env = {k: v for k, v in os.environ.items() if k != "SPINDLE_NO_SERVER"}

    def query() -> str:
        done = subprocess.run(
            [sys.executable, "-m", "spindle.cli.main", "query", "crash", "SELECT 1"],
            env={**env, "PYTHONPATH": str(copy), "SPINDLE_HOME": str(home)},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert "CheckpointNotFound" in done.stderr, done.stdout + done.stderr  # none yet
        return done.stderr

    with served_from(copy, home) as process:
        assert "replacing" not in query()  # the same code: served
        assert process.poll() is None
        edited = copy / "spindle" / "errors.py"
        edited.write_text(edited.read_text() + "\n# edited after the server started\n")
        assert f"replacing the server for {home} (PID {process.pid}, Spindle" in query()
        assert process.wait(timeout=120) == 0


@pytest.mark.slow  # its crash loop runs beside the cluster's tests: the two halves take as long
def test_server_killed_mid_step_recovers_exactly_once(
    tmp_path: Path, homes: list[Path], spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    reference, crashed = tmp_path / "reference", tmp_path / "crashed"
    homes.append(crashed / "home")
    # the uninterrupted reference runs in this process, on the session's Spark (not under test)
    settle(reference / "home", "local", "apply", "-f", str(prepare(reference, 1)))
    settle(reference / "home", "local", "run", "crash", "--until-idle")
    call(crashed / "home", "local", "apply", "-f", str(prepare(crashed, 1)))

    home = crashed / "home"
    store = LocalPipeline(home, "crash").store()
    run = spindle(home, "local", "run", "crash", "--until-idle")
    assert run.stderr is not None
    for line in run.stderr:  # the first step committed: the server is warm
        if line.startswith("step 1:"):
            break
    latest = store.latest()
    assert latest is not None
    intent = Path(store.uri.removeprefix("file://")) / "intents" / f"{latest.sequence + 1:08d}.json"
    deadline = time.monotonic() + 300
    while not intent.exists() and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    pid = server_pid(home)
    assert intent.exists() and pid is not None, "the run ended before a next step began"
    os.kill(pid, signal.SIGKILL)  # between the step's intent and its checkpoint
    rest = run.stderr.read()
    assert run.wait(timeout=60) == 1
    assert "ServerCrashed" in rest and "Run the command again" in rest
    assert store.latest() == latest  # the step did not commit

    _, err = call(home, "local", "run", "crash", "--until-idle")
    assert "starting a Spark server" in err
    for relation in ("events", "totals"):
        assert rows(home, relation) == rows_here(reference / "home", relation, capsys)
    events = rows(home, "events")
    assert len(events) == len(set(events)) == FILES * ROWS  # none lost, none twice

    def outputs(root: Path) -> dict[str, list[str]]:
        return {
            p.name: sorted(p.read_text().splitlines())
            for p in sorted((root / "out").glob("*.jsonl"))
        }

    assert outputs(crashed) == outputs(reference)

    # `spindle local stop` of a served run: the step commits, the run ends, then the server
    more = 20
    for i in range(FILES, FILES + more):
        batch = [{"id": i * ROWS + j, "k": j % 4, "amount": j} for j in range(ROWS)]
        (crashed / "in" / f"{i:03d}.json").write_text("".join(json.dumps(r) + "\n" for r in batch))
    server = server_pid(home)
    assert server is not None
    run = spindle(home, "local", "run", "crash", "--until-idle")
    assert run.stderr is not None
    for line in run.stderr:
        if line.startswith("step "):
            break
    out, _ = call(home, "local", "stop", "crash")  # never served: it signals the run
    assert "Stopped pipeline 'crash'" in out
    rest = run.stderr.read()
    assert run.wait(timeout=600) == 0 and "Stopped at checkpoint" in rest
    wait_gone(server)
    assert LocalPipeline(home, "crash").running_pid() is None
    events = rows(home, "events")  # a new server
    assert len(events) == len(set(events)) and len(events) % ROWS == 0


def test_an_idle_server_stops_by_itself(tmp_path: Path, homes: list[Path]) -> None:
    home = tmp_path / "home"
    homes.append(home)
    call(home, "local", "apply", "-f", str(prepare(tmp_path, 1)))
    _, err = call(home, "query", "crash", "SELECT 1", "--idle-timeout", "1", expect=1)
    assert "stops after 1 s idle" in err
    pid = server_pid(home)
    assert pid is not None
    wait_gone(pid)
    assert ServerFiles(home).state() is None  # it cleaned up after itself
    assert "stopping (idle)" in ServerFiles(home).log_path.read_text()
