"""Files and Delta tables as Spark sees them: URIs, listing, moving, and versions.

Object storage URIs are `s3://` for boto3 and `s3a://` for Spark; `spark_uri` converts.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType


def spark_uri(uri: str) -> str:
    return "s3a://" + uri[len("s3://") :] if uri.startswith("s3://") else uri


def join(uri: str, *parts: str) -> str:
    return "/".join([uri.rstrip("/"), *(p.strip("/") for p in parts if p)])


def _fs(spark: SparkSession, uri: str) -> tuple[Any, Any]:
    jvm = spark.sparkContext._jvm  # the Hadoop FileSystem API has no Python face
    assert jvm is not None
    path = jvm.org.apache.hadoop.fs.Path(uri)
    return path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), path


def list_status(spark: SparkSession, uri: str) -> list[tuple[str, int]]:
    """Data files under a directory or prefix, recursively, with their modification times (ms
    since the epoch), sorted by path; hidden files (`.x`, `_x`, under `_x/`) skipped. One
    metadata listing: no file is opened."""
    fs, path = _fs(spark, uri)
    if not fs.exists(path):
        return []
    found = []
    iterator = fs.listFiles(path, True)
    while iterator.hasNext():
        status = iterator.next()
        item = status.getPath()
        name = item.getName()
        relative = item.toString()
        if name.startswith((".", "_")) or "/_" in relative[len(uri) :]:
            continue
        found.append((relative, int(status.getModificationTime())))
    return sorted(found)


def list_files(spark: SparkSession, uri: str) -> list[str]:
    """Data files under a directory or prefix, recursively, sorted; hidden files skipped."""
    return [path for path, _ in list_status(spark, uri)]


def delete(spark: SparkSession, uri: str) -> None:
    fs, path = _fs(spark, uri)
    if fs.exists(path):
        fs.delete(path, True)


def move(spark: SparkSession, source: str, target: str) -> None:
    fs, src = _fs(spark, source)
    _, dst = _fs(spark, target)
    if fs.exists(dst):
        fs.delete(dst, False)
    if not fs.rename(src, dst):
        raise OSError(f"cannot move {source} to {target}")


def write_text(spark: SparkSession, uri: str, text: str) -> None:
    fs, path = _fs(spark, uri)
    stream = fs.create(path, True)
    stream.write(bytearray(text.encode()))
    stream.close()


def read_text(spark: SparkSession, uri: str) -> str | None:
    """A small text file (a Delta commit), or None when it does not exist."""
    fs, path = _fs(spark, uri)
    if not fs.exists(path):
        return None
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    stream = fs.open(path)
    try:
        data = jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
    finally:
        stream.close()
    return bytes(data).decode()


LOG = "_delta_log"
_COMMIT = re.compile(r"^(\d{20})\.json$")


def delta_version(spark: SparkSession, uri: str) -> int:
    """The latest version of a Delta table; -1 when there is none. One listing of its log (no
    Spark job: this runs for every relation on every step)."""
    fs, log = _fs(spark, join(uri, LOG))
    if not fs.exists(log):
        return -1
    versions = [
        int(found.group(1))
        for status in fs.listStatus(log)
        if (found := _COMMIT.match(status.getPath().getName()))
    ]
    return max(versions, default=-1)


def commit_actions(spark: SparkSession, uri: str, version: int) -> list[dict[str, Any]] | None:
    """The actions of one commit of a Delta table, from its log entry; None when the log no
    longer holds it."""
    text = read_text(spark, join(uri, LOG, f"{version:020d}.json"))
    if text is None:
        return None
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def last_commit(spark: SparkSession, uri: str) -> tuple[int, dict[str, str]]:
    """Version and operation metrics (rows written, inserted, deleted...) of the latest commit
    of a Delta table this process just wrote: read from that commit's own log entry."""
    version = delta_version(spark, uri)
    actions = commit_actions(spark, uri, version) if version >= 0 else None
    if actions is None:
        raise OSError(f"{uri} has no Delta commit to read")
    for action in actions:
        if "commitInfo" in action:
            metrics = action["commitInfo"].get("operationMetrics") or {}
            return version, {str(k): str(v) for k, v in metrics.items()}
    return version, {}


def last_write(spark: SparkSession, uri: str) -> tuple[int, int]:
    """Version and row count written by the latest commit of a Delta table (from its log)."""
    version, metrics = last_commit(spark, uri)
    return version, int(metrics.get("numOutputRows", 0))


def read_delta(spark: SparkSession, uri: str, version: int, schema: StructType) -> DataFrame:
    if version < 0:
        return spark.createDataFrame([], schema)
    return spark.read.format("delta").option("versionAsOf", version).load(uri)


def restore(spark: SparkSession, uri: str, version: int) -> bool:
    """Roll a Delta table back to `version` if a crashed step wrote past it."""
    from delta.tables import DeltaTable

    if version < 0 or delta_version(spark, uri) <= version:
        return False
    DeltaTable.forPath(spark, uri).restoreToVersion(version)
    return True
