"""Input and output connectors, in Feldera's JSON shape, as a registry keyed by transport name.

Inputs return new rows and a new offset; offsets are opaque JSON stored in the checkpoint, and
must not grow with history. `file_input` keeps a modification-time mark plus the files within
`late_arrival_seconds` of it (`runtime.file_offsets`); `delta_table_input` the Delta version.

What an input returns: a DataFrame with the table's columns, an order column `__o` (`ORDER`:
a later change has a larger value), and optionally an integer column `__w` (`WEIGHT`): +n for
a row inserted n times, -n for one deleted. An input without `__w` is insert-only. File inputs
read their format as `program.formats` validated it (JSON `insert_delete`, a CSV or Parquet
weight or operation column), and fail with `InvalidInputRecord` on the first record that says
neither insert nor delete, before anything is ingested. `delta_table_input` reads only the
commits after its offset: the files they added (from the Delta log) when they only added rows,
or the change data feed (`__w` from `_change_type`) when one of them removed or rewrote rows;
without the feed that is `DeltaInputNotAppendOnly`. An input whose storage refuses to be listed
or read (no such bucket, no permission, a file where its directory should be) is
`InputUnreadable`, naming the connector, the location and the cause; a location that does not
exist yet is an input with nothing new. A file Spark cannot read where the step evaluates the
rows (lazily, after `poll`: corrupt, half written, gone) is `InputUnreadable` too, naming the
connector and the file (`unreadable_file`, which the engine asks).

Outputs receive changes (the view's columns plus `weight`: +1 insert, -1 delete) under a step
sequence number, so replaying a step rewrites the same files or Delta transaction instead of
duplicating them; on bootstrap, outputs Spindle owns can have their contents replaced. A write
the output's storage refuses (a file where its directory should be, no permission, a bucket
that does not exist) is `OutputUnwritable`, naming the connector, the location and the cause.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import json
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol
from urllib.parse import unquote

from py4j.protocol import Py4JJavaError
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    ByteType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

from spindle.checkpoint.blobs import place
from spindle.errors import SpindleError
from spindle.program import Connector
from spindle.program.formats import (
    OPERATIONS,
    InputFormat,
    format_name,
    input_format,
    output_update_format,
)
from spindle.program.formats import invalid_record as _invalid_record
from spindle.program.locations import location
from spindle.program.transports import TRANSPORTS, whole_number
from spindle.program.types import declared_for
from spindle.runtime import file_offsets, json_keys, semantics, storage
from spindle.runtime.change_sql import WEIGHT
from spindle.runtime.zsets import column

EXTENSIONS = {"json": "jsonl", "csv": "csv", "parquet": "parquet"}
LATE_ARRIVAL_SECONDS = 60
ORDER = "__o"
"""An input's order column: a later change has a larger value (file, then line; Delta commit,
then deletes before inserts). Tables with a primary key apply a key's changes in this order."""
_FILE_BITS = 40
"""ORDER is `file index << 40 | position in the file`: up to 2^40 records per file."""


def _location(connector: Connector) -> str:
    """Where a connector's transport reads or writes: the first of its location keys set
    (`program.transports.TRANSPORTS`)."""
    found = location(connector)
    if found is not None:
        return storage.spark_uri(found)
    keys = TRANSPORTS[connector.transport].location
    raise SpindleError(
        reason="InvalidConnectors",
        message=f"Connector {connector.key}: transport config needs '{keys[0]}'.",
        details={"connector": connector.key},
    )


class Input(Protocol):
    @property
    def connector(self) -> str:
        """The connector's key, for error messages."""
        ...

    @property
    def location(self) -> str:
        """Where its files are (a directory, a bucket prefix, a Delta table)."""
        ...

    def poll(self, spark: SparkSession, offset: Any) -> tuple[DataFrame | None, Any]:
        """New rows since `offset`, and the offset after them (None: nothing new)."""
        ...

    def replay(self, spark: SparkSession, before: Any, wanted: Any) -> DataFrame:
        """Exactly the rows between offsets `before` and `wanted` (a crashed step's intent)."""
        ...


class Output(Protocol):
    def emit(self, spark: SparkSession, changes: DataFrame, *, sequence: int) -> None: ...

    def replace(self, spark: SparkSession, contents: DataFrame, *, sequence: int) -> None: ...

    def discard(
        self,
        spark: SparkSession,
        *,
        sequence: int,
        undoing: Callable[[int, str], None],
        renamed: bool = False,
    ) -> list[str]: ...

    def discard_abandoned(
        self, spark: SparkSession, *, sequence: int, bootstrap: str | None = None
    ) -> list[str]: ...

    def finish_undo(
        self, spark: SparkSession, *, since: datetime.datetime
    ) -> tuple[str, str] | None: ...


