"""The sizes of a checkpoint's stored relations, from their Delta logs: no Spark, no data file.

A body reads them while it observes (only when a change may need approval) and hands them to
the pure plan as data (`plan.StoredSize`), which estimates what a bootstrap reads. For the
Delta version a checkpoint names: the version's checksum file (`<version>.crc`, which Delta
writes with every commit) gives the table's bytes and, for tables of few files, every file
with its statistics (`allFiles`, `numRecords`); otherwise the JSON commits from version 0 are
replayed (`add` minus `remove`, each `add` carrying `size` and `stats`). A size the log does not
give (files written without statistics, commits already cleaned up) is None, and the estimate
says which relations it does not know. Versions never change, so sizes are cached by
(table, version).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from spindle.checkpoint.manifest import Manifest, StateRecord
from spindle.checkpoint.objects import ObjectNotFound, ObjectStore, S3Options, open_objects
from spindle.checkpoint.retry import RetryPolicy
from spindle.errors import SpindleError
from spindle.plan import StoredSize

LOG = "_delta_log"
_CACHE: dict[tuple[str, int], StoredSize] = {}
_CACHE_LIMIT = 20_000


def needs_sizes(
    checkpoint: Manifest | None, *, sql: str, runtime: str, restate: str | None
) -> bool:
    """Whether a plan against `checkpoint` may have something to estimate: the program, the
    runtime or a restatement differs from what it recorded."""
    if checkpoint is None:
        return False
    pending_restate = bool(restate) and restate != checkpoint.restated
    return (
        checkpoint.program.text != sql or checkpoint.runtime_version != runtime or pending_restate
    )


def stored_sizes(
    objects: ObjectStore,
    checkpoint: Manifest,
    *,
    s3: S3Options | None = None,
    retry: RetryPolicy | None = None,
) -> dict[str, StoredSize]:
    """Every stored relation of `checkpoint`, by name; `objects` is the pipeline root, and
    `retry` bounds the reads of state that lives elsewhere (another pipeline's)."""
    return {
        name: relation_size(objects, record, s3=s3, retry=retry)
        for name, record in checkpoint.state.items()
    }


def relation_size(
    objects: ObjectStore,
    record: StateRecord,
    *,
    s3: S3Options | None = None,
    retry: RetryPolicy | None = None,
) -> StoredSize:
    """One relation at its recorded version (adopted state is read where it lives)."""
    if record.version < 0:
        return StoredSize(rows=0, bytes=0)
    table = (
        open_objects(record.path, s3=s3, retry=retry)
        if record.adopted
        else objects.child(record.path)
    )
    key = (table.uri, record.version)
    if key in _CACHE:
        return _CACHE[key]
    try:
        size = delta_size(table, record.version)
    except (SpindleError, OSError, ValueError, KeyError, TypeError, AttributeError):
        size = StoredSize(rows=None, bytes=None)  # the estimate says unknown; nothing fails
    if size.rows is not None:
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.clear()
        _CACHE[key] = size
    return size


def _read_json(table: ObjectStore, key: str) -> Any:
    try:
        return json.loads(table.read(key).data)
    except ObjectNotFound:
        return None


def _records(stats: Any) -> int | None:
    """`numRecords` from an `add` action's statistics (a JSON string), if it has them."""
    if not stats:
        return None
    value = json.loads(stats).get("numRecords") if isinstance(stats, str) else None
    return int(value) if value is not None else None


def _totals(files: Mapping[str, tuple[int, int | None]]) -> StoredSize:
    sizes = list(files.values())
    unknown = any(records is None for _, records in sizes)
    return StoredSize(
        rows=None if unknown else sum(records or 0 for _, records in sizes),
        bytes=sum(size for size, _ in sizes),
    )


def delta_size(table: ObjectStore, version: int) -> StoredSize:
    """Rows and bytes of the Delta table `table` at `version`, from its log only."""
    checksum = _read_json(table, f"{LOG}/{version:020d}.crc")
    if isinstance(checksum, dict) and isinstance(checksum.get("allFiles"), list):
        files = {
            str(f["path"]): (int(f.get("size", 0)), _records(f.get("stats")))
            for f in checksum["allFiles"]
        }
        return _totals(files)
    active: dict[str, tuple[int, int | None]] = {}
    for number in range(version + 1):
        try:
            text = table.read(f"{LOG}/{number:020d}.json").data.decode()
        except ObjectNotFound:
            data = checksum.get("tableSizeBytes") if isinstance(checksum, dict) else None
            return StoredSize(rows=None, bytes=int(data) if data is not None else None)
        for line in text.splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            if "add" in action:
                add = action["add"]
                active[str(add["path"])] = (int(add.get("size", 0)), _records(add.get("stats")))
            elif "remove" in action:
                active.pop(str(action["remove"]["path"]), None)
    return _totals(active)
