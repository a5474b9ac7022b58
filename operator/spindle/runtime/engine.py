"""The runtime: runs a pipeline's program on Spark, step by step, and bootstraps changes.

A step: (0) roll back Delta writes of a crashed step, (1) ingest new input recorded in a step
intent, (2) maintain the views whose inputs changed, in dependency order, (3) emit each view's
changes to its outputs, (4) commit one checkpoint (offsets plus Delta versions). A bootstrap
evaluates a `ChangePlan` from stored state without reading any input, then commits.

A table's appended input, a view's new state and its outputs' changes are written in the
background (`_Write`) while the views after them are maintained: most changes are computed from
the inputs' changes, not their new state, and only what reads a state still being written waits
for it (`_After`). The commit waits for every write.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import gc
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from spindle.checkpoint import (
    BootstrapRecord,
    ConnectorRecord,
    Manifest,
    PipelineRef,
    StateRecord,
)
from spindle.checkpoint.blobs import local_path
from spindle.checkpoint.manifest import is_uri
from spindle.checkpoint.records import next_manifest
from spindle.checkpoint.store import CheckpointStore
from spindle.errors import SpindleError
from spindle.plan import ChangePlan
from spindle.plan.estimate import stored_reads
from spindle.program import Program, Table, View
from spindle.program.queries import (
    MAX_QUERY_ROWS,
    Answer,
    answer_columns,
    check_query,
    materialized,
    plain,
    query_failed,
    row_limit,
)
from spindle.runtime import compaction, semantics, storage, upsert, zsets
from spindle.runtime.change_sql import WEIGHT
from spindle.runtime.connectors import (
    INCOMPLETE,
    MALFORMED,
    MISSING_FEED,
    ORDER,
    Input,
    make_input,
    make_output,
    unreadable_file,
)
from spindle.runtime.maintain import Views, copy_delta, spark_types, table_schema, write_whole
from spindle.runtime.rows import collect as rows_of
from spindle.runtime.zsets import column
from spindle.versions import RUNTIME_VERSION

ADHOC = "__adhoc__"
"""Connector name of a table's ad-hoc inserts (`spindle local execute`), under inputs/<table>/."""

Report = Callable[..., None]
_T = TypeVar("_T")

_WRITER = futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="spindle-write")
"""Writes tables' appended input, views' new state and outputs' changes while the step goes on
(`_Write`). Two threads: a Delta write spends most of its time in the driver (planning, the
log, the commit), which the step's own planning can overlap on a second core."""


def _quiet(event: str, **fields: Any) -> None:
    pass


RESTART = "then start the driver again; nothing was committed"
"""What a step or bootstrap that found stored state gone says to do once it is restored."""


@dataclass
class StepStats:
    sequence: int
    rows_ingested: int = 0
    views_recomputed: list[str] = field(default_factory=list)
    changes_emitted: int = 0
    polled: bool = False
    """Whether an input had something new: files or versions, even without a row (a CSV of
    its header only), whose offsets the step moved."""

    @property
    def idle(self) -> bool:
        return not self.polled


