"""Spark SQL for maintaining a view from changes: pure sqlglot rewrites of its translated query.

Every relation is read as a Z-set: its columns plus `__w`, the weight (+1 a row is in, -1 it
left). The runtime registers three temporary views per relation a step touches (its old state,
its new state, its change) and runs the SQL these functions build over them:

- `linear_change`: the change of a `Linear` view. For a block over references r1..rn, the change
  is the sum over i of the block with ri read as its change, r1..ri-1 as new and ri+1..rn as old
  state; the weight of a joined row is the product of its inputs' weights. A block `L LEFT JOIN
  R` is its inner join plus the unmatched rows U(L, R) (L rows no R row matches, R's columns
  NULL). U is linear in L, and a row of L can change between matched and unmatched only if some
  row of R's change matches it, so ΔU = U(ΔL, R') + U(L ⋉ ΔR, R') - U(L ⋉ ΔR, R): only the L
  rows the change of R touches are read again.
- `group_rows`: an `Aggregate`'s per-group running values (`__k*` keys, `__c` row count, `__s*`
  sums, `__n*` non-null counts, `__m*` minima/maxima) evaluated by Spark over whole inputs.
- `pre_aggregate` + `group_change`: the same running values over a change, weighted; `combine`
  adds them to the old ones; `visible` turns running values back into the view's columns.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp

from spindle.plan.maintenance import AGGREGATES, Aggregate, Call, Linear, references

WEIGHT = "__w"
COUNT = "__c"


def _id(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def _col(name: str, table: str | None = None) -> exp.Column:
    return exp.Column(this=_id(name), table=_id(table) if table else None)


def key(index: int) -> str:
    return f"__k{index}"


def total(index: int) -> str:
    return f"__s{index}"


def nonnull(index: int) -> str:
    return f"__n{index}"


def extreme(index: int) -> str:
    return f"__m{index}"


def retracted(index: int) -> str:
    return f"__r{index}"


def argument(index: int) -> str:
    return f"__x{index}"


def _sql(tree: exp.Expr) -> str:
    return tree.sql(dialect="spark")


def reading(block: exp.Select, names: Sequence[str]) -> exp.Select:
    """A copy of `block` that reads `names[i]` in place of its i-th reference (aliases kept, so
    the rest of the query is untouched)."""
    copy = block.copy()
    for table, name in zip(references(copy), names, strict=True):
        table.replace(exp.Table(this=_id(name), alias=_alias(table)))
    return copy


def _left_join(block: exp.Select) -> exp.Join | None:
    """The block's join when it is `L LEFT JOIN R` (the one outer join maintained)."""
    joins: list[exp.Join] = list(block.args.get("joins") or [])
    if len(joins) == 1 and (joins[0].side or "").upper() == "LEFT":
        return joins[0]
    return None


def _weight_product(block: exp.Select) -> exp.Expr:
    """The weight of an output row: the product of its inputs' weights. The right side of a LEFT
    JOIN (read as rows present, weight 1) counts as 1 where no row matched."""
    tables = references(block)
    weights: list[exp.Expr] = [_col(WEIGHT, t.alias_or_name) for t in tables]
    if _left_join(block) is not None:
        weights[1] = exp.func("COALESCE", weights[1], exp.Literal.number(1))
    product = weights[0]
    for weight in weights[1:]:
        product = exp.Mul(this=product, expression=weight)
    return product


def weighted(block: exp.Select, names: Sequence[str]) -> exp.Select:
    """The block over Z-sets `names`, with the weight of each output row."""
    rewritten = reading(block, names)
    return rewritten.select(exp.alias_(_weight_product(rewritten), WEIGHT, quoted=True), copy=False)


@dataclass(frozen=True)
class Sources:
    """Temporary view names for one step: each relation's old state, new state and change
    (None: the relation did not change). For LEFT JOINs also: `present(name, new)`, the rows
    of a relation's old or new contents with weight 1, and `define(sql, negated)`, which
    registers a query (its weights negated if asked) and returns the view's name."""

    old: Mapping[str, str]
    new: Mapping[str, str]
    change: Mapping[str, str | None]
    present: Callable[[str, bool], str]
    define: Callable[[str, bool], str]


