"""Retention and vacuum after every commit: storage stays bounded while a pipeline runs.

Runs as the checkpoint store's `after_commit` listener (wired by `runtime.factory`), so every
commit (first start, step, bootstrap) is followed by it, in the driver, before the next step
starts: no step or bootstrap of this pipeline runs concurrently. Order, so that a crash at any
point leaves every remaining manifest readable: (1) the store deletes the manifests beyond
`spec.storage.retention`, oldest first, orphan manifests past their grace period and the intents
of finished steps; (2) only then, the Delta files and log entries that no kept checkpoint's
`(path, version)` needs are deleted (`vacuum_rules` decides which). A failed vacuum is reported
and retried after the next commit; it never fails the step that committed.

Snapshots are read with Spark once per table and process, then advanced from the JSON commits
(cached: commit files are immutable), so a vacuum costs a listing of `state/` plus the commits
since the oldest kept version.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from pyspark.sql import SparkSession

from spindle.api import RetentionSpec
from spindle.checkpoint import Manifest
from spindle.checkpoint.store import CheckpointStore
from spindle.runtime import semantics, storage
from spindle.runtime.vacuum_rules import (
    Actions,
    advance,
    commit_versions,
    kept_versions,
    parse_commit,
    table_garbage,
    unnamed,
)


@dataclass
class Vacuum:
    spark: SparkSession
    store: CheckpointStore
    retention: RetentionSpec
    report: Callable[..., None]
    _snapshots: dict[str, tuple[int, frozenset[str]]] = field(default_factory=dict)
    _commits: dict[str, Actions] = field(default_factory=dict)

    def __call__(self, latest: Manifest) -> None:
        try:
            deleted = self.run(latest)
        except Exception as error:  # storage trouble: the next commit retries
            self.report("vacuum-failed", error=semantics.cause(error))
        else:
            self.report("vacuum", deleted=deleted)

    def run(self, latest: Manifest) -> int:
        """Retire old checkpoints, then delete what no kept one needs; returns keys deleted."""
        kept = self.store.retire(
            latest,
            checkpoints=self.retention.checkpoints,
            min_age=datetime.timedelta(seconds=self.retention.min_age_seconds),
        )
        versions = kept_versions({n: (r.path, r.version) for n, r in m.state.items()} for m in kept)
        keys = [item.key for item in self.store.objects.scan("state/")]
        doomed = unnamed(keys, versions)
        for table, named in sorted(versions.items()):
            under = [k for k in keys if k.startswith(f"{table}/")]
            oldest = min(named)
            live = self._live(table, oldest, under)
            doomed += table_garbage(under, table=table, oldest=oldest, live=live)
        self.store.objects.delete(doomed)
        self._snapshots = {t: s for t, s in self._snapshots.items() if t in versions}
        return len(doomed)

    def _live(self, table: str, oldest: int, keys: list[str]) -> frozenset[str]:
        """The snapshot at `oldest` plus every file a later commit added."""
        commits = commit_versions(keys, table=table)
        later = [self._actions(commits[v]) for v in sorted(commits) if v > oldest]
        added = frozenset().union(*(a.added for a in later))
        self._commits = {k: a for k, a in self._commits.items() if k in commits.values()}
        return self._snapshot(table, oldest, commits) | added

    def _snapshot(self, table: str, version: int, commits: dict[int, str]) -> frozenset[str]:
        if version < 0:
            return frozenset()
        cached = self._snapshots.get(table)
        if cached is not None and cached[0] <= version:
            steps = range(cached[0] + 1, version + 1)
            if all(v in commits for v in steps):
                files = advance(cached[1], (self._actions(commits[v]) for v in steps))
                self._snapshots[table] = (version, files)
                return files
        uri = storage.join(storage.spark_uri(self.store.uri), table)
        frame = self.spark.read.format("delta").option("versionAsOf", version).load(uri)
        files = frozenset(_relative(f, table) for f in frame.inputFiles())
        self._snapshots[table] = (version, files)
        return files

    def _actions(self, key: str) -> Actions:
        if key not in self._commits:
            self._commits[key] = parse_commit(self.store.objects.read(key).data.decode())
        return self._commits[key]


def _relative(uri: str, table: str) -> str:
    return unquote(uri.split(f"/{table}/", 1)[1])


def attach(
    spark: SparkSession, store: CheckpointStore, retention: RetentionSpec, report: Any
) -> Vacuum:
    """Make `store` run retention and vacuum after each commit (replacing an earlier one)."""
    vacuum = Vacuum(spark, store, retention, report)
    store.after_commit[:] = [
        *(c for c in store.after_commit if not isinstance(c, Vacuum)),
        vacuum,
    ]
    return vacuum
