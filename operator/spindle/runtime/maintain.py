"""Keeping views up to date on Spark: whole evaluation, and a step's change, per maintenance mode.

`Views` serves one step (or one bootstrap). It reads stored relations in any layout, evaluates a
view whole (first start, bootstrap, a view whose stored layout its mode no longer matches), and
maintains it from its inputs' changes:

- incremental `Linear` views: the change is `change_sql.linear_change`, appended to the view's
  Z-set;
- incremental `Aggregate` views: the touched groups' running values are combined with the
  change's, MIN/MAX re-read where an extreme left, and merged back by group key;
- `recompute` views: evaluated whole, and the change is new minus old contents.

A change is consolidated before anything sees it: a view whose change is empty writes nothing
and wakes none of its dependents.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    StructType,
    _parse_datatype_string,
)
from sqlglot import exp

from spindle.checkpoint import StateRecord
from spindle.errors import SpindleError
from spindle.plan.maintenance import Aggregate, Linear, Shape, decompose, references
from spindle.program import Program, Table, View
from spindle.program.dependencies import relation_name
from spindle.program.queries import without_position
from spindle.runtime import change_sql, storage, zsets
from spindle.runtime.change_sql import COUNT, WEIGHT, Sources
from spindle.runtime.translate import table_ddl_schema, translated

LAYOUTS = {Linear: "zset", Aggregate: "groups"}
"""The stored layout each shape is maintained in; views that recompute keep `rows`."""

SPARK_REASONS = {
    "UNRESOLVED_COLUMN": "UnknownColumn",
    "UNRESOLVED_USING_COLUMN_FOR_JOIN": "UnknownColumn",
    "AMBIGUOUS_REFERENCE": "AmbiguousColumn",
    "UNRESOLVED_ROUTINE": "UnknownFunction",
    "MISSING_AGGREGATION": "UngroupedColumn",
    "MISSING_GROUP_BY": "UngroupedColumn",
    "NUM_COLUMNS_MISMATCH": "ColumnCountMismatch",
    "INVALID_WHERE_CONDITION": "MisplacedAggregate",
    "GROUP_BY_AGGREGATE": "MisplacedAggregate",
    "WINDOW_FUNCTION_NOT_ALLOWED_IN_CLAUSE": "MisplacedWindow",
    "WINDOW_FUNCTION_FRAME_NOT_ORDERED": "UnorderedWindow",
    "GROUP_BY_POS_OUT_OF_RANGE": "OrdinalOutOfRange",
    "ORDER_BY_POS_OUT_OF_RANGE": "OrdinalOutOfRange",
    "NESTED_AGGREGATE_FUNCTION": "NestedAggregate",
    "INVALID_AGGREGATE_FILTER": "NestedAggregate",
    "DATATYPE_MISMATCH": "TypeMismatch",
    "INCOMPATIBLE_COLUMN_TYPE": "TypeMismatch",
    "WRONG_NUM_ARGS": "WrongArgumentCount",
}
"""Spark's analysis error classes with a reason of their own (the program layer's, for what its
reference checks leave to Spark; `TypeMismatch` and `WrongArgumentCount` only Spark finds); any
other failure to evaluate a view is `UnsupportedSql`."""


def spark_said(error: BaseException) -> str:
    """The first line of Spark's message, without its position in the translated SQL (the
    view's line and column are said instead), as a sentence."""
    return f"{without_position(str(error).splitlines()[0])}."


_names = itertools.count()


def table_schema(table: Table) -> StructType:
    parsed = _parse_datatype_string(table_ddl_schema(table))
    assert isinstance(parsed, StructType)
    return parsed


def spark_types(frame: DataFrame) -> dict[str, str]:
    return {f.name: f.dataType.simpleString().upper() for f in frame.schema.fields}


@dataclass
class Analyzed:
    """A view's query as translated against the schemas of what it reads, and its shape."""

    sql: str
    shape: Shape | str
    relations: tuple[tuple[str, ...], ...] = ()
    """Per block, the relation each reference reads."""

    @property
    def layout(self) -> str:
        return "rows" if isinstance(self.shape, str) else LAYOUTS[type(self.shape)]


@dataclass(frozen=True)
class Maintained:
    """A view's consolidated change this step, and how to store its new state (given the path
    to write and the change's `zsets.Size`, the new record). `dirty`: the state must be
    written even when the change is empty (an aggregate's running values moved while its
    columns did not)."""

    change: DataFrame
    store: Callable[[str, zsets.Size], StateRecord]
    dirty: Callable[[], bool] = lambda: False


