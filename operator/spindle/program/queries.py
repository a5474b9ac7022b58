"""Ad-hoc queries over a pipeline's state (`spindle query`, `kubectl spindle query`): only a
single read-only query of the pipeline's own materialized relations runs.

The check is Spindle's own parse (the program's dialect and statement splitter), made before
anything reaches Spark, by the client and again by whatever runs the query. Spark then runs the
SQL generated from the checked tree (`QueryCheck.spark_sql`), never the text as typed, so a
difference between the two parsers cannot smuggle a second statement or a command past it.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sqlglot import exp
from sqlglot.tokenizer_core import TokenType

from spindle.errors import SpindleError, located
from spindle.program.dependencies import function_name
from spindle.program.dialect import DIALECT
from spindle.program.model import Program
from spindle.program.statements import split, text_start
from spindle.program.syntax import Problem, parse_tokens, tokenize
from spindle.program.writable import spark_sql, unwritable_call

REACHES_OUT = frozenset({"reflect", "java_method", "try_reflect"})
"""Spark functions that call Java methods: a query could end or change the process."""

WRITES: tuple[type[exp.Expr], ...] = (exp.DDL, exp.DML, exp.Command, exp.Into, exp.Set)
"""Nodes that make a statement something other than a query (`SELECT ... INTO` creates)."""

MAX_QUERY_ROWS = 10_000
"""Rows one answer holds at most: they are collected into the driver's memory (or the local
CLI's), which the running steps share, and rendered as one JSON document. A query with more
answers its first `MAX_QUERY_ROWS` (in its own order) and says it was cut."""


def row_limit(value: object) -> int:
    """A requested row limit: a whole number from 1 to `MAX_QUERY_ROWS`, or `InvalidQuery`."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_QUERY_ROWS:
        raise SpindleError(
            reason="InvalidQuery",
            message=f"A query answers at most {MAX_QUERY_ROWS:,} rows; ask for 1 to "
            f"{MAX_QUERY_ROWS:,} (got {value!r}), and narrow the query with WHERE or LIMIT.",
            details={"limit": str(value)},
        )
    return value


@dataclass(frozen=True)
class QueryCheck:
    """A query that passed the check, and the Spark SQL to run for it."""

    tree: exp.Query

    @property
    def spark_sql(self) -> str:
        """As a view's: the calls as written (sqlglot rewrites some into others that Spark
        runs with other results: `date_trunc('hour', ts)` as a DATE, `like(a, b)` swapped)."""
        return spark_sql(self.tree)


@dataclass(frozen=True)
class Answer:
    """A query's answer: its columns in order, its first rows (values as JSON holds them,
    `plain`), and whether the query has more rows than those."""

    columns: tuple[str, ...]
    rows: tuple[dict[str, Any], ...]
    truncated: bool


def answer_columns(names: Sequence[str], *, sql: str) -> tuple[str, ...]:
    """An answer's column names, or `InvalidQuery` when two are the same: each row is an
    object keyed by column name (as `--json` prints it), where one would hide the other."""
    seen: set[str] = set()
    for position, name in enumerate(names, start=1):
        if name in seen:
            instead = f"{name}_{position}" if name.isidentifier() else f"c{position}"
            raise SpindleError(
                reason="InvalidQuery",
                message=f"The query's answer has two columns named {name!r} (the second is "
                f"column {position}): give them different names with AS, e.g. "
                f"`... AS {instead}`.",
                details={"query": sql, "column": name},
            )
        seen.add(name)
    return tuple(names)


def _not_read_only(sql: str, what: str) -> SpindleError:
    return SpindleError(
        reason="QueryNotReadOnly",
        message=f"Only a single read-only query (SELECT, WITH ... SELECT, UNION, ...) runs "
        f"here, not {what}. Change a pipeline's data through its inputs (`spindle local "
        "execute` locally) and its program through `spec.sql`.",
        details={"query": sql},
    )


def _name(identifier: exp.Expr) -> str:
    return identifier.name if identifier.args.get("quoted") else identifier.name.lower()


def _check_relations(tree: exp.Query, sql: str, relations: Collection[str]) -> None:
    ctes = {_name(cte.args["alias"].this) for cte in tree.find_all(exp.CTE) if cte.alias}
    for table in tree.find_all(exp.Table):
        plain = isinstance(table.this, exp.Identifier) and not table.args.get("db")
        name = _name(table.this) if plain else table.sql(dialect=DIALECT)
        if plain and (name in relations or name in ctes):
            continue
        raise SpindleError(
            reason="InvalidQuery",
            message=f"The query reads {name!r}, which is not a materialized table or view of "
            f"the pipeline. Only these can be queried: {', '.join(sorted(relations)) or 'none'}.",
            details={"query": sql, "relation": name},
        )


def materialized(program: Program) -> frozenset[str]:
    """What a query may read: the program's materialized tables and views."""
    tables = {n for n, t in program.tables.items() if t.materialized}
    return frozenset(tables | {n for n, v in program.views.items() if v.materialized})


