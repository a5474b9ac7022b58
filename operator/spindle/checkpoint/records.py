"""Building manifest records from a parsed program (fingerprints as a cache, text as truth)."""

from __future__ import annotations

import datetime

from spindle.checkpoint.manifest import (
    BootstrapRecord,
    ConnectorRecord,
    Manifest,
    PipelineRef,
    ProgramRecord,
    StateRecord,
    new_checkpoint_id,
)
from spindle.program import Program, fingerprint
from spindle.versions import PARSER_VERSION, PLAN_FORMAT_VERSION, RUNTIME_VERSION


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


def next_manifest(
    *,
    parent: Manifest | None,
    pipeline: PipelineRef,
    program: Program,
    state: dict[str, StateRecord],
    connectors: dict[str, ConnectorRecord],
    spark_version: str | None,
    bootstrap: BootstrapRecord | None = None,
    runtime_version: str = RUNTIME_VERSION,
) -> Manifest:
    """The manifest of the checkpoint that follows `parent` (the first one when None)."""
    sequence = 0 if parent is None else parent.sequence + 1
    return Manifest(
        id=new_checkpoint_id(sequence),
        parent=None if parent is None else parent.id,
        sequence=sequence,
        created_at=datetime.datetime.now(datetime.UTC),
        pipeline=pipeline,
        program=program_record(program),
        parser_version=PARSER_VERSION,
        plan_format_version=PLAN_FORMAT_VERSION,
        runtime_version=runtime_version,
        spark_version=spark_version,
        connectors=connectors,
        state=state,
        bootstrap=bootstrap,
    )