def _moved(running: DataFrame) -> bool:
    """Whether a change's running values (`change_sql.group_change`) move any group."""
    moved = [
        F.coalesce(zsets.column(c), F.lit(0)) != 0
        for c in running.columns
        if c.startswith(("__c", "__n", "__s", "__r"))
    ]
    moved += [zsets.column(c).isNotNull() for c in running.columns if c.startswith("__m")]
    condition = moved[0]
    for term in moved[1:]:
        condition = condition | term
    return running.where(condition).limit(1).count() > 0


@dataclass
class Views:
    spark: SparkSession
    program: Program
    uri: Callable[[str], str]
    _frames: dict[tuple[str, int], DataFrame] = field(default_factory=dict)
    _analyzed: dict[str, Analyzed] = field(default_factory=dict)
    cached: list[DataFrame] = field(default_factory=list)
    """Frames computed once and read several times this step; the caller unpersists them when
    the step ends (unpersisting one earlier would make Spark recompute the changes built on
    it)."""
    temps: list[str] = field(default_factory=list)
    """The temporary views this reader registered: the caller drops them when the step ends
    (each holds a plan, and a driver runs many thousands of steps)."""

    def cache(self, frame: DataFrame) -> DataFrame:
        self.cached.append(frame.persist())
        return frame

    # -- reading ---------------------------------------------------------------------------

    def raw(self, name: str, record: StateRecord) -> DataFrame:
        key = (self.uri(record.path), record.version)
        if key not in self._frames:
            relation = self.program.relation(name)
            schema = table_schema(relation) if isinstance(relation, Table) else StructType([])
            self._frames[key] = storage.read_delta(self.spark, key[0], record.version, schema)
        return self._frames[key]

    def zset(self, name: str, record: StateRecord) -> DataFrame:
        return zsets.as_zset(self.raw(name, record), record.layout)

    def contents(self, name: str, record: StateRecord) -> DataFrame:
        return zsets.as_contents(self.raw(name, record), record.layout)

    def temp(self, frame: DataFrame) -> str:
        name = f"__spindle_{next(_names)}"
        frame.createOrReplaceTempView(f"`{name}`")
        self.temps.append(name)
        return name

    def register(
        self, state: Mapping[str, StateRecord], names: tuple[str, ...]
    ) -> dict[str, dict[str, str]]:
        """Register relations' contents under their own names; returns their Spark schemas.
        Tables without state read as empty."""
        schemas: dict[str, dict[str, str]] = {}
        for name in names:
            record, relation = state.get(name), self.program.relation(name)
            if relation is None:
                continue
            if record is None or (isinstance(relation, View) and record.version < 0):
                if not isinstance(relation, Table):
                    continue
                frame = self.spark.createDataFrame([], table_schema(relation))
            else:
                frame = self.contents(name, record)
            frame.createOrReplaceTempView(f"`{name}`")
            schemas[name] = spark_types(frame)
        return schemas

    # -- analysis --------------------------------------------------------------------------

    def mode(self, name: str) -> str:
        """How the view was last maintained: incremental or recompute."""
        analyzed = self._analyzed.get(name)
        return "recompute" if analyzed is None or isinstance(analyzed.shape, str) else "incremental"

    def analyze(self, view: View, schemas: Mapping[str, Mapping[str, str]]) -> Analyzed:
        tree = translated(view, self.program, schemas)
        sql = tree.sql(dialect="spark")
        shape = decompose(tree)
        relations: list[tuple[str, ...]] = []
        if not isinstance(shape, str):
            blocks = shape.blocks if isinstance(shape, Linear) else (shape.block,)
            for block in blocks:
                names = tuple(self._resolve(t) for t in references(block))
                if any(n is None for n in names) or _has_star(block):
                    shape = "a query Spindle cannot rewrite for changes"
                    break
                relations.append(tuple(n for n in names if n is not None))
        analyzed = Analyzed(sql, shape, tuple(relations))
        self._analyzed[view.name] = analyzed
        return analyzed

    def _resolve(self, table: exp.Table) -> str | None:
        name = relation_name(table)
        for candidate in (name, name.lower()):
            if self.program.relation(candidate) is not None:
                return candidate
        return None

    def query(self, view: View, sql: str) -> DataFrame:
        try:
            frame = self.spark.sql(sql)
        except Exception as error:  # Spark's AnalysisException and friends
            condition = str(getattr(error, "getCondition", lambda: None)() or "")
            raise SpindleError(
                reason=SPARK_REASONS.get(condition.split(".")[0], "UnsupportedSql"),
                message=f"Spark cannot evaluate view '{view.name}' ({view.where}): "
                f"{spark_said(error)}",
                details=view.located,
            ) from None
        names = [c.lower() for c in frame.columns]
        repeated = next((c for i, c in enumerate(frame.columns) if c.lower() in names[:i]), None)
        if repeated is not None:  # one the program layer could not see (behind a star, say)
            raise SpindleError(
                reason="DuplicateColumn",
                message=f"View '{view.name}' ({view.where}) has two columns named "
                f"'{repeated}'; a view's columns are stored and read by name. Give one "
                "another name (... AS another_name)",
                details=view.located,
            )
        return frame

    # -- whole evaluation ------------------------------------------------------------------

    def evaluate(self, view: View, state: Mapping[str, StateRecord]) -> tuple[DataFrame, Analyzed]:
        """The view's whole stored form (in its mode's layout), from `state`."""
        schemas = self.register(state, view.dependencies)
        analyzed = self.analyze(view, schemas)
        shape = analyzed.shape
        if isinstance(shape, Aggregate):
            names = [n for block in analyzed.relations for n in block]
            frame = self.query(view, change_sql.group_rows(shape, names))
            return frame, analyzed
        frame = self.query(view, analyzed.sql)
        return (zsets.weighted(frame) if isinstance(shape, Linear) else frame), analyzed

    # -- changes ---------------------------------------------------------------------------

    def change(
        self,
        view: View,
        *,
        before: Mapping[str, StateRecord],
        after: Mapping[str, StateRecord],
        changes: Mapping[str, DataFrame],
    ) -> Maintained:
        """The view's consolidated change this step, and how to store it (given the path to
        write, returns the new record). `before`/`after`: state at the start and now."""
        old_record = before[view.name]
        # a step does not change a relation's columns: the schemas are read from the state
        # before it, so an input whose new state is still being written is not waited for
        schemas = self.register(before, view.dependencies)
        analyzed = self.analyze(view, schemas)
        shape = analyzed.shape
        if isinstance(shape, str) or analyzed.layout != old_record.layout:
            return self._recompute(view, old_record, after)
        sources = self._sources(analyzed, before, after, changes)
        if isinstance(shape, Linear):
            return self._linear(view, shape, analyzed, sources, old_record)
        made = self._aggregate(view, shape, analyzed, sources, old_record)
        return made if made is not None else self._recompute(view, old_record, after)

    def _sources(
        self,
        analyzed: Analyzed,
        before: Mapping[str, StateRecord],
        after: Mapping[str, StateRecord],
        changes: Mapping[str, DataFrame],
    ) -> Sources:
        names = {n for block in analyzed.relations for n in block}

        @functools.cache  # each state is opened at most once, and only if a term reads it
        def state(name: str, now: bool) -> DataFrame:
            return self._zset_or_empty(name, after if now else before)

        @functools.cache  # a LEFT JOIN reads its right side's new rows in several terms
        def present(name: str, now: bool) -> str:
            rows = zsets.consolidate(state(name, now))
            return self.temp(rows.where(zsets.column(WEIGHT) > 0))

        def define(sql: str, negated: bool) -> str:
            frame = self.spark.sql(sql)
            return self.temp(zsets.negated(frame) if negated else frame)

        return Sources(
            old=_Named(names, lambda n: self.temp(state(n, False))),
            new=_Named(names, lambda n: self.temp(state(n, True))),
            change={n: self.temp(changes[n]) if n in changes else None for n in names},
            present=present,
            define=define,
        )

    def _zset_or_empty(self, name: str, state: Mapping[str, StateRecord]) -> DataFrame:
        record = state.get(name)
        relation = self.program.relation(name)
        if record is None and isinstance(relation, Table):
            return zsets.weighted(self.spark.createDataFrame([], table_schema(relation)))
        assert record is not None
        return self.zset(name, record)

    def _recompute(
        self, view: View, old: StateRecord, after: Mapping[str, StateRecord]
    ) -> Maintained:
        """Evaluate whole; the change is new minus old contents. A view stored in another
        layout than its mode's is written even when its contents did not change."""
        whole, analyzed = self.evaluate(view, after)
        new_contents = zsets.as_contents(whole, analyzed.layout)
        old_contents = self.contents(view.name, old) if old.version >= 0 else None
        signed = [zsets.weighted(new_contents)]
        if old_contents is not None:
            signed.append(zsets.weighted(old_contents, -1))
        change = zsets.consolidate(zsets.union(signed))

        def store(path: str, size: zsets.Size) -> StateRecord:
            version, rows = write_whole(self.spark, whole, self.uri(path))
            return StateRecord(
                kind="view", path=path, version=version, rows=rows, layout=analyzed.layout
            )

        return Maintained(change, store, lambda: old.layout != analyzed.layout)

    def _linear(
        self, view: View, shape: Linear, analyzed: Analyzed, sources: Sources, old: StateRecord
    ) -> Maintained:
        sql = change_sql.linear_change(shape, analyzed.relations, sources)
        assert sql is not None
        change = zsets.consolidate(self.query(view, sql))
        if len(shape.blocks) > 1:
            # as stored: a UNION ALL's change reads only its changed inputs, and Spark names
            # and types a union's columns after its first term, so a change of the second
            # branch alone has that branch's names (`select v, k` where the view has `k, v`)
            # and can have narrower types (INT where the state's column is BIGINT): its
            # columns are the state's, by position. One block's change is as stored.
            stored = [f for f in self.raw(view.name, old).schema.fields if f.name != WEIGHT]
            visible = [c for c in change.columns if c != WEIGHT]
            change = change.select(
                *[
                    zsets.column(c).cast(f.dataType).alias(f.name)
                    for c, f in zip(visible, stored, strict=True)
                ],
                zsets.column(WEIGHT),
            )

        def store(path: str, size: zsets.Size) -> StateRecord:
            uri = self.uri(path)
            if path != old.path:
                copy_delta(self.spark, self.uri(old.path), old.version, uri)
            appended = change.coalesce(1) if size.rows <= ONE_FILE else change
            appended.write.format("delta").mode("append").save(uri)
            return old.model_copy(
                update={
                    "path": path,
                    "version": storage.last_commit(self.spark, uri)[0],
                    "rows": (old.rows or 0) + size.net,
                }
            )

        return Maintained(change, store)

    def _aggregate(
        self, view: View, shape: Aggregate, analyzed: Analyzed, sources: Sources, old: StateRecord
    ) -> Maintained | None:
        relations = analyzed.relations[0]
        pre_terms = change_sql.telescoped(
            shape.block,
            relations,
            sources,
            lambda b, names: change_sql.pre_aggregate(b, shape, names),
        )
        pre_frame = self.query(view, change_sql.union_all(pre_terms))
        pre = self.temp(pre_frame)
        exact = _sums_over(shape, pre_frame, (DecimalType,))
        watched = _sums_over(shape, pre_frame, (DecimalType, FloatType, DoubleType))
        delta = self.temp(self.query(view, change_sql.group_change(shape, pre, exact=exact)))
        old_state = self.raw(view.name, old)
        types = {f.name: f.dataType.simpleString() for f in old_state.schema.fields}
        combined = self.cache(  # the touched groups: read for the change, the write, the gone
            self.query(
                view,
                change_sql.combine(
                    shape,
                    old=self.temp(old_state),
                    change=delta,
                    types=types,
                    watched=watched,
                    exact=exact,
                ),
            )
        )
        combined = self._reread(
            view, shape, relations, sources, combined, exact=exact, watched=watched
        )
        argument_types = {
            int(f.name[len("__x") :]): f.dataType.simpleString()
            for f in pre_frame.schema.fields
            if f.name.startswith("__x")
        }
        output_types = [t for n, t in types.items() if not n.startswith("__")]
        made = change_sql.visible(
            shape, self.temp(combined), argument_types=argument_types, output_types=output_types
        )
        if made is None:
            return None
        sql, outputs = made
        state_columns = [f.name for f in old_state.schema.fields]
        new_state = self.query(view, sql).select(*[zsets.column(c) for c in state_columns])
        keys = [change_sql.key(j) for j in range(len(shape.keys))]
        touched = combined.select(*[zsets.column(k) for k in keys])
        old_touched = (
            old_state.alias("o").join(
                touched.alias("t"), on=zsets.same_key("o", "t", keys), how="left_semi"
            )
            if keys
            else old_state
        )
        visible_new = zsets.weighted(new_state.select(*[zsets.column(c) for c in outputs]))
        visible_old = zsets.weighted(old_touched.select(*[zsets.column(c) for c in outputs]), -1)
        change = zsets.consolidate(visible_new.unionByName(visible_old))
        gone = (
            combined.where(zsets.column(COUNT) <= 0).select(*[zsets.column(k) for k in keys])
            if shape.grouped
            else None
        )

        def store(path: str, size: zsets.Size) -> StateRecord:
            uri, current = self.uri(path), old.version
            if path != old.path:  # adopted: the copy's version, not the source's
                current = copy_delta(self.spark, self.uri(old.path), old.version, uri)
            write = GroupWrite(new_state, gone, keys, state_columns)
            version, rows = store_groups(
                self.spark, uri, write, current=(current, old.rows or 0), changed=size.rows
            )
            return old.model_copy(update={"path": path, "version": version, "rows": rows})

        return Maintained(change, store, lambda: _moved(self.spark.table(f"`{delta}`")))

    def _reread(
        self,
        view: View,
        shape: Aggregate,
        relations: tuple[str, ...],
        sources: Sources,
        combined: DataFrame,
        *,
        exact: frozenset[int],
        watched: frozenset[int],
    ) -> DataFrame:
        """Running values that adding the change cannot give, read again from the new state,
        for those groups only: MIN/MAX of the groups a value left (`__r*`), SUM/AVG whose
        running sum overflowed or is not finite (`__o*`, for the `watched` calls only: a view
        without MIN/MAX or such a sum costs no job here)."""
        reread: dict[str, list[str]] = {}  # each flag, and the running values it re-reads
        for i, call in enumerate(shape.calls):
            if call.argument is not None and call.kind in ("min", "max"):
                reread[change_sql.retracted(i)] = [change_sql.extreme(i)]
            elif i in watched:
                reread[change_sql.overflowed(i)] = [change_sql.total(i), change_sql.nonnull(i)]
        flags = list(reread)
        if not flags:
            return combined
        keys = [change_sql.key(j) for j in range(len(shape.keys))]
        any_flag = functools.reduce(lambda a, b: a | b, [zsets.column(f) > 0 for f in flags])
        touched = combined.where(any_flag).select(*[zsets.column(k) for k in keys]).persist()
        if touched.limit(1).count() == 0:
            touched.unpersist()
            return combined.drop(*flags)
        whole = change_sql.pre_aggregate(
            shape.block, shape, change_sql.whole(shape.block, relations, sources)
        )
        pre = self.query(view, whole.sql(dialect="spark"))
        if keys:
            pre = pre.alias("p").join(
                touched.alias("t"), on=zsets.same_key("p", "t", keys), how="left_semi"
            )
        # consolidated first: a row deleted since still has its +1 and -1 in a table's state,
        # and 6e35 + 6e35 - 6e35 overflows where the contents, 6e35, do not
        settled = self.temp(zsets.consolidate(pre))
        again = self.query(view, change_sql.group_change(shape, settled, exact=exact))
        again = again.select(
            *[zsets.column(k).alias(f"__right{k}") for k in keys],
            *[zsets.column(c).alias(f"__again{c}") for c in again.columns if c not in keys],
        )
        condition = zsets.same_key("r", "f", keys, right_prefix="__right")
        result = combined.alias("r").join(again.alias("f"), on=condition, how="left")
        for flag, values in reread.items():
            for value in values:
                chosen = F.when(
                    zsets.column(flag) > 0,
                    zsets.column(f"__again{value}").cast(combined.schema[value].dataType),
                ).otherwise(zsets.column(value))
                result = result.withColumn(value, chosen)
        result = result.select(*[zsets.column(c) for c in combined.columns])
        touched.unpersist()
        return self.cache(result.drop(*flags))