@dataclass(frozen=True)
class FileInput:
    connector: str
    """The connector's key, for error messages."""
    path: str
    schema: StructType
    format: InputFormat
    max_files: int | None = None
    """Flow control (`max_files_per_step`): at most this many new files per step."""
    late_ms: int = LATE_ARRIVAL_SECONDS * 1000
    """`late_arrival_seconds`: how far behind the newest ingested file's modification time a
    file may appear and still be ingested (`runtime.file_offsets`)."""
    not_null: tuple[str, ...] = ()
    """The table's NOT NULL columns: a row inserted without a value in one fails the step."""
    key: tuple[str, ...] = ()
    """The table's primary key: a delete names a row by it, so it needs only those."""

    @property
    def location(self) -> str:
        return self.path

    def poll(self, spark: SparkSession, offset: Any) -> tuple[DataFrame | None, Any]:
        now = int(time.time() * 1000)
        files, after = file_offsets.plan(
            file_offsets.FileOffset.parse(offset),
            self._listed(spark),
            window=self.late_ms,
            limit=self.max_files,
            now=now,
        )
        if not files:
            return None, offset
        self._nameable(files)
        return self.read(spark, files), after.to_json()

    def _nameable(self, files: list[str]) -> None:
        """Refuse a file whose name has a colon (`2024-01-01T10:00:00.json`): Hadoop lists it
        but cannot read a path with one (`URISyntaxException`), which was `InputUnreadable`
        retried forever, advising to wait for a writer that had finished."""
        for file in files:
            name = unquote(file.rsplit("/", 1)[-1])
            if ":" in name:
                raise SpindleError(
                    reason="InputFileNameUnsupported",
                    message=f"Input connector {self.connector}: the file {file} has a ':' in "
                    "its name, which Spark's file systems cannot read. Rename it (a '-' or "
                    "'_' for each ':'); nothing of this step was ingested.",
                    details={"connector": self.connector, "file": file},
                )

    def replay(self, spark: SparkSession, before: Any, wanted: Any) -> DataFrame:
        files = file_offsets.between(
            file_offsets.FileOffset.parse(before),
            file_offsets.FileOffset.parse(wanted),
            self._listed(spark),
            window=self.late_ms,
        )
        return self.read(spark, files)

    def _listed(self, spark: SparkSession) -> list[tuple[str, int]]:
        """The input's files; a listing its storage refuses is `InputUnreadable`."""
        with _refused("read", self.connector, self.path):
            return storage.list_status(spark, self.path)

    def read(self, spark: SparkSession, files: list[str]) -> DataFrame:
        """The files' records, in order (ORDER), as rows with `__w` when the format carries
        deletes; a record that says neither insert nor delete fails the read (`_check`)."""
        if self.format.update_format == "insert_delete":
            return self._insert_delete(spark, files)
        return self._rows(spark, files)

    def _insert_delete(self, spark: SparkSession, files: list[str]) -> DataFrame:
        """JSON lines `{"insert": row}` / `{"delete": row}` (blank lines skipped); a line that
        does not parse as the table's columns fails the step, as in `_rows`, never a row of
        NULLs."""
        names = [f.name for f in self.schema.fields]
        lines = _positioned(spark, spark.read.text, files)
        envelope = StructType(
            [
                StructField("insert", self.schema),
                StructField("delete", self.schema),
                StructField(CORRUPT, StringType()),
            ]
        )
        record = json_keys.respelled(F.col("value"), names, nested=True)
        parsed = lines.where(F.trim("value") != "").withColumn(
            "__e", F.from_json(record, envelope, {"columnNameOfCorruptRecord": CORRUPT})
        )
        inserted, deleted = F.col("__e.insert").isNotNull(), F.col("__e.delete").isNotNull()
        alone = _one_value(record, envelope)

        def missing(name: str) -> Column:
            inserts = inserted & F.col(f"__e.insert.{name}").isNull()
            deletes = deleted & F.col(f"__e.delete.{name}").isNull()
            return inserts | deletes if self._names(name) else inserts

        self._check(
            parsed,
            "line",
            (
                (F.col(f"__e.{CORRUPT}").isNotNull() | ~alone, _malformed("json", rows=False)),
                (inserted & deleted, 'has both "insert" and "delete"; give one per line'),
                (
                    ~inserted & ~deleted,
                    'is neither {"insert": {...}} nor {"delete": {...}}',
                ),
                (
                    _names_none(F.get_json_object(record, "$.insert"), names)
                    | _names_none(F.get_json_object(record, "$.delete"), names),
                    "has a row with no key that names a column (a row of NULLs); spell its "
                    "keys as the table's columns",
                ),
                *((missing(c), _null_in(c)) for c in self.not_null),
            ),
        )
        weight = F.when(inserted, F.lit(1)).otherwise(F.lit(-1)).cast("bigint")
        row = F.coalesce("__e.insert", "__e.delete")
        return parsed.select(*[row[n].alias(n) for n in names], weight.alias(WEIGHT), ORDER)

    def _rows(self, spark: SparkSession, files: list[str]) -> DataFrame:
        """Rows (JSON, CSV, Parquet), with a weight or operation column when configured.

        A JSON or CSV record that does not parse as the table's columns (not JSON, a value not
        of its column's type, a CSV quote never closed) is never a row of NULLs: the rows fail
        where they are read, quoting the record (`_whole`). A CSV record with more or fewer
        fields than the table has columns (a trailing comma, extra columns) is read as Spindle
        always read it: missing fields NULL, extra ones dropped."""
        names, fmt = [f.name for f in self.schema.fields], self.format
        extra = fmt.change_column
        fields = self._fields()
        reader = spark.read.format(fmt.name)
        guarded = fmt.name in ("json", "csv")
        if guarded:
            fields.append(StructField(CORRUPT, StringType()))
            reader = reader.option("mode", "PERMISSIVE").option(
                "columnNameOfCorruptRecord", CORRUPT
            )
        if fmt.name == "csv":
            reader = reader.option("header", str(fmt.header).lower()).option("sep", fmt.delimiter)
            reader = reader.options(**CSV_QUOTING).option("multiLine", "true")
            if fmt.header and fmt.header_checked:  # Spark checks each file's header
                reader = reader.option("enforceSchema", "false")
        if fmt.name == "json":
            records = _json_records(spark, files, StructType(fields))
        else:
            records = _positioned(spark, reader.schema(StructType(fields)).load, files)
        if guarded:
            # a change column's own check says more (`_check`: "has no integer weight")
            rechecked = names if fmt.name == "csv" else None
            records = _whole(records, self.connector, fields=rechecked)
        if extra is None:
            located = records.select(*[column(n) for n in names], ORDER, "__file")
            return self._complete(located).drop("__file")
        if fmt.weight_column is not None:
            weight = column(extra)
            problem = f"has no integer weight in column '{extra}'"
        else:
            value = F.lower(F.trim(column(extra)))
            weight = F.lit(None)
            for operation, sign in OPERATIONS.items():
                weight = F.when(value == operation, F.lit(sign)).otherwise(weight)
            problem = f"has no operation ({' or '.join(OPERATIONS)}) in column '{extra}'"
        unit = "row" if fmt.name == "parquet" else "record"
        self._check(records, unit, ((weight.isNull(), problem),))
        signed: Column = weight.cast("bigint").alias(WEIGHT)
        selected = [*[column(n) for n in names], signed, F.col(ORDER), F.col("__file")]
        return self._complete(records.select(*selected).where(F.col(WEIGHT) != 0)).drop("__file")

    def _names(self, column_name: str) -> bool:
        """Whether a delete needs a value for the column: it names its row by the primary
        key, or, without one, by the whole row."""
        return column_name in self.key or not self.key

    def _complete(self, rows: DataFrame) -> DataFrame:
        """`rows` failing the job that reads them on a row without a value in a NOT NULL
        column (a delete: in a key column), in the same pass, naming the file and the row's
        place in it (`unreadable_file` reads the error)."""
        if not self.not_null:
            return rows
        missing = _first_missing(rows, self.not_null, always=self._names)
        said = F.concat_ws(
            "\t",
            F.lit(INCOMPLETE),
            F.lit(self.connector),
            F.col("__file"),
            F.col(ORDER).cast("string"),
            missing,
        )
        return _failing(rows, missing.isNotNull(), said)

    def _fields(self) -> list[StructField]:
        """The table's columns, and the weight or operation column its format adds."""
        extra = self.format.change_column
        kinds = {self.format.weight_column: LongType(), self.format.op_column: StringType()}
        return [*self.schema.fields, *([StructField(extra, kinds[extra])] if extra else [])]

    def bad_lines(self, spark: SparkSession, file: str) -> tuple[int, list[int]] | None:
        """How many lines of a JSON `file` do not parse as the table's columns, and the first
        of them (`SHOWN`), read again only once one failed a step; None when the file cannot
        be read again, or is not JSON rows."""
        if self.format.name != "json" or self.format.update_format == "insert_delete":
            return None
        try:
            lines = _positioned(spark, spark.read.text, [file])
            schema = StructType([*self._fields(), StructField(CORRUPT, StringType())])
            bad = _parsed_json(lines, schema).where(column(CORRUPT).isNotNull())
            first = [_in_file(int(r[ORDER])) for r in bad.orderBy(ORDER).limit(SHOWN).collect()]
            return (bad.count() if len(first) == SHOWN else len(first)), first
        except Exception:  # the error stands without the count: it is the record that matters
            return None

    def _check(
        self, records: DataFrame, unit: str, problems: tuple[tuple[Column, str], ...]
    ) -> None:
        """Fail, before anything is ingested, on the first record (in input order) that has
        one of `problems`."""
        which: Column = F.lit(None)
        for index, (condition, _) in reversed(list(enumerate(problems))):
            which = F.when(condition, F.lit(index)).otherwise(which)
        found = records.withColumn("__p", which).where(F.col("__p").isNotNull())
        first = found.orderBy(ORDER).select("__file", ORDER, "__p").limit(1).collect()
        if not first:
            return
        row = first[0]
        raise _invalid_record(
            connector=self.connector,
            file=unquote(row["__file"]),
            unit=unit,
            number=_in_file(int(row[ORDER])),
            problem=problems[int(row["__p"])][1],
        )


def _json_records(spark: SparkSession, files: list[str], schema: StructType) -> DataFrame:
    """JSON lines as `schema`'s fields (blank lines skipped), `ORDER` by line, keys matched
    with columns as Feldera matches them (`json_keys`); a record that does not parse keeps its
    own text in `CORRUPT`, as Spark's JSON reader keeps it."""
    return _parsed_json(_positioned(spark, spark.read.text, files), schema)


def _parsed_json(lines: DataFrame, schema: StructType) -> DataFrame:
    """`_json_records` of positioned lines of text; a line that is not one record
    (`_one_value`: `{"id": 1}{"id": 2}` was the record 1, the record 2 dropped without a
    word), or a record none of whose keys names a column (`_names_none`), is corrupt."""
    names = [f.name for f in schema.fields if f.name != CORRUPT]
    lines = lines.where(F.trim("value") != "")
    record = json_keys.respelled(F.col("value"), names)
    parsed = F.from_json(record, schema, {"columnNameOfCorruptRecord": CORRUPT})
    corrupt = F.when(
        F.col(f"__r.{CORRUPT}").isNotNull()
        | ~_one_value(record, schema)
        | _names_none(record, names),
        F.col("value"),
    )
    return lines.withColumn("__r", parsed).select(
        *[F.col("__r").getField(n).alias(n) for n in names],
        corrupt.alias(CORRUPT),
        "__file",
        ORDER,
    )


def _names_none(record: Column, names: list[str]) -> Column:
    """Whether a JSON object (keys respelled as the columns, `json_keys`) has no key that
    names a column: Feldera's `{"insert": {...}}` on a connector without `update_format`, or
    keys of another spelling (`userId` for `user_id`), were each ingested as a row of NULLs,
    a delete as one more insert."""
    keys = F.json_object_keys(record)
    known = F.array_intersect(keys, F.array(*[F.lit(n) for n in names]))
    return keys.isNotNull() & (F.size(known) == 0)


def _one_value(line: Column, schema: StructType) -> Column:
    """Whether a line of JSON text is one value of `schema`: read as a JSON array of it (`[`
    line `]`), it holds one element. Spark's parser reads a line's first value and drops what
    follows it (`{...}{...}`, `{...},{...}`, `{...} trailing`)."""
    whole = F.from_json(F.concat(F.lit("["), line, F.lit("]")), ArrayType(schema))
    return whole.isNotNull() & (F.size(whole) == 1)