def telescoped(
    block: exp.Select, relations: Sequence[str], sources: Sources, shape: Callable[..., exp.Select]
) -> list[exp.Select]:
    """The change of a (multi)linear block: one term per reference whose relation changed; a
    LEFT JOIN's inner part telescoped, plus the change of its unmatched rows."""
    join = _left_join(block)
    if join is None:
        return _telescoped(block, relations, sources, shape)
    inner = block.copy()
    inner_join = _left_join(inner)
    assert inner_join is not None
    inner_join.set("side", None)
    inner_join.set("kind", None)
    terms = _telescoped(inner, relations, sources, shape)
    unmatched = _unmatched(block)
    left, right = relations
    left_change, right_change = sources.change.get(left), sources.change.get(right)
    if left_change is not None:
        terms.append(shape(unmatched, [left_change, sources.present(right, True)]))
    if right_change is not None:
        touched = _touched(block, sources.old[left], right_change)
        terms.append(
            shape(unmatched, [sources.define(touched, False), sources.present(right, True)])
        )
        terms.append(
            shape(unmatched, [sources.define(touched, True), sources.present(right, False)])
        )
    return terms


def whole(block: exp.Select, relations: Sequence[str], sources: Sources) -> list[str]:
    """What a block reads to be evaluated over the new state, weighted: each relation's new
    Z-set; the right side of a LEFT JOIN as its rows present (a Z-set's cancelled rows would
    hide that a left row is unmatched)."""
    names = [sources.new[r] for r in relations]
    if _left_join(block) is not None:
        names[1] = sources.present(relations[1], True)
    return names


def _telescoped(
    block: exp.Select, relations: Sequence[str], sources: Sources, shape: Callable[..., exp.Select]
) -> list[exp.Select]:
    terms = []
    for index, relation in enumerate(relations):
        change = sources.change.get(relation)
        if change is None:
            continue
        names = [
            *(sources.new[r] for r in relations[:index]),
            change,
            *(sources.old[r] for r in relations[index + 1 :]),
        ]
        terms.append(shape(block, names))
    return terms


def _unmatched(block: exp.Select) -> exp.Select:
    """The LEFT JOIN block restricted to the left rows no right row matched."""
    right = references(block)[1].alias_or_name
    return block.copy().where(exp.Is(this=_col(WEIGHT, right), expression=exp.Null()))


def _touched(block: exp.Select, left: str, right_change: str) -> str:
    """The rows of `left` that some row of the right side's change matches (the only rows
    whose matched or unmatched status can change this step)."""
    join = _left_join(block)
    assert join is not None
    left_table, right_table = references(block)
    semi = join.copy()
    semi.set("this", exp.Table(this=_id(right_change), alias=_alias(right_table)))
    semi.set("side", "LEFT")
    semi.set("kind", "SEMI")
    select = exp.select(exp.Column(this=exp.Star(), table=_id(left_table.alias_or_name)))
    select = select.from_(exp.Table(this=_id(left), alias=_alias(left_table)))
    select.set("joins", [semi])
    return _sql(select)


def _alias(table: exp.Table) -> exp.TableAlias:
    alias = table.args.get("alias")
    return alias.copy() if alias is not None else exp.TableAlias(this=table.this.copy())


def union_all(selects: Sequence[exp.Select]) -> str:
    query: exp.Query = selects[0]
    for select in selects[1:]:
        query = exp.union(query, select, distinct=False)
    return _sql(query)


def linear_change(
    shape: Linear, relations: Sequence[Sequence[str]], sources: Sources
) -> str | None:
    """The change of a linear view (None: none of its inputs changed)."""
    terms = [
        term
        for block, names in zip(shape.blocks, relations, strict=True)
        for term in telescoped(block, names, sources, weighted)
    ]
    return union_all(terms) if terms else None


# -- aggregates ----------------------------------------------------------------------------


def _grouping(select: exp.Select, keys: Sequence[exp.Expr]) -> exp.Select:
    select.set("distinct", None)
    select.set("group", exp.Group(expressions=[k.copy() for k in keys]) if keys else None)
    return select


