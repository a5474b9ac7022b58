"""`open_runtime`: the one place a `Runtime` is built, for every body that runs one.

A SparkSession (local mode, or Kubernetes executors through `master` and `conf`) on the
pipeline's checkpoint store, with the spec's Spark settings and output behaviour, and the spec's
retention applied after every commit (`runtime.vacuum`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from spindle.api import PipelineSpec, RetentionSpec
from spindle.checkpoint import PipelineRef
from spindle.checkpoint.objects import S3Options
from spindle.checkpoint.store import CheckpointStore
from spindle.runtime import vacuum
from spindle.runtime.engine import Runtime
from spindle.runtime.session import spark_session
from spindle.versions import RUNTIME_VERSION


def open_runtime(
    *,
    pipeline: PipelineRef,
    spec: PipelineSpec,
    store: CheckpointStore,
    s3: S3Options | None,
    report: Callable[..., None],
    master: str = "local[2]",
    conf: Mapping[str, str] | None = None,
) -> Runtime:
    settings: dict[str, Any] = {**spec.spark.conf, **(conf or {})}
    spark = spark_session(
        app=f"spindle-{pipeline.namespace}-{pipeline.name}", master=master, s3=s3, extra=settings
    )
    storage = spec.storage
    vacuum.attach(spark, store, storage.retention if storage else RetentionSpec(), report)
    return Runtime(
        spark=spark,
        store=store,
        root=store.uri,
        pipeline=pipeline,
        report=report,
        outputs_on_bootstrap=spec.outputs.on_bootstrap,
        runtime_version=spec.runtime_version or RUNTIME_VERSION,
    )