CSV_QUOTING = {"quote": '"', "escape": '"'}
"""CSV as RFC 4180 and Feldera write it: a quote inside a quoted field is written twice.
Spark's default escape is a backslash: a doubled quote was read as two quotes, and a quote
was written as a backslash and a quote, which other readers split the field at."""
CSV_VERBATIM = {"ignoreLeadingWhiteSpace": "false", "ignoreTrailingWhiteSpace": "false"}
"""Spark's CSV writer trims values by default: `'  spaced  '` was written `spaced`."""


TIMESTAMPS_WRITTEN = {
    "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
    "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
}
"""Timestamps as JSON and CSV outputs write them, to the microsecond Spark keeps (its default
wrote milliseconds: `.123456` came out `.123`)."""
JSON_WRITTEN = {"ignoreNullFields": "false", **TIMESTAMPS_WRITTEN}

WRITTEN = re.compile(rf"[0-9]{{8,}}-(changes|snapshot)-[0-9]+\.({'|'.join(EXTENSIONS.values())})")
"""The names of the files a file output writes (`<sequence>-<changes|snapshot>-<n>.<ext>`)."""


CORRUPT = "__corrupt"
"""The column a JSON reader fills with a record that does not parse as the table's columns
(Spark's `columnNameOfCorruptRecord`)."""


def _first_missing(
    rows: DataFrame, columns: Sequence[str], *, always: Callable[[str], bool]
) -> Column:
    """The first of `columns` a row has no value in, else NULL: one `always` names is needed
    by every row, another only by an insert (a weight above 0, where rows carry one)."""
    inserts = F.col(WEIGHT) > 0 if WEIGHT in rows.columns else F.lit(True)
    missing: Column = F.lit(None)
    for name in reversed(columns):
        lacks = column(name).isNull() & (F.lit(True) if always(name) else inserts)
        missing = F.when(lacks, F.lit(name)).otherwise(missing)
    return missing


def _failing(rows: DataFrame, failed: Column, said: Column) -> DataFrame:
    """`rows`, failing the job that reads them with `said` on a row where `failed` holds: in
    the same pass, no check of its own."""
    return rows.where(F.when(failed, F.raise_error(said)).isNull())


INCOMPLETE = "spindle-incomplete-record"
"""How `FileInput._complete` starts the error it raises (then the connector, the file, the
row's ORDER and the column), for `unreadable_file` to find."""


def _null_in(name: str) -> str:
    return (
        f"has no value for '{name}', which is NOT NULL: give every row one (or declare the "
        "column without NOT NULL)"
    )


MALFORMED = "spindle-malformed-record"
"""How `_whole` starts the error it raises (then the connector, the file and the record's
start, tab-separated), for `unreadable_file` to find."""
QUOTED = 200
"""How much of a record that does not parse its error quotes."""


def _malformed(fmt: str, *, rows: bool = True) -> str:
    """What is wrong with a record that does not parse (`rows`: records are rows, not
    Feldera's `{"insert": ...}` lines)."""
    return (
        f"is not valid {fmt.upper()} for the table's columns (a value not of its column's "
        "type, or not a record at all"
        + (
            ", or a record with no key that names a column: Feldera's "
            '{"insert": {...}} lines need "update_format": "insert_delete" in the '
            "connector's format config)"
            if fmt == "json" and rows
            else ")"
        )
    )


def _whole(records: DataFrame, connector: str, *, fields: list[str] | None = None) -> DataFrame:
    """`records` failing the job that reads them on a record that did not parse (`CORRUPT`),
    quoting it, in the same pass: a check of its own would read every file once more, every
    step, and one that reads only some columns would not see a value of the others fail to
    parse (Spark parses only the columns a query reads). The record is quoted; its line is
    found only once it failed (`_line_of`): numbering every record (`ORDER`) needs a sort by
    file that only primary-key tables pay for.

    CSV (`fields`: the table's columns, first in the file): Spark also calls a record corrupt
    when it has more or fewer fields than the table; such a record fails only if one of
    `fields` has text that did not read as its column's type (the record is read again as
    text, only when it is corrupt)."""
    bad = column(CORRUPT).isNotNull()
    if fields is not None:
        text = ", ".join(f"`{name.replace('`', '``')}` STRING" for name in fields)
        raw = F.from_csv(column(CORRUPT), text)
        lost = [column(name).isNull() & raw.getField(name).isNotNull() for name in fields]
        bad = bad & functools.reduce(lambda a, b: a | b, lost)
    quoted = F.substring(column(CORRUPT), 1, QUOTED)
    said = F.concat_ws("\t", F.lit(MALFORMED), F.lit(connector), F.col("__file"), quoted)
    return _failing(records, bad, said)


def _line_of(spark: SparkSession, file: str, quoted: str) -> int | None:
    """The number of the first line of `file` that `_whole` quotes as `quoted` (its first
    `QUOTED` characters), read again only once a record failed, so the error can say where it
    is; None when the file cannot be read again or no line matches (it changed meanwhile)."""
    try:
        lines = _positioned(spark, spark.read.text, [file])
        found = (
            lines.where(F.substring("value", 1, QUOTED) == F.lit(quoted))
            .select(F.min(ORDER).alias("first"))
            .collect()
        )
    except Exception:  # the error stands without its line: it is the record that matters
        return None
    first = found[0]["first"] if found else None
    return None if first is None else _in_file(int(first))


def _others(bad: tuple[int, list[int]] | None, first: int | None) -> str:
    """What a message adds of the other lines of a file that do not parse: `; 3 more lines
    of it do not parse either (7, 9, 12)`."""
    if bad is None:
        return ""
    count, lines = bad
    others = [n for n in lines if n != first]
    more = count - (1 if first in lines else 0)
    if more <= 0:
        return ""
    listed = ", ".join(str(n) for n in others) + (", ..." if more > len(others) else "")
    lines_do = "lines of it do" if more > 1 else "line of it does"
    return f"; {more} more {lines_do} not parse either ({listed})"


SHOWN = 5
"""Lines of a file that does not parse an `InvalidInputRecord` names besides the first."""


def _in_file(order: int) -> int:
    """A record's 1-based position in its file, from its ORDER (`_positioned`)."""
    return order & ((1 << _FILE_BITS) - 1)


def _positioned(
    spark: SparkSession, read: Callable[[list[str]], DataFrame], files: list[str]
) -> DataFrame:
    """`files` as `read` reads them, each the file it names (Spark reads a path with `[`, `{`,
    `*` or `?` as a glob: `b[12].json` read `b1.json` again, and its own rows never), with
    ORDER (file index in `files`, then the 1-based position in its file) and `__file` (the
    file's path, URL-encoded as Spark names it)."""
    frame = read([storage.literal(f) for f in files])
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    encoded = [jvm.org.apache.hadoop.fs.Path(f).toUri().toString() for f in files]
    path = F.col("_metadata.file_path")
    index = F.array_position(F.array(*[F.lit(e) for e in encoded]), path)
    located = (
        frame.withColumn("__file", path)
        .withColumn("__i", index)
        .withColumn("__b", F.col("_metadata.file_block_start"))
        .withColumn("__m", F.monotonically_increasing_id())
    )
    position = F.row_number().over(Window.partitionBy("__i").orderBy("__b", "__m"))
    order = F.shiftleft(F.col("__i"), _FILE_BITS) + position
    return located.withColumn(ORDER, order.cast("bigint"))


