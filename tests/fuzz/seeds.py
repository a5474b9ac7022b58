"""The programs the fuzzer mutates: the examples, the golden plan cases and the fingerprint
corpus (which covers every statement form), each once, in a stable order."""

from __future__ import annotations

from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
SOURCES = (
    ROOT / "examples",
    ROOT / "tests" / "golden" / "plan",
    ROOT / "tests" / "golden" / "fingerprints" / "programs",
)


@cache
def seeds() -> tuple[tuple[str, str], ...]:
    """(name, text) of every distinct seed program, names relative to the repository."""
    found: dict[str, str] = {}
    for source in SOURCES:
        for path in sorted(source.rglob("*.sql")):
            found.setdefault(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    return tuple((name, text) for text, name in found.items())
