"""Pipeline documents and data helpers shared by the e2e tests."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from spindle.checkpoint import PipelineRef
from spindle.checkpoint.objects import S3Options, open_objects
from spindle.checkpoint.store import open_store
from spindle.local.adhoc import write_batch
from spindle.program import parse_program

EXAMPLE = Path("examples/grades")
STUDENTS = [{"id": 1, "name": "Alice"}, {"id": 2, "name": "Bob"}]
GRADES = [
    {"student_id": s, "class": c, "grade": g, "class_date": d}
    for s, c, g, d in [
        (1, "algebra", 97, "2025-09-15"),
        (1, "physics", 89, "2025-11-15"),
        (2, "algebra", 85, "2025-10-22"),
        (2, "physics", 93, "2025-12-05"),
        (1, "algebra", 95, "2026-01-15"),
        (1, "physics", 87, "2026-03-15"),
        (2, "algebra", 98, "2026-04-22"),
        (2, "physics", 91, "2026-05-05"),
    ]
]


V1_ENRICHED = [
    ("Alice", "algebra", "97.00"),
    ("Alice", "physics", "89.00"),
    ("Bob", "algebra", "85.00"),
    ("Bob", "physics", "93.00"),
]
V2_ENRICHED = [
    ("Alice", "algebra", "96.00"),
    ("Alice", "physics", "88.00"),
    ("Bob", "algebra", "91.50"),
    ("Bob", "physics", "92.00"),
]
V2_ALL_COURSES = [(1, "92.00"), (2, "91.75")]
"""The reference's numbers: `avg_grade_enriched` ordered by student and class, before and after
the v2 bootstrap, and `avg_grade_all_courses` by student after it."""
ENRICHED = "SELECT * FROM avg_grade_enriched ORDER BY student_name, class"
ALL_COURSES = "SELECT * FROM avg_grade_all_courses ORDER BY student_id"


def grades(version: str, space: Any, *, name: str = "grades", **spec: Any) -> dict[str, Any]:
    document = yaml.safe_load((EXAMPLE / f"pipeline-{version}.yaml").read_text())
    document = copy.deepcopy(document)
    document["metadata"]["name"] = name
    document["spec"]["storage"] = space.storage()
    document["spec"].update(spec)
    return dict(document)


def s3_options(space: Any) -> S3Options:
    return S3Options(
        endpoint=space.s3.endpoint,
        region=space.s3.region,
        access_key=space.s3.access_key,
        secret_key=space.s3.secret_key,
    )


def root(space: Any, name: str) -> str:
    return f"s3://{space.bucket}/pipelines/{space.name}/{name}"


def ingest_grades(space: Any, name: str = "grades") -> None:
    objects = open_objects(root(space, name), s3=s3_options(space))
    write_batch(objects, "students", STUDENTS)
    write_batch(objects, "grades", GRADES)


def store(space: Any, name: str = "grades") -> Any:
    return open_store(root(space, name), s3=s3_options(space))


def query(spark: Any, space: Any, sql: str, name: str = "grades") -> list[tuple[Any, ...]]:
    """Spark SQL over the pipeline's latest checkpoint, read from S3 by the test itself."""
    from spindle.runtime.engine import Runtime

    checkpoints = store(space, name)
    manifest = checkpoints.latest()
    assert manifest is not None, "no checkpoint yet"
    runtime = Runtime(
        spark=spark,
        store=checkpoints,
        root=checkpoints.uri,
        pipeline=PipelineRef(namespace=space.name, name=name),
    )
    found = runtime.query(parse_program(manifest.program.text), manifest, sql)
    return [tuple(row.values()) for row in found.rows]  # DECIMAL as its exact text
