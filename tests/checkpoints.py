"""Helpers for checkpoint tests: manifests built the way the runtime builds them."""

from __future__ import annotations

from pathlib import Path

from spindle.checkpoint import (
    ConnectorRecord,
    Manifest,
    PipelineRef,
    StateRecord,
)
from spindle.checkpoint.records import next_manifest
from spindle.checkpoint.store import CheckpointStore
from spindle.program import parse_program

GRADES_V1 = Path("examples/grades/v1.sql").read_text()


def manifest(parent: Manifest | None, *, program: str = GRADES_V1, offset: int = 0) -> Manifest:
    sequence = 0 if parent is None else parent.sequence + 1
    return next_manifest(
        parent=parent,
        pipeline=PipelineRef(namespace="default", name="grades"),
        program=parse_program(program),
        connectors={"grades.src": ConnectorRecord(direction="input", offset={"files": offset})},
        state={
            "grades": StateRecord(kind="table", path=f"state/grades-{sequence}", version=sequence),
        },
        spark_version="4.2.0",
    )


def seed(store: CheckpointStore, *, namespace: str, name: str, program: str) -> Manifest:
    """Commit a first checkpoint of `program` with no state, as if the pipeline had run it:
    enough for the operator or `spindle plan` to plan a change against."""
    return store.commit(
        next_manifest(
            parent=None,
            pipeline=PipelineRef(namespace=namespace, name=name),
            program=parse_program(program),
            connectors={},
            state={},
            spark_version="4.2.0",
        )
    )
