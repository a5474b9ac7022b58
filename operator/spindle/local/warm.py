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
import hashlib
import json
import os
from pathlib import Path
from typing import Any

PROTOCOL = 1
"""The framing between client and server; part of `version()`."""
MAX_SOCKET_PATH = 100  # sockaddr_un holds 108 bytes, with the terminating NUL


def version() -> str:
    """Spindle's version, plus a digest of its sources (names, sizes, modification times): a
    server that runs other code than the client's is replaced, even between releases."""
    import spindle

    package = Path(spindle.__file__).parent
    digest = hashlib.sha256(f"{PROTOCOL}".encode())
    for path in sorted(package.rglob("*.py")):
        stat = path.stat()
        digest.update(f"{path.relative_to(package)}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return f"{spindle.__version__}+{digest.hexdigest()[:12]}"


class ServerFiles:
    """Where the server of one home keeps its files (a plain class: the client imports it,
    and `dataclasses` costs it more than all the rest)."""

    def __init__(self, home: Path) -> None:
        self.home = home

    @property
    def directory(self) -> Path:
        return self.home / "server"

    @property
    def token_path(self) -> Path:
        return self.directory / "token"

    @property
    def state_path(self) -> Path:
        return self.directory / "server.json"

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    @property
    def lock_path(self) -> Path:
        return self.directory / "start.lock"

    def prepare(self) -> None:
        """The directory, readable by its owner only."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.directory.chmod(0o700)

    def socket_path(self) -> Path:
        """`server/spindle.sock`, or a short path when that one is too long for a socket."""
        path = self.directory / "spindle.sock"
        if len(str(path)) <= MAX_SOCKET_PATH:
            return path
        import tempfile

        key = hashlib.sha256(str(self.home.resolve()).encode()).hexdigest()[:16]
        short = Path(tempfile.gettempdir()) / f"spindle-{os.getuid()}"
        short.mkdir(mode=0o700, exist_ok=True)
        short.chmod(0o700)
        return short / f"{key}.sock"

    def new_token(self) -> str:
        """A fresh token, written with mode 0600 before any byte of it is."""
        import secrets

        token = secrets.token_hex(32)
        temp = self.token_path.with_name(".token.tmp")
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(token + "\n")
        temp.replace(self.token_path)
        return token

    def token(self) -> str | None:
        try:
            return self.token_path.read_text().strip()
        except FileNotFoundError:
            return None

    def state(self) -> dict[str, Any] | None:
        try:
            state: dict[str, Any] = json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            return None
        return state

    def save_state(self, state: dict[str, Any]) -> None:
        temp = self.state_path.with_name(".server.json.tmp")
        temp.write_text(json.dumps(state, indent=2))
        temp.replace(self.state_path)

    def clear(self, *, pid: int) -> None:
        """Remove the state and socket of the server `pid` (not a newer server's)."""
        state = self.state()
        if state is not None and state.get("pid") != pid:
            return
        with contextlib.suppress(FileNotFoundError):
            Path(state["socket"] if state else self.socket_path()).unlink()
        with contextlib.suppress(FileNotFoundError):
            self.state_path.unlink()


def alive(pid: int) -> bool:
    """Whether `pid` runs: it exists and is not a zombie (an exited child nobody reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _state_of(pid) != "Z"


def is_server(pid: int) -> bool:
    """Whether `pid` runs and is a warm server (not another process that took a dead
    server's PID)."""
    if not alive(pid):
        return False
    try:
        return b"spindle.cli.warm_server" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc to tell: trust the PID


def _state_of(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
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
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except (OSError, ValueError):
            continue
    return total
