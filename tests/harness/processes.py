"""Child processes of the harness: started in their own session, logged to files, and torn
down by PID (SIGTERM, a grace period, then SIGKILL) when the session ends.

A process started with a `registry` directory also leaves `<registry>/<pid>` holding its start
time, so a later run can stop it by PID after this one was killed (`kill_registered`); the
start time guards against a recycled PID.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

_RUNNING: list[subprocess.Popen[bytes]] = []


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def kill_registered(registry: Path) -> int:
    """SIGKILL every process recorded in `registry` that is still the same process."""
    killed = 0
    for entry in registry.glob("*") if registry.exists() else []:
        pid = int(entry.name)
        if _start_time(pid) == entry.read_text().strip():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        entry.unlink(missing_ok=True)
    return killed


def start(
    args: Sequence[str],
    *,
    log: Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    registry: Path | None = None,
) -> subprocess.Popen[bytes]:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen(
            list(args),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    _RUNNING.append(process)
    if registry is not None:
        registry.mkdir(parents=True, exist_ok=True)
        (registry / str(process.pid)).write_text(_start_time(process.pid) or "")
    return process


def stop(process: subprocess.Popen[bytes], *, grace: float = 10.0) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    if process in _RUNNING:
        _RUNNING.remove(process)


@atexit.register
def stop_all() -> None:
    for process in reversed(list(_RUNNING)):
        stop(process, grace=5.0)


def wait_until(
    ready: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    process: subprocess.Popen[bytes] | None = None,
    log: Path | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:] if log else ""
            raise RuntimeError(f"{what} exited with {process.returncode}:\n{tail}")
        try:
            if ready():
                return
        except Exception:  # not ready yet, whatever the reason
            pass
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-3000:] if log else ""
    raise TimeoutError(f"{what} not ready after {timeout:.0f}s:\n{tail}")


def http_ok(url: str, **kwargs: object) -> bool:
    with urllib.request.urlopen(url, timeout=2, **kwargs) as response:  # type: ignore[arg-type]
        return bool(response.status == 200)
