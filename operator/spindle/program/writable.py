"""Views Spindle cannot write for Spark, refused when the program is planned.

Three kinds, each at its own line and column:
- a construct Spindle does not run (`UNSUPPORTED`: LATERAL, PIVOT, UNPIVOT), or an UNNEST
  sqlglot writes for Spark otherwise than it means (`_unnest`: without a name for its column
  it was dropped from the query, WITH ORDINALITY written as one name too many, a LEFT JOIN or
  an ON condition dropped): `UnsupportedSql`;
- a call sqlglot cannot write in Spark's SQL: `REGEXP_REPLACE(s, 'a')` (no replacement) made
  the driver fail after approval with `InternalError: Unexpected KeyError: 'replacement'`
  (`UnsupportedSql`);
- a type Spark has not (`CAST(d AS DECIMAL(40, 2))`, `CAST(n AS MONEY)`), as a table's column
  would be refused (`types.written_type_problem`): `UnsupportedType`, at the type.

Most used to be found by the runtime only, as it translated the view for its first step or
bootstrap (`runtime.translate`, which keeps the same checks for a checkpointed program), or
by Spark, after approval.
"""

from __future__ import annotations

import datetime
import itertools
import re
from collections.abc import Callable, Iterator, Mapping
from typing import NamedTuple

from sqlglot import exp
from sqlglot.errors import ErrorLevel, TokenError
from sqlglot.parser import Parser
from sqlglot.tokenizer_core import Token, TokenType

from spindle.program.calls import call_name
from spindle.program.dialect import DIALECT, in_casts
from spindle.program.model import Position, Program, Unrunnable
from spindle.program.ordinals import GENERATORS
from spindle.program.spark_calls import as_written, numeric_places
from spindle.program.statements import text_start
from spindle.program.types import written_type_problem

UNSUPPORTED: dict[type[exp.Expr], str] = {
    exp.Lateral: "LATERAL",
    exp.Pivot: "PIVOT",
}


def unsupported(node: exp.Expr) -> str | None:
    """The construct of `UNSUPPORTED` that `node` is, or None (an UNPIVOT is a Pivot to sqlglot)."""
    label = UNSUPPORTED.get(type(node))
    return f"UN{label}" if label == "PIVOT" and node.args.get("unpivot") else label


def spark_sql(tree: exp.Expr) -> str:
    """`tree` in Spark's SQL, its calls as written (what sqlglot would warn of, a form it
    writes otherwise, is `spark_calls`'s to get right, not a log line)."""
    return as_written(tree).sql(dialect="spark", unsupported_level=ErrorLevel.IGNORE)


def unwritable(node: exp.Expr) -> str | None:
    """Why `node` (a call) cannot be written in Spark's SQL, or None when it can."""
    try:
        spark_sql(node)
    except KeyError as error:  # the generator reading an argument the call does not have
        return f"it lacks its argument {error}"
    except Exception as error:  # sqlglot's UnsupportedError, ValueError, ...
        return str(error).splitlines()[0] if str(error) else type(error).__name__
    return None


def writing_problems(program: Program) -> tuple[Unrunnable, ...]:
    """Each view's first construct, call or type Spindle cannot write for Spark."""
    problems: list[Unrunnable] = []
    for view in program.views.values():
        found = next(_problems(view.query, view.text), None)
        where = None if found is None else program.locate(view.text, found.start)
        if found is not None and where is not None:
            problems.append(found.at(where, "View", view.name))
    return tuple(problems)


class Found(NamedTuple):
    """A problem of a view's (or a function's) SQL: where it starts in the statement, why."""

    start: int
    said: str
    reason: str = "UnsupportedSql"

    def at(self, where: Position, kind: str, name: str) -> Unrunnable:
        """The problem of `kind` (View, Function) `name`, located at `where`."""
        return Unrunnable.at(
            where,
            reason=self.reason,
            message=f"{kind} '{name}' {self.said}",
            **{kind.lower(): name},
        )


DATE_TRUNC_UNITS = frozenset(
    {"YEAR", "YYYY", "YY", "QUARTER", "MONTH", "MM", "MON", "WEEK", "DAY", "DD", "HOUR"}
    | {"MINUTE", "SECOND", "MILLISECOND", "MICROSECOND"}
)
"""The units Spark's DATE_TRUNC reads; any other gives NULL for every row."""