@dataclass(frozen=True)
class DeltaInput:
    connector: str
    """The connector's key, for error messages."""
    uri: str
    schema: StructType
    not_null: tuple[str, ...] = ()
    """The table's NOT NULL columns: a row the source adds without a value in one fails the
    step (`InvalidInputRecord`), as a file's row does."""
    key: tuple[str, ...] = ()
    """The table's primary key: every row needs values in it, a delete too (it names its row
    by them)."""

    @property
    def location(self) -> str:
        return self.uri

    def poll(self, spark: SparkSession, offset: Any) -> tuple[DataFrame | None, Any]:
        before = -1 if offset is None else int(offset)
        with _refused("read", self.connector, self.uri):
            latest = storage.delta_version(spark, self.uri)
        if latest < before:  # it waited without a word, then read the new table's later
            raise SpindleError(  # commits only, skipping its first ones
                reason="DeltaInputReset",
                message=f"Input connector {self.connector}: the Delta table {self.uri} is at "
                + ("no version (it is gone)" if latest < 0 else f"version {latest}")
                + f", and this connector read it up to version {before}: it was deleted or "
                "created again, and what changed since cannot be told. Reset the connector "
                "(rename it) to read the table again from its first version, or restore the "
                "table.",
                details={"connector": self.connector, "uri": self.uri, "version": before},
            )
        if latest == before:
            return None, before
        return self.replay(spark, before, latest), latest

    def replay(self, spark: SparkSession, before: Any, wanted: Any) -> DataFrame:
        """What versions `before` (exclusive; None or -1: the whole table) to `wanted` changed:
        the rows their commits added, read from those commits' files; or, when a commit in the
        range removed or rewrote rows, the change data feed with `__w` (-1 for deletes)."""
        with _refused("read", self.connector, self.uri):
            return self._complete(self._changes(spark, before, wanted))

    def _complete(self, rows: DataFrame) -> DataFrame:
        """`rows` failing the job that reads them on one without a value in a NOT NULL column,
        naming the column (`unreadable_file` reads the error)."""
        needed = tuple(dict.fromkeys((*self.key, *self.not_null)))
        if not needed:
            return rows
        # a delete or an update's old row needs its key only
        missing = _first_missing(rows, needed, always=lambda name: name in self.key)
        said = F.concat_ws("\t", F.lit(INCOMPLETE), F.lit(self.connector), F.lit(self.uri), missing)
        return _failing(rows, missing.isNotNull(), said)

    def _changes(self, spark: SparkSession, before: Any, wanted: Any) -> DataFrame:
        end = int(wanted)
        start = -1 if before is None else int(before)
        source = storage.read_delta(spark, self.uri, end, self.schema)
        columns = self._columns(source.schema)
        unordered = F.lit(0).cast("bigint").alias(ORDER)  # inserts only: order is moot
        if start < 0:
            return source.select(*columns, unordered)
        commits = {v: self._commit(spark, v) for v in range(start + 1, end + 1)}
        rewrites = [v for v, actions in commits.items() if any(_removes(a) for a in actions)]
        if rewrites:
            changes = self._change_feed(spark, start, end, rewrites)
            return changes.select(*columns, WEIGHT, ORDER)
        added = [(v, a["add"]) for v, actions in commits.items() for a in actions if _adds(a)]
        return self._read_added(spark, added, source.schema).select(*columns, ORDER)

    def _columns(self, source: StructType) -> list[Column]:
        """The table's columns read from the source's: each by name, cast to the table's type
        where that holds every value of the source's (INT into BIGINT); a column the source
        lacks, or has of a type the table's cannot hold, is `DeltaInputSchemaMismatch`."""
        found = {f.name.lower(): f for f in source.fields}
        columns: list[Column] = []
        for wanted in self.schema.fields:
            field = found.get(wanted.name.lower())
            if field is None or not widens(field.dataType, wanted.dataType):
                has = (
                    "has no such column"
                    if field is None
                    else (f"has it as {field.dataType.simpleString().upper()}")
                )
                raise SpindleError(
                    reason="DeltaInputSchemaMismatch",
                    message=f"Input connector {self.connector}: the table declares column "
                    f"'{wanted.name}' as {wanted.dataType.simpleString().upper()}, and the "
                    f"Delta table {self.uri} {has}. Declare the column as the source has it "
                    "(or a type that holds all its values), or change the source.",
                    details={"connector": self.connector, "uri": self.uri, "column": wanted.name},
                )
            columns.append(column(field.name).cast(wanted.dataType).alias(wanted.name))
        return columns

    def _commit(self, spark: SparkSession, version: int) -> list[dict[str, Any]]:
        actions = storage.commit_actions(spark, self.uri, version)
        if actions is None:
            raise SpindleError(
                reason="DeltaInputVersionExpired",
                message=f"Version {version} of the Delta table {self.uri} is no longer in its "
                "log (log retention removed it), so the changes since this connector's offset "
                "cannot be read. Raise the source's delta.logRetentionDuration, and reset the "
                "connector (rename it) to read the table again from its current version.",
                details={"uri": self.uri, "version": version},
            )
        return actions

    def _read_added(
        self, spark: SparkSession, added: list[tuple[int, dict[str, Any]]], schema: StructType
    ) -> DataFrame:
        """The rows of the files the commits added, each with its commit's version as ORDER
        (a primary key's later commit wins, as with the change data feed), partition values
        from the log; `schema`: the source table's at the last of those commits."""
        from delta.tables import DeltaTable

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
        data = StructType([f for f in schema.fields if f.name not in partitions])
        frame = spark.createDataFrame([], schema).withColumn(ORDER, F.lit(0).cast("bigint"))
        groups: dict[tuple[int, str], list[dict[str, Any]]] = {}
        for version, add in added:
            values = json.dumps(add.get("partitionValues") or {}, sort_keys=True)
            groups.setdefault((version, values), []).append(add)
        for (version, values), adds in groups.items():
            files = [storage.join(self.uri, unquote(a["path"])) for a in adds]
            part = spark.read.schema(data).parquet(*files)
            for partition, value in json.loads(values).items():
                kind = schema[partition].dataType
                part = part.withColumn(partition, F.lit(value).cast(kind))
            frame = frame.unionByName(part.withColumn(ORDER, F.lit(version).cast("bigint")))
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
        inserted = kind.isin("insert", "update_postimage")
        weight = F.when(inserted, F.lit(1)).otherwise(F.lit(-1))
        order = F.col("_commit_version") * 2 + inserted.cast("bigint")  # deletes first
        return changes.withColumn(WEIGHT, weight).withColumn(ORDER, order.cast("bigint"))


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


_REFUSALS = {
    "read": (
        "InputUnreadable",
        "Input connector {connector} cannot read {location}",
        "Make the location a directory (or bucket prefix) the driver may list and read, with "
        "the storage credentials the pipeline gives it. Nothing was ingested: a run started "
        "once it can read ingests from where this one stopped.",
    ),
    "read a file": (
        "InputUnreadable",
        "Input connector {connector} cannot read its file {location}",
        "If the file is corrupt or not in the connector's format, replace it (with a new file, "
        "written whole) or move it out of the input's location; if its writer had not finished "
        "it, a retry reads it whole. Nothing was ingested: the step is done again from the last "
        "checkpoint.",
    ),
    "read a table": (
        "InputUnreadable",
        "Input connector {connector} cannot read the Delta table's file {location}",
        "A file the table's log still names is gone or unreadable: restore it; if a VACUUM of "
        "the source removed it, raise the source's delta.deletedFileRetentionDuration and "
        "reset the connector (rename it) to read the table again from its current version. "
        "Nothing was ingested: the step is done again from the last checkpoint.",
    ),
    "write": (
        "OutputUnwritable",
        "Output connector {connector} cannot write to {location}",
        "Make the location a directory (or bucket prefix) the driver may create and write. "
        "Nothing was committed: a run started once it can write does the work again and "
        "delivers its changes once.",
    ),
}
"""What storage refusing a connector's read or write is: reason, what failed, what to do."""


Action = Literal["read", "read a file", "read a table", "write"]


@contextlib.contextmanager
def _refused(action: Action, connector: str, location: str) -> Iterator[None]:
    """An input's read (listing it, its Delta log, its files) or an output's write; its
    storage refusing it is the action's reason in `_REFUSALS`, naming the connector, the
    location and the cause (a row a view's SQL cannot evaluate stays `SqlRuntimeError`)."""
    try:
        yield
    except (Py4JJavaError, AnalysisException, OSError) as error:
        if semantics.data_error(error) is not None:
            raise
        if action == "write" and _ROWS_UNWRITABLE.search(str(error)):
            raise SpindleError(
                reason="OutputSchemaMismatch",
                message=f"Output connector {connector} cannot write the view's rows to "
                f"{location}: {semantics.cause(error)}. No retry writes them: change the "
                "view's columns (cast or leave out that column) or the output (another format, "
                "or a new location for a Delta table whose columns differ).",
                details={"connector": connector, "uri": location},
            ) from error
        raise _refusal(action, connector, location, error) from error


_ROWS_UNWRITABLE = re.compile(
    r"\[(UNSUPPORTED_DATA_TYPE_FOR_DATASOURCE|DELTA_FAILED_TO_MERGE_FIELDS"
    r"|DELTA_METADATA_MISMATCH|DELTA_SCHEMA_CHANGE|_LEGACY_ERROR_TEMP_DELTA_0007)[\].]"
)
"""Spark's and Delta's errors for rows an output cannot hold (a type its format has no
form for, columns the Delta table has otherwise): a retry fails the same way."""


