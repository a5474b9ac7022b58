"""The files of a home's warm server (`<home>/server/`), and what they say about it.

server/token        a random secret, mode 0600: a client proves it may use the server
server/server.json  the server's PID, socket, version, start time and idle timeout
server/server.log   the server's own output (Spark's and the JVM's included)
server/start.lock   held while a client starts a server, so two clients start one

The socket is `server/spindle.sock`, or, when that path is too long for a Unix socket, one
in a directory of its own under the system's temporary directory (mode 0700). This module
imports only the standard library: the client that reads it must start in milliseconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import zlib

TYPE_CHECKING = False  # `typing` itself is a third of what the client imports
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

PROTOCOL = 1
"""The framing between client and server; part of `version()`."""
MAX_SOCKET_PATH = 100  # sockaddr_un holds 108 bytes, with the terminating NUL


def version() -> str:
    """Spindle's version, plus a digest of its sources (names, sizes, modification times): a
    server that runs other code than the client's is replaced, even between releases."""
    import spindle

    package = os.path.dirname(spindle.__file__)
    sources = []
    for directory, _, names in os.walk(package):
        for name in names:
            if name.endswith(".py"):
                stat = os.stat(os.path.join(directory, name))
                where = os.path.relpath(os.path.join(directory, name), package)
                sources.append(f"{where}:{stat.st_size}:{stat.st_mtime_ns}")
    digest = zlib.crc32("\n".join([str(PROTOCOL), *sorted(sources)]).encode())
    return f"{spindle.__version__}+{digest:08x}"


def home_problem(home: str | os.PathLike[str]) -> str | None:
    """Why `home` cannot hold a home's files: it, or the nearest of its parents that exists,
    is not a directory (a regular file, a dangling link). None when it can (a home that does
    not exist yet is created)."""
    path = os.path.abspath(os.fspath(home))
    existing = path
    while not os.path.lexists(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing)
    if os.path.isdir(existing):
        return None
    where = "it is" if existing == path else f"{existing} is"
    return (
        f"The home {path} cannot hold Spindle's local state: {where} not a directory. Name a "
        "directory with --home (or $SPINDLE_HOME), or one that does not exist yet (Spindle "
        "creates it)."
    )


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as file:
        return file.read()


