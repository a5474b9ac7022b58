"""The client side of the warm server: route a command to its home's server, and relay.

`spindle query`, `spindle local preview` and `spindle local run --until-idle` start the
server when none runs; `local apply`, `status`, `approve` and `execute` use a server of this
version that runs and is not busy, and otherwise run here (they need no Spark).
`spindle local stop`, `spindle local server ...`, a foreground `local run` (it would hold the
server for its whole life), help, standard input (`-f -`), `--no-server` and
`$SPINDLE_NO_SERVER=1` always run here. Only the standard library is imported before a
command is known to run here, so a served command starts in milliseconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import time

from spindle.local.warm import ServerFiles, alive, cancellable, home_problem, version
from spindle.progress import say as _say

TYPE_CHECKING = False  # as in `spindle.local.warm`: no `typing` at run time
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import IO, Any

DEFAULT_IDLE_TIMEOUT = 600.0
START_TIMEOUT = 120.0
HELLO_TIMEOUT = 30.0


class ServerError(Exception):
    """A user-facing failure of the warm server path: a CamelCase reason and what to do."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason, self.message = reason, message


def _option(argv: Sequence[str], name: str) -> str | None:
    """The value of the option's last occurrence (`--home H` or `--home=H`), as argparse
    takes it: the first one ran a command given `--home` twice on the other home's server."""
    value = None
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
    return value


def idle_timeout(text: str) -> float:
    """`--idle-timeout`'s seconds: a number above 0 (not infinite), else ValueError."""
    seconds = float(text)
    if not 0 < seconds < float("inf"):
        raise ValueError(f"not a number of seconds above 0: {text!r}")
    return seconds


def home_of(argv: Sequence[str]) -> str:
    home = _option(argv, "--home") or os.environ.get("SPINDLE_HOME") or "~/.spindle"
    return os.path.abspath(os.path.expanduser(home))


SEEN = ("--no-server", "--help", "--home", "--idle-timeout")
"""Long options whose value routing reads: argparse also takes a unique prefix of each."""


def _this_process(path: str) -> bool:
    """A file argument only this process can open: standard input (`-`, `/dev/stdin`), or one
    of its descriptors (`-f <(envsubst < p.yaml)` passes `/dev/fd/63`). The server read its
    own, empty, standard input, or opened its own descriptor."""
    return path == "-" or path.startswith(("/dev/fd/", "/proc/self/fd/", "/dev/stdin"))


def _here_only(arg: str) -> bool:
    """An argument that keeps the command here: help, `--no-server`, a file only this process
    can open in any spelling (`-f -`, `-f-`, `--file=-`), or an abbreviated option routing
    would misread (`--no-ser`, `--hom X`: argparse takes them)."""
    if arg == "-h" or _this_process(arg):
        return True
    if arg.startswith("-f"):
        return _this_process(arg[2:].lstrip("="))
    name, _, value = arg.partition("=")
    if not name.startswith("--") or len(name) < 3:
        return False
    if _this_process(value):
        return True
    return name in ("--no-server", "--help") or any(o.startswith(name) and o != name for o in SEEN)


def _wanted(argv: Sequence[str]) -> tuple[bool, bool]:
    """(served, needs Spark) for a command line."""
    if not argv or argv[0] not in ("local", "query") or os.environ.get("SPINDLE_NO_SERVER"):
        return False, False
    if any(_here_only(arg) for arg in argv):
        return False, False
    if argv[0] == "query":
        return True, True
    action = argv[1] if len(argv) > 1 else ""
    if action == "run":
        return "--until-idle" in argv, True
    if action == "preview":
        return True, True
    return action in ("apply", "status", "approve", "execute"), False


class ConnectionBroken(ConnectionError):
    """The server broke the connection: it closed, died or was killed, mid-frame too (not a
    `BrokenPipeError`, which says stdout's reader left)."""


class Connection:
    """An open, greeted connection to a home's server (a plain class: `dataclasses` alone
    would add a third to the client's start-up)."""

    def __init__(
        self,
        sock: socket.socket,
        reader: Any,
        pid: int,
        busy: list[str] | None = None,
        version: str | None = None,
    ) -> None:
        self.sock, self.reader, self.pid = sock, reader, pid
        self.busy = busy
        """The command the server was running when it greeted, if any."""
        self.version = version
        """The Spindle version the server runs."""

    def send(self, frame: dict[str, Any]) -> None:
        try:
            self.sock.sendall((json.dumps(frame) + "\n").encode())
        except OSError as error:
            raise ConnectionBroken(str(error)) from error

    def receive(self) -> dict[str, Any] | None:
        """The server's next frame; None when it closed the connection between frames."""
        try:
            line = self.reader.readline()
            if not line:
                return None
            frame: dict[str, Any] = json.loads(line)
        except (OSError, ValueError) as error:  # reset, or a frame cut short
            raise ConnectionBroken(str(error)) from error
        return frame

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.reader.close()
            self.sock.close()


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def connect(files: ServerFiles, *, replace: bool = True) -> Connection | None:
    """A greeted connection to the home's server; None when none runs. A server that died
    is cleaned up; one of another Spindle version is stopped (with `replace`)."""
    state = files.state()
    if state is None:
        return None
    pid = int(state["pid"])
    if files.server_pid() is None:
        files.clear(pid=pid)
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(HELLO_TIMEOUT)
        sock.connect(state["socket"])
        reader = sock.makefile("r", encoding="utf-8")
        hello = json.loads(reader.readline() or "{}")
        sock.settimeout(None)
    except (OSError, ValueError):
        sock.close()
        if files.server_pid() == pid:  # running, not answering (its socket removed): it
            with contextlib.suppress(ProcessLookupError):  # is of no use; it ends after its
                os.kill(pid, signal.SIGTERM)  # step, as `server stop` ends it
        files.clear(pid=pid)
        return None
    connection = Connection(sock, reader, pid, hello.get("busy"), hello.get("version"))
    if hello.get("version") != version() and replace:
        connection.close()
        _say(
            f"replacing the server for {files.home} (PID {pid}, Spindle "
            f"{hello.get('version')}) with one of this version ({version()})"
        )
        stop(files)
        return None
    return connection