@dataclass
class Runtime:
    spark: SparkSession
    store: CheckpointStore
    root: str
    """The pipeline root URI (`file:///...` or `s3://...`)."""
    pipeline: PipelineRef
    report: Report = _quiet
    outputs_on_bootstrap: str = "replace"
    runtime_version: str = RUNTIME_VERSION
    """What checkpoints record as their runtime: the spec's pin (`spec.runtimeVersion`), so a
    pinned pipeline's next plan compares like with like."""
    input_records_read: int = 0
    compaction: compaction.Compaction = field(default_factory=compaction.Compaction)
    waiting: set[str] = field(default_factory=set)
    """The input connectors reported waiting for their first rows (once per connector)."""
    abandoned_checked: bool = False
    """Whether a step of this runtime undid what abandoned bootstraps wrote to its outputs
    (`_discard_abandoned`): at its first step with input, and at the first after a
    bootstrap."""

    # -- paths and schemas -------------------------------------------------------------------

    def uri(self, path: str) -> str:
        if is_uri(path):
            return storage.spark_uri(path)
        return storage.join(storage.spark_uri(self.root), path)

    @contextlib.contextmanager
    def _io(self, manifest: Manifest | None, program: Program | None = None) -> Iterator[None]:
        """A step's, bootstrap's or first start's storage I/O (`semantics.storage_io`), where
        a file Spark fails to read is named for what it is: one of `manifest`'s stored state
        found gone is lost data (`StateFileMissing`, never retried: waiting brings nothing
        back); one of `program`'s inputs (corrupt, half written, gone) is `InputUnreadable`,
        naming the connector and the file. Neither is an internal error."""
        with semantics.storage_io(self.root):
            try:
                yield
            except Exception as error:
                named = self._lost(manifest, error) if manifest else None
                if named is None and program is not None:
                    named = self._unreadable(program, error)
                if named is None:
                    raise
                raise named from error

    def _lost(
        self, manifest: Manifest, error: BaseException, *, then: str = RESTART
    ) -> SpindleError | None:
        """`StateFileMissing` for the relation whose stored state `error` says lost a file:
        the file Spark failed to read, if it names one, else any its messages name. `then`:
        what to do once the file is restored."""
        if not semantics.lost_file(error):
            return None
        failed, said = semantics.failed_file(error), semantics.said(error)
        for name, record in sorted(manifest.state.items()):
            uri = self.uri(record.path)
            if storage.within(failed, uri) if failed else f"{local_path(uri) or uri}/" in said:
                return _missing(name, record, error, then=then)
        return None

    def _unreadable(self, program: Program, error: BaseException) -> SpindleError | None:
        """`connectors.unreadable_file` over `program`'s inputs, when `error` is Spark failing
        to read a file or a record; None otherwise, or when the inputs cannot be made (the
        error then stands as it is)."""
        raised = (semantics.raised(error, marker) for marker in (MALFORMED, INCOMPLETE))
        feed = MISSING_FEED in str(error)  # a Delta input's, read lazily
        if semantics.failed_file(error) is None and all(r is None for r in raised) and not feed:
            return None
        try:
            inputs = [source for _, source in self._inputs(program).values()]
        except Exception:
            return None
        return unreadable_file(self.spark, inputs, error)

    # -- views -----------------------------------------------------------------------------

    def views(self, program: Program) -> Views:
        """Reading and maintaining `program`'s relations (one per step or bootstrap), with
        this runtime's SQL semantics."""
        semantics.apply(self.spark, version=self.runtime_version)
        return Views(self.spark, program, self.uri)

    def preflight(
        self, program: Program, state: Mapping[str, StateRecord], views: tuple[str, ...]
    ) -> None:
        """Analyze every view to evaluate, against stored state (tables without state count as
        empty), before anything is written: an unsupported construct fails here, not midway."""
        reader = self.views(program)
        needed = {dep for name in views for dep in program.views[name].dependencies}
        schemas = reader.register(state, tuple(sorted(needed - set(views))))
        for name in views:
            view = program.views[name]
            analyzed = reader.analyze(view, schemas)
            frame = reader.query(view, analyzed.sql)
            frame.createOrReplaceTempView(f"`{name}`")
            schemas[name] = spark_types(frame)

    # -- first start -------------------------------------------------------------------------

    def initialize(self, program: Program, *, restated: str | None = None) -> Manifest:
        """Create empty state for every relation and commit the first checkpoint; `restated`,
        a restatement request made before it, is served by it (every view is computed)."""
        with self._io(None):
            return self._initialize(program, restated)

    def _initialize(self, program: Program, restated: str | None) -> Manifest:
        self.preflight(program, {}, tuple(program.views))
        state: dict[str, StateRecord] = {}
        for name, table in program.tables.items():
            path = f"state/tables/{name}@0"
            empty = self.spark.createDataFrame([], table_schema(table))
            # a first start that failed (or was killed) after this write left the table with
            # the old program's columns: the new one's replace them, as any rewrite does
            empty.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(
                self.uri(path)
            )
            version = storage.delta_version(self.spark, self.uri(path))
            state[name] = StateRecord(kind="table", path=path, version=version, rows=0)
        reader = self.views(program)
        for name, view in program.views.items():
            with semantics.evaluating(view, version=self.runtime_version):
                state[name] = self._write_whole(reader, view, state, f"state/views/{name}@0")
        # no output is written before every view is: then, an earlier attempt's writes (its
        # SQL fixed since, they may differ) are undone, and the first contents written
        incarnation = self.store.incarnation()
        writer = self._writer(incarnation)
        undone = self._discard_written(program, sequence=0, writer=writer, renamed=True)
        for view in program.views.values():
            self._first_contents(reader, view, state[view.name], writer=writer, undone=undone)
        manifest = self._manifest(
            program=program,
            parent=None,
            state=state,
            connectors=self._fresh_connectors(program),
            restated=restated,
            incarnation=incarnation,
        )
        return self.store.commit(manifest)

    def _first_contents(
        self,
        reader: Views,
        view: View,
        record: StateRecord,
        *,
        writer: str,
        undone: Mapping[str, tuple[int, str]],
    ) -> None:
        """Hand a view's rows over empty tables to its outputs, as the first checkpoint's
        changes: a global aggregate's one row (`count(*)` is 0), a view of VALUES. They were
        never emitted, so a consumer saw a later step retract a row it never received."""
        if not view.connectors:
            return
        contents = reader.contents(view.name, record)
        if contents.limit(1).count() == 0:
            return
        rows = contents.withColumn("weight", F.lit(1))
        for connector in view.connectors:
            output = make_output(connector, pipeline=writer, undone=undone.get(connector.key))
            output.emit(self.spark, rows, sequence=0)

    def _fresh_connectors(
        self, program: Program, keep: Mapping[str, ConnectorRecord] | None = None
    ) -> dict[str, ConnectorRecord]:
        records: dict[str, ConnectorRecord] = {}
        for connector in program.connectors:
            previous = (keep or {}).get(connector.key)
            records[connector.key] = previous or ConnectorRecord(
                direction=connector.direction.value, offset=None
            )
        for name in program.tables:
            key = f"{name}.{ADHOC}"
            records[key] = (keep or {}).get(key) or ConnectorRecord(direction="input", offset=None)
        for key, record in (keep or {}).items():  # a removed table's batches stay in inputs/:
            if key.endswith(f".{ADHOC}") and key not in records:  # added again, it ingested
                records[key] = record  # them again; its offset stays, to resume from
        return records

    def _manifest(
        self,
        *,
        program: Program,
        parent: Manifest | None,
        state: dict[str, StateRecord],
        connectors: dict[str, ConnectorRecord],
        bootstrap: BootstrapRecord | None = None,
        measured: tuple[str, int, float] | None = None,
        restated: str | None = None,
        incarnation: str | None = None,
    ) -> Manifest:
        return next_manifest(
            parent=parent,
            pipeline=self.pipeline,
            program=program,
            state=state,
            connectors=connectors,
            spark_version=self.spark.version,
            bootstrap=bootstrap,
            runtime_version=self.runtime_version,
            measured=measured,
            restated=restated,
            incarnation=incarnation,
        )

    # -- run mode ----------------------------------------------------------------------------

    def _write_whole(
        self, reader: Views, view: View, state: Mapping[str, StateRecord], path: str
    ) -> StateRecord:
        """Evaluate a view whole from `state` and write it, in its mode's layout, to `path`."""
        frame, analyzed = reader.evaluate(view, state)
        version, rows = write_whole(self.spark, frame, self.uri(path))
        return StateRecord(
            kind="view", path=path, version=version, rows=rows, layout=analyzed.layout
        )

    def _rollback(self, manifest: Manifest) -> None:
        """Restore this pipeline's state to the checkpoint's versions (what a failed step
        wrote goes). Adopted state is another pipeline's: never written here, so never
        restored (a restore would undo that pipeline's own steps)."""
        for name, record in manifest.state.items():
            if record.adopted:
                continue
            if storage.restore(self.spark, self.uri(record.path), record.version):
                self.report("rollback", relation=name, version=record.version)

    def _discard_abandoned(
        self, programs: Iterable[Program], parent: Manifest, *, bootstrap: str | None = None
    ) -> None:
        """Undo what bootstraps that never committed wrote to `programs`' outputs for the
        sequence after `parent`, before a step (or the bootstrap of change `bootstrap`) of it:
        abandoned, they would leave another program's contents under this one's changes.
        First, what an undo that a driver's stop cut short took from other writers since the
        checkpoint is put back (`finish_undo`)."""
        sequence, since = parent.sequence + 1, parent.created_at
        outputs = {
            make_output(connector, pipeline=self._writer(parent.incarnation)): connector.key
            for program in programs
            for view in program.views.values()
            for connector in view.connectors
        }
        for output, key in outputs.items():
            unfinished = output.finish_undo(self.spark, since=since)
            if unfinished is not None:
                event, path = unfinished
                self.report(event, connector=key, path=path)
            undone = output.discard_abandoned(self.spark, sequence=sequence, bootstrap=bootstrap)
            for path in undone:
                self.report("output-discarded", connector=key, path=path, by="abandoned")

    def _discard_uncommitted(self, program: Program, parent: Manifest) -> None:
        """Remove what a failed step of `sequence` wrote to `program`'s file outputs. Outputs
        are written while the step runs, so a step that failed can leave files no checkpoint
        accounts for. A replay of the step rewrites them, but a bootstrap takes the sequence
        and does not rewrite an unchanged view's output, and the failed step's input is
        ingested again after it: left there, those changes would reach consumers twice.
        A Delta output's undo is recorded before it is done (`record_undone_outputs`): should
        this bootstrap be abandoned, the step's replay writes to that output as a writer Delta
        does not remember, so it is not skipped as already written."""
        sequence = parent.sequence + 1
        if self.store.has_intent(sequence):
            self._discard_written(
                program, sequence=sequence, writer=self._writer(parent.incarnation)
            )

    def _discard_written(
        self, program: Program, *, sequence: int, writer: str, renamed: bool = False
    ) -> dict[str, tuple[int, str]]:
        """Undo what an attempt of `sequence` that never committed wrote to `program`'s
        outputs as `writer` (`Output.discard`; with `renamed`, as any of its views' or
        connectors': a first start's attempt may have named them otherwise); returns the
        Delta outputs whose commit of it was undone, recorded before each undo
        (`CheckpointStore.undone_outputs`)."""
        undone = self.store.undone_outputs(sequence)

        def undoing(connector: str, version: int, by: str) -> None:
            undone[connector] = (version, by)
            self.store.record_undone_outputs(sequence, undone)

        for view in program.views.values():
            for connector in view.connectors:
                output = make_output(connector, pipeline=writer)
                record = functools.partial(undoing, connector.key)
                discarded = output.discard(
                    self.spark, sequence=sequence, undoing=record, renamed=renamed
                )
                for path in discarded:
                    self.report("output-discarded", connector=connector.key, path=path)
        return undone

    def _inputs(self, program: Program) -> dict[str, tuple[str, Input]]:
        inputs: dict[str, tuple[str, Input]] = {}
        for name, table in program.tables.items():
            schema = table_schema(table)
            for connector in table.connectors:
                not_null = tuple(c.name for c in table.columns if not c.nullable)
                made = make_input(connector, schema, not_null=not_null, key=table.primary_key)
                inputs[connector.key] = (name, made)
            adhoc = make_input(_adhoc_connector(name, self.root), schema)
            inputs[f"{name}.{ADHOC}"] = (name, adhoc)
        return inputs

    def step(
        self, program: Program, manifest: Manifest, *, ingest: bool = True
    ) -> tuple[Manifest, StepStats]:
        """One step from `manifest`, in the phases the module docstring lists; returns the new
        checkpoint (or `manifest` when idle)."""
        with self._io(manifest, program):
            return self._step(program, manifest, ingest=ingest)

    def _step(
        self, program: Program, manifest: Manifest, *, ingest: bool
    ) -> tuple[Manifest, StepStats]:
        work = _Work.after(manifest)
        started = time.monotonic()
        semantics.apply(self.spark, version=self.runtime_version)  # ingest precedes `views`
        self._rollback(manifest)
        inputs = self._inputs(program) if ingest else {}
        polled = self._poll(inputs, manifest)
        if not polled:
            return manifest, work.stats
        work.stats.polled = True
        try:
            if not self.abandoned_checked:  # only a new driver follows an abandoned bootstrap
                self._discard_abandoned((program,), manifest)
                self.abandoned_checked = True
            received = self._ingest(program, inputs, polled, manifest, work)
            self._maintain(program, manifest, work)
            self._settle(work, list(work.writes))
            for emitted in work.emits:
                emitted.result()
            self.report("ingested", rows=work.stats.rows_ingested, tables=sorted(received))
            measured = ("step", work.stats.rows_ingested, time.monotonic() - started)
            committed = self.store.commit(
                self._manifest(
                    program=program,
                    parent=manifest,
                    state=work.state,
                    connectors=work.connectors,
                    measured=measured,
                )
            )
        finally:  # a failed step leaves no write running: the next step's rollback would race it
            running: list[futures.Future[Any]] = [w.future for w in work.writes.values()]
            futures.wait([*running, *work.emits])
            for frame in [*work.changes.values(), *work.cached]:
                frame.unpersist()
            for name in work.temps:
                self.spark.catalog.dropTempView(name)
            # py4j keeps a JVM object while its Python proxy lives, and a step's frames sit in
            # reference cycles that Python's collector reaches late: left to it, the JVM held
            # old steps' plans and snapshots longer (its collector took 15 s per 10 steps by
            # step 50 without this, 5 s with it)
            gc.collect()
        return committed, work.stats

    def _poll(
        self, inputs: Mapping[str, tuple[str, Input]], manifest: Manifest
    ) -> dict[str, tuple[DataFrame, Any]]:
        """New input per connector, with the offset after it."""
        polled: dict[str, tuple[DataFrame, Any]] = {}
        for key, (_, source) in inputs.items():
            previous = manifest.connectors.get(key)
            frame, offset = source.poll(self.spark, previous.offset if previous else None)
            if frame is not None:
                polled[key] = (frame, offset)
            elif previous is None or previous.offset is None:
                self._waiting(key, source)
        return polled

    def _waiting(self, key: str, source: Input) -> None:
        """Say once that an input that never read anything has nothing to read (a mistyped
        path would otherwise wait silently forever); ad-hoc inserts wait quietly."""
        if key in self.waiting or key.endswith(ADHOC):
            return
        self.waiting.add(key)
        where = local_path(source.location)
        missing = where is not None and not os.path.exists(where)
        self.report("input-waiting", connector=key, location=source.location, missing=missing)

    def _ingest(
        self,
        program: Program,
        inputs: Mapping[str, tuple[str, Input]],
        polled: Mapping[str, tuple[DataFrame, Any]],
        manifest: Manifest,
        work: _Work,
    ) -> list[str]:
        """(1) Record the step intent, then apply exactly what it names to the tables (a
        replay of a crashed step ingests what that step planned, no more, no less). A table's
        input is its connectors' in declaration order (ad-hoc inserts last). Returns the
        tables that received input."""
        planned = {key: offset for key, (_, offset) in polled.items()}
        intent, replay = self.store.record_intent(work.sequence, {"offsets": planned})
        if replay:
            work.undone = self.store.undone_outputs(work.sequence)
        received: dict[str, list[DataFrame]] = {}
        deletes: set[str] = set()
        for position, (key, (frame, offset)) in enumerate(polled.items()):
            wanted = intent["offsets"].get(key)  # type: ignore[attr-defined]
            if wanted is None:
                continue  # arrived after the crashed attempt planned this step: next step
            table_name, source = inputs[key]
            if wanted != offset:  # replaying a crashed step: ingest exactly what it planned
                previous = manifest.connectors.get(key)
                frame = source.replay(self.spark, previous.offset if previous else None, wanted)
            if WEIGHT in frame.columns:
                deletes.add(table_name)
            table = program.tables[table_name]
            received.setdefault(table_name, []).append(_in_order(frame, table, position))
            work.connectors[key] = ConnectorRecord(direction="input", offset=wanted)
        for table_name, frames in received.items():
            self._ingest_table(
                program.tables[table_name], frames, work, deletes=table_name in deletes
            )
        return list(received)

    def _ingest_table(
        self, table: Table, frames: list[DataFrame], work: _Work, *, deletes: bool
    ) -> None:
        """Apply a table's input: appended to its rows, or to its Z-set when the input carries
        deletes; with a primary key, its upserts' change (`runtime.upsert`) appended to its
        Z-set."""
        name, key = table.name, list(table.primary_key)
        record = self._own(work.state[name], f"state/tables/{name}@{work.sequence}")
        received = zsets.union(frames).persist()
        work.cached.append(received)
        uri = self.uri(record.path)
        if key or deletes:
            record = self._as_zset(record)
            if key:
                rows = zsets.size(received).rows
                state = storage.read_delta(self.spark, uri, record.version, StructType([]))
                last = upsert.latest(received, key=key)
                added = upsert.change(last=last, state=state, key=key).persist()
                work.cached.append(added)
                net = zsets.size(added).net
            else:
                added, measured = received, zsets.size(received)
                rows = measured.rows
                if measured.magnitude > measured.net:  # deletes: of rows the table holds only
                    state = storage.read_delta(self.spark, uri, record.version, received.schema)
                    added = zsets.held(received, state).persist()
                    work.cached.append(added)
                    measured = zsets.size(added)
                net = measured.net
            added.write.format("delta").mode("append").save(uri)
            version = storage.last_commit(self.spark, uri)[0]
        else:  # inserts only, appended in the background: the commit says how many rows
            stored = received if record.layout == "zset" else received.drop(WEIGHT)
            work.changes[name] = received
            self._write(
                table,
                lambda: _appended(self.spark, stored, uri, record),
                work,
                then=lambda new: self._count_ingested(work, (new.rows or 0) - (record.rows or 0)),
            )
            return
        work.changes[name] = added
        record = record.model_copy(update={"version": version, "rows": (record.rows or 0) + net})
        work.state[name] = self._compacted(name, record)
        self._count_ingested(work, rows)

    def _count_ingested(self, work: _Work, rows: int) -> None:
        work.stats.rows_ingested += rows
        self.input_records_read += rows

    def _maintain(self, program: Program, manifest: Manifest, work: _Work) -> None:
        """(2) Maintain, in dependency order, the views whose inputs changed, and (3) emit
        each one's change to its outputs. A view whose change is empty writes nothing and
        wakes none of its dependents."""
        reader = self.views(program)
        after = _After(work, lambda name: self._settle(work, [name]))
        try:
            for view in program.views.values():
                if not (set(view.dependencies) & work.changes.keys()):
                    continue
                with semantics.evaluating(view, version=self.runtime_version):
                    self._maintain_view(reader, view, manifest, work, after)
        finally:
            work.cached.extend(reader.cached)
            work.temps.extend(reader.temps)

    def _maintain_view(
        self, reader: Views, view: View, manifest: Manifest, work: _Work, after: _After
    ) -> None:
        """Maintain one view: store it (in the background) and emit its change (nothing
        when the change is empty, unless its running values moved)."""
        name = view.name
        before = work.state[name]
        maintained = reader.change(view, before=manifest.state, after=after, changes=work.changes)
        change = maintained.change.persist()
        size = zsets.size(change)
        event = {"view": name, "mode": reader.mode(name), "changes": size.rows}
        path = self._own_view_path(before, name, work)
        written = functools.partial(self._view_written, event)
        if size.rows == 0:
            change.unpersist()
            if maintained.dirty():  # running values moved, columns did not: store only
                self._write(view, lambda: maintained.store(path, size), work, then=written)
            else:
                self.report("view", **event)
            return
        self._write(view, lambda: maintained.store(path, size), work, then=written)
        work.changes[name] = change
        work.stats.views_recomputed.append(name)
        self._emit_changes(view, change, work, rows=size.magnitude)

    def _view_written(self, event: dict[str, Any], record: StateRecord) -> None:
        self.report("view", **event, rows=record.rows)

    def _write(
        self,
        relation: Table | View,
        store: Callable[[], StateRecord],
        work: _Work,
        *,
        then: Callable[[StateRecord], None],
    ) -> None:
        """Start writing a relation's new state in the background; `_settle` records it, then
        calls `then` with it (on the step's thread)."""

        def run() -> StateRecord:
            if isinstance(relation, Table):
                record = store()
            else:
                with semantics.evaluating(relation, version=self.runtime_version):
                    record = store()
            return self._compacted(relation.name, record)

        work.writes[relation.name] = _Write(_WRITER.submit(self._in_session(run)), then)

    def _compacted(self, name: str, record: StateRecord) -> StateRecord:
        """A relation's record after its write, compacted when its small files are due
        (`runtime.compaction`). A compaction that fails is reported and leaves the record as
        written: it changes no data, so the step goes on (if its commit landed, the next
        step's rollback undoes it), and the relation's next write compacts. One that finds a
        stored file missing fails the step (`StateFileMissing`): that is lost data."""
        live = (record.rows or 0) if record.layout == "zset" else None
        uri = self.uri(record.path)
        try:
            done = self.compaction.after_write(self.spark, uri, record.version, live=live)
        except Exception as error:  # upkeep: the write stands, and the next write compacts
            if semantics.lost_file(error):
                raise _missing(name, record, error, then=RESTART) from error  # lost data: at once
            self.report("compaction-failed", relation=name, error=semantics.cause(error))
            return record
        if done is None:
            return record
        self.report(
            "compacted",
            relation=name,
            files=done.removed,
            into=done.added,
            consolidated=done.consolidated,
        )
        return record.model_copy(update={"version": done.version})

    def _in_session(self, work: Callable[[], _T]) -> Callable[[], _T]:
        """`work` as a writer thread runs it: a new JVM thread has no active Spark session."""
        session, jvm = self.spark._jsparkSession, self.spark._jvm
        assert jvm is not None

        def run() -> _T:
            jvm.org.apache.spark.sql.SparkSession.setActiveSession(session)
            return work()

        return run

    def _settle(self, work: _Work, names: Iterable[str]) -> None:
        """Wait for the background writes of `names` and record their new state (a failed
        write raises here)."""
        for name in names:
            write = work.writes.get(name)
            if write is None:
                continue
            work.state[name] = write.future.result()
            del work.writes[name]
            write.then(work.state[name])

    def _own_view_path(self, record: StateRecord, name: str, work: _Work) -> str:
        """Where a view's new state goes: in place, or anew for adopted state (read only)."""
        return f"state/views/{name}@{work.sequence}" if record.adopted else record.path

    def _emit_changes(self, view: View, change: DataFrame, work: _Work, *, rows: int) -> None:
        """Send a view's change (`rows` signed rows in all) to each of its outputs."""
        outputs = [
            make_output(c, pipeline=self._writer(work.incarnation), undone=work.undone.get(c.key))
            for c in view.connectors
        ]
        if not outputs:
            return
        signed = zsets.signed(change)  # cheap: `change` is cached
        for output in outputs:
            emit = functools.partial(output.emit, self.spark, signed, sequence=work.sequence)
            work.emits.append(_WRITER.submit(self._in_session(emit)))
        work.stats.changes_emitted += rows

    def _as_zset(self, record: StateRecord) -> StateRecord:
        """A table stored as a Z-set from now on (its rows, weighted +1): it is about to
        receive deletes, or upserts by its primary key."""
        if record.layout == "zset":
            return record
        uri = self.uri(record.path)
        frame = storage.read_delta(self.spark, uri, record.version, StructType([]))
        version, _ = write_whole(self.spark, zsets.weighted(frame), uri)
        return record.model_copy(update={"version": version, "layout": "zset"})

    def _own(self, record: StateRecord, path: str) -> StateRecord:
        """A table this pipeline may append to: state adopted from another pipeline (an
        absolute URI) is copied into this pipeline's own state first, never written to."""
        if not record.adopted:
            return record
        version = copy_delta(self.spark, self.uri(record.path), record.version, self.uri(path))
        return record.model_copy(update={"path": path, "version": version})

    def _writer(self, incarnation: str | None) -> str:
        """Who this pipeline's incarnation writes to its outputs as (a Delta output's
        `txnAppId`, with the connector's key after it): its namespace and name, and its
        incarnation (none for a pipeline whose first checkpoint was before format 5)."""
        named = f"{self.pipeline.namespace}/{self.pipeline.name}"
        return named if incarnation is None else f"{named}@{incarnation}"

    # -- bootstrap ---------------------------------------------------------------------------

    def bootstrap(
        self, plan: ChangePlan, manifest: Manifest, *, approved_by: str | None = None
    ) -> Manifest:
        """Apply an approved plan from stored state; refuses, before touching anything, what
        the plan refuses. Reads no input. Phases: discard the state of removed and modified
        objects, analyze the views to evaluate, reset (or evolve) modified tables and their
        connectors, evaluate new and modified views and hand their contents to their outputs,
        commit with a bootstrap record."""
        with self._io(manifest):
            return self._bootstrap(plan, manifest, approved_by=approved_by)

    def _bootstrap(
        self, plan: ChangePlan, manifest: Manifest, *, approved_by: str | None
    ) -> Manifest:
        refuse_unless_allowed(plan)
        started = datetime.datetime.now(datetime.UTC)
        clock = time.monotonic()
        read_before = self.input_records_read
        # no rollback: a bootstrap writes only to new paths, so a crashed one left nothing the
        # checkpoint names, and its replay overwrites what it wrote
        program = plan.new
        self.abandoned_checked = False  # should this one be abandoned, the next step checks
        # abandoned bootstraps' writes, then a failed step's
        self._discard_abandoned((plan.old, plan.new), manifest, bootstrap=plan.change_id)
        self._discard_uncommitted(plan.old, manifest)
        state_rows_read = self._stored_rows_read(plan, manifest)
        state, rows_written = self.evaluate_change(plan, manifest)
        # an emptied table's ad-hoc offset stays: its batches were checked against its old
        # columns (and may be a removed namesake's), so they are not read again
        reset = set(plan.connectors_to_reset)
        keep = {k: v for k, v in manifest.connectors.items() if k not in reset}
        connectors = self._fresh_connectors(program, keep)
        record = BootstrapRecord(
            change_id=plan.change_id,
            approved_by=approved_by,
            started_at=started,
            finished_at=datetime.datetime.now(datetime.UTC),
            views_evaluated=list(plan.views_to_evaluate),
            input_records_read=self.input_records_read - read_before,
            state_rows_read=state_rows_read,
        )
        committed = self.store.commit(
            self._manifest(
                program=program,
                parent=manifest,
                state=state,
                connectors=connectors,
                bootstrap=record,
                measured=("bootstrap", state_rows_read, time.monotonic() - clock),
                restated=plan.restate_request,
            )
        )
        self.report("bootstrap-done", rows=rows_written, checkpoint=committed.id)
        return committed

    def evaluate_change(
        self, plan: ChangePlan, manifest: Manifest, *, location: str = "state", emit: bool = True
    ) -> tuple[dict[str, StateRecord], int]:
        """The state `plan` leaves from `manifest`'s: analyze the views to evaluate, reset (or
        evolve) modified tables, evaluate new and modified views from stored state; new state
        goes under `location` (a preview's is scratch space). With `emit`, outputs receive the
        views' contents. Returns the new state (nothing committed) and the rows written."""
        program, sequence = plan.new, manifest.sequence + 1
        state = _kept_state(plan, manifest)
        unchanged_tables = {
            n: r for n, r in state.items() if n in program.tables and n not in plan.tables_to_evolve
        }
        kept_views = {n: r for n, r in state.items() if n in program.views}
        self.preflight(program, {**unchanged_tables, **kept_views}, plan.views_to_evaluate)
        self._reset_tables(plan, manifest, state, location=location, sequence=sequence)
        rows_written = self._evaluate_views(
            plan, state, location=location, parent=manifest, emit=emit
        )
        return state, rows_written

    def _stored_rows_read(self, plan: ChangePlan, manifest: Manifest) -> int:
        """The rows of checkpointed state the views to evaluate scan, counted by Spark (a Delta
        count: from its file statistics where it has them). Tables reset empty are not read."""
        reader = self.views(plan.new)
        kept = frozenset(_kept_state(plan, manifest))
        reads = stored_reads(new=plan.new, views=plan.views_to_evaluate, kept=kept)
        return sum(reader.raw(name, manifest.state[name]).count() for name in reads)

    def _reset_tables(
        self,
        plan: ChangePlan,
        manifest: Manifest,
        state: dict[str, StateRecord],
        *,
        location: str,
        sequence: int,
    ) -> None:
        """New and modified tables start empty; tables whose change only appends nullable
        columns keep their rows (NULL in the new columns)."""
        program = plan.new
        for name in program.tables:
            if name in state and name not in plan.tables_to_evolve:
                continue
            path = f"{location}/tables/{name}@{sequence}"
            schema = table_schema(program.tables[name])
            kept = StateRecord(kind="table", path=path, version=0, rows=0)
            if name in plan.tables_to_evolve:
                old = manifest.state[name]
                frame = storage.read_delta(self.spark, self.uri(old.path), old.version, schema)
                for field in schema.fields:
                    if field.name not in frame.columns:
                        frame = frame.withColumn(field.name, F.lit(None).cast(field.dataType))
                # a Z-set's weights too: without them, every insert and delete it stored of a
                # key or a deleted row was a live row again
                weights = [column(WEIGHT)] if old.layout == "zset" else []
                frame = frame.select(*[column(f.name) for f in schema.fields], *weights)
                kept = kept.model_copy(update={"rows": old.rows, "layout": old.layout})
            else:
                frame = self.spark.createDataFrame([], schema)
            frame.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(
                self.uri(path)
            )
            version = storage.delta_version(self.spark, self.uri(path))
            state[name] = kept.model_copy(update={"version": version})

    def _evaluate_views(
        self,
        plan: ChangePlan,
        state: dict[str, StateRecord],
        *,
        location: str,
        parent: Manifest,
        emit: bool,
    ) -> int:
        """Evaluate the new and modified views from stored state, in dependency order, into
        `location`, and with `emit` then replace (or append to) their outputs (as the
        sequence after `parent`, no attempt of which wrote before its time); returns the rows
        written. No output is touched before every view is evaluated: a view that fails (its
        SQL, its rows) leaves the outputs as the last checkpoint left them."""
        program, todo = plan.new, plan.views_to_evaluate
        sequence = parent.sequence + 1
        reader = self.views(program)
        rows_written = 0
        kind = "bootstrap" if emit else "preview"
        self.report(f"{kind}-start", views=len(todo), change_id=plan.change_id)
        for index, name in enumerate(todo, start=1):
            view = program.views[name]
            path = f"{location}/views/{name}@{sequence}"
            with semantics.evaluating(view, version=self.runtime_version):
                record = self._write_whole(reader, view, state, path)
            state[name] = record
            rows = record.rows or 0
            rows_written += rows
            self.report(f"{kind}-view", view=name, done=index, total=len(todo), rows=rows)
        if emit and self.outputs_on_bootstrap != "silent":
            for name in todo:
                self._send_contents(reader, plan, name, state[name], parent=parent)
        return rows_written

    def _send_contents(
        self,
        reader: Views,
        plan: ChangePlan,
        name: str,
        record: StateRecord,
        *,
        parent: Manifest,
    ) -> None:
        """A bootstrapped view's contents to its outputs (as the sequence after `parent`):
        replacing theirs, or appended."""
        view = plan.new.views[name]
        if not view.connectors:
            return
        contents = reader.contents(name, record).withColumn("weight", F.lit(1))
        for connector in view.connectors:
            output = make_output(
                connector,
                pipeline=self._writer(parent.incarnation),
                bootstrap=plan.change_id,
                since=parent.created_at,
            )
            if self.outputs_on_bootstrap == "replace":
                output.replace(self.spark, contents, sequence=parent.sequence + 1)
            else:
                output.emit(self.spark, contents, sequence=parent.sequence + 1)

    # -- queries -----------------------------------------------------------------------------

    def query(
        self, program: Program, manifest: Manifest, sql: str, *, limit: int = MAX_QUERY_ROWS
    ) -> Answer:
        """The query's columns, its first `limit` rows, and whether it has more (only
        `limit` + 1 rows are ever collected)."""
        readable, limit = materialized(program), row_limit(limit)
        checked = check_query(sql, relations=readable)
        then = "then query again"  # stored state gone is lost data, as a step says it
        try:
            self.views(program).register(manifest.state, tuple(sorted(readable)))
        except SpindleError:
            raise
        except Exception as error:
            lost = self._lost(manifest, error, then=then)
            if lost is None:
                raise
            raise lost from None
        try:
            frame = self.spark.sql(checked.spark_sql)
            columns = answer_columns(frame.columns, sql=sql)
            rows = rows_of(frame, limit=limit + 1)
        except SpindleError:
            raise
        except Exception as error:  # a file lost under the query, else the query's own failure
            lost = self._lost(manifest, error, then=then)
            if lost is not None:
                raise lost from None
            raise query_failed(sql, str(error).splitlines()[0], readable) from None
        return Answer(
            columns=columns,
            rows=tuple(plain(row.asDict(recursive=True)) for row in rows[:limit]),
            truncated=len(rows) > limit,
        )