class ServerFiles:
    """Where the server of one home keeps its files (a plain class: the client imports it,
    and `dataclasses` costs it more than all the rest). The client's calls (`state`, `token`,
    `clear`) use plain strings: `pathlib` would be a fifth of its start-up."""

    def __init__(self, home: str | os.PathLike[str]) -> None:
        self.home = os.fspath(home)
        self._directory = os.path.join(self.home, "server")

    def _path(self, name: str) -> Path:
        from pathlib import Path

        return Path(self._directory, name)

    @property
    def directory(self) -> Path:
        return self._path("")

    @property
    def token_path(self) -> Path:
        return self._path("token")

    @property
    def state_path(self) -> Path:
        return self._path("server.json")

    @property
    def log_path(self) -> Path:
        return self._path("server.log")

    @property
    def lock_path(self) -> Path:
        return self._path("start.lock")

    def prepare(self) -> None:
        """The directory, readable by its owner only."""
        os.makedirs(self._directory, exist_ok=True)
        os.chmod(self._directory, 0o700)

    def socket_path(self) -> str:
        """`server/spindle.sock`, or a short path when that one is too long for a socket."""
        path = os.path.join(self._directory, "spindle.sock")
        if len(path) <= MAX_SOCKET_PATH:
            return path
        import hashlib
        import tempfile

        key = hashlib.sha256(os.path.realpath(self.home).encode()).hexdigest()[:16]
        short = os.path.join(tempfile.gettempdir(), f"spindle-{os.getuid()}")
        os.makedirs(short, mode=0o700, exist_ok=True)
        os.chmod(short, 0o700)
        return os.path.join(short, f"{key}.sock")

    def new_token(self) -> str:
        """A fresh token, written with mode 0600 before any byte of it is."""
        import secrets

        token = secrets.token_hex(32)
        temp = os.path.join(self._directory, ".token.tmp")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(token + "\n")
        os.replace(temp, os.path.join(self._directory, "token"))
        return token

    def token(self) -> str | None:
        try:
            return _read(os.path.join(self._directory, "token")).strip()
        except FileNotFoundError:
            return None

    def state(self) -> dict[str, Any] | None:
        """The server's `server.json`: None when there is none, or none this Spindle reads
        (another version's layout, edited by hand: a `KeyError` traceback on every command,
        `local server stop` too)."""
        try:
            state = json.loads(_read(os.path.join(self._directory, "server.json")))
        except (OSError, ValueError):
            return None
        if not isinstance(state, dict) or not isinstance(state.get("socket"), str):
            return None
        return state if type(state.get("pid")) is int else None

    def server_pid(self) -> int | None:
        """The PID of this home's running server, as its state names it; None when none runs
        (the state names a process that ended, or one that took its PID since)."""
        state = self.state()
        if state is None:
            return None
        pid: int = state["pid"]
        return pid if is_server(pid, home=self.home, process=state.get("process")) else None

    def save_state(self, state: dict[str, Any]) -> None:
        temp = os.path.join(self._directory, ".server.json.tmp")
        with open(temp, "w", encoding="utf-8") as out:
            out.write(json.dumps(state, indent=2))
        os.replace(temp, os.path.join(self._directory, "server.json"))

    def clear(self, *, pid: int) -> None:
        """Remove the state and socket of the server `pid` (not a newer server's)."""
        state = self.state()
        if state is not None and state.get("pid") != pid:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(state["socket"] if state else self.socket_path())
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(self._directory, "server.json"))


def cancellable(argv: list[str]) -> bool:
    """Whether a stop (the client's Ctrl-C or SIGTERM, or its departure) cancels a served
    command at once, its Spark jobs with it: a query or a preview. A run ends after its step;
    a command without Spark (apply, approve) is done before the client leaves."""
    return argv[:1] == ["query"] or argv[:2] == ["local", "preview"]


def alive(pid: int) -> bool:
    """Whether `pid` runs: it exists and is not a zombie (an exited child nobody reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _state_of(pid) != "Z"


def is_server(pid: int, *, home: str, process: str | None = None) -> bool:
    """Whether `pid` runs and is the warm server of `home`: not another process that took a
    dead server's PID (`process`, when its state recorded it: when it started, `started`),
    nor another home's server. A stale state made a command SIGKILL another home's server."""
    if not alive(pid):
        return False
    now = started(pid)
    if process is not None and now is not None and now != process:
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            arguments = cmdline.read().split(b"\0")
    except OSError:
        return True  # no /proc to tell: trust the PID
    if b"spindle.cli.warm_server" not in arguments or b"--home" not in arguments[:-1]:
        return False
    served = os.fsdecode(arguments[arguments.index(b"--home") + 1])
    return os.path.realpath(served) == os.path.realpath(home)  # `h/../h`, a symbolic link


def started(pid: int) -> str | None:
    """When `pid` started (clock ticks since boot, from /proc): with its PID, it names one
    process, where a PID alone may since name another. None: no /proc to tell."""
    try:
        return _read(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _state_of(pid: int) -> str | None:
    try:
        stat = _read(f"/proc/{pid}/stat")
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            parent = int(_read(f"/proc/{entry}/stat").rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    return children


def tree(pid: int) -> list[int]:
    """`pid` and its descendants (the JVM that PySpark starts is one)."""
    children, found, todo = _children(), [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def resident_bytes(pid: int) -> int:
    """Resident memory of `pid` and its descendants, from /proc (0 where unreadable)."""
    total = 0
    for member in tree(pid):
        try:
            for line in _read(f"/proc/{member}/status").splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except (OSError, ValueError):
            continue
    return total
