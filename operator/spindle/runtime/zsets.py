"""Z-sets on Spark: rows with a `__w` weight, and the three layouts a relation is stored in.

A Z-set may hold the same row several times; its meaning is the sum of the weights per row.
`consolidate` sums them (dropping rows that cancel out), `expand` turns a Z-set back into the
bag of rows SQL sees. The layouts (`StateRecord.layout`):

- `rows`: the relation's contents, one row per row (tables, recomputed views);
- `zset`: a Z-set, appended to with each change (linear views);
- `groups`: one row per group, the view's columns plus `__`-prefixed running values
  (aggregate views).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spindle.runtime.change_sql import WEIGHT

RESERVED = "__"


def column(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


def same_key(left: str, right: str, keys: Sequence[str], *, right_prefix: str = "") -> Column:
    """Null-safe equality of `keys` between two aliased frames (a NULL key matches a NULL key,
    as GROUP BY and a primary key treat it). The right frame's key columns may carry a prefix
    that keeps them apart from the left's after the join. No keys: every row matches."""
    terms = [F.col(f"{left}.`{k}`").eqNullSafe(F.col(f"{right}.`{right_prefix}{k}`")) for k in keys]
    return reduce(lambda a, b: a & b, terms) if terms else F.lit(True)


def visible(frame: DataFrame) -> list[str]:
    """The relation's own columns (running values and weights are `__`-prefixed)."""
    return [c for c in frame.columns if not c.startswith(RESERVED)]


def weighted(frame: DataFrame, weight: int = 1) -> DataFrame:
    """Rows as a Z-set, each with `weight`."""
    return frame.select(
        *[column(c) for c in frame.columns], F.lit(weight).cast("bigint").alias(WEIGHT)
    )


def negated(frame: DataFrame) -> DataFrame:
    """A Z-set with every weight negated: added to the original, it cancels it."""
    return frame.withColumn(WEIGHT, -column(WEIGHT))


def consolidate(frame: DataFrame) -> DataFrame:
    """One row per distinct row, with its summed weight; rows that cancel out are gone."""
    names = [c for c in frame.columns if c != WEIGHT]
    summed = frame.groupBy(*[column(c) for c in names]).agg(F.sum(column(WEIGHT)).alias(WEIGHT))
    return summed.where(column(WEIGHT) != 0)


def held(change: DataFrame, state: DataFrame) -> DataFrame:
    """`change`, consolidated, with each row's deletes cut to the copies `state` (a Z-set of
    the same columns) holds: a relation never holds a row fewer than zero times, and deleting
    a row it does not hold does nothing (Feldera's table semantics). Only the deleted rows'
    stored copies are read (a semi-join on every column, NULL matching NULL)."""
    names = [c for c in change.columns if c != WEIGHT]
    net = consolidate(change)
    deleted = net.where(column(WEIGHT) < 0)
    stored = state.alias("s").join(deleted.alias("d"), same_key("s", "d", names), "left_semi")
    have = stored.groupBy(*[column(n) for n in names]).agg(
        F.greatest(F.sum(column(WEIGHT)), F.lit(0)).alias(_HAVE)
    )
    cut = deleted.alias("d").join(have.alias("h"), same_key("d", "h", names), "left")
    floor = -F.coalesce(F.col(f"h.{_HAVE}"), F.lit(0))
    kept = cut.select(
        *[F.col(f"d.`{n}`").alias(n) for n in names],
        F.greatest(F.col(f"d.{WEIGHT}"), floor).cast("bigint").alias(WEIGHT),
    )
    return net.where(column(WEIGHT) > 0).unionByName(kept.where(column(WEIGHT) != 0))


_HAVE = "__have"


def expand(frame: DataFrame) -> DataFrame:
    """The bag a Z-set means: each row as many times as its (positive) weight."""
    names = [c for c in frame.columns if c != WEIGHT]
    positive = consolidate(frame).where(column(WEIGHT) > 0)
    repeated = positive.withColumn(WEIGHT, F.explode(F.sequence(F.lit(1), column(WEIGHT))))
    return repeated.select(*[column(c) for c in names])


def as_zset(frame: DataFrame, layout: str) -> DataFrame:
    if layout == "zset":
        return frame
    if layout == "groups":
        frame = frame.select(*[column(c) for c in visible(frame)])
    return weighted(frame)


def as_contents(frame: DataFrame, layout: str) -> DataFrame:
    if layout == "zset":
        return expand(frame)
    if layout == "groups":
        return frame.select(*[column(c) for c in visible(frame)])
    return frame


def signed(frame: DataFrame) -> DataFrame:
    """A consolidated change as the rows outputs receive: each row |weight| times, with `weight`
    +1 (inserted) or -1 (deleted)."""
    names = [c for c in frame.columns if c != WEIGHT]
    weight = column(WEIGHT)
    # no helper column: a view's own `__n` was overwritten by the explode's counter; a count
    # beyond an INT fails (an INT cast of it wrapped, silently), as no array holds it anyway
    sign = F.signum(weight).cast("int")
    count = F.abs(weight)
    repeats = F.when(count <= 2147483647, count.cast("int")).otherwise(
        F.raise_error(F.lit("a change's weight is beyond 2147483647 rows"))
    )
    signs = F.array_repeat(sign, repeats)  # none for a weight of 0 (or NULL)
    return frame.select(*[column(c) for c in names], F.explode(signs).alias("weight"))


def union(frames: Iterable[DataFrame]) -> DataFrame:
    found = list(frames)
    result = found[0]
    for frame in found[1:]:
        result = result.unionByName(frame)
    return result


@dataclass(frozen=True)
class Size:
    """How big a Z-set is: its rows, their summed weight (the rows it adds to a relation) and
    their summed |weight| (the rows an output receives)."""

    rows: int
    net: int
    magnitude: int


def size(frame: DataFrame) -> Size:
    """A Z-set's `Size`, in one aggregation (one Spark job, which also fills a persisted
    frame's cache)."""
    weight = column(WEIGHT)
    found = frame.agg(F.count(F.lit(1)), F.sum(weight), F.sum(F.abs(weight))).first()
    if found is None:
        return Size(rows=0, net=0, magnitude=0)
    return Size(rows=int(found[0]), net=int(found[1] or 0), magnitude=int(found[2] or 0))