def _missing(name: str, record: StateRecord, error: BaseException, *, then: str) -> SpindleError:
    """A file a relation's stored state names is gone: data lost outside Spindle, which every
    later read of the relation would fail on."""
    return SpindleError(
        reason="StateFileMissing",
        message=f"A file of {name}'s stored state at {record.path} is missing "
        f"({semantics.cause(error)}): something outside Spindle deleted it (a bucket lifecycle "
        f"rule, a manual cleanup, another tool's vacuum). Restore it from a backup of the "
        f"storage, {then}.",
        details={"relation": name, "path": record.path},
    )


def _appended(spark: SparkSession, rows: DataFrame, uri: str, record: StateRecord) -> StateRecord:
    """Append `rows` to a table's Delta state: its record after, the row count from the
    commit's own metrics (no count job). Rows of none (files of a header only) make no
    commit: the latest commit's count is then an earlier step's, not this one's."""
    rows.write.format("delta").mode("append").save(uri)
    version, written = storage.last_write(spark, uri)
    if version == record.version:
        written = 0
    return record.model_copy(update={"version": version, "rows": (record.rows or 0) + written})


def _in_order(frame: DataFrame, table: Table, position: int) -> DataFrame:
    """An input's frame as a change of `table`: its columns and `__w` (+1 when the input
    carries none); with a primary key also ORDER, after the connector's `position` (other
    tables never compute it)."""
    weight = column(WEIGHT) if WEIGHT in frame.columns else F.lit(1)
    selected = [*[column(c.name) for c in table.columns], weight.cast("bigint").alias(WEIGHT)]
    if table.primary_key:
        order = F.struct(F.lit(position).alias("connector"), column(ORDER).alias("record"))
        selected.append(order.alias(ORDER))
    return frame.select(*selected)