_PARQUET_TYPE = re.compile(
    r"SchemaColumnConvertNotSupportedException: column: \[(?P<column>[^\]]*)\], "
    r"physicalType: (?P<physical>\w+)"
)
"""How Spark says a Parquet file's column is not of the type the table declares."""
PARQUET_TYPES = {
    "INT32": "INT",
    "INT64": "BIGINT",
    "FLOAT": "REAL",
    "DOUBLE": "DOUBLE",
    "BOOLEAN": "BOOLEAN",
    "BINARY": "VARCHAR",
}
"""The SQL type that holds each Parquet physical type's values, for what to declare when the
file's own schema cannot be read."""


def _file_type(spark: SparkSession, file: str, name: str) -> str | None:
    """The type to declare for column `name` as the Parquet file's schema has it (its logical
    type: a DECIMAL(6, 3) is an INT32 to Parquet), from its footer; None when unread."""
    try:
        fields = spark.read.parquet(storage.literal(file)).schema.fields
    except Exception:
        return None
    found = next((f.dataType for f in fields if f.name == name), None)
    return None if found is None else declared_for(found.simpleString())


def _parquet_type(
    spark: SparkSession, source: FileInput, file: str, found: re.Match[str]
) -> SpindleError:
    """`InvalidInputRecord` for a Parquet file whose column is of another type than the
    table's: the file is not wrong and no retry reads it otherwise (it was retried as a file
    half written, then called corrupt)."""
    name, physical, path = found["column"], found["physical"], unquote(file)
    declared = next((f.dataType for f in source.schema.fields if f.name == name), None)
    table = (declared_for(declared.simpleString()) if declared is not None else None) or (
        "another type"
    )
    has = _file_type(spark, path, name)
    instead = has or PARQUET_TYPES.get(physical)
    return _invalid_record(
        connector=source.connector,
        file=path,
        unit="column",
        problem=f"('{name}') holds "
        + (f"{has} values (Parquet {physical})" if has else f"Parquet {physical} values")
        + f", which the table's column of {table} does not read: declare the column "
        + (f"{instead}" if instead else "as the file has it")
        + ", or write the file with the column's type",
    )


def _refusal(action: Action, connector: str, location: str, error: BaseException) -> SpindleError:
    reason, failed, advice = _REFUSALS[action]
    return SpindleError(
        reason=reason,
        message=f"{failed.format(connector=connector, location=location)}: "
        f"{semantics.cause(error)}. {advice}",
        details={"connector": connector, "uri": location},
    )


MISSING_FEED = "DELTA_MISSING_CHANGE_DATA"
"""Delta's error for a change data feed read for versions it was not on for (read lazily, so
it fails the step's job: `unreadable_file` turns it into `DeltaInputNotAppendOnly`)."""


def _feed_turned_on_later(deltas: list[DeltaInput]) -> SpindleError:
    """A Delta source's commit after the offset removed or rewrote rows, and its change data
    feed, read for them, was turned on after that commit (Delta says which versions, not which
    table): the step failed as an internal error."""
    which = (
        f"Input connector {deltas[0].connector}: the Delta table {deltas[0].uri}"
        if len(deltas) == 1
        else "A delta_table_input's Delta table"
    )
    return SpindleError(
        reason="DeltaInputNotAppendOnly",
        message=f"{which} removed or rewrote rows (DELETE, UPDATE, MERGE or overwrite) after "
        "the connector's offset, and its change data feed was turned on only later, so "
        "Spindle cannot tell which rows left. Reset the connector (rename it) to read the "
        "table again from its current version.",
        details={"connectors": [d.connector for d in deltas]},
    )


def unreadable_file(
    spark: SparkSession, inputs: Iterable[Input], error: BaseException
) -> SpindleError | None:
    """`InputUnreadable` naming the connector and the file, when `error` is Spark failing to
    read a file of one of `inputs` as the step evaluated its rows (read lazily, after `poll`):
    a corrupt file, one not in the connector's format, one gone; a JSON or CSV record that does
    not parse (`_whole`) is `InvalidInputRecord`, quoting it and naming its line (no retry makes
    it parse). None for any other error."""
    sources = {source.connector: source for source in inputs}
    if MISSING_FEED in str(error):
        return _feed_turned_on_later([s for s in sources.values() if isinstance(s, DeltaInput)])
    match semantics.raised(error, MALFORMED):
        case [connector, file, *text] if isinstance(source := sources.get(connector), FileInput):
            quoted = "\t".join(text)
            number = _line_of(spark, unquote(file), quoted)
            return _invalid_record(
                connector=connector,
                file=unquote(file),
                problem=f"{_malformed(source.format.name)}: {quoted!r}"
                + (" (cut)" if len(quoted) >= QUOTED else "")
                + _others(source.bad_lines(spark, unquote(file)), number),
                unit="line",
                number=number,
            )
    match semantics.raised(error, INCOMPLETE):
        case [connector, file, order, name] if isinstance(
            source := sources.get(connector), FileInput
        ):
            return _invalid_record(
                connector=connector,
                file=unquote(file),
                problem=_null_in(name),
                unit="line" if source.format.name == "json" else "record",
                number=_in_file(int(order)),
            )
        case [connector, uri, name] if isinstance(sources.get(connector), DeltaInput):
            return SpindleError(
                reason="InvalidInputRecord",
                message=f"Connector {connector}: a row of the Delta table {uri} has no value "
                f"for '{name}', which is NOT NULL (or in the primary key). Nothing of this step "
                "was ingested: declare the column without NOT NULL (a key column must have "
                "values), or fix the source and reset the connector (rename it).",
                details={"connector": connector, "file": uri, "column": name},
            )
    failed = semantics.failed_file(error)
    if failed is None or semantics.data_error(error) is not None:
        return None
    nearest = sorted(sources.values(), key=lambda source: -len(source.location))
    for source in nearest:  # where locations nest, the innermost is the file's input
        if storage.within(failed, source.location):
            typed = _PARQUET_TYPE.search(str(error))
            if typed is not None and isinstance(source, FileInput):
                return _parquet_type(spark, source, failed, typed)
            header = semantics.csv_header_mismatch(error)
            if header is not None and isinstance(source, FileInput):
                return _invalid_record(
                    connector=source.connector,
                    file=failed,
                    unit="line",
                    number=1,
                    problem=f"is not a header naming the table's columns in order ({header}); "
                    'files without a header line need "header": false in the format\'s config, '
                    'and "header": true skips the first line whatever it holds',
                )
            action: Action = "read a file" if isinstance(source, FileInput) else "read a table"
            return _refusal(action, source.connector, failed, error)
    return None


