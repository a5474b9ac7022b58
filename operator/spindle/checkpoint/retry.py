"""Bounded, jittered retries with an overall deadline, for calls to object storage.

Retried: 5xx, throttling (429, SlowDown), timeouts and dropped connections. Never retried: any
other 4xx (a 412 is an answer, not a failure). When the deadline passes the caller gets
`StorageUnavailable`, naming the URI and the last error.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from spindle.errors import SpindleError

T = TypeVar("T")


class Transient(Exception):
    """A failure worth retrying."""


@dataclass(frozen=True)
class RetryPolicy:
    deadline: float = 30.0
    first_delay: float = 0.1
    max_delay: float = 2.0
    max_attempts: int = 12
    connect_timeout: float = 5.0
    """Seconds one attempt may take to connect, and to wait for each read of its answer: a
    store that hangs costs one attempt these, and is retried until the deadline."""
    read_timeout: float = 10.0


def call(
    fn: Callable[[], T],
    *,
    uri: str,
    policy: RetryPolicy,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    start = time.monotonic()
    delay = policy.first_delay
    attempt = 0
    while True:
        attempt += 1
        try:
            return fn()
        except Transient as error:
            elapsed = time.monotonic() - start
            pause = random.uniform(0, delay)  # full jitter
            if attempt >= policy.max_attempts or elapsed + pause > policy.deadline:
                raise SpindleError(
                    reason="StorageUnavailable",
                    message=f"Object storage at {uri} kept failing for {elapsed:.1f}s "
                    f"({attempt} attempts; last: {error}). Check the endpoint and its health, "
                    "then retry: a checkpoint is published whole or not at all.",
                    details={"uri": uri, "attempts": attempt, "last_error": str(error)},
                ) from None
            sleep(pause)
            delay = min(delay * 2, policy.max_delay)
