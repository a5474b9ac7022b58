"""Helpers for checkpoint tests: manifests built the way the runtime builds them."""

from __future__ import annotations

import datetime
from pathlib import Path

from spindle.checkpoint import (
    ConnectorRecord,
    Manifest,
    PipelineRef,
    StateRecord,
    new_checkpoint_id,
)
from spindle.checkpoint.records import program_record
from spindle.program import parse_program
from spindle.versions import PARSER_VERSION, PLAN_FORMAT_VERSION, RUNTIME_VERSION

GRADES_V1 = Path("examples/grades/v1.sql").read_text()


def manifest(parent: Manifest | None, *, program: str = GRADES_V1, offset: int = 0) -> Manifest:
    sequence = 0 if parent is None else parent.sequence + 1
    return Manifest(
        id=new_checkpoint_id(sequence),
        parent=None if parent is None else parent.id,
        sequence=sequence,
        created_at=datetime.datetime.now(datetime.UTC),
        pipeline=PipelineRef(namespace="default", name="grades"),
        program=program_record(parse_program(program)),
        parser_version=PARSER_VERSION,
        plan_format_version=PLAN_FORMAT_VERSION,
        runtime_version=RUNTIME_VERSION,
        spark_version="4.2.0",
        connectors={"grades.src": ConnectorRecord(direction="input", offset={"files": offset})},
        state={
            "grades": StateRecord(kind="table", path=f"state/grades-{sequence}", version=sequence),
        },
    )
