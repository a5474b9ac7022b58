"""What a command served by the warm server knows of its client: the event its client's
Ctrl-C, SIGTERM or departure sets (a thread cannot take signals of its own)."""

from __future__ import annotations

import threading
from contextvars import ContextVar

STOP: ContextVar[threading.Event | None] = ContextVar("spindle_served_stop", default=None)


def stop_event() -> threading.Event | None:
    """The served command's stop event; None in a command that runs in its own process."""
    return STOP.get()
