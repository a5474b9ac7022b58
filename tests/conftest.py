"""Shared pytest wiring: run from the repository root so example paths resolve."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
os.chdir(ROOT)
