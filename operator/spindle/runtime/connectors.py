"""Input and output connectors, in Feldera's JSON shape, as a registry keyed by transport name.

Inputs return new rows and a new offset; offsets are opaque JSON stored in the checkpoint:
`file_input` remembers the set of files already ingested, `delta_table_input` the Delta version.
Outputs receive changes (the view's columns plus `weight`: +1 insert, -1 delete) under a step
sequence number, so replaying a step rewrites the same files or Delta transaction instead of
duplicating them; on bootstrap, outputs Spindle owns can have their contents replaced.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from spindle.errors import SpindleError
from spindle.program import Connector
from spindle.runtime import file_offsets, storage

FORMATS = {"json": "json", "csv": "csv", "parquet": "parquet"}
EXTENSIONS = {"json": "jsonl", "csv": "csv", "parquet": "parquet"}
LATE_ARRIVAL_SECONDS = 60


def _format(connector: Connector) -> tuple[str, Mapping[str, Any]]:
    fmt = connector.format or {"name": "json"}
    name = str(fmt.get("name", "json")).lower()
    if name not in FORMATS:
        raise SpindleError(
            reason="InvalidConnectors",
            message=f"Connector {connector.key}: format '{name}' is not supported; use json, "
            "csv or parquet.",
            details={"connector": connector.key},
        )
    config = fmt.get("config") or {}
    return name, config if isinstance(config, Mapping) else {}


def _location(connector: Connector, *keys: str) -> str:
    config = connector.transport_config
    for key in keys:
        value = config.get(key)
        if isinstance(value, str) and value:
            return storage.spark_uri(value)
    raise SpindleError(
        reason="InvalidConnectors",
        message=f"Connector {connector.key}: transport config needs '{keys[0]}'.",
        details={"connector": connector.key},
    )


class Input(Protocol):
    def poll(self, spark: SparkSession, offset: Any) -> tuple[DataFrame | None, Any]:
        """New rows since `offset`, and the offset after them (None: nothing new)."""
        ...

    def replay(self, spark: SparkSession, before: Any, wanted: Any) -> DataFrame:
        """Exactly the rows between offsets `before` and `wanted` (a crashed step's intent)."""
        ...


class Output(Protocol):
    def emit(self, spark: SparkSession, changes: DataFrame, *, sequence: int) -> None: ...

    def replace(self, spark: SparkSession, contents: DataFrame, *, sequence: int) -> None: ...


@dataclass(frozen=True)
class FileInput:
    path: str
    schema: StructType
    format: str
    options: Mapping[str, Any]
    max_files: int | None = None
    """Flow control (`max_files_per_step`): at most this many new files per step."""
    late_ms: int = LATE_ARRIVAL_SECONDS * 1000
    """`late_arrival_seconds`: how far behind the newest ingested file's modification time a
    file may appear and still be ingested (`runtime.file_offsets`)."""

    def poll(self, spark: SparkSession, offset: Any) -> tuple[DataFrame | None, Any]:
        files, after = file_offsets.plan(
            file_offsets.FileOffset.parse(offset),
            storage.list_status(spark, self.path),
            window=self.late_ms,
            limit=self.max_files,
        )
        if not files:
            return None, offset
        return self.read(spark, files), after.to_json()

    def replay(self, spark: SparkSession, before: Any, wanted: Any) -> DataFrame:
        files = file_offsets.between(
            file_offsets.FileOffset.parse(before),
            file_offsets.FileOffset.parse(wanted),
            storage.list_status(spark, self.path),
            window=self.late_ms,
        )
        return self.read(spark, files)

    def read(self, spark: SparkSession, files: list[str]) -> DataFrame:
        reader = spark.read.schema(self.schema).format(FORMATS[self.format])
        if self.format == "csv":
            reader = reader.option("header", str(self.options.get("header", True)).lower())
        return reader.load(files)


@dataclass(frozen=True)
class DeltaInput:
    uri: str
    schema: StructType

    def poll(self, spark: SparkSession, offset: Any) -> tuple[DataFrame | None, Any]:
        before = -1 if offset is None else int(offset)
        latest = storage.delta_version(spark, self.uri)
        if latest <= before:
            return None, before
        return self.replay(spark, before, latest), latest

    def replay(self, spark: SparkSession, before: Any, wanted: Any) -> DataFrame:
        """The table at version `wanted` minus the table at `before` (None or -1: nothing)."""
        names = [f.name for f in self.schema.fields]
        now = storage.read_delta(spark, self.uri, int(wanted), self.schema).select(*names)
        if before is not None and int(before) >= 0:
            now = now.exceptAll(
                storage.read_delta(spark, self.uri, int(before), self.schema).select(*names)
            )
        return now


@dataclass(frozen=True)
class FileOutput:
    path: str
    format: str

    def _write(self, spark: SparkSession, frame: DataFrame, *, sequence: int, tag: str) -> None:
        staging = storage.join(self.path, "_spindle_staging", f"{sequence:08d}-{tag}")
        storage.delete(spark, staging)
        frame.coalesce(1).write.mode("overwrite").format(FORMATS[self.format]).option(
            "header", "true"
        ).save(staging)
        parts = [f for f in storage.list_files(spark, staging) if "/part-" in f]
        for index, part in enumerate(parts):
            target = storage.join(
                self.path, f"{sequence:08d}-{tag}-{index}.{EXTENSIONS[self.format]}"
            )
            storage.move(spark, part, target)
        storage.delete(spark, staging)

    def emit(self, spark: SparkSession, changes: DataFrame, *, sequence: int) -> None:
        self._write(spark, changes, sequence=sequence, tag="changes")

    def replace(self, spark: SparkSession, contents: DataFrame, *, sequence: int) -> None:
        old = storage.list_files(spark, self.path)
        self._write(spark, contents, sequence=sequence, tag="snapshot")
        keep = f"{sequence:08d}-snapshot-"
        for file in old:
            if keep not in file:
                storage.delete(spark, file)


@dataclass(frozen=True)
class DeltaOutput:
    uri: str
    app_id: str

    def emit(self, spark: SparkSession, changes: DataFrame, *, sequence: int) -> None:
        changes.write.format("delta").mode("append").option("txnAppId", self.app_id).option(
            "txnVersion", sequence
        ).option("mergeSchema", "true").save(self.uri)

    def replace(self, spark: SparkSession, contents: DataFrame, *, sequence: int) -> None:
        contents.write.format("delta").mode("overwrite").option("overwriteSchema", "true").option(
            "txnAppId", self.app_id
        ).option("txnVersion", sequence).save(self.uri)


def make_input(connector: Connector, schema: StructType) -> Input:
    if connector.transport == "file_input":
        name, options = _format(connector)
        limit = connector.config.get("max_files_per_step")
        late = connector.config.get("late_arrival_seconds", LATE_ARRIVAL_SECONDS)
        if not isinstance(late, int) or isinstance(late, bool) or late < 0:
            raise SpindleError(
                reason="InvalidConnectors",
                message=f"Connector {connector.key}: late_arrival_seconds must be a whole number "
                f"of seconds, 0 or more (got {late!r}).",
                details={"connector": connector.key},
            )
        return FileInput(
            _location(connector, "path", "uri"),
            schema,
            name,
            options,
            int(limit) if isinstance(limit, int) and limit > 0 else None,
            late * 1000,
        )
    if connector.transport == "delta_table_input":
        return DeltaInput(_location(connector, "uri", "path"), schema)
    raise unsupported(connector)


def make_output(connector: Connector, *, pipeline: str) -> Output:
    if connector.transport == "file_output":
        name, _ = _format(connector)
        return FileOutput(_location(connector, "path", "uri"), name)
    if connector.transport == "delta_table_output":
        return DeltaOutput(_location(connector, "uri", "path"), f"{pipeline}/{connector.key}")
    raise unsupported(connector)


def unsupported(connector: Connector) -> SpindleError:
    return SpindleError(
        reason="UnsupportedConnector",
        message=f"Connector {connector.key} uses transport '{connector.transport}', which "
        "Spindle does not run; use file_input, delta_table_input, file_output or "
        "delta_table_output.",
        details={"connector": connector.key, "transport": connector.transport},
    )
