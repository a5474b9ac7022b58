"""Rows collected into Python as the session has them.

PySpark turns a TIMESTAMP into a Python value in the time zone of the process that collects it,
not in the session's (UTC, `runtime.session`): `spindle query` with `TZ=America/New_York`
showed a stored `2024-01-02 03:04:05` as `2024-01-01T22:04:05`. A TIMESTAMP_NTZ is turned into
its wall time as it is, so timestamps are cast to it (in UTC, the session's zone) first.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Row
from pyspark.sql.types import (
    ArrayType,
    DataType,
    MapType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from spindle.runtime.zsets import column


def _as_wall_time(kind: DataType) -> DataType:
    """`kind` with each TIMESTAMP in it (nested too) a TIMESTAMP_NTZ."""
    if isinstance(kind, TimestampType):
        return TimestampNTZType()
    if isinstance(kind, ArrayType):
        return ArrayType(_as_wall_time(kind.elementType), kind.containsNull)
    if isinstance(kind, MapType):
        key, value = _as_wall_time(kind.keyType), _as_wall_time(kind.valueType)
        return MapType(key, value, kind.valueContainsNull)
    if isinstance(kind, StructType):
        return StructType(
            [StructField(f.name, _as_wall_time(f.dataType), f.nullable) for f in kind.fields]
        )
    return kind


def collect(frame: DataFrame, *, limit: int) -> list[Row]:
    """The first `limit` rows of `frame`, timestamps as the session's (UTC) wall time."""
    if limit <= 0:
        return []
    kinds = [f.dataType for f in frame.schema.fields]
    wanted = [_as_wall_time(kind) for kind in kinds]
    if wanted != kinds:  # by position: a frame may have two columns of one name
        names = frame.columns
        numbered = frame.toDF(*[f"_{i}" for i in range(len(names))])
        cast = [column(f"_{i}").cast(kind) for i, kind in enumerate(wanted)]
        frame = numbered.select(*cast).toDF(*names)
    return frame.limit(limit).collect()