def group_rows(shape: Aggregate, names: Sequence[str]) -> str:
    """The view's rows with their running values, evaluated by Spark over whole contents."""
    select = _grouping(reading(shape.block, names), shape.keys)
    extra: list[exp.Expr] = [
        exp.alias_(k.copy(), key(j), quoted=True) for j, k in enumerate(shape.keys)
    ]
    extra.append(exp.alias_(exp.Count(this=exp.Star()), COUNT, quoted=True))
    for index, call in enumerate(shape.calls):
        if call.argument is None:
            continue
        arg = call.argument.copy()
        extra.append(exp.alias_(exp.Count(this=arg.copy()), nonnull(index), quoted=True))
        if call.kind in ("sum", "avg"):
            extra.append(exp.alias_(exp.Sum(this=arg.copy()), total(index), quoted=True))
        if call.kind in ("min", "max"):
            node = exp.Min if call.kind == "min" else exp.Max
            extra.append(exp.alias_(node(this=arg.copy()), extreme(index), quoted=True))
    return _sql(select.select(*extra, copy=False))


def pre_aggregate(block: exp.Select, shape: Aggregate, names: Sequence[str]) -> exp.Select:
    """The block over Z-sets `names`, projected to group keys, call arguments and weight."""
    rewritten = reading(block, names)
    items: list[exp.Expr] = [
        exp.alias_(k.copy(), key(j), quoted=True) for j, k in enumerate(shape.keys)
    ]
    for index, call in enumerate(shape.calls):
        if call.argument is not None:
            items.append(exp.alias_(call.argument.copy(), argument(index), quoted=True))
    items.append(exp.alias_(_weight_product(rewritten), WEIGHT, quoted=True))
    rewritten.set("expressions", items)
    rewritten.set("distinct", None)
    rewritten.set("group", None)
    return rewritten


def _if(condition: exp.Expr, then: exp.Expr, otherwise: exp.Expr) -> exp.Expr:
    return exp.If(this=condition, true=then, false=otherwise)


def _parse(sql: str) -> exp.Expr:
    return exp.maybe_parse(sql, dialect="spark")


MAX_UNITS = 2**31 - 1
"""The largest weight a row's repeated ±1 rows stand for (ARRAY_REPEAT's count is an INT)."""
UNIT = "__u"
"""A row's weight as ±1, one row per unit of its weight (`group_change` with exact sums)."""


def group_change(shape: Aggregate, pre: str, *, exact: Collection[int] = ()) -> str:
    """Running values of a change (`pre`: a `pre_aggregate` view), per touched group.

    The calls `exact` names (SUM and AVG of DECIMAL arguments) sum `IF(unit > 0, x, -x)` over
    the change's rows repeated as often as their weight, never `x * weight`: Spark types that
    product DECIMAL(p + 21, s), cut to 38 digits by dropping scale, so a DECIMAL(18, 8) change
    was summed at 7 places (0.00000001 counted as 0)."""
    keys = [_col(key(j)) for j in range(len(shape.keys))]
    w = f"`{UNIT}`" if exact else f"`{WEIGHT}`"
    items: list[exp.Expr] = [*keys, exp.alias_(_parse(f"SUM({w})"), COUNT, quoted=True)]
    for index, call in enumerate(shape.calls):
        if call.argument is None:
            continue
        x = f"`{argument(index)}`"
        items.append(
            exp.alias_(_parse(f"SUM(IF({x} IS NULL, 0, {w}))"), nonnull(index), quoted=True)
        )
        if call.kind in ("sum", "avg"):
            summed = f"IF({w} > 0, {x}, -{x})" if index in exact else f"{x} * {w}"
            items.append(exp.alias_(_parse(f"SUM({summed})"), total(index), quoted=True))
        if call.kind in ("min", "max"):
            items.append(
                exp.alias_(
                    _parse(f"{call.kind.upper()}(IF({w} > 0, {x}, NULL))"),
                    extreme(index),
                    quoted=True,
                )
            )
            items.append(
                exp.alias_(
                    _parse(f"MAX(IF({w} < 0 AND {x} IS NOT NULL, 1, 0))"),
                    retracted(index),
                    quoted=True,
                )
            )
    source: exp.Expr = exp.Table(this=_id(pre))
    if exact:  # a weight past INT's range (a row two billion times) is refused, never cut
        count = (
            f"IF(ABS(`{WEIGHT}`) > {MAX_UNITS}, RAISE_ERROR(CONCAT('A row of weight ', "
            f"`{WEIGHT}`, ' is more than Spindle sums exactly ({MAX_UNITS} at most)')), "
            f"CAST(ABS(`{WEIGHT}`) AS INT))"
        )
        units = _parse(f"EXPLODE(ARRAY_REPEAT(IF(`{WEIGHT}` > 0, 1, -1), {count}))")
        repeated = exp.select(exp.Star(), exp.alias_(units, UNIT, quoted=True)).from_(source)
        source = repeated.subquery("__units")
    select = exp.select(*items).from_(source)
    if keys:
        select = select.group_by(*[k.copy() for k in keys])
    return _sql(select)


