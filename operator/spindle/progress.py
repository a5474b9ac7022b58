"""A line about a command's own progress, on stderr, where a user tells it from Spark's log:
`[spindle] starting Spark (local[2])`. The warm server relays a served command's stderr."""

from __future__ import annotations

import sys


def say(line: str) -> None:
    print(f"[spindle] {line}", file=sys.stderr, flush=True)