@dataclass(frozen=True)
class FileOutput:
    connector: str
    path: str
    format: str
    update_format: str | None = None
    """None: each line is a row and its `weight`; `insert_delete`: `{"insert": row}` or
    `{"delete": row}` (JSON only, `program.formats.output_update_format`)."""

    def _lines(self, frame: DataFrame) -> DataFrame:
        """A JSON output's changes as its lines: `{..., "weight": 1}`, or Feldera's
        `{"insert": {...}}` / `{"delete": {...}}`, each NULL written as `null` (Spark's JSON
        writer left NULL fields out: a row of NULLs was `{"insert":{}}`, which an
        `insert_delete` input refuses)."""
        if self.update_format != "insert_delete":
            row = F.struct(*[column(c) for c in frame.columns])  # `a.b`, `0.5`: names
            return frame.select(F.to_json(row, JSON_WRITTEN).alias("value"))
        row = F.struct(*[column(c) for c in frame.columns if c != "weight"])
        as_json = {
            key: F.to_json(F.struct(row.alias(key)), JSON_WRITTEN) for key in ("insert", "delete")
        }
        line = F.when(column("weight") > 0, as_json["insert"]).otherwise(as_json["delete"])
        return frame.select(line.alias("value"))

    def _write(self, spark: SparkSession, frame: DataFrame, *, sequence: int, tag: str) -> None:
        staging = storage.join(self.path, "_spindle_staging", f"{sequence:08d}-{tag}")
        with _refused("write", self.connector, self.path):
            storage.delete(spark, staging)
            # a row's deletes before its inserts: a consumer that applies the file in order
            # by a key (Feldera, a Spindle table with a PRIMARY KEY) kept an update's new row
            # only where its -1 happened to come first (69 of 200 updated keys lost, measured)
            ordered = frame.coalesce(1).sortWithinPartitions(column("weight"))
            if self.format == "json":
                ordered.transform(self._lines).write.mode("overwrite").text(staging)
            else:
                writer = ordered.write.mode("overwrite").format(self.format)
                if self.format == "csv":
                    writer = writer.options(**CSV_QUOTING, **CSV_VERBATIM, **TIMESTAMPS_WRITTEN)
                writer.option("header", "true").save(staging)
            parts = [f for f in storage.list_files(spark, staging) if "/part-" in f]
            for index, part in enumerate(parts):
                target = storage.join(
                    self.path, f"{sequence:08d}-{tag}-{index}.{EXTENSIONS[self.format]}"
                )
                storage.move(spark, part, target)
            storage.delete(spark, staging)

    def emit(self, spark: SparkSession, changes: DataFrame, *, sequence: int) -> None:
        self._write(spark, changes, sequence=sequence, tag="changes")

    def discard(
        self,
        spark: SparkSession,
        *,
        sequence: int,
        undoing: Callable[[int, str], None],
        renamed: bool = False,
    ) -> list[str]:
        """Delete the changes a step of `sequence` wrote but never committed; returns them.
        (A replay writes the same files again, so `undoing` has nothing to record here; the
        files are named by sequence, whichever view or connector wrote them: `renamed`.)"""
        with _refused("write", self.connector, self.path):
            return storage.delete_matching(spark, self.path, f"{sequence:08d}-changes-")

    def discard_abandoned(
        self, spark: SparkSession, *, sequence: int, bootstrap: str | None = None
    ) -> list[str]:
        """Delete the changes a bootstrap that never committed appended for `sequence`, before
        a step or a bootstrap (`bootstrap`) of that sequence. They are named as a step's are,
        so a failed step's go too: its replay, or a bootstrap's retry, writes its own again.
        A bootstrap's replaced snapshot cannot be undone: the files it replaced are gone."""
        return self.discard(spark, sequence=sequence, undoing=lambda *_: None)

    def finish_undo(
        self, spark: SparkSession, *, since: datetime.datetime
    ) -> tuple[str, str] | None:
        """Nothing to finish: deleting a file takes no other writer's."""
        return None

    def replace(self, spark: SparkSession, contents: DataFrame, *, sequence: int) -> None:
        """Write `contents` as a snapshot, then delete the files Spindle wrote here before
        (`WRITTEN`): only those, directly in the directory. Every file under it went, a
        consumer's own and, for an output path above the pipeline's storage, its checkpoints.
        A consumer that lists the directory between the two sees both."""
        with _refused("write", self.connector, self.path):
            here = place(self.path)
            old = [f for f in storage.list_files(spark, self.path) if _wrote(f, here)]
            self._write(spark, contents, sequence=sequence, tag="snapshot")
            keep = f"{sequence:08d}-snapshot-"
            for file in old:
                if keep not in file:
                    storage.delete(spark, file)


def _wrote(file: str, directory: str) -> bool:
    """Whether `file` is one a file output writes (`WRITTEN`) directly in `directory` (as
    `place` gives it)."""
    parent, _, name = file.rpartition("/")
    return WRITTEN.fullmatch(name) is not None and place(parent) == directory


CLOCK_SKEW = datetime.timedelta(minutes=10)
"""How far apart the clocks of the drivers that wrote a Delta output's commits may be."""

UNDO_MARK = "spindle-undo:{version}-{latest}"
"""The `userMetadata` of Spindle's undo of a Delta output's commits `version` to `latest`: the
RESTORE to the version before, or the commit that empties the table when `version` is 0. Its
`readVersion` past `latest` says it took other writers' commits too, to be put back
(`DeltaOutput.finish_undo`). Undos marked before `latest` was are `spindle-undo:0` (an
emptying), or not marked (a RESTORE). The commit that gives a table an emptying left (at
version L, `DeltaOutput._emptied`) the next write's columns undoes nothing:
`spindle-undo:<L + 1>-<L>`."""


_UNDO_MARKED = re.compile(r"spindle-undo:([0-9]+)(?:-([0-9]+))?")


def _undo_marked(info: dict[str, Any]) -> tuple[int, int | None] | None:
    """The versions (first, latest) a commit marked as Spindle's undo (`UNDO_MARK`) undid;
    latest is None in an older mark, which named only the first."""
    found = _UNDO_MARKED.fullmatch(str(info.get("userMetadata") or ""))
    if found is None:
        return None
    return int(found[1]), None if found[2] is None else int(found[2])


def _restored_to(info: dict[str, Any]) -> int | None:
    """The version a Delta `RESTORE` commit restored its table to (None: another commit)."""
    version = str((info.get("operationParameters") or {}).get("version"))
    return int(version) if info.get("operation") == "RESTORE" and version.isdigit() else None


