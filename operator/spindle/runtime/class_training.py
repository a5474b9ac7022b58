"""The run whose classes go in Spark's class archive (`class_archive`): a small pipeline on a
local directory, initialized and stepped twice, so the archive holds what a driver's start
and its steps load (Delta's reads and commits, JSON inputs, joins, aggregates, the change
queries). Run as `python -m spindle.runtime.class_training` with `$SPINDLE_CLASS_ARCHIVE_DUMP`
naming the file; it returns once the JVM has written it and exited.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from spindle.api import PipelineSpec
from spindle.checkpoint import PipelineRef
from spindle.checkpoint.blobs import file_uri
from spindle.checkpoint.store import open_store
from spindle.program import parse_program
from spindle.runtime.factory import open_runtime

JVM_EXIT_TIMEOUT = 300.0


def _program(inputs: Path) -> str:
    source = [
        {
            "name": "files",
            "format": {"name": "json"},
            "transport": {"name": "file_input", "config": {"path": str(inputs)}},
        }
    ]
    return (
        "create table students (id bigint primary key, name varchar, class int);\n"
        "create table grades (student bigint, course varchar, grade decimal(5, 2)) with "
        f"('materialized' = 'true', 'connectors' = '{json.dumps(source)}');\n"
        "create materialized view averages as select s.class, g.course, avg(g.grade) as avg, "
        "count(*) as n from grades g join students s on g.student = s.id "
        "group by s.class, g.course;\n"
        "create materialized view best as select distinct course from grades where grade > 90;\n"
    )


def train(work: Path) -> None:
    inputs = work / "inputs"
    inputs.mkdir()
    storage = file_uri(str(work / "storage"))
    spec = PipelineSpec.model_validate({"sql": _program(inputs), "storage": {"uri": storage}})
    pipeline = PipelineRef(namespace="spindle", name="classes")
    store = open_store(storage, namespace=pipeline.namespace, name=pipeline.name)
    runtime = open_runtime(
        pipeline=pipeline, spec=spec, store=store, s3=None, report=lambda *_, **__: None
    )
    program = parse_program(spec.sql)
    checkpoint = runtime.initialize(program)
    for step in range(2):
        rows = [{"student": s, "course": f"c{(s + step) % 3}", "grade": 80 + s} for s in range(5)]
        (inputs / f"{step}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
        checkpoint, _ = runtime.step(program, checkpoint)
    spark = runtime.spark
    jvm = spark.sparkContext._gateway.proc  # type: ignore[union-attr]
    spark.stop()
    jvm.stdin.close()  # the gateway exits on end of input, writing the archive as it does
    if jvm.wait(timeout=JVM_EXIT_TIMEOUT) != 0:  # killed while it wrote: not an archive
        raise SystemExit(f"the JVM ended with {jvm.returncode}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="spindle-classes-") as directory:
        train(Path(directory))
