"""Building manifest records from a parsed program (fingerprints as a cache, text as truth)."""

from __future__ import annotations

from spindle.checkpoint.manifest import ProgramRecord
from spindle.program import Program, fingerprint


def program_record(program: Program) -> ProgramRecord:
    fingerprints = fingerprint(program)
    return ProgramRecord(
        text=program.text,
        fingerprint=fingerprints.program,
        fingerprints={
            **{f"table:{n}": fp for n, fp in fingerprints.tables.items()},
            **{f"view:{n}": fp for n, fp in fingerprints.views.items()},
        },
        dependencies={name: list(view.dependencies) for name, view in program.views.items()},
    )
