"""Polling for a condition, with a timeout that says what was awaited and what was seen last."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(what: str, check: Callable[[], Any], *, timeout: float = 600.0) -> Any:
    """`check()`'s first truthy value; an AssertionError naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(1.0)  # each check of the cluster starts a kubectl: CPU the tests need
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")
