"""Tables with a PRIMARY KEY (Feldera's table semantics): a step's input applied key by key.

A positive weight upserts the row (replacing the key's row, if any), a negative one deletes the
key's row whatever its other columns hold (so a delete may carry the key columns only); a
delete of a key the table does not hold does nothing. A key's changes apply in input order
(`connectors.ORDER`, after the connector's position among the table's inputs), so only its
last change decides its new row. The change is a Z-set: -old for the key's replaced or deleted
row, +new for its new row, nothing when the two are equal.

The stored table is a Z-set too (layout `zset`), and the change is appended to it: no stored
row is rewritten, so a step writes what its batch changed, whatever the table's size (a Delta
MERGE rewrote every file that held a touched key). The key's current row is what its stored
rows consolidate to; `runtime.compaction` consolidates the table once replaced rows are a third
of what it stores.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, Window
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
    """The consolidated Z-set the keys' last changes make to `state` (the table as a Z-set:
    the touched keys' stored rows, negated, cancel their current rows)."""
    names = [c for c in state.columns if c != WEIGHT]
    touched = last.select(*[column(k) for k in key])
    stored = state.alias("s").join(touched.alias("t"), zsets.same_key("s", "t", key), "left_semi")
    old = zsets.negated(stored.select(*[column(n) for n in [*names, WEIGHT]]))
    new = zsets.weighted(last.where(column(WEIGHT) > 0).select(*[column(n) for n in names]))
    return zsets.consolidate(old.unionByName(new))