def overflowed(index: int) -> str:
    return f"__o{index}"


@dataclass(frozen=True)
class _Adding:
    """How `combine` adds the old state's running values of a group and the change's."""

    key: Callable[[str], str]
    added: Callable[[str], str]
    """A running count or sum, old and change together."""
    extreme: Callable[[str, str], str]
    """A MIN or MAX (its kind, its column), old and change together."""
    flag: Callable[[str], str]
    """A flag the change raised (`__r*`)."""
    anywhere: Callable[[Callable[[str], str]], str]
    """A condition (given a row's qualifier) that holds of the old row or the change's."""


_JOINED = _Adding(
    key=lambda c: f"d.`{c}`",
    added=lambda c: f"(COALESCE(o.`{c}`, 0) + COALESCE(d.`{c}`, 0))",
    extreme=lambda kind, c: f"{'LEAST' if kind == 'min' else 'GREATEST'}(o.`{c}`, d.`{c}`)",
    flag=lambda c: f"d.`{c}`",
    anywhere=lambda holds: f"(({holds('o.')}) OR ({holds('d.')}))",
)
"""The change LEFT JOIN the old state: one join, the cheaper plan of the two."""
_UNITED = _Adding(
    key=lambda c: f"`{c}`",
    added=lambda c: f"SUM(`{c}`)",
    extreme=lambda kind, c: f"{kind.upper()}(`{c}`)",
    flag=lambda c: f"MAX(`{c}`)",
    anywhere=lambda holds: f"MAX(IF({holds('')}, 1, 0)) > 0",
)
"""The change UNION ALL the old state's touched groups, grouped: Spark's SUM adds DECIMAL(38, s)
values at scale s, where `a + b` would drop a digit of scale."""


def _stuck(row: str, *, s: str, n: str) -> str:
    """Whether a row's (`row`: its qualifier) running sum `s` of `n` values is one adding
    cannot carry on: NULL though it summed values (it overflowed), NaN or an infinity."""
    return (
        f"({row}`{s}` IS NULL AND {row}`{n}` > 0) "
        f"OR ISNAN(CAST({row}`{s}` AS DOUBLE)) "
        f"OR ABS(CAST({row}`{s}` AS DOUBLE)) = CAST('Infinity' AS DOUBLE)"
    )


