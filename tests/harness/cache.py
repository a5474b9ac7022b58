"""The harness cache: where built binaries and downloads live, keyed by version.

`$SPINDLE_CACHE` (default `~/.cache/spindle`) survives clones, so a second run reuses what the
first one built; a fresh machine builds everything. A file lock keeps concurrent runs from
building the same thing twice.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TIMINGS: list[tuple[str, str, float]] = []
"""(what, "built" | "reused", seconds) for every cached part this process touched."""


def root() -> Path:
    path = Path(os.environ.get("SPINDLE_CACHE", Path.home() / ".cache" / "spindle"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def say(message: str) -> None:
    print(f"[harness] {message}", file=sys.stderr, flush=True)


@contextmanager
def locked(name: str) -> Iterator[None]:
    lock = root() / "locks" / f"{name}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def record(what: str, how: str, seconds: float) -> None:
    TIMINGS.append((what, how, seconds))
    say(f"{how} {what} in {seconds:.1f}s")


@contextmanager
def timed(what: str, how: str) -> Iterator[None]:
    start = time.monotonic()
    yield
    record(what, how, time.monotonic() - start)
