"""Which process a home's `server.json` names as its warm server: a stale or foreign state
must never make a command signal a process that is not this home's server."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from spindle.cli.warm_client import connect, stop
from spindle.local.warm import ServerFiles, started


@pytest.fixture
def impostor(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A process whose command line looks like another home's warm server."""
    other = tmp_path / "other-home"
    code = "import time; time.sleep(120)"
    process = subprocess.Popen(
        [sys.executable, "-c", code, "spindle.cli.warm_server", "--home", str(other)]
    )
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def _state(files: ServerFiles, **state: object) -> None:
    directory = Path(files.home) / "server"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "server.json").write_text(json.dumps(state))


def test_a_stale_state_naming_another_homes_server_signals_nothing(
    tmp_path: Path, impostor: subprocess.Popen[bytes]
) -> None:
    """A `server.json` left by a crash named a PID that another home's server had since: any
    command SIGKILLed that server, mid-step."""
    files = ServerFiles(tmp_path / "home")
    _state(files, pid=impostor.pid, socket=str(tmp_path / "gone.sock"))
    assert files.server_pid() is None
    assert connect(files) is None and stop(files) is None
    assert impostor.poll() is None  # still running
    assert files.state() is None  # the stale state is cleared


def test_a_state_of_another_process_start_is_not_the_server(
    tmp_path: Path, impostor: subprocess.Popen[bytes]
) -> None:
    """The PID and home match, the process's start does not: the PID was reused."""
    home = tmp_path / "other-home"
    files = ServerFiles(home)
    _state(files, pid=impostor.pid, socket="s", process=started(impostor.pid))
    assert files.server_pid() == impostor.pid
    _state(files, pid=impostor.pid, socket="s", process="1")
    assert files.server_pid() is None
    # the same home spelled another way is the same server (its state was cleared, live)
    (tmp_path / "link").symlink_to(home)
    for spelled in (tmp_path / "x" / ".." / "other-home", tmp_path / "link"):
        _state(ServerFiles(spelled), pid=impostor.pid, socket="s")
        assert ServerFiles(spelled).server_pid() == impostor.pid


@pytest.mark.parametrize("written", [[], {"socket": "s"}, {"pid": "12", "socket": "s"}, 7])
def test_a_state_this_spindle_does_not_read_is_no_server(tmp_path: Path, written: object) -> None:
    """Valid JSON of another shape ended every local command, `server stop` too, in a
    KeyError or TypeError traceback."""
    files = ServerFiles(tmp_path / "home")
    directory = Path(files.home) / "server"
    directory.mkdir(parents=True)
    (directory / "server.json").write_text(json.dumps(written))
    assert files.state() is None and files.server_pid() is None
    assert connect(files) is None and stop(files) is None


@pytest.mark.parametrize(
    "server",
    [
        "closes before reading the request",
        "closes after reading it",
        "dies in the middle of a frame",
        "resets the connection",
    ],
)
def test_a_connection_the_server_breaks_is_server_crashed(tmp_path: Path, server: str) -> None:
    """A socket's BrokenPipeError was taken for stdout's reader leaving (exit 141, nothing
    said); a reset or a frame cut short ended in a traceback."""
    import socket
    import struct
    import threading

    from spindle.cli.warm_client import Connection, ServerError, _relay

    ours, theirs = socket.socketpair()

    def serve() -> None:
        if server != "closes before reading the request":
            theirs.recv(1 << 20)
        if server == "dies in the middle of a frame":
            theirs.sendall(b'{"out": "first line\\n"}\n{"out": "| 1 | Alice | 97.0')
        if server == "resets the connection":
            theirs.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        theirs.close()

    if server == "closes before reading the request":
        serve()
    else:
        threading.Thread(target=serve, daemon=True).start()
    connection = Connection(ours, ours.makefile("r", encoding="utf-8"), pid=4242)
    with pytest.raises(ServerError) as crashed:
        _relay(connection, ServerFiles(tmp_path), ["query", "p", "select 1"], 60.0, cwd="/")
    assert crashed.value.reason == "ServerCrashed" and "PID 4242" in crashed.value.message


def test_a_server_asked_to_stop_lets_a_query_or_a_preview_end_and_stops_a_run_after_its_step(
    tmp_path: Path,
) -> None:
    """`local server stop`, SIGTERM, or another terminal replacing the server cancelled a
    served preview (its stop event was the one a run heeds), with no report and no word."""
    import threading

    from spindle.cli.warm_server import Server

    for command, stopped in [
        (["local", "preview", "grades"], False),
        (["query", "grades", "select 1"], False),
        (["local", "run", "grades", "--until-idle"], True),
    ]:
        server = Server(files=ServerFiles(tmp_path), token="t", idle_timeout=60.0)
        server.command, server.stop_command = command, threading.Event()
        server.shut_down()
        assert server.exiting.is_set() and server.stop_command.is_set() is stopped


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (
            {"stopping": True, "command": ["local", "run", "grades", "--until-idle"]},
            "waiting for the step in progress to commit (PID {pid})",
        ),
        (
            {"stopping": True, "command": ["query", "grades", "select 1", "--home", "a b"]},
            "waiting for `spindle query grades 'select 1' --home 'a b'` to end (PID {pid})",
        ),
        (None, "waiting for the server to end the command in progress (PID {pid})"),
        ({"stopping": True, "command": None}, None),
    ],
)
def test_stopping_a_server_says_what_it_waits_for(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    answer: dict[str, object] | None,
    said: str | None,
) -> None:
    """`spindle local server stop` waited up to 300 s in silence for the command in progress
    (a run's step): it says what it waits for. An idle server stops at once, unsaid."""
    import threading

    from spindle.cli import warm_client

    busy = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(60)"
    )
    server = subprocess.Popen([sys.executable, "-c", busy], stdout=subprocess.PIPE)
    try:
        assert server.stdout is not None and server.stdout.readline() == b"ready\n"
        files = ServerFiles(tmp_path / "home")
        monkeypatch.setattr(ServerFiles, "server_pid", lambda _: server.pid)
        monkeypatch.setattr(warm_client, "request", lambda *_: answer)
        threading.Timer(1.5, server.kill).start()  # its command ended: it exits
        assert stop(files) == server.pid
        err = capsys.readouterr().err
        assert err == ("" if said is None else f"[spindle] {said.format(pid=server.pid)}\n")
    finally:
        server.kill()
        server.wait()


def test_a_server_asked_to_stop_names_the_command_it_finishes_first(tmp_path: Path) -> None:
    """What `local server stop` says it waits for."""
    import socket
    import threading

    from spindle.cli.warm_server import Server

    for command in (["local", "run", "grades", "--until-idle"], None):
        server = Server(files=ServerFiles(tmp_path), token="t", idle_timeout=60.0)
        server.command, server.stop_command = command, threading.Event()
        ours, theirs = socket.socketpair()
        with ours:
            ours.sendall(b'{"token": "t", "op": "stop"}\n')
            server.handle(theirs)
            lines = ours.makefile("r").read().splitlines()
        assert json.loads(lines[1]) == {"stopping": True, "command": command}