def _txns(actions: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """The (`txnAppId`, `txnVersion`) pairs of a Delta commit's actions."""
    return [
        (str(a["txn"].get("appId")), int(a["txn"].get("version", -1)))
        for a in actions
        if "txn" in a
    ]


def _as(writer: str, who: str, then: str = "/after/") -> bool:
    """Whether `writer` is `who`, or one of its later writers (`who` + `then` ...)."""
    return writer == who or writer.startswith(f"{who}{then}")


def _undoes(info: dict[str, Any], version: int) -> bool:
    """Whether a commit is Spindle's undo of `version` (`DeltaOutput.discard`)."""
    if version == 0:
        return (_undo_marked(info) or (None,))[0] == 0
    return _restored_to(info) == version - 1


@dataclass(frozen=True)
class DeltaOutput:
    connector: str
    uri: str
    writer: str
    """The steps' writer id, Delta's `txnAppId` (a bootstrap's is another, per change)."""
    undone: tuple[int, str] | None = None
    """The table version and the writer of this sequence's step commit that a bootstrap undid,
    or set out to undo (`CheckpointStore.undone_outputs`). Delta keeps an undone commit's
    `txnAppId` and `txnVersion`, and skips a later write of the same pair: a replay writes as
    `<writer>/after/<version>` instead."""
    attempts_since: datetime.datetime | None = None
    """For a bootstrap's writer (one per change), the time of the checkpoint it starts from:
    its earlier attempts wrote after it. A commit of theirs for this sequence may have been
    undone since, by another change's bootstrap or by a step (`discard_abandoned`), and this
    write must not be skipped then. No record says so: the table's log, read back to that
    time, does."""

    def _writing(self, spark: SparkSession, sequence: int) -> str:
        """The writer this write commits as (`undone`, `attempts_since`)."""
        if self.undone is not None:
            return self._replaying(spark)
        if self.attempts_since is not None:
            return self._rewriting(spark, sequence, since=self.attempts_since)
        return self.writer

    def emit(self, spark: SparkSession, changes: DataFrame, *, sequence: int) -> None:
        """Append `changes`; to a table Spindle's undo emptied (`_emptied`), after giving it
        their columns (`_take_columns`)."""
        with _refused("write", self.connector, self.uri):
            writer = self._writing(spark, sequence)
            latest = storage.delta_version(spark, self.uri)
            if self._emptied(spark, latest):
                self._take_columns(spark, changes.schema, latest=latest)
            append = changes.write.format("delta").mode("append")
            append = append.option("txnAppId", writer).option("txnVersion", sequence)
            try:
                append.save(self.uri)
            except (Py4JJavaError, AnalysisException) as error:
                # merged only when the view adds columns: merging always gave someone
                # else's table (or one whose view renamed a column) the view's beside its own
                if not _ROWS_UNWRITABLE.search(str(error)) or not self._grown(spark, changes):
                    raise
                append.option("mergeSchema", "true").save(self.uri)

    def _grown(self, spark: SparkSession, changes: DataFrame) -> bool:
        """Whether the rows only add columns to the table's (a view that gained one under an
        `append` or `silent` bootstrap): each of the table's columns is one of theirs, of the
        same type (names and nullability aside: Delta stores a table's types as nullable, where
        a view's `split(...)` is an array of non-null strings)."""

        def types(schema: StructType) -> dict[str, str]:
            return {f.name.lower(): f.dataType.simpleString().lower() for f in schema.fields}

        theirs = types(changes.schema)
        table = types(spark.read.format("delta").load(self.uri).schema)
        return all(theirs.get(name) == kind for name, kind in table.items())

    def _emptied(self, spark: SparkSession, latest: int) -> bool:
        """Whether the table at `latest` is as Spindle's undo of the commits that created it
        (`_undo` of version 0, done) left it (that undo, or RESTOREs back to it, or to the
        columns it took since): no rows, and the columns of an undone writer, whose program
        may have had others (a change since abandoned)."""
        version = latest
        info: dict[str, Any] = {}
        done = False
        while version > 0:
            info = storage.commit_info(spark, self.uri, version)
            back = _restored_to(info)
            first, last = _undo_marked(info) or (-1, None)
            done = last is None or info.get("readVersion", last) == last
            if back is not None and back < version:
                version = back
            elif last is not None and first == last + 1 and last < version and done:
                version = last  # the columns taken: no rows either
            else:
                break
        return version > 0 and _undoes(info, 0) and done

    def _take_columns(self, spark: SparkSession, schema: StructType, *, latest: int) -> None:
        """Give the table emptied at `latest` (`_emptied`) the columns of `schema`: an empty
        overwrite (which Delta commits only when they differ), marked as an undo of nothing
        (`UNDO_MARK`, `latest` + 1 to `latest`), so that one which took another writer's
        commit since is put back (`_put_back`, or `finish_undo` after a stop), and the write
        appends to their columns."""
        mark = UNDO_MARK.format(version=latest + 1, latest=latest)
        spark.createDataFrame([], schema).write.format("delta").mode("overwrite").option(
            "overwriteSchema", "true"
        ).option("userMetadata", mark).save(self.uri)
        columns = self._commit_after(spark, latest, lambda info: info.get("userMetadata") == mark)
        if columns is not None:  # none: the table had those columns, Delta committed nothing
            self._alone(spark, latest + 1, latest=latest, commit=columns)

    def discard(
        self,
        spark: SparkSession,
        *,
        sequence: int,
        undoing: Callable[[int, str], None],
        renamed: bool = False,
    ) -> list[str]:
        """Undo the changes a step of `sequence` committed to the table but never
        checkpointed: the table's latest commits, when they are that step's (this output's
        steps' writer, or with `renamed` any of this pipeline's: a first start's, whose views
        may have been renamed since; that sequence), as `_undo_latest` does, `undoing`
        recording the first one's version and writer before."""
        wanted = self._pipelines if renamed else self._steps
        return self._undo_latest(spark, sequence, wanted, undoing=undoing)

    def discard_abandoned(
        self, spark: SparkSession, *, sequence: int, bootstrap: str | None = None
    ) -> list[str]:
        """Undo what bootstraps that never committed (abandoned: the SQL went back, or on to
        another change) wrote for `sequence`, before a step or a bootstrap (`bootstrap`, its
        change id) of that sequence: the table's latest commits, when they are such
        bootstraps' (this output's bootstrap writers but the asking bootstrap's own, whose
        retry finds its write done), go with a `RESTORE` to the version before the first of
        them (emptied, when it created the table). A commit of another writer after them
        leaves the table as it is, as `discard` does."""

        def abandoned(writer: str) -> bool:
            _, found, change = writer.rpartition("/bootstrap/")  # a key may hold a "/"
            ours = self._pipelines(writer) and bool(found) and not self._steps(writer)
            return ours and change.split("/after/")[0] != bootstrap

        return self._undo_latest(spark, sequence, abandoned)

    def _undo_latest(
        self,
        spark: SparkSession,
        sequence: int,
        wanted: Callable[[str], bool],
        *,
        undoing: Callable[[int, str], None] | None = None,
    ) -> list[str]:
        """Undo the table's latest commits for `sequence` by `wanted` writers: restore it to
        the version before the first of them (emptied, when that commit created it), telling
        `undoing` that one's version and writer first (a replay after a crash here must know
        of the undo); returns what was undone. A commit of another writer after them leaves
        the table as it is, and so does one that lands between that check and the undo: the
        undo took it too, so the table is put back as it was before the undo, and nothing is
        undone."""
        found: tuple[int, str] | None = None  # the first of them: its version, its writer
        with _refused("write", self.connector, self.uri):
            latest = first = storage.delta_version(spark, self.uri)
            while first >= 0 and (ours := self._writer(spark, first, sequence, wanted)):
                found, first = (first, ours), first - 1
        if found is None:
            return []
        if undoing is not None:
            undoing(*found)
        if not self._undo_alone(spark, first + 1, latest=latest):
            return []
        versions = f"version {latest}" if first + 1 == latest else f"versions {first + 1}-{latest}"
        return [f"{self.uri} ({versions})"]

    def _steps(self, writer: str) -> bool:
        return _as(writer, self.writer)

    def _pipelines(self, writer: str) -> bool:
        """Whether `writer` is any of this pipeline's (incarnation's): any view's or
        connector's, its steps' or its bootstraps'."""
        return writer.startswith(f"{self.writer.removesuffix(f'/{self.connector}')}/")

    def _undo_alone(self, spark: SparkSession, version: int, *, latest: int) -> bool:
        """Undo the commits from `version` to `latest`, the latest the caller read (`_undo`);
        whether they were undone. Another writer's commit that landed since is taken by the
        undo: the table is then put back as it was, and nothing is undone."""
        with _refused("write", self.connector, self.uri):
            self._undo(spark, version, latest=latest)
            undo = self._commit_after(spark, latest, lambda info: _undoes(info, version))
            if undo is None:
                raise OSError(
                    f"{self.uri}: Spindle's undo after version {latest} is not in the log"
                )
            return self._alone(spark, version, latest=latest, commit=undo)

    def _alone(self, spark: SparkSession, version: int, *, latest: int, commit: int) -> bool:
        """Whether Spindle's `commit`, the undo of `version` to `latest` (`UNDO_MARK`), read
        `latest` only; if it took other writers' commits too, the table is put back."""
        read = int(storage.commit_info(spark, self.uri, commit).get("readVersion", latest))
        if read == latest:
            return True
        self._put_back(spark, version, latest=latest, undo=commit, read=read)
        return False

    def finish_undo(
        self, spark: SparkSession, *, since: datetime.datetime
    ) -> tuple[str, str] | None:
        """Finish Spindle's undo that took other writers' commits too when its driver stopped
        before it put them back (`_undo_alone`), looking back to `since` (the checkpoint's
        time: a driver of a later one went by here). When that undo is the table's latest
        commit, the table is restored to the version it read, with their rows and the ones it
        undid, as `_undo_alone` leaves it: `("output-put-back", what)`. When other commits
        followed it, a RESTORE would take theirs: the table is left as it is, and
        `("output-undo-unfinished", the versions it is without)` says so."""
        with _refused("write", self.connector, self.uri):
            latest = storage.delta_version(spark, self.uri)
            unfinished = self._unfinished_undo(spark, latest, since=since)
        if unfinished is None:
            return None
        undo, version, undid, read = unfinished
        if undo < latest:
            lost = f"version {read}" if undid + 1 == read else f"versions {undid + 1}-{read}"
            return "output-undo-unfinished", f"{self.uri} ({lost})"
        self._put_back(spark, version, latest=undid, undo=undo, read=read)
        return "output-put-back", f"{self.uri} (version {read})"

    def _unfinished_undo(
        self, spark: SparkSession, latest: int, *, since: datetime.datetime
    ) -> tuple[int, int, int, int] | None:
        """The latest undo, back to `since` (less `CLOCK_SKEW`), that read past the versions
        it undid and that no RESTORE since put back: (its version, the first and the last it
        undid, the version it read)."""
        oldest = (since - CLOCK_SKEW).timestamp() * 1000
        restored: set[int] = set()
        for undo in range(latest, 0, -1):
            info = storage.commit_info(spark, self.uri, undo)
            when = info.get("timestamp")
            if not info or (isinstance(when, int) and when < oldest):
                return None
            first, last = _undo_marked(info) or (-1, None)
            read = info.get("readVersion")
            if last is not None and isinstance(read, int) and read > last and read not in restored:
                return undo, first, last, read
            back = _restored_to(info)
            if back is not None:
                restored.add(back)
        return None

    def _put_back(self, spark: SparkSession, version: int, *, latest: int, undo: int,
                  read: int) -> None:  # fmt: skip
        """Restore the table to `read`, the version the undo (`undo`, of `version` to
        `latest`) read: it took the other writers' commits after `latest` too."""
        try:
            storage.restore(spark, self.uri, read)
            back = self._commit_after(spark, undo, lambda info: _restored_to(info) == read)
            if back is None:
                raise OSError(
                    f"{self.uri}: Spindle's RESTORE after version {undo} is not in the log"
                )
            again = int(storage.commit_info(spark, self.uri, back).get("readVersion", undo))
        except Exception as error:  # whatever refused it, their rows are out of the table
            raise self._changed_during_undo(
                version, latest=latest, lost=(latest + 1, read)
            ) from error
        if again != undo:  # and that took theirs since
            raise self._changed_during_undo(version, latest=latest, lost=(undo + 1, again))

    def _changed_during_undo(
        self, version: int, *, latest: int, lost: tuple[int, int]
    ) -> SpindleError:
        """The undo of `version` to `latest` (none, when `latest` is before `version`) took
        other writers' commits, and `lost` of them stay out of the table."""
        first, last = lost
        versions = f"version {first}" if first == last else f"versions {first} to {last}"
        doing = (  # an undo of nothing: the columns an emptied table took (`_take_columns`)
            "gave the table it had emptied the columns of its next write"
            if version > latest
            else f"undid its writes there from version {version} on (a step's or a "
            "bootstrap's that did not commit)"
        )
        return SpindleError(
            reason="OutputChangedDuringUndo",
            message=f"Output connector {self.connector}: other writers committed to the Delta "
            f"table {self.uri} while Spindle {doing}, and Spindle could not put all "
            f"their commits back: the rows of {versions} are not in the table. Write them "
            "again (DESCRIBE HISTORY shows what each version did), then restart the pipeline.",
            details={"connector": self.connector, "uri": self.uri, "lost": f"{first}-{last}"},
        )

    def _commit_after(
        self, spark: SparkSession, version: int, wanted: Callable[[dict[str, Any]], bool]
    ) -> int | None:
        """The first commit after `version` whose `commitInfo` is `wanted` (Spindle's own
        RESTORE or overwrite, which other writers' commits may precede); None if none is."""
        for later in range(version + 1, storage.delta_version(spark, self.uri) + 1):
            if wanted(storage.commit_info(spark, self.uri, later)):
                return later
        return None

    def _replaying(self, spark: SparkSession) -> str:
        """The writer of a step replayed after a bootstrap undid (or set out to undo) its
        commit: a new one if the table is without that commit now; if not (a crash cut the
        undo short, or the undo was put back), the commit's own, so Delta skips this write:
        its rows are there."""
        assert self.undone is not None
        version, writer = self.undone
        if self._without(spark, version, storage.delta_version(spark, self.uri)):
            return self._after(version)
        return writer

    def _writer(
        self, spark: SparkSession, version: int, sequence: int, wanted: Callable[[str], bool]
    ) -> str | None:
        """The writer that committed `version` for `sequence`, if it is `wanted`."""
        actions = storage.commit_actions(spark, self.uri, version) or []
        return next((w for w, v in _txns(actions) if v == sequence and wanted(w)), None)

    def _rewriting(self, spark: SparkSession, sequence: int, *, since: datetime.datetime) -> str:
        """A bootstrap's writer for `sequence`: the one of its latest commit for it (Delta
        skips the write, which stands), unless the table is without that commit now: then a
        new one, `<writer>/after/<version>`. The log is read back from the latest version to
        that commit, or to a commit older than `since` (less `CLOCK_SKEW`), or one of this
        output's writers' for an earlier sequence, or to the oldest commit the log holds."""
        latest = storage.delta_version(spark, self.uri)
        base = self.writer.rpartition("/bootstrap/")[0]  # the steps' writer; a key may hold it too
        oldest = (since - CLOCK_SKEW).timestamp() * 1000
        for version in range(latest, -1, -1):
            actions = storage.commit_actions(spark, self.uri, version)
            if actions is None:  # the log keeps no older commit either
                break
            txns = _txns(actions)
            own = next((w for w, v in txns if v == sequence and _as(w, self.writer)), None)
            if own is not None:
                return self._after(version) if self._without(spark, version, latest) else own
            when = storage.info_of(actions).get("timestamp")
            if isinstance(when, int) and when < oldest:
                break
            if any(v < sequence and _as(w, base, "/") for w, v in txns):
                break
        return self.writer

    def _after(self, version: int) -> str:
        return f"{self.writer}/after/{version}"

    def _undo(self, spark: SparkSession, version: int, *, latest: int) -> None:
        mark = UNDO_MARK.format(version=version, latest=latest)
        if version == 0:  # the step created the table: no version before it, so emptied
            empty = spark.read.format("delta").load(self.uri).limit(0)
            empty.write.format("delta").mode("overwrite").option("userMetadata", mark).save(
                self.uri
            )
        else:
            storage.restore(spark, self.uri, version - 1, note=mark)

    def _without(self, spark: SparkSession, version: int, latest: int) -> bool:
        """Whether the table at `latest` is without the commit of `version`: a later commit
        undid it (a RESTORE to a version before it, or the emptying marked as its undo), and
        no RESTORE to a version that holds it put it back. A commit the log no longer holds,
        or a RESTORE to a timestamp, counts as one that left the table's rows alone."""
        if latest < version:  # the table was made again since: without it
            return True
        without = {version: False}
        for later in range(version + 1, latest + 1):
            info = storage.commit_info(spark, self.uri, later)
            restored = _restored_to(info)
            if restored is not None:
                without[later] = restored < version or without.get(restored, False)
            else:
                first, last = _undo_marked(info) or (-1, None)
                emptied = first <= version <= (first if last is None else last)
                without[later] = without[later - 1] or emptied
        return without[latest]

    def replace(self, spark: SparkSession, contents: DataFrame, *, sequence: int) -> None:
        with _refused("write", self.connector, self.uri):
            writer = self._writing(spark, sequence)
            contents.write.format("delta").mode("overwrite").option(
                "overwriteSchema", "true"
            ).option("txnAppId", writer).option("txnVersion", sequence).save(self.uri)


_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)


