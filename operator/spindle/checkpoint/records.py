"""Building manifest records from a parsed program (fingerprints as a cache, text as truth)."""

from __future__ import annotations

import datetime

from spindle.checkpoint.manifest import (
    BootstrapRecord,
    ConnectorRecord,
    Manifest,
    PipelineRef,
    ProgramRecord,
    RateRecord,
    StateRecord,
    new_checkpoint_id,
)
from spindle.program import Program, fingerprint
from spindle.program.spark_calls import TRANSLATION_REVISION
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
    measured: tuple[str, int, float] | None = None,
    restated: str | None = None,
    incarnation: str | None = None,
) -> Manifest:
    """The manifest of the checkpoint that follows `parent` (the first one when None, of
    `incarnation`). `measured` is this step's or bootstrap's (kind, rows, seconds); the
    parent's throughput, served restatement and incarnation are carried forward."""
    sequence = 0 if parent is None else parent.sequence + 1
    checkpoint_id = new_checkpoint_id(sequence)
    throughput = dict(parent.throughput) if parent is not None else {}
    if measured is not None:
        kind, rows, seconds = measured
        throughput[kind] = RateRecord(rows=rows, seconds=seconds, checkpoint=checkpoint_id)  # type: ignore[index]
    return Manifest(
        id=checkpoint_id,
        parent=None if parent is None else parent.id,
        sequence=sequence,
        created_at=datetime.datetime.now(datetime.UTC),
        pipeline=pipeline,
        program=program_record(program),
        parser_version=PARSER_VERSION,
        plan_format_version=PLAN_FORMAT_VERSION,
        runtime_version=runtime_version,
        # the views' state is written with this translation only where computed afresh: at
        # the first checkpoint and at a bootstrap (whose plan recomputes every view the
        # translation changed since its parent); a step keeps its parent's
        translation_revision=TRANSLATION_REVISION
        if parent is None or bootstrap is not None
        else parent.translation_revision,
        spark_version=spark_version,
        connectors=connectors,
        state=state,
        bootstrap=bootstrap,
        throughput=throughput,
        restated=restated if restated is not None else (parent.restated if parent else None),
        incarnation=parent.incarnation if parent is not None else incarnation,
    )