def start(files: ServerFiles, *, idle_timeout: float) -> Connection | None:
    """Start the home's server (one, even when several clients try at once) and connect;
    None when the home cannot hold a server's files (read-only, full: an `OSError` and its
    traceback before), so the command runs here, and says what it cannot write if it must."""
    import fcntl

    try:
        files.prepare()
        lock = files.lock_path.open("w")
    except OSError:
        return None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        connection = connect(files)
        if connection is not None:
            return connection
        try:
            files.new_token()
            log = files.log_path.open("ab")
        except OSError:
            return None
        return _started(files, log, idle_timeout=idle_timeout)


def _started(files: ServerFiles, log: IO[bytes], *, idle_timeout: float) -> Connection:
    """Start the server (its output to `log`, which it closes) and connect, under the lock."""
    import subprocess

    _say(
        f"starting a Spark server for {files.home} (it stops after {idle_timeout:.0f} s "
        "idle; `spindle local server stop` stops it, --no-server runs without it)"
    )
    with log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "spindle.cli.warm_server",
                "--home",
                str(files.home),
                "--idle-timeout",
                str(idle_timeout),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline and process.poll() is None:
        state = files.state()
        if state is not None and state.get("pid") == process.pid:
            connection = connect(files)
            if connection is not None:
                return connection
        time.sleep(0.05)
    if process.poll() is None:
        process.kill()
    process.wait()
    tail = files.log_path.read_text(errors="replace").splitlines()[-5:]
    raise ServerError(
        "ServerNotStarted",
        f"The Spark server for {files.home} did not start (its log, {files.log_path}, ends: "
        f"{' | '.join(tail) or 'nothing'}). Fix what the log says, or add --no-server.",
    )


def request(files: ServerFiles, frame: dict[str, Any]) -> dict[str, Any] | None:
    """One control request (`status`, `stop`) to a running server; None when none runs."""
    connection = connect(files, replace=False)
    if connection is None:
        return None
    try:
        connection.send({**frame, "token": files.token()})
        return connection.receive() or {}
    finally:
        connection.close()


def stop(files: ServerFiles, *, timeout: float = 300.0) -> int | None:
    """Stop the home's server (a command in progress ends first: a run finishes its step);
    its PID, or None when none ran. A server that refuses the request is sent SIGTERM."""
    pid = files.server_pid()
    if pid is None:
        return None
    answer = None
    with contextlib.suppress(OSError, ValueError):
        answer = request(files, {"op": "stop"})
    if not answer or not answer.get("stopping"):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    command = (answer or {}).get("command")  # it finishes that first (a run, its step)
    if command and command[:2] == ["local", "run"]:
        _say(f"waiting for the step in progress to commit (PID {pid})")
    elif command:
        _say(f"waiting for `{command_line(command)}` to end (PID {pid})")
    elif "command" not in (answer or {}) and not _wait_gone(pid, 1.0):  # it did not say
        _say(f"waiting for the server to end the command in progress (PID {pid})")
    if not _wait_gone(pid, timeout):
        raise ServerError(
            "ServerNotStopped",
            f"The Spark server for {files.home} (PID {pid}) did not stop within {timeout:.0f} s; "
            f"end it with `kill -9 {pid}` (a step it was running is redone by the next run).",
        )
    files.clear(pid=pid)
    return pid


def command_line(argv: Sequence[str]) -> str:
    """A served command as the user would type it again: `spindle` and its words, quoted."""
    import shlex

    return shlex.join(["spindle", *argv])


def _columns() -> int:
    try:
        return int(os.environ.get("COLUMNS") or os.get_terminal_size(sys.stdout.fileno()).columns)
    except (OSError, ValueError):
        return 80