def _adhoc_connector(table: str, root: str) -> Any:
    from spindle.program import Connector, Direction

    path = storage.join(root, "inputs", table)
    return Connector(
        relation=table,
        name=ADHOC,
        direction=Direction.INPUT,
        transport="file_input",
        config={
            "transport": {"name": "file_input", "config": {"path": path}},
            "format": {"name": "json"},
        },
        comparable="",
    )


@dataclass(frozen=True)
class _Write:
    """A relation's new state being written in the background, and what to do with it on the
    step's thread once it is written (count the rows, report progress)."""

    future: futures.Future[StateRecord]
    then: Callable[[StateRecord], None]


@dataclass
class _Work:
    """What a step has done so far: the state and offsets it will commit."""

    sequence: int
    stats: StepStats
    state: dict[str, StateRecord]
    connectors: dict[str, ConnectorRecord]
    changes: dict[str, DataFrame] = field(default_factory=dict)
    """This step's consolidated change of each table and view that changed (Z-sets)."""
    cached: list[DataFrame] = field(default_factory=list)
    temps: list[str] = field(default_factory=list)
    """Temporary views the step's change queries registered, dropped when it ends."""
    writes: dict[str, _Write] = field(default_factory=dict)
    """Relations whose new state is still being written; `state` has their record before."""
    emits: list[futures.Future[None]] = field(default_factory=list)
    """Outputs' changes being written."""
    incarnation: str | None = None
    """The pipeline's incarnation (`Manifest.incarnation`), whose writer its outputs write as."""
    undone: dict[str, tuple[int, str]] = field(default_factory=dict)
    """A replay's Delta outputs whose commit of this sequence a bootstrap undid, or set out to
    undo: that commit's table version and writer (`CheckpointStore.undone_outputs`)."""

    @classmethod
    def after(cls, manifest: Manifest) -> _Work:
        sequence = manifest.sequence + 1
        state, connectors = dict(manifest.state), dict(manifest.connectors)
        return cls(
            sequence, StepStats(sequence), state, connectors, incarnation=manifest.incarnation
        )


class _After(Mapping[str, StateRecord]):
    """The state so far as a view's maintenance reads it: a relation whose new state is still
    being written is waited for (`settle`), and only when it is read."""

    def __init__(self, work: _Work, settle: Callable[[str], None]) -> None:
        self._work, self._settle = work, settle

    def __getitem__(self, name: str) -> StateRecord:
        self._settle(name)
        return self._work.state[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._work.state)

    def __len__(self) -> int:
        return len(self._work.state)


def refuse_unless_allowed(plan: ChangePlan) -> None:
    if not plan.bootstrap.allowed:
        raise SpindleError(
            reason=plan.bootstrap.error_code or "BootstrapRefused",
            message=plan.bootstrap.message or "The change cannot be bootstrapped.",
            details=dict(plan.bootstrap.details),
        )


def _kept_state(plan: ChangePlan, manifest: Manifest) -> dict[str, StateRecord]:
    """The checkpointed state the new program keeps: removed and modified objects' goes."""
    return {
        name: record
        for name, record in manifest.state.items()
        if name not in plan.state_to_discard and plan.new.relation(name) is not None
    }