def widens(source: DataType, target: DataType) -> bool:
    """Whether every value of `source` is a value of `target`: the same type, a wider
    integer, FLOAT into DOUBLE, a DECIMAL with as many digits on both sides of the point, an
    integer into a DECIMAL with room for it."""
    if source == target:
        return True
    if isinstance(source, _INTEGRAL) and isinstance(target, _INTEGRAL):
        return _INTEGRAL.index(type(source)) <= _INTEGRAL.index(type(target))
    if isinstance(source, FloatType) and isinstance(target, DoubleType):
        return True
    if isinstance(target, DecimalType):
        digits_of: dict[type[DataType], int] = {
            ByteType: 3,
            ShortType: 5,
            IntegerType: 10,
            LongType: 19,
        }
        digits = digits_of.get(type(source))
        if digits is not None:
            return target.precision - target.scale >= digits
        if isinstance(source, DecimalType):
            return (
                target.scale >= source.scale
                and target.precision - target.scale >= source.precision - source.scale
            )
    return False


def make_input(
    connector: Connector,
    schema: StructType,
    *,
    not_null: tuple[str, ...] = (),
    key: tuple[str, ...] = (),
) -> Input:
    """The input a connector reads through; `not_null` and `key`: the table's NOT NULL and
    primary key columns, which a file input's rows must have values for."""
    if connector.transport == "file_input":
        fmt = input_format(connector, columns=[f.name for f in schema.fields])
        limit = connector.config.get("max_files_per_step")  # not a count: no limit (warned)
        late = connector.config.get("late_arrival_seconds", LATE_ARRIVAL_SECONDS)
        if not whole_number(late, 0):
            raise SpindleError(
                reason="InvalidConnectors",
                message=f"Connector {connector.key}: late_arrival_seconds must be a whole number "
                f"of seconds, 0 or more (got {late!r}).",
                details={"connector": connector.key},
            )
        return FileInput(
            connector=connector.key,
            path=_location(connector),
            schema=schema,
            format=fmt,
            max_files=limit if whole_number(limit, 1) else None,
            late_ms=late * 1000,
            not_null=not_null,
            key=key,
        )
    if connector.transport == "delta_table_input":
        return DeltaInput(connector.key, _location(connector), schema, not_null=not_null, key=key)
    raise unsupported(connector)


def make_output(
    connector: Connector,
    *,
    pipeline: str,
    bootstrap: str | None = None,
    undone: tuple[int, str] | None = None,
    since: datetime.datetime | None = None,
) -> Output:
    """The output a step (or, given its change id and its checkpoint's time `since`, a
    bootstrap) writes through. A Delta output's writes are idempotent per (writer, sequence):
    a step's replay skips what its crashed attempt wrote. A bootstrap is another writer than
    the steps, one per change: it commits the sequence a failed step may have written to
    before it, and must not be skipped for that. A step replayed after a bootstrap undid its
    commit (`undone`: its table version and writer) is another writer again, and so is a
    bootstrap whose earlier attempt's commit was undone."""
    if connector.transport == "file_output":
        name, _ = format_name(connector)
        update = output_update_format(connector)
        return FileOutput(connector.key, _location(connector), name, update)
    if connector.transport == "delta_table_output":
        writer = f"{pipeline}/{connector.key}"
        if bootstrap is not None:
            writer = f"{writer}/bootstrap/{bootstrap}"
        return DeltaOutput(
            connector.key, _location(connector), writer, undone, attempts_since=since
        )
    raise unsupported(connector)


def unsupported(connector: Connector) -> SpindleError:
    return SpindleError(
        reason="UnsupportedConnector",
        message=f"Connector {connector.key} uses transport '{connector.transport}', which "
        "Spindle does not run; use file_input, delta_table_input, file_output or "
        "delta_table_output.",
        details={"connector": connector.key, "transport": connector.transport},
    )
