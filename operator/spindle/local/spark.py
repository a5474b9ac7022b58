"""Opening the runtime for a local pipeline: a local SparkSession on the pipeline's storage."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spindle.checkpoint import PipelineRef
from spindle.local.home import LocalPipeline
from spindle.runtime.engine import Runtime
from spindle.runtime.session import spark_session


def reporter(say: Callable[[str], None]) -> Callable[..., None]:
    def report(event: str, **fields: Any) -> None:
        if event == "bootstrap-start":
            say(
                f"Bootstrapping change {fields['change_id']}: {fields['views']} views to "
                "evaluate from stored state (no input is read)."
            )
        elif event == "bootstrap-view":
            say(
                f"  [{fields['done']}/{fields['total']}] {fields['view']}: "
                f"{fields['rows']} rows written"
            )
        elif event == "bootstrap-done":
            say(
                f"Bootstrap committed as checkpoint {fields['checkpoint']} "
                f"({fields['rows']} rows written)."
            )
        elif event == "rollback":
            say(
                f"Rolled back {fields['relation']} to version {fields['version']} "
                "(a previous step did not commit)."
            )

    return report


def open_runtime(pipeline: LocalPipeline, *, say: Callable[[str], None]) -> Runtime:
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
        report=reporter(say),
        outputs_on_bootstrap=manifest.spec.outputs.on_bootstrap,
    )