def _relay(
    connection: Connection, files: ServerFiles, argv: Sequence[str], idle: float, *, cwd: str
) -> int:
    """Run `argv` on the server and relay its output: the command's exit code, or -1 when the
    server was stopping (the caller waits for it to end, and starts the next). A connection
    the server broke (it closed, died or was killed, mid-frame too) is `ServerCrashed`: a
    socket's `BrokenPipeError` was taken for stdout's reader leaving (exit 141, nothing
    said), and a reset or a cut frame ended in a traceback."""
    try:
        return _relayed(connection, files, argv, idle, cwd=cwd)
    except ConnectionBroken:
        raise _crashed(files, connection.pid) from None
    finally:
        connection.close()


def _crashed(files: ServerFiles, pid: int) -> ServerError:
    return ServerError(
        "ServerCrashed",
        f"The Spark server for {files.home} (PID {pid}) ended during the command. "
        "Run the command again: a new server starts, and a run resumes from the last "
        "checkpoint (a step that did not commit is undone and redone, exactly once). Its log "
        f"is {files.log_path}.",
    )


def _relayed(
    connection: Connection, files: ServerFiles, argv: Sequence[str], idle: float, *, cwd: str
) -> int:
    connection.send(
        {
            "op": "run",
            "token": files.token(),
            "argv": list(argv),
            "cwd": cwd,
            "env": dict(os.environ),
            "tty": {"out": sys.stdout.isatty(), "err": sys.stderr.isatty()},
            "columns": _columns(),
            "idle_timeout": idle,
        }
    )
    asked: list[int] = []

    def ask_stop(signum: int, _: object) -> None:
        with contextlib.suppress(OSError):
            connection.send({"op": "stop"})
        if asked or cancellable(list(argv)):  # the server cancels a query at once; a
            raise KeyboardInterrupt  # second Ctrl-C leaves a run (it finishes the step alone)
        asked.append(signum)
        if argv[:2] == ["local", "run"]:
            _say("stopping: a step in progress is committed first (Ctrl-C again to leave now)")
        else:
            _say("stopping: the command finishes first (Ctrl-C again to leave now)")

    previous = {s: signal.signal(s, ask_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while (frame := connection.receive()) is not None:
            if "out" in frame:
                sys.stdout.write(frame["out"])
                sys.stdout.flush()
            elif "err" in frame:
                sys.stderr.write(frame["err"])
                sys.stderr.flush()
            elif "exit" in frame:
                return int(frame["exit"])
            elif "error" in frame:
                raise ServerError(frame["error"]["reason"], frame["error"]["message"])
            elif frame.get("retry"):
                return -1
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    raise _crashed(files, connection.pid)


def _report(error: ServerError, argv: Sequence[str]) -> int:
    if "--json" in argv:
        body = {"message": error.message, "error_code": error.reason, "details": {}}
        print(json.dumps(body, indent=2))
    else:
        print(f"error {error.reason}: {error.message}", file=sys.stderr)
    return 1


def _names_a_pipeline(home: str, argv: Sequence[str]) -> bool:
    """Whether a word of the command line names a pipeline applied under `home` (which of
    them is the name, argparse decides): a misspelt one is refused without starting a JVM."""
    return any(
        os.path.isfile(os.path.join(home, "pipelines", word, "pipeline.json"))
        for word in argv[1:]
        if word and not word.startswith("-") and "/" not in word and word not in (".", "..")
    )


def route(argv: Sequence[str]) -> int | None:
    """Run `argv` on the home's warm server: its exit code, or None to run it here."""
    served, needs_spark = _wanted(argv)
    if not served:
        return None
    home = home_of(argv)
    given = _option(argv, "--idle-timeout")
    try:
        idle = DEFAULT_IDLE_TIMEOUT if given is None else idle_timeout(given)
    except ValueError:
        return None  # here, argparse refuses it: a usage error
    if home_problem(home) is not None:
        return None  # here, the command refuses the home (`InvalidHome`)
    try:
        cwd = os.getcwd()
    except OSError:  # the directory was deleted under the shell: here, which needs none
        return None
    files = ServerFiles(home)
    try:
        for _ in range(3):
            # a command that needs no Spark never replaces a server of another version (an
            # upgrade; two installs sharing a home): it stopped another terminal's run
            connection = connect(files, replace=needs_spark)
            if connection is not None and connection.version != version():
                connection.close()
                return None  # here: no Spark needed (one that does replaced it)
            if connection is None:
                if not needs_spark or not _names_a_pipeline(home, argv):
                    return None  # here: no Spark needed, or `PipelineNotFound` without one
                connection = start(files, idle_timeout=idle)
                if connection is None:
                    return None  # here: the home cannot hold a server's files
            elif connection.busy:
                if not needs_spark:  # no Spark needed: here, now, rather than after it
                    connection.close()
                    return None
                _say(f"waiting for the server, which runs `{command_line(connection.busy)}`")
            code = _relay(connection, files, argv, idle, cwd=cwd)
            if code >= 0:
                return code
            if not _wait_gone(connection.pid, 1.0):  # it was stopping: start the next one
                _say(f"waiting for the stopping server to end its command (PID {connection.pid})")
                _wait_gone(connection.pid, 300.0)
    except ServerError as error:
        return _report(error, argv)
    except KeyboardInterrupt:
        return 130
    return None