def _sums_over(
    shape: Aggregate, pre: DataFrame, kinds: tuple[type[DataType], ...]
) -> frozenset[int]:
    """The SUM and AVG calls over arguments of `kinds`: DECIMAL ones are summed exactly
    (`change_sql.group_change`); DECIMAL and floating-point ones are watched for a running
    sum that overflowed or is not finite (`change_sql.combine`)."""
    return frozenset(
        i
        for i, call in enumerate(shape.calls)
        if call.kind in ("sum", "avg")
        and isinstance(pre.schema[change_sql.argument(i)].dataType, kinds)
    )


class _Named(Mapping[str, str]):
    """The temporary view of each of `names`, registered the first time a term reads it."""

    def __init__(self, names: set[str], register: Callable[[str], str]) -> None:
        self._names, self._register = names, register
        self._made: dict[str, str] = {}

    def __getitem__(self, name: str) -> str:
        if name not in self._names:
            raise KeyError(name)
        if name not in self._made:
            self._made[name] = self._register(name)
        return self._made[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def _has_star(block: exp.Select) -> bool:
    return any(
        isinstance(o, exp.Star) or (isinstance(o, exp.Column) and isinstance(o.this, exp.Star))
        for o in block.expressions
    )


def write_whole(spark: SparkSession, frame: DataFrame, uri: str) -> tuple[int, int]:
    frame.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(uri)
    return storage.last_write(spark, uri)


def copy_delta(spark: SparkSession, source: str, version: int, target: str) -> int:
    """Copy state this pipeline may not write (adopted) into its own path first; returns the
    copy's version."""
    frame = spark.read.format("delta").option("versionAsOf", version).load(source)
    return write_whole(spark, frame, target)[0]


ONE_FILE = 100_000
"""A step's write of up to this many rows goes to one file. Shuffles leave a small change in
several partitions, and a file per partition per step would leave a table of tiny files that
every later read must open."""

SMALL_GROUPS = ONE_FILE
"""A group table up to this many rows is rewritten whole in one job (and one file); a larger
one MERGEs only the touched groups (a MERGE costs two jobs and a materialized source, whatever
its size)."""


@dataclass(frozen=True)
class GroupWrite:
    """A step's write to a group table: the touched groups' new state (`updates`), the groups
    now empty (`gone`), by `keys`, over the table's `columns`."""

    updates: DataFrame
    gone: DataFrame | None
    keys: list[str]
    columns: list[str]


def store_groups(
    spark: SparkSession, uri: str, write: GroupWrite, *, current: tuple[int, int], changed: int
) -> tuple[int, int]:
    """Apply `write`; `current`: the table's version and rows before; `changed`: the rows of the
    view's change (at least the groups it adds). Returns the table's new version and rows."""
    version, rows = current
    if rows > SMALL_GROUPS:
        _merge_groups(spark, uri, write)
        new_version, metrics = storage.last_commit(spark, uri)
        inserted = int(metrics.get("numTargetRowsInserted", 0))
        deleted = int(metrics.get("numTargetRowsDeleted", 0))
        return new_version, rows + inserted - deleted
    keys, columns = write.keys, write.columns
    fresh = write.updates.select(*[zsets.column(c) for c in columns])
    if keys:
        touched = fresh.select(*[zsets.column(k) for k in keys])
        if write.gone is not None:
            touched = touched.unionByName(write.gone.select(*[zsets.column(k) for k in keys]))
        touched = touched.select(*[zsets.column(k).alias(f"__right{k}") for k in keys])
        stored = spark.read.format("delta").option("versionAsOf", version).load(uri)
        kept = stored.alias("s").join(
            touched.alias("t"),
            on=zsets.same_key("s", "t", keys, right_prefix="__right"),
            how="left_anti",
        )
        fresh = kept.select(*[zsets.column(c) for c in columns]).unionByName(fresh)
    return write_whole(spark, fresh.coalesce(1) if rows + changed <= ONE_FILE else fresh, uri)


def _merge_groups(spark: SparkSession, uri: str, write: GroupWrite) -> None:
    """MERGE the touched groups: update or insert the live ones, delete the ones now empty."""
    from delta.tables import DeltaTable

    updates, gone, keys, columns = write.updates, write.gone, write.keys, write.columns
    target = DeltaTable.forPath(spark, uri)
    on = zsets.same_key("t", "u", keys)  # no keys (one global group): the one row matches
    marked = updates.withColumn("__gone", F.lit(False))
    if gone is not None:
        empty = {c: F.lit(None).cast(updates.schema[c].dataType) for c in columns if c not in keys}
        removed = gone.select(
            *[zsets.column(k) for k in keys], *[v.alias(c) for c, v in empty.items()]
        )
        removed = removed.select(*[zsets.column(c) for c in columns]).withColumn(
            "__gone", F.lit(True)
        )
        marked = marked.unionByName(removed)
    target.alias("t").merge(marked.alias("u"), on).whenMatchedDelete(
        condition="u.__gone"
    ).whenMatchedUpdate(set={f"`{c}`": f"u.`{c}`" for c in columns}).whenNotMatchedInsert(
        condition="NOT u.__gone", values={f"`{c}`": f"u.`{c}`" for c in columns}
    ).execute()
