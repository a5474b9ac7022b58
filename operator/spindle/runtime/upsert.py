"""Tables with a PRIMARY KEY (Feldera's table semantics): a step's input applied key by key.

A positive weight upserts the row (replacing the key's row, if any), a negative one deletes the
key's row whatever its other columns hold (so a delete may carry the key columns only); a
delete of a key the table does not hold does nothing. A key's changes apply in input order
(`connectors.ORDER`, after the connector's position among the table's inputs), so only its
last change decides its new row. The stored table stays one row per key (layout `rows`); the
change is a Z-set: -old for the key's replaced or deleted row, +new for its new row, nothing
when the two are equal.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from spindle.runtime import zsets
from spindle.runtime.change_sql import WEIGHT
from spindle.runtime.connectors import ORDER
from spindle.runtime.zsets import column

_LAST = "__last"


def latest(changes: DataFrame, *, key: Sequence[str]) -> DataFrame:
    """Each touched key's last change (by ORDER): its columns and `__w` (sign kept)."""
    last = Window.partitionBy(*[column(k) for k in key]).orderBy(F.col(ORDER).desc())
    ranked = changes.withColumn(_LAST, F.row_number().over(last))
    return ranked.where(F.col(_LAST) == 1).drop(_LAST, ORDER)


def change(*, last: DataFrame, state: DataFrame, key: Sequence[str]) -> DataFrame:
    """The consolidated Z-set the keys' last changes make to `state` (the table's rows)."""
    names = state.columns
    touched = last.select(*[column(k) for k in key])
    old = state.alias("s").join(touched.alias("t"), zsets.same_key("s", "t", key), "left_semi")
    new = last.where(column(WEIGHT) > 0).select(*[column(n) for n in names])
    return zsets.consolidate(zsets.weighted(old, -1).unionByName(zsets.weighted(new)))


def apply(spark: SparkSession, uri: str, delta: DataFrame, *, key: Sequence[str]) -> None:
    """Write a `change` into the stored table at `uri` in one Delta commit: the keys of its -1
    rows lose their row, its +1 rows are inserted."""
    from delta.tables import DeltaTable

    names = [c for c in delta.columns if c != WEIGHT]
    gone = delta.where(column(WEIGHT) < 0).select(*[column(k) for k in key]).distinct()
    for name in names:
        if name not in key:
            gone = gone.withColumn(name, F.lit(None).cast(delta.schema[name].dataType))
    source = gone.select(*[column(n) for n in names], F.lit(-1).alias(WEIGHT)).unionByName(
        delta.where(column(WEIGHT) > 0)
    )
    deleting = zsets.same_key("t", "s", key) & (F.col(f"s.{WEIGHT}") < 0)
    (
        DeltaTable.forPath(spark, uri)
        .alias("t")
        .merge(source.alias("s"), deleting)
        .whenMatchedDelete()
        .whenNotMatchedInsert(
            condition=F.col(f"s.{WEIGHT}") > 0,
            values={f"`{n}`": F.col(f"s.`{n}`") for n in names},
        )
        .execute()
    )
