"""Input and output connectors, in Feldera's JSON shape, as a registry keyed by transport name.

Inputs return new rows and a new offset; offsets are opaque JSON stored in the checkpoint, and
must not grow with history. `file_input` keeps a modification-time mark plus the files within
`late_arrival_seconds` of it (`runtime.file_offsets`); `delta_table_input` the Delta version.

What an input returns: a DataFrame with the table's columns, plus optionally an integer column
`__w` (`WEIGHT`): +1 for an inserted row, -1 for a deleted one. An input without `__w` is
insert-only. `delta_table_input` reads only the commits after its offset: the files they added
(from the Delta log) when they only added rows, or the change data feed (`__w` from
`_change_type`) when one of them removed or rewrote rows; without the feed that is
`DeltaInputNotAppendOnly`. Until the engine maintains Z-sets, it ingests only the table columns.

Outputs receive changes (the view's columns plus `weight`: +1 insert, -1 delete) under a step
sequence number, so replaying a step rewrites the same files or Delta transaction instead of
duplicating them; on bootstrap, outputs Spindle owns can have their contents replaced.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import unquote

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from spindle.errors import SpindleError
from spindle.program import Connector
from spindle.runtime import file_offsets, storage

FORMATS = {"json": "json", "csv": "csv", "parquet": "parquet"}
EXTENSIONS = {"json": "jsonl", "csv": "csv", "parquet": "parquet"}
LATE_ARRIVAL_SECONDS = 60
WEIGHT = "__w"
"""An input's optional weight column: +1 insert, -1 delete (absent: every row is +1)."""


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
        """What versions `before` (exclusive; None or -1: the whole table) to `wanted` changed:
        the rows their commits added, read from those commits' files; or, when a commit in the
        range removed or rewrote rows, the change data feed with `__w` (-1 for deletes)."""
        names = [f.name for f in self.schema.fields]
        end = int(wanted)
        start = -1 if before is None else int(before)
        if start < 0:
            return storage.read_delta(spark, self.uri, end, self.schema).select(*names)
        commits = {v: self._commit(spark, v) for v in range(start + 1, end + 1)}
        rewrites = [v for v, actions in commits.items() if any(_removes(a) for a in actions)]
        if rewrites:
            return self._change_feed(spark, start, end, rewrites).select(*names, WEIGHT)
        added = [a["add"] for actions in commits.values() for a in actions if _adds(a)]
        return self._read_added(spark, added, end).select(*names)

    def _commit(self, spark: SparkSession, version: int) -> list[dict[str, Any]]:
        text = storage.read_text(
            spark, storage.join(self.uri, "_delta_log", f"{version:020d}.json")
        )
        if text is None:
            raise SpindleError(
                reason="DeltaInputVersionExpired",
                message=f"Version {version} of the Delta table {self.uri} is no longer in its "
                "log (log retention removed it), so the changes since this connector's offset "
                "cannot be read. Raise the source's delta.logRetentionDuration, and reset the "
                "connector (rename it) to read the table again from its current version.",
                details={"uri": self.uri, "version": version},
            )
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def _read_added(self, spark: SparkSession, added: list[dict[str, Any]], end: int) -> DataFrame:
        """The rows of the files the commits added (partition values from the log)."""
        from delta.tables import DeltaTable

        table = storage.read_delta(spark, self.uri, end, self.schema)
        detail = DeltaTable.forPath(spark, self.uri).detail().first()
        partitions = list(detail["partitionColumns"]) if detail else []
        mode = (
            (detail["properties"] or {}).get("delta.columnMapping.mode", "none") if detail else ""
        )
        if mode not in ("none", ""):
            raise SpindleError(
                reason="DeltaInputUnsupported",
                message=f"The Delta table {self.uri} uses column mapping ({mode}), which Spindle "
                "reads only through the change data feed: enable it with ALTER TABLE ... SET "
                "TBLPROPERTIES (delta.enableChangeDataFeed = true).",
                details={"uri": self.uri},
            )
        data = StructType([f for f in table.schema.fields if f.name not in partitions])
        frame = spark.createDataFrame([], table.schema)
        groups: dict[str, list[dict[str, Any]]] = {}
        for add in added:
            groups.setdefault(
                json.dumps(add.get("partitionValues") or {}, sort_keys=True), []
            ).append(add)
        for values, adds in groups.items():
            files = [storage.join(self.uri, unquote(a["path"])) for a in adds]
            part = spark.read.schema(data).parquet(*files)
            for column, value in json.loads(values).items():
                kind = table.schema[column].dataType
                part = part.withColumn(column, F.lit(value).cast(kind))
            frame = frame.unionByName(part)
        return frame

    def _change_feed(
        self, spark: SparkSession, start: int, end: int, rewrites: list[int]
    ) -> DataFrame:
        properties = _detail(spark, self.uri)[1]
        if properties.get("delta.enableChangeDataFeed", "false").lower() != "true":
            raise SpindleError(
                reason="DeltaInputNotAppendOnly",
                message=f"Version {rewrites[0]} of the Delta table {self.uri} removed or "
                "rewrote rows (DELETE, UPDATE, MERGE or overwrite), and the table has no change "
                f"data feed for versions {start + 1}..{end}, so Spindle cannot tell which rows "
                "left. Enable it on the source with ALTER TABLE ... SET TBLPROPERTIES "
                "(delta.enableChangeDataFeed = true), then reset the connector (rename it).",
                details={"uri": self.uri, "versions": rewrites},
            )
        changes = (
            spark.read.format("delta")
            .option("readChangeFeed", "true")
            .option("startingVersion", start + 1)
            .option("endingVersion", end)
            .load(self.uri)
        )
        kind = F.col("_change_type")
        weight = F.when(kind.isin("insert", "update_postimage"), F.lit(1)).otherwise(F.lit(-1))
        return changes.withColumn(WEIGHT, weight)


def _detail(spark: SparkSession, uri: str) -> tuple[list[str], dict[str, str]]:
    """A Delta table's partition columns and properties (as of its latest version)."""
    from delta.tables import DeltaTable

    row = DeltaTable.forPath(spark, uri).detail().select("partitionColumns", "properties").first()
    if row is None:
        return [], {}
    return list(row[0] or []), dict(row[1] or {})


def _adds(action: dict[str, Any]) -> bool:
    return "add" in action and bool(action["add"].get("dataChange", True))


def _removes(action: dict[str, Any]) -> bool:
    """A commit action that takes rows away: a data-changing remove, or an add carrying a
    deletion vector (rows deleted in place)."""
    if "remove" in action:
        return bool(action["remove"].get("dataChange", True))
    return _adds(action) and action["add"].get("deletionVector") is not None


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
