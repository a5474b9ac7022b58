"""The SparkSession Spindle runs on: local mode or Kubernetes, with Delta Lake and S3A.

Jars come from the cache (`spindle.runtime.jars`) or, in the Spark image, from
`$SPINDLE_SPARK_JARS`. S3 settings are the checkpoint store's `S3Options` (arguments or the
standard AWS environment variables), never files in the image.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pyspark.sql import SparkSession

from spindle.checkpoint.objects import S3Options
from spindle.runtime.jars import ensure_jars


def _class_path() -> str:
    """Jars on the JVM class path directly: unlike `spark.jars`, nothing is copied per session
    (the AWS SDK bundle alone is 600 MB). The Spark image sets SPINDLE_SPARK_JARS."""
    preset = os.environ.get("SPINDLE_SPARK_JARS")
    if preset:
        return preset.replace(",", ":")
    return ":".join(str(p) for p in ensure_jars())


def spark_conf(*, s3: S3Options | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    conf = {
        "spark.driver.extraClassPath": _class_path(),
        "spark.executor.extraClassPath": _class_path(),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.shuffle.partitions": "4",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        # short-lived drivers on small machines: C1 only and the serial GC start faster
        "spark.driver.extraJavaOptions": "-Duser.timezone=UTC -XX:TieredStopAtLevel=1 "
        "-XX:+UseSerialGC",
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.sql.ansi.enabled": "false",
    }
    if s3 is not None:
        prefix = "spark.hadoop.fs.s3a."
        conf.update(
            {
                f"{prefix}impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
                f"{prefix}path.style.access": "true",
                f"{prefix}connection.ssl.enabled": "false"
                if (s3.endpoint or "").startswith("http://")
                else "true",
                # Delta's S3 log store needs single-writer semantics per table; Spindle has one
                # driver per pipeline, which is what S3SingleDriverLogStore assumes.
                "spark.delta.logStore.s3a.impl": "io.delta.storage.S3SingleDriverLogStore",
            }
        )
        if s3.endpoint:
            conf[f"{prefix}endpoint"] = s3.endpoint
        if s3.region:
            conf[f"{prefix}endpoint.region"] = s3.region
        if s3.access_key and s3.secret_key:
            conf[f"{prefix}access.key"] = s3.access_key
            conf[f"{prefix}secret.key"] = s3.secret_key
            conf[f"{prefix}aws.credentials.provider"] = (
                "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
            )
    conf.update(extra or {})
    return conf


def spark_session(
    *,
    app: str = "spindle",
    master: str = "local[2]",
    s3: S3Options | None = None,
    extra: Mapping[str, str] | None = None,
) -> SparkSession:
    builder = SparkSession.builder.appName(app).master(master)
    for key, value in spark_conf(s3=s3, extra=extra).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