def combine(
    shape: Aggregate,
    *,
    old: str,
    change: str,
    types: Mapping[str, str],
    watched: Collection[int] = (),
    exact: Collection[int] = (),
) -> str:
    """New running values of the touched groups: old + change, added as `_UNITED` says when
    some sum is `exact` (over DECIMAL arguments), else as `_JOINED` says. `__r*` = 1 marks a
    MIN/MAX whose extreme may have left, `__o*` = 1 a SUM/AVG whose running sum is not a
    number that adding can carry on (NULL: it overflowed; NaN or an infinity, which no
    subtraction takes back), for the calls `watched` names (over DECIMAL or floating-point
    arguments: an integer sum wraps around, as Spark's does): such values are read again from
    the new state. `types` are the state columns' Spark types."""
    adding = _UNITED if exact else _JOINED
    on = " AND ".join(f"d.`{key(j)}` <=> o.`{key(j)}`" for j in range(len(shape.keys))) or "TRUE"
    keys = [key(j) for j in range(len(shape.keys))]
    running = [COUNT]
    items = [*(adding.key(k) for k in keys), f"{adding.added(COUNT)} AS `{COUNT}`"]
    for index, call in enumerate(shape.calls):
        if call.argument is None:
            continue
        n = nonnull(index)
        running.append(n)
        items.append(f"{adding.added(n)} AS `{n}`")
        if call.kind in ("sum", "avg"):
            s = total(index)
            running.append(s)
            summed = f"IF({adding.added(n)} = 0, NULL, {adding.added(s)})"
            items.append(f"CAST({summed} AS {types[s]}) AS `{s}`")
            if index in watched:
                stuck = adding.anywhere(functools.partial(_stuck, s=s, n=n))
                lost = f"({adding.added(n)} > 0 AND {adding.added(s)} IS NULL)"
                items.append(f"IF({stuck} OR {lost}, 1, 0) AS `{overflowed(index)}`")
        if call.kind in ("min", "max"):
            m, r = extreme(index), retracted(index)
            running.append(m)
            items.append(f"CAST({adding.extreme(call.kind, m)} AS {types[m]}) AS `{m}`")
            items.append(f"{adding.flag(r)} AS `{r}`")
    if adding is _JOINED:
        return f"SELECT {', '.join(items)} FROM `{change}` d LEFT JOIN `{old}` o ON {on}"
    flags = [retracted(i) for i, c in enumerate(shape.calls) if c.kind in ("min", "max")]
    quoted = [f"`{k}`" for k in keys]
    from_change = ", ".join([*quoted, *(f"`{c}`" for c in running), *(f"`{f}`" for f in flags)])
    from_old = ", ".join(
        [
            *(f"o.{k}" for k in quoted),
            *(f"o.`{c}`" for c in running),
            *(f"0 AS `{f}`" for f in flags),
        ]
    )
    both = (
        f"SELECT {from_change}, 1 AS `__d` FROM `{change}` UNION ALL "
        f"SELECT {from_old}, 0 AS `__d` FROM `{old}` o LEFT SEMI JOIN `{change}` d ON {on}"
    )
    grouped = f" GROUP BY {', '.join(quoted)}" if keys else ""
    return f"SELECT {', '.join(items)} FROM ({both}) AS `__both`{grouped} HAVING MAX(`__d`) = 1"


def _finish(call: Call, index: int, argument_types: Mapping[int, str]) -> exp.Expr:
    if call.kind == "count":
        return _col(COUNT if call.argument is None else nonnull(index))
    if call.kind in ("min", "max"):
        return _col(extreme(index))
    n, s = f"`{nonnull(index)}`", f"`{total(index)}`"
    if call.kind == "sum":
        return _parse(f"IF({n} > 0, {s}, NULL)")
    declared = argument_types.get(index, "")
    if declared.startswith("decimal("):
        precision, scale = (int(p) for p in declared[len("decimal(") : -1].split(","))
        result = f"DECIMAL({min(38, precision + 4)}, {min(38, scale + 4)})"
        return _parse(f"IF({n} > 0, CAST({s} / CAST({n} AS DECIMAL(20, 0)) AS {result}), NULL)")
    return _parse(f"IF({n} > 0, CAST({s} AS DOUBLE) / {n}, NULL)")


def visible(
    shape: Aggregate, state: str, *, argument_types: Mapping[int, str], output_types: Sequence[str]
) -> tuple[str, tuple[str, ...]] | None:
    """The view's columns computed from running values in `state`, with the running values
    kept; None if an output is not a function of the groups (Spark decides the fallback)."""
    select = shape.block.copy()
    calls = [c for o in select.expressions for c in o.find_all(*AGGREGATES)]
    for index, (node, call) in enumerate(zip(calls, shape.calls, strict=True)):
        node.replace(_finish(call, index, argument_types))
    keyed = {k: j for j, k in enumerate(shape.keys)}

    def by_key(node: exp.Expr) -> exp.Expr:
        for candidate, j in keyed.items():
            if node == candidate:
                return _col(key(j))
        return node

    outputs = [o.transform(by_key) for o in select.expressions]
    names = tuple(o.alias_or_name for o in outputs)
    for output in outputs:
        if any(not c.name.startswith("__") for c in output.find_all(exp.Column)):
            return None
    cast = [
        exp.alias_(
            exp.Cast(this=o.unalias(), to=exp.DataType.build(t, dialect="spark")), n, quoted=True
        )
        for o, n, t in zip(outputs, names, output_types, strict=True)
    ]
    query = exp.select(*cast, exp.Star()).from_(exp.Table(this=_id(state)))
    if shape.grouped:
        query = query.where(exp.GT(this=_col(COUNT), expression=exp.Literal.number(0)))
    return _sql(query), names
