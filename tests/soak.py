"""How long the crash loops run: a CI-sized count by default, the full count under `make soak`
(SPINDLE_SOAK=1). Both assert the same properties; the soak only repeats them more often."""

from __future__ import annotations

import os

SOAK = os.environ.get("SPINDLE_SOAK", "") == "1"


def count(*, ci: int, soak: int) -> int:
    return soak if SOAK else ci
