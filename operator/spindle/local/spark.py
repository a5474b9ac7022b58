"""Opening the runtime for a local pipeline: a local SparkSession on the pipeline's storage."""

from __future__ import annotations

from collections.abc import Callable

from spindle.checkpoint import PipelineRef
from spindle.local.home import LocalPipeline
from spindle.runtime.driver import reporter
from spindle.runtime.engine import Runtime
from spindle.runtime.session import spark_session


def open_runtime(
    pipeline: LocalPipeline,
    *,
    say: Callable[[str], None],
    report: Callable[..., None] | None = None,
) -> Runtime:
    manifest = pipeline.manifest()
    root, options = pipeline.storage_root()
    spark = spark_session(
        app=f"spindle-{pipeline.name}", s3=options, extra=manifest.spec.spark.conf
    )
    return Runtime(
        spark=spark,
        store=pipeline.store(),
        root=root,
        pipeline=PipelineRef(namespace=manifest.metadata.namespace, name=pipeline.name),
        report=report or reporter(say),
        outputs_on_bootstrap=manifest.spec.outputs.on_bootstrap,
    )