def check_query(sql: str, *, relations: Collection[str] | None = None) -> QueryCheck:
    """`sql` as one read-only query, or `QueryNotReadOnly` (several statements, DML, DDL,
    commands, functions that call Java); with `relations`, also `InvalidQuery` when it reads
    anything but those (paths, other catalogs, table functions)."""
    statements = split(sql)
    if len(statements) != 1:
        raise _not_read_only(sql, f"{len(statements)} statements" if statements else "an empty one")
    statement = statements[0]
    try:  # the program's own parse, so a mistake reads as it would in a program
        [tree] = parse_tokens(statement.text, tokenize(statement.text))
    except Problem as problem:
        where = statement.locate_line_col(problem.line, problem.col)
        raise located(
            reason="InvalidQuery",
            message=problem.message,
            line=where.line,
            column=where.column,
            query=sql,
        ) from None
    if not isinstance(tree, exp.Query):
        raise _not_read_only(sql, f"{type(tree).__name__.upper()}")
    for node in tree.walk():
        if isinstance(node, WRITES):
            raise _not_read_only(sql, f"a query with {node.key.upper()}")
        if isinstance(node, exp.Func) and function_name(node) in REACHES_OUT:
            raise _not_read_only(sql, f"{function_name(node)}(), which runs Java code")
    if relations is not None:
        _check_relations(tree, sql, relations)
    # a call the generator cannot write raised its Python error, unlocated (other checks of
    # views are not a query's: Spark runs it once, as written, and nothing maintains it)
    unwritable = unwritable_call(tree)
    if unwritable is not None:
        node, said = unwritable
        where = statement.locate(text_start(node) or 0)
        raise located(
            reason="InvalidQuery",
            message=f"The query {said}.",
            line=where.line,
            column=where.column,
            query=sql,
        )
    return QueryCheck(tree=tree)


NOT_FOUND = ("TABLE_OR_VIEW_NOT_FOUND", "Table or view not found")
"""How Spark says a query names a relation it does not know."""


_SPARK_POSITION = re.compile(r";? line \d+ pos \d+;?\s*$")
"""Where Spark's message says the error is: in the SQL written for Spark, not the user's."""

_NAMED = re.compile(r"(?:`[^`]+`\.)*`([A-Za-z_][A-Za-z0-9_]*)`")
"""A name Spark quotes in its message, by its last part (`nme` of `s`.`nme`)."""

_LITERALS = frozenset({TokenType.STRING, TokenType.NATIONAL_STRING, TokenType.NUMBER})
"""Tokens a name is never found in (a name may be a keyword's token: a column `date`)."""


def without_position(said: str) -> str:
    """A line of Spark's message without its position in the SQL Spark was given."""
    return _SPARK_POSITION.sub("", said).rstrip(" ;.")


def query_failed(sql: str, cause: str, relations: Collection[str]) -> SpindleError:
    """`InvalidQuery` for a checked query that Spark could not run (`cause`: the first line
    of Spark's error, e.g. a column that does not exist), at the first name Spark quotes where
    the query has it (Spark's own position is in the SQL it was given, not the query). Only
    when Spark did not find a relation does it list what can be queried: otherwise that is not
    the problem."""
    said = without_position(cause)
    message = f"The query cannot run: {said}."
    if any(marker in said for marker in NOT_FOUND):
        message += (
            " Only materialized tables and views can be queried "
            f"({', '.join(sorted(relations)) or 'none'})."
        )
    start = _name_in(sql, named[1]) if (named := _NAMED.search(said)) else None
    if start is None:
        return SpindleError(reason="InvalidQuery", message=message, details={"query": sql})
    before = sql[:start]
    line, column = before.count("\n") + 1, start - (before.rfind("\n") + 1) + 1
    return located(reason="InvalidQuery", message=message, line=line, column=column, query=sql)


def _name_in(sql: str, name: str) -> int | None:
    """Where the query first has `name` as a name (quoted or not; never inside a string)."""
    try:
        tokens = tokenize(sql)
    except Problem:
        return None
    lowered = name.lower()
    found = (t for t in tokens if t.token_type not in _LITERALS and t.text.lower() == lowered)
    return next((t.start for t in found), None)


def plain(value: Any) -> Any:
    """A row value as JSON holds it: DECIMAL as its exact text in positional notation (no digit
    lost, no exponent), dates in ISO 8601, an interval as an ISO 8601 duration, bytes as hex,
    a NaN or an infinity as the text Spark reads back (`'NaN'`, `'Infinity'`: JSON has no
    such numbers); maps, lists and tuples value by value."""
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return duration(value)
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, bytes | bytearray):
        return value.hex()
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def duration(value: datetime.timedelta) -> str:
    """An interval as ISO 8601 writes it (`P1DT2H3M4.5S`, `-PT1S`)."""
    micros = abs(value) // datetime.timedelta(microseconds=1)
    days, rest = divmod(micros, 86_400_000_000)
    hours, rest = divmod(rest, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds = f"{rest // 1_000_000}.{rest % 1_000_000:06d}".rstrip("0").rstrip(".")
    time = "".join(f"{n}{unit}" for n, unit in ((hours, "H"), (minutes, "M")) if n) + (
        f"{seconds}S" if rest or not (days or hours or minutes) else ""
    )
    sign = "-" if value < datetime.timedelta(0) else ""
    return f"{sign}P{f'{days}D' if days else ''}{'T' + time if time else ''}"
