"""Calls of Spark's functions, written for Spark as the program wrote them.

Spindle reads a program in its dialect (sqlglot's default) and the runtime writes each view's
query again for Spark. Spindle's function vocabulary is Spark's (`UnknownFunction` checks
calls against it), but sqlglot reads some calls with another engine's meaning and rewrites
them for Spark, which changed what the view computes:

- `DATE_TRUNC('hour', ts)` was `TRUNC(ts, 'HOUR')`: NULL for a unit below a month, and a DATE,
  not a TIMESTAMP, for the others;
- `TRUNC(d, 'MM')` was `CAST(d AS BIGINT)`: NULL (an error under ANSI);
- `TO_CHAR(x, fmt)` was `CAST(x AS STRING)`: the format dropped;
- `REGEXP_EXTRACT(s, re, 2)` was `REGEXP_EXTRACT(s, re)`: group 1, not 2;
- `CONCAT_WS(',', a, b)` was NULL when any part is; Spark skips NULL parts;
- `ARRAY_INSERT(a, 1, x)` was `ARRAY_INSERT(a, 2, x)`: read as 0-based;
- `ARRAY_APPEND(a, x)` (and `ARRAY_PREPEND`) gave `[x]`, not NULL, for a NULL array;
- `UNIX_DATE(d)` gave a BIGINT, not an INT;
- `PERCENTILE_CONT(q)`/`PERCENTILE_DISC(q) WITHIN GROUP (ORDER BY x)` was
  `PERCENTILE_APPROX(x, q)`: approximate, and the order's direction dropped;
- `LIKE(s, 'a%')`, Spark's call form (`like(str, pattern)`), was `'a%' LIKE s`: sqlglot reads
  it as SQLite's `like(pattern, str)`;
- `LTRIM('a', s)`, `RTRIM` and `TRIM(chars, s)` (Spark's `(trimStr, str)`) trimmed `s`'s
  characters from `'a'`;
- `STRING_AGG(s)` joined with `,`; Spark's default delimiter is none;
- `MAX_BY(x, y, k)` and `MIN_BY` dropped `k` (one value, not an array of `k`);
- `PARSE_JSON(s)` was `s`: a string, not a VARIANT (`VARIANT_GET` of it failed);
- `SPLIT(s, d, limit)` dropped its limit;
- `LOG10(x)` and `LOG2(x)` were `LOG(10, x)`, one unit in the last place off;
- `MAP(k, v)` was `MAP_FROM_ARRAYS(k, v)`, and `COLLATE(s, 'UTF8_LCASE')` `s COLLATE
  'UTF8_LCASE'`: Spark refused both, after approval (revision 2);
- `CURRENT_CATALOG()` and `LOCALTIMESTAMP()` (or `LOCALTIMESTAMP`) were written bare, a name
  Spark read as a column and refused, after approval. No checkpoint holds a view that calls
  them, so they are revision 2's too.

`AS_WRITTEN` writes each such call back as written; `tests/integration/test_calls_as_written.py`
has Spark evaluate calls both ways and holds them equal. A view whose translation this changed
computed other values before: the checkpoint records the translation it was computed with
(`TRANSLATION_REVISION`), and the plan reports such a view modified (`revised_views`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from sqlglot import exp

from spindle.program.statements import text_start

TRANSLATION_REVISION = 4
"""The translation of views to Spark SQL, as checkpoints record it: 0 before `AS_WRITTEN`,
1 with its first calls, 2 with `LIKE`'s call form and the calls after it above, 3 with
`ARGUMENTS_CAST` and `CASED_NAMES`, 4 with `COLUMN_LISTS`."""
COLUMN_LISTS = 4
"""The revision from which a view's column list names its columns (`CREATE VIEW v (n, s) AS
SELECT x, 'a' ...` has the columns n and s; `program.column_lists`): before it the list was
ignored, and the stored columns, and output records' keys, were the query's own names. Every
view with a column list is revised."""
CASED_NAMES = 3
"""The revision from which a column a view names in double quotes with capitals (`x AS
"Name"`) keeps them: before it the stored column, and output records' key, was `name`. Every
such view is revised."""
ARGUMENTS_CAST = 3
"""The revision from which a call of the program's own function takes each argument as its
parameter's declared type, as Spark's SQL functions do (`runtime.translate` inlines the body):
before it, `dbl(x + 1)` of a body `n * 2` computed `x + 1 * 2`, and `tag(10)` of a parameter
DECIMAL(10, 2) gave '10', not '10.00'. Every view that calls one is revised."""


def _call(name: str, *arguments: exp.Expr | None) -> exp.Anonymous:
    return exp.Anonymous(this=name, expressions=[a.copy() for a in arguments if a is not None])


def _only(node: exp.Expr, *keys: str) -> bool:
    return all(key in keys for key, value in node.args.items() if value not in (None, False, []))


def _named(name: str, *keys: str) -> Callable[[exp.Expr], exp.Expr | None]:
    """The call written `name(keys...)`, when it has each of `keys` and no other argument."""

    def written(node: exp.Expr) -> exp.Expr | None:
        ignored = ("null_propagation",)  # sqlglot's own flag, never written
        if any(node.args.get(key) is None for key in keys) or not _only(node, *keys, *ignored):
            return None
        return _call(name, *(node.args[key] for key in keys))

    return written


def _trunc(node: exp.Expr) -> exp.Expr | None:
    """Spark's TRUNC(d, format) truncates a date; a number of places (`TRUNC(x, 2)`) is
    refused (`writable`): Spark has no such TRUNC."""
    return None if numeric_places(node) else _named("TRUNC", "this", "decimals")(node)


def numeric_places(node: exp.Expr) -> bool:
    """Whether a TRUNC call's second argument is a number (`TRUNC(x, 2)`)."""
    places = node.args.get("decimals")
    return isinstance(places, exp.Literal) and not places.is_string


def _concat_ws(node: exp.Expr) -> exp.Expr | None:
    return _call("CONCAT_WS", *node.expressions)


def _like_call(node: exp.Expr) -> exp.Expr | None:
    """`LIKE(s, pattern)` as Spark reads it: sqlglot builds the call with its arguments swapped
    (SQLite's `like(pattern, s)`), so the subject follows the pattern in the text. The tree
    must be as parsed (positions within one statement): `translate` writes calls before it
    inlines functions."""
    subject, pattern = text_start(node.expression), text_start(node.this)
    if subject is None or pattern is None or subject > pattern:
        return None  # `s LIKE pattern`, written as an operator
    return exp.Like(this=node.expression.copy(), expression=node.this.copy())


def _trim_call(node: exp.Expr) -> exp.Expr | None:
    """`LTRIM(chars, s)`, `RTRIM(chars, s)`, `TRIM(chars, s)`: Spark's call forms, which trim
    `chars` from `s`. sqlglot reads them as trimming `s` from `chars`; `TRIM(chars FROM s)`,
    which it reads right, has the characters first in the text."""
    chars, subject = node.this, node.expression
    first, then = text_start(chars), text_start(subject) if subject is not None else None
    if first is None or then is None or first > then:
        return None  # `TRIM(chars FROM s)`, or a call the text does not place
    name = {"LEADING": "LTRIM", "TRAILING": "RTRIM"}.get(node.text("position").upper(), "TRIM")
    return _call(name, chars, subject)


def _string_agg(node: exp.Expr) -> exp.Expr | None:
    """`STRING_AGG(s)` without a delimiter: Spark's joins with none, sqlglot's with `,`."""
    if node.args.get("separator") is not None:
        return None
    written = node.copy()  # never the node itself: `revised_calls` asks of a shared tree
    written.set("separator", exp.Literal.string(""))
    return written


def _split(node: exp.Expr) -> exp.Expr | None:
    """`SPLIT(s, delimiter, limit)`: the delimiter a string (Feldera's `SPLIT`, as the
    translation writes it without a limit), the limit kept."""
    limit = node.args.get("limit")
    if limit is None:
        return None
    quoted = exp.Concat(
        expressions=[exp.Literal.string("\\Q"), node.expression.copy(), exp.Literal.string("\\E")]
    )
    return _call("SPLIT", node.this, quoted, limit)


def _log(node: exp.Expr) -> exp.Expr | None:
    """`LOG10(x)` and `LOG2(x)`, which sqlglot reads as `LOG(10, x)`: its base has no place in
    the text. Spark's LOG10 is exact where LOG(10, x) is one unit in the last place off."""
    base = node.this
    if node.expression is None or not isinstance(base, exp.Literal) or "start" in base.meta:
        return None
    name = {"10": "LOG10", "2": "LOG2"}.get(base.name)
    return None if name is None else _call(name, node.expression)


def _collate(node: exp.Expr) -> exp.Expr | None:
    """`COLLATE(s, 'UTF8_LCASE')`: Spark names a collation, never quotes it."""
    collation = node.expression
    if not (isinstance(collation, exp.Literal) and collation.is_string):
        return None
    return exp.Collate(this=node.this.copy(), expression=exp.var(collation.name))


_PERCENTILES = {exp.PercentileCont: "PERCENTILE_CONT", exp.PercentileDisc: "PERCENTILE_DISC"}


def _within_group(node: exp.Expr) -> exp.Expr | None:
    inner = node.this
    name = _PERCENTILES.get(type(inner))
    if name is None:
        return None
    return exp.WithinGroup(this=_call(name, inner.this), expression=node.expression.copy())


AS_WRITTEN: Mapping[type[exp.Expr], Callable[[exp.Expr], exp.Expr | None]] = {
    exp.DateTrunc: _named("DATE_TRUNC", "unit", "this"),
    exp.Trunc: _trunc,
    exp.ToChar: _named("TO_CHAR", "this", "format"),
    exp.RegexpExtract: _named("REGEXP_EXTRACT", "this", "expression", "position"),  # a group
    exp.ConcatWs: _concat_ws,
    exp.ArrayInsert: _named("ARRAY_INSERT", "this", "position", "expression"),
    exp.ArrayAppend: _named("ARRAY_APPEND", "this", "expression"),
    exp.ArrayPrepend: _named("ARRAY_PREPEND", "this", "expression"),
    exp.UnixDate: _named("UNIX_DATE", "this"),
    exp.WithinGroup: _within_group,
    exp.Like: _like_call,
    exp.Trim: _trim_call,
    exp.GroupConcat: _string_agg,
    exp.ArgMax: _named("MAX_BY", "this", "expression", "count"),
    exp.ArgMin: _named("MIN_BY", "this", "expression", "count"),
    exp.ParseJSON: _named("PARSE_JSON", "this"),
    exp.Split: _split,
    exp.Log: _log,
    exp.Map: _named("MAP", "keys", "values"),
    exp.Collate: _collate,
    exp.CurrentCatalog: _named("CURRENT_CATALOG"),
    exp.Localtimestamp: _named("LOCALTIMESTAMP"),
}
"""For each kind of call sqlglot writes for Spark with another meaning, the call as written
(None: this call's form is written faithfully)."""

_FIRST: tuple[type[exp.Expr], ...] = (
    exp.DateTrunc,
    exp.Trunc,
    exp.ToChar,
    exp.RegexpExtract,
    exp.ConcatWs,
    exp.ArrayInsert,
    exp.ArrayAppend,
    exp.ArrayPrepend,
    exp.UnixDate,
    exp.WithinGroup,
)
REVISED: Mapping[type[exp.Expr], int] = {kind: 1 if kind in _FIRST else 2 for kind in AS_WRITTEN}
"""The translation revision that changed how each kind of call is written for Spark."""


def first_select(
    query: exp.Expr, *, through: tuple[type[exp.Expr], ...] = (exp.SetOperation, exp.Subquery)
) -> exp.Select | None:
    """The SELECT that names a query's columns: the query's own, or a set operation's first,
    through parentheses (only through the kinds `through` names), or None."""
    while isinstance(query, through):
        query = query.this
    return query if isinstance(query, exp.Select) else None


def cased_alias(item: exp.Expr) -> str | None:
    """The name a select item is given in double quotes with capitals (`x AS "Name"`, or a
    column `"Name"`), kept as written from `CASED_NAMES` on; None for any other item."""
    name = item.args.get("alias") if isinstance(item, exp.Alias) else None
    if isinstance(item, exp.Column):  # `"Name"`, `t."Name"`: a column as written
        name = item.this
    if not isinstance(name, exp.Identifier) or not name.quoted or name.this == name.this.lower():
        return None
    return str(name.this)


def cased_outputs(query: exp.Expr) -> bool:
    """Whether a view names one of its columns with capitals in double quotes."""
    select = first_select(query)
    return select is not None and any(cased_alias(item) for item in select.expressions)


def as_written(tree: exp.Expr) -> exp.Expr:
    """`tree` with each call of `AS_WRITTEN` as the program wrote it: a copy where one is
    rewritten, else `tree` itself (never changed: it may be a parsed program's, shared)."""
    if not any(type(node) in AS_WRITTEN for node in tree.walk()):
        return tree
    copy = tree.copy()
    for node in reversed(list(copy.walk())):  # innermost first: a call's arguments are written
        rule = AS_WRITTEN.get(type(node))  # before it copies them
        written = rule(node) if rule is not None else None
        if written is None:
            continue
        if node is copy:
            copy = written
        else:
            node.replace(written)
    return copy


def revised_calls(trees: Iterable[exp.Expr], *, since: int) -> list[exp.Expr]:
    """The calls of `trees` whose translation changed after revision `since`."""
    return [
        node
        for tree in trees
        for node in tree.walk()
        if REVISED.get(type(node), 0) > since and AS_WRITTEN[type(node)](node) is not None
    ]
