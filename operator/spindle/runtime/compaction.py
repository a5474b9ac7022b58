"""Compaction: a stored relation stays a few files however many steps have appended to it.

A step appends each changed relation's change as a small file (`maintain.ONE_FILE`), so a
pipeline that has run 10,000 steps would hold 10,000 files per relation. Every file costs on
every read: Delta reconstructs a larger snapshot for each new version, and a join's other side,
a MIN/MAX re-read, a primary key's upsert and a bootstrap open them all. A step gets slower the
longer the pipeline runs, which is what #14 set out to end.

So `Compaction` counts, per relation, the small files (under `SMALL_BYTES`) that writes have
added since its last compaction, from each write's own Delta commit (a small JSON file: no
Spark job). At `SMALL_FILES` it runs Delta's OPTIMIZE, which bin-packs every file under
`SMALL_BYTES` into files of up to `TARGET_BYTES`, in one commit that changes no data; the step's
checkpoint then names that version. The replaced files stay as long as a retained checkpoint
reads them, and `runtime.vacuum` deletes them after. A relation this process has not seen
compacted starts at zero, so after a restart its first compaction also takes the small files
earlier processes left.

A Z-set relation (layout `zset`: a linear view, a table with deletes) also keeps every change's
rows: a row inserted and later deleted stays stored twice, as +1 and -1, so a table that churns
through the same thousand live rows would grow with every step. When such a relation compacts
and stores more than `CONSOLIDATE_AT` rows per live row, it is consolidated instead of
bin-packed: rewritten as one row per distinct row with its summed weight, cancelled rows gone,
in one commit marked `dataChange: false` (the Z-set it means is the same). That rewrite reads
the whole relation, so it runs only once the cancelled rows are a third of what is stored: its
cost is repaid by the rows it removes.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import SparkSession

from spindle.runtime import storage, zsets

SMALL_FILES = 32
"""Small files added to a relation since its last compaction that make the next write compact."""
SMALL_BYTES = 16 * 1024 * 1024
"""A file under this size is small: compaction rewrites it."""
TARGET_BYTES = 128 * 1024 * 1024
"""The size compaction packs small files into."""
CONSOLIDATE_AT = 1.5
"""Stored rows per live row above which a compacting Z-set relation is consolidated."""

CONF: Mapping[str, str] = {
    "spark.databricks.delta.optimize.minFileSize": str(SMALL_BYTES),
    "spark.databricks.delta.optimize.maxFileSize": str(TARGET_BYTES),
}
"""The session settings OPTIMIZE reads its file sizes from (`session.spark_conf` sets them)."""


def small_files_added(actions: Sequence[Mapping[str, Any]]) -> int:
    """How many small files one Delta commit adds, net of the small files it removes (a MERGE
    that rewrites a file removes one and adds one); pure."""
    added = removed = 0
    for action in actions:
        if "add" in action and int(action["add"].get("size", 0)) < SMALL_BYTES:
            added += 1
        elif "remove" in action and int(action["remove"].get("size", 0)) < SMALL_BYTES:
            removed += 1
    return added - removed


def consolidates(*, stored: int, live: int) -> bool:
    """Whether a compacting Z-set relation that stores `stored` rows meaning `live` rows (its
    summed weight) is consolidated rather than bin-packed; pure."""
    return stored > CONSOLIDATE_AT * max(live, 0)


def files_changed(actions: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """The files one Delta commit removes and adds; pure."""
    removed = sum(1 for action in actions if "remove" in action)
    return removed, sum(1 for action in actions if "add" in action)


@dataclass(frozen=True)
class Compacted:
    """One compaction: the relation's new version, the files it replaced and wrote, and
    whether it consolidated a Z-set (cancelled rows removed) or only bin-packed files."""

    version: int
    removed: int
    added: int
    consolidated: bool = False


@dataclass
class Compaction:
    """Per relation URI, the small files added since its last compaction (in this process).
    Writes of different relations run on different threads: one lock guards the counts."""

    small_files: int = SMALL_FILES
    _small: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def after_write(
        self, spark: SparkSession, uri: str, version: int, *, live: int | None = None
    ) -> Compacted | None:
        """Count the small files the write that made `version` added; compact the relation
        when they reach `small_files`. `live` is a Z-set relation's summed weight (None for
        any other layout): it decides whether the compaction consolidates. The compaction, or
        None."""
        actions = storage.commit_actions(spark, uri, version) or []
        with self._lock:
            count = max(0, self._small.get(uri, 0) + small_files_added(actions))
            self._small[uri] = count
        if count < self.small_files:
            return None
        consolidating = live is not None and consolidates(stored=_stored(spark, uri), live=live)
        removed, added = (_consolidate if consolidating else _optimize)(spark, uri)
        with self._lock:
            self._small[uri] = 0
        return Compacted(
            version=storage.delta_version(spark, uri),
            removed=removed,
            added=added,
            consolidated=consolidating,
        )


def _optimize(spark: SparkSession, uri: str) -> tuple[int, int]:
    """Delta's OPTIMIZE (bin-packing) of one table: files removed and added."""
    from delta.tables import DeltaTable

    row = DeltaTable.forPath(spark, uri).optimize().executeCompaction().first()
    metrics = row["metrics"] if row is not None else None
    if metrics is None:
        return 0, 0
    return int(metrics["numFilesRemoved"]), int(metrics["numFilesAdded"])


def _stored(spark: SparkSession, uri: str) -> int:
    """Rows stored in a table's latest version (a count that reads no column: Parquet's
    footers)."""
    return spark.read.format("delta").load(uri).count()


def _consolidate(spark: SparkSession, uri: str) -> tuple[int, int]:
    """A Z-set table rewritten as its consolidation, in files of about `TARGET_BYTES`, in one
    commit that changes no data: files removed and added."""
    from delta.tables import DeltaTable

    table = DeltaTable.forPath(spark, uri)
    detail = table.detail().select("sizeInBytes").first()
    files = max(1, -(-int(detail[0] if detail else 0) // TARGET_BYTES))
    consolidated = zsets.consolidate(table.toDF()).coalesce(files)
    consolidated.write.format("delta").mode("overwrite").option("dataChange", "false").save(uri)
    actions = storage.commit_actions(spark, uri, storage.delta_version(spark, uri)) or []
    return files_changed(actions)