def _date_trunc(node: exp.Expr) -> str | None:
    unit = node.args.get("unit")
    if not isinstance(unit, exp.Literal) or unit.name.upper() in DATE_TRUNC_UNITS:
        return None  # a column of units (`t.unit`), or an expression: Spark reads its values
    return (
        f"calls DATE_TRUNC with the unit {unit.name!r}, which is none of Spark's (NULL for every "
        "row): write DATE_TRUNC('hour', ts), the unit first and quoted (year, quarter, month, "
        "week, day, hour, minute, second, millisecond, microsecond), or a column of units with "
        "its table's name (DATE_TRUNC(t.unit, ts))"
    )


EXTRACT_FIELDS = frozenset(
    {"YEAR", "Y", "YEARS", "YR", "YRS", "YEAROFWEEK", "QUARTER", "QTR", "MONTH", "MON", "MONS"}
    | {"MONTHS", "WEEK", "W", "WEEKS", "DAY", "D", "DAYS", "DAYOFWEEK", "DOW", "DAYOFWEEK_ISO"}
    | {"DOW_ISO", "DOY", "HOUR", "H", "HOURS", "HR", "HRS", "MINUTE", "M", "MIN", "MINS"}
    | {"MINUTES", "SECOND", "S", "SEC", "SECONDS", "SECS"}
)
"""The fields Spark's EXTRACT reads (`INVALID_EXTRACT_FIELD` for any other, after approval)."""
_EXTRACT_INSTEAD = {
    "EPOCH": "UNIX_SECONDS(ts) (UNIX_DATE(d) for a DATE's days)",
    "MILLISECOND": "EXTRACT(SECOND FROM ts) * 1000",
    "MICROSECOND": "EXTRACT(SECOND FROM ts) * 1000000",
    "ISODOW": "EXTRACT(DAYOFWEEK_ISO FROM ts)",
    "ISOYEAR": "EXTRACT(YEAROFWEEK FROM ts)",
}


def _extract(node: exp.Expr) -> str | None:
    field = node.this
    if not isinstance(field, exp.Var) or field.name.upper() in EXTRACT_FIELDS:
        return None
    name = field.name.upper()
    instead = _EXTRACT_INSTEAD.get(
        name,
        "a field Spark has (YEAR, QUARTER, MONTH, WEEK, DAY, DAYOFWEEK, DOY, HOUR, MINUTE, SECOND)",
    )
    return f"calls EXTRACT({name} FROM ...), a field Spark's EXTRACT does not have: write {instead}"


def _trunc(node: exp.Expr) -> str | None:
    if not numeric_places(node):
        return None
    return (
        "calls TRUNC with a number of places, but Spark's TRUNC truncates dates "
        "(TRUNC(d, 'MM')): round a number with ROUND(x, 2), or FLOOR(x, 2) and CEIL(x, 2)"
    )


SEVERAL_COLUMNS = frozenset(g.upper() for g in GENERATORS - {"explode", "explode_outer"})
"""Spark's generators that may make more than one column (`_columns` says when they do): a
select list names each of them. EXPLODE makes one, of an array (two of a map, which the
plan cannot tell apart)."""


def _columns(name: str, arguments: list[exp.Expr]) -> int | None:
    """How many columns a call of one of `SEVERAL_COLUMNS` makes, where the SQL says."""
    if name.startswith("POSEXPLODE"):
        return 2
    if name == "JSON_TUPLE":
        return len(arguments) - 1
    first = arguments[0] if arguments else None
    if name == "STACK" and isinstance(first, exp.Literal) and first.is_int and int(first.name):
        return -(-(len(arguments) - 1) // int(first.name))
    if name.startswith("INLINE") and isinstance(first, exp.Array) and first.expressions:
        row = first.expressions[0]
        return len(row.expressions) if isinstance(row, exp.Struct) else None
    return None


def _unnamed_columns(node: exp.Expr) -> str | None:
    name = call_name(node)
    if name not in SEVERAL_COLUMNS:
        return None
    first = node.args.get("this")  # an Anonymous call's is its name
    arguments = [*([first] if isinstance(first, exp.Expr) else []), *node.expressions]
    if (_columns(name, arguments) or 0) < 2:
        return None
    item = node.parent if isinstance(node.parent, exp.Alias) else node
    if not isinstance(item.parent, exp.Select) or item.arg_key != "expressions":
        return None  # named (`AS (p, v)`: an Aliases), or not a select item
    named = "one name" if item is not node else "no name"
    return (
        f"calls {name}, which makes more than one column, with {named} for them: name each, "
        f"{name}(...) AS (a, b) (Spark refused it after approval: UDTF_ALIAS_NUMBER_MISMATCH)"
    )


def _time(node: exp.Expr) -> str | None:
    if node.this not in (exp.DType.TIME, exp.DType.TIMETZ):
        return None
    return (
        "uses the type TIME, which Spark's SQL does not have: Spindle wrote it as a TIMESTAMP, "
        "today's date at that time. Use a TIMESTAMP (a time on a fixed date), or a VARCHAR"
    )


_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?")


def _impossible_date(node: exp.Expr) -> str | None:
    """A DATE or TIMESTAMP literal (or a cast of a constant) of a day or time that does not
    exist: Spark's cast makes it NULL on every row (under `v1`), where Feldera refuses it."""
    text, to = node.this, node.args.get("to")
    if not isinstance(text, exp.Literal) or not text.is_string or not isinstance(to, exp.DataType):
        return None
    value = text.name.strip()
    if value.startswith("0000"):  # a year Spark has and Python's calendar has not
        return None
    try:
        if to.this in (exp.DType.DATE, exp.DType.TIMESTAMP) and _DATE.fullmatch(value):
            datetime.date.fromisoformat(value)
        elif to.this == exp.DType.TIMESTAMP and _TIMESTAMP.fullmatch(value):
            datetime.datetime.fromisoformat(value[:26])
        else:
            return None
    except ValueError as error:
        kind = "DATE" if to.this == exp.DType.DATE else "TIMESTAMP"
        return f"has the {kind} '{value}', which does not exist ({error}): write a real one"
    return None


def _flags(node: exp.Expr) -> str | None:
    flag = node.args.get("flag")
    if flag is None:
        return None
    return (
        f"calls REGEXP_LIKE with the flags {flag.sql()}, which Spark's REGEXP_LIKE does not "
        "take (they were dropped): write them in the pattern, REGEXP_LIKE(s, '(?i)^a')"
    )


def _delimiters(node: exp.Expr) -> str | None:
    written = node.args.get("expression")  # sqlglot fills in its default, at no position
    if written is None or "start" not in written.meta:
        return None
    return (
        "calls INITCAP with delimiters, which Spark's INITCAP does not take (they were "
        "dropped): Spark capitalizes each word after a space"
    )


def _at_time_zone(node: exp.Expr) -> str | None:
    return (
        "uses AT TIME ZONE, which Spark's SQL does not have (it ran as FROM_UTC_TIMESTAMP, "
        "not as PostgreSQL reads it): write FROM_UTC_TIMESTAMP(ts, zone) for the zone's time "
        "of a UTC timestamp, or TO_UTC_TIMESTAMP(ts, zone) for the UTC time of the zone's"
    )


def _similar_to(node: exp.Expr) -> str | None:
    return (
        "uses SIMILAR TO, which Spark's SQL does not have: write RLIKE with a regular "
        "expression of the whole text (s RLIKE '^(a|b).*$')"
    )


CALL_PROBLEMS: dict[type[exp.Expr], Callable[[exp.Expr], str | None]] = {
    exp.AtTimeZone: _at_time_zone,
    exp.Cast: _impossible_date,  # DATE '2024-02-30'
    exp.Initcap: _delimiters,
    exp.RegexpLike: _flags,
    exp.SimilarTo: _similar_to,
    exp.DataType: _time,  # TIME '12:30:00', CAST(s AS TIME)
    exp.DateTrunc: _date_trunc,
    exp.Extract: _extract,
    exp.Trunc: _trunc,
    exp.Posexplode: _unnamed_columns,
    exp.PosexplodeOuter: _unnamed_columns,
    exp.Inline: _unnamed_columns,
    exp.Stack: _unnamed_columns,
    exp.Anonymous: _unnamed_columns,  # INLINE_OUTER, JSON_TUPLE
}
"""Calls whose arguments Spark would read otherwise than they were meant, silently: sqlglot
reads `DATE_TRUNC(unit_col, ts)`'s unit as the word `UNIT_COL`, wrote `TRUNC(x, 2)` as
`CAST(x AS BIGINT)`, dropped REGEXP_LIKE's flags and INITCAP's delimiters, and wrote `ts AT
TIME ZONE z` as FROM_UTC_TIMESTAMP; Spark makes a date that does not exist NULL, and refused
SIMILAR TO after approval."""


def _unnest(node: exp.Expr) -> str | None:
    """An UNNEST in FROM or a JOIN that sqlglot writes for Spark (`LATERAL VIEW EXPLODE(...) x
    AS e`, an inner join of each row with its elements) otherwise than it means."""
    joined = node.parent
    if not isinstance(joined, exp.From | exp.Join) or node.arg_key != "this":
        return None  # `SELECT UNNEST(a)`: EXPLODE(a), a generator Spark runs as written
    if isinstance(joined, exp.From) and not (joined.parent and joined.parent.args.get("joins")):
        return None  # `FROM UNNEST(a)` alone: `FROM EXPLODE(a)`, which Spark runs as written
    alias = node.args.get("alias")
    if not isinstance(alias, exp.TableAlias) or not alias.columns:
        return (
            "uses UNNEST without a name for its column, which Spindle cannot write for Spark "
            "(the UNNEST was dropped from the query, each row kept once): name it, UNNEST(a) "
            "AS x(e), and read x.e"
        )
    arrays = len(node.expressions)
    if arrays > 1 and len(alias.columns) != arrays:
        return (
            f"uses UNNEST of {arrays} arrays with {len(alias.columns)} names for their columns, "
            "which Spark refuses (UDTF_ALIAS_NUMBER_MISMATCH): name one per array, UNNEST(a, b) "
            "AS x(e, f)"
        )
    if isinstance(joined, exp.Join) and (joined.side or joined.args.get("using")):
        return (
            f"uses {joined.side or 'a'} JOIN of UNNEST, which Spindle writes for Spark as an "
            "inner join (a row without elements was dropped): write CROSS JOIN UNNEST(a) AS "
            "x(e), or keep such rows with EXPLODE_OUTER(a) in the select list"
        )
    on = joined.args.get("on") if isinstance(joined, exp.Join) else None
    if on is not None and not (isinstance(on, exp.Boolean) and on.this):
        return (
            "joins UNNEST ON a condition, which Spindle cannot write for Spark (the condition "
            "was dropped): write CROSS JOIN UNNEST(a) AS x(e), and the condition in WHERE"
        )
    return None


def _ordinality(tokens: list[Token]) -> Iterator[Found]:
    """UNNEST ... WITH ORDINALITY (and BigQuery's WITH OFFSET, parsed alike): sqlglot wrote
    `LATERAL VIEW EXPLODE(a) x AS e, o`, which Spark refused after approval
    (UDTF_ALIAS_NUMBER_MISMATCH), or `POSEXPLODE`, numbered from 0. Found in the text: the
    parsed query keeps no trace of it once its canonical form is written."""
    unnested = False  # `WITH offset AS (...)` names a CTE: only `UNNEST(a) WITH ...` counts
    for closing, (before, token) in zip(tokens, itertools.pairwise(tokens[1:]), strict=False):
        unnested = unnested or closing.token_type is TokenType.UNNEST
        if (
            unnested
            and closing.token_type is TokenType.R_PAREN
            and before.token_type is TokenType.WITH
            and token.token_type in _NUMBERED
        ):
            yield Found(
                before.start,
                f"uses UNNEST ... WITH {token.text.upper()}, which Spindle cannot write for "
                "Spark (it was written as EXPLODE with a name too many, which Spark refused "
                "after approval, or as POSEXPLODE, numbered from 0): write UNNEST(a) AS x(e) "
                "without it, or number the elements with POSEXPLODE in the select list, SELECT "
                "POSEXPLODE(a) AS (pos, e) (pos counts from 0)",
            )


_NUMBERED = frozenset({TokenType.ORDINALITY, TokenType.OFFSET})


def _problems(query: exp.Expr, text: str) -> Iterator[Found]:
    tokens = statement_tokens(text) if _NUMBERED_WORDS.search(text) else []
    yield from _ordinality(tokens)
    for node in query.walk():
        label = unsupported(node)
        if label is not None:
            yield Found(text_start(node) or 0, f"uses {label}, which Spindle cannot run on Spark")
        check = CALL_PROBLEMS.get(type(node))
        said = check(node) if check is not None else None
        if said is not None:  # a type is where its CAST is
            at = node.parent if isinstance(node, exp.DataType) else node
            yield Found(text_start(at or node) or 0, said)
        said = _unnest(node) if isinstance(node, exp.Unnest) else None
        if said is not None:
            yield Found(_keyword_before(text, node, TokenType.UNNEST), said)
    found = unwritable_call(query)
    if found is not None:
        yield Found(text_start(found[0]) or 0, found[1])
    yield from type_problems(query, text, said="uses the")


_NUMBERED_WORDS = re.compile(r"ordinality|offset", re.IGNORECASE)


def type_problems(tree: exp.Expr, text: str, *, said: str) -> Iterator[Found]:
    """`UnsupportedType` for each type `tree` (in the statement `text`) writes that Spindle
    cannot run on Spark (`types.written_type_problem`), at the type, in the tree's order."""
    starts: Mapping[int, int] | None = None
    for node in tree.find_all(exp.DataType):
        if isinstance(node.parent, exp.DataType | exp.ColumnDef):
            continue  # an element: its type's check reads it
        problem = written_type_problem(node)
        if problem is None:
            continue
        starts = type_starts(tree, text) if starts is None else starts
        at = starts.get(id(node), text_start(node.parent) if node.parent else None)
        yield Found(at or 0, f"{said} {problem}", "UnsupportedType")


def statement_tokens(text: str) -> list[Token]:
    """The tokens of a statement's text (none for one that does not tokenize: it parsed)."""
    try:
        return DIALECT.tokenize(text)
    except TokenError:
        return []


def _keyword_before(text: str, node: exp.Expr, keyword: TokenType) -> int:
    """Where the last `keyword` before `node`'s text starts (`UNNEST` of `UNNEST(a)`, whose
    arguments sqlglot locates, not the word)."""
    start = text_start(node)
    found = [
        t.start
        for t in statement_tokens(text)
        if t.token_type is keyword and (start is None or t.start < start)
    ]
    return (found[-1] if start is not None else found[0]) if found else start or 0


_TYPE_WORDS = frozenset(Parser.TYPE_TOKENS)
_TYPED_LITERAL_WORDS = frozenset({"WITH", "WITHOUT", "LOCAL", "TIME", "ZONE"})
"""Words of a typed literal's type besides type names: TIMESTAMP WITH TIME ZONE '...'."""


def type_starts(tree: exp.Expr, text: str) -> dict[int, int]:
    """Where each CAST's type in `tree` (by the type's id) starts in its statement `text`.

    sqlglot locates names and literals, not types: a type is the first one written after its
    CAST's operand (after `AS` within `CAST(`, or after `::`), or before a typed literal's
    string (`DATE '2024-01-01'`). A cast whose operand has no located token (`CAST(NULL AS
    T)`) takes a type start no other cast has, in the tree's order."""
    tokens = statement_tokens(text)
    index = {t.start: i for i, t in enumerate(tokens)}
    after = _cast_type_starts(tokens)
    starts: dict[int, int] = {}
    unplaced: list[exp.Cast] = []
    for cast in reversed(list(tree.find_all(exp.Cast))):  # the innermost first
        operand = cast.this
        start = (
            _typed_literal(tokens, index.get(text_start(operand) or -1))
            if isinstance(operand, exp.Literal)
            else None
        )
        ends = [int(n.meta["end"]) for n in operand.walk() if n._meta and "end" in n.meta]
        ends += [starts[id(c.to)] for c in operand.find_all(exp.Cast) if id(c.to) in starts]
        if start is None and ends:
            start = next((a for a in after if a > max(ends)), None)
        if start is None:
            unplaced.append(cast)
        else:
            starts[id(cast.to)] = start
    left = [a for a in after if a not in starts.values()]
    for cast, start in zip(reversed(unplaced), left, strict=False):
        starts[id(cast.to)] = start
    return starts


def _cast_type_starts(tokens: list[Token]) -> list[int]:
    """Where a type starts after `::`, or after the `AS` of a CAST call, in text order."""
    return [
        following.start
        for _, token, following, in_cast in in_casts(tokens)
        if token.token_type is TokenType.DCOLON or (token.token_type is TokenType.ALIAS and in_cast)
    ]


def _typed_literal(tokens: list[Token], at: int | None) -> int | None:
    """Where the type of a typed literal whose string is token `at` starts (`DATE` of `DATE
    '2024-01-01'`), or None for a string that is not one (`CAST('1' AS INT)`)."""
    if at is None:
        return None
    first = at
    while first > 0 and (
        tokens[first - 1].token_type in _TYPE_WORDS
        or tokens[first - 1].text.upper() in _TYPED_LITERAL_WORDS
    ):
        first -= 1
    while first < at and tokens[first].token_type not in _TYPE_WORDS:
        first += 1
    return tokens[first].start if first < at else None


def unwritable_call(query: exp.Expr) -> tuple[exp.Expr, str] | None:
    """The innermost call of `query` sqlglot cannot write in Spark's SQL, and why (a view is
    refused for it at plan time, an ad-hoc query when it is checked)."""
    if unwritable(query) is None:
        return None
    calls = [n for n in query.walk() if isinstance(n, exp.Func) and "start" in n.meta]
    for call in reversed(calls):  # breadth first, reversed: the innermost call at fault
        why = unwritable(call)
        if why is not None:
            name = call_name(call)
            return call, (
                f"calls {name} in a form Spindle cannot write for Spark: {why}. Check the "
                f"number and order of its arguments against Spark's {name}"
            )
    return None
