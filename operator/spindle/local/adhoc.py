"""Ad-hoc inserts (`spindle local execute NAME "INSERT INTO t VALUES ..."`): a batch of literal
rows written, create-only, as one JSON-lines file into the table's ad-hoc input, where the next
step ingests it exactly once (its offset is the set of files already ingested).

All or nothing: every value is checked against its column's type and nullability before
anything is written (`spindle.local.values`), so a batch the next step cannot ingest is refused
here, naming the row, the column and where the value is, instead of failing the step on a file
the user would have to delete. Only the shape `INSERT INTO t [(columns)] VALUES (...), ...` is
understood, and any other part sqlglot parsed (a second statement, RETURNING, OVERWRITE, a name
after the rows: a missing comma between rows) is refused, never ignored.

Reasons: `UnsupportedSql` (not that shape, not a literal, a type ad-hoc inserts do not write),
`InvalidInsert` (rows and columns that do not match the table), `InvalidInsertValue` (a value
not of its column's type, NULL in a NOT NULL column), `UnknownRelation`.
"""

from __future__ import annotations

import datetime
import difflib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlglot import exp
from sqlglot.errors import TokenError
from sqlglot.tokenizer_core import Token, TokenType

from spindle.checkpoint.objects import ObjectStore
from spindle.errors import SpindleError, located
from spindle.local.values import Mismatch, column_type
from spindle.program import Program
from spindle.program.dialect import DIALECT
from spindle.program.model import Column, Table
from spindle.program.syntax import Problem, parse_tokens

SHAPE = "INSERT INTO <table> [(columns)] VALUES (...), (...)"
UNQUEUED = "nothing of the statement was queued"

_UNDERSTOOD: dict[type[exp.Expr], frozenset[str]] = {
    exp.Insert: frozenset({"this", "expression"}),
    exp.Schema: frozenset({"this", "expressions"}),
    exp.Table: frozenset({"this"}),
    exp.Values: frozenset({"expressions"}),
    exp.Tuple: frozenset({"expressions"}),
    exp.Paren: frozenset({"this"}),
    exp.Cast: frozenset({"this", "to", "_type"}),
    exp.Date: frozenset({"this"}),
    exp.TsOrDsToDate: frozenset({"this"}),
}
"""The arguments of each node this module reads; any other one set is refused."""

_CLAUSES = {
    "with_": ("WITH", "WITH"),
    "conflict": ("ON", "ON CONFLICT"),
    "alternative": ("OR", "OR"),
    "by_name": ("BY", "BY NAME"),
}
"""An Insert argument's first keyword (a token type) and its name in a message (followed by the
argument's value when that is text: OR REPLACE), where they are not the argument's own name."""


class _Refused(Exception):
    """A value that cannot be queued: `problem` follows the value's text in the message."""

    def __init__(self, reason: str, problem: str) -> None:
        super().__init__(problem)
        self.reason, self.problem = reason, problem


@dataclass
class _Row:
    start: int
    """Offset of the row's first token (its opening parenthesis)."""
    end: int = -1
    """Offset of its last character (its closing parenthesis), once read."""
    values: list[tuple[int, int]] = field(default_factory=list)
    """Each value's first and last character offsets."""


@dataclass(frozen=True)
class _Source:
    """The statement's text and tokens, for positions sqlglot's nodes do not keep (NULL, TRUE,
    CAST, a keyword) and for quoting values as written."""

    sql: str
    tokens: Sequence[Token]

    def error(self, reason: str, message: str, offset: int | None, **details: Any) -> SpindleError:
        if offset is None:
            return SpindleError(reason=reason, message=f"{message}.", details=details)
        line = self.sql.count("\n", 0, offset) + 1
        column = offset - self.sql.rfind("\n", 0, offset)
        return located(reason=reason, message=message, line=line, column=column, **details)

    @property
    def start(self) -> int | None:
        return self.tokens[0].start if self.tokens else None

    def keyword(self, name: str) -> int | None:
        return next((t.start for t in self.tokens if t.token_type.name == name), None)

    def second_statement(self) -> int | None:
        for before, token in zip(self.tokens, self.tokens[1:], strict=False):
            if before.token_type == TokenType.SEMICOLON and token.token_type != before.token_type:
                return token.start
        return None

    def rows(self) -> list[_Row]:
        """The rows after VALUES as written, read from the tokens. A parenthesized row that
        follows another with no comma is a row here, as the user meant it (sqlglot reads it as
        column names)."""
        first = next(
            (i for i, t in enumerate(self.tokens) if t.token_type == TokenType.VALUES), None
        )
        rows: list[_Row] = []
        row: _Row | None = None
        bare = after_row = False
        depth, start, end = 0, 0, 0
        for token in self.tokens[first + 1 :] if first is not None else ():
            kind = token.token_type
            if row is None:
                if kind == TokenType.COMMA:
                    after_row = False
                    continue
                if kind == TokenType.SEMICOLON or (after_row and kind != TokenType.L_PAREN):
                    break
                row = _Row(token.start)
                rows.append(row)
                bare, depth, start, end = kind != TokenType.L_PAREN, 0, token.start, token.end
                if not bare:
                    depth, start = 1, -1
                continue
            top = depth == (0 if bare else 1)
            if top and (kind == TokenType.COMMA or (kind == TokenType.R_PAREN and not bare)):
                if start >= 0:
                    row.values.append((start, end))
                start = -1
                if kind == TokenType.R_PAREN or bare:
                    row.end = token.end if kind == TokenType.R_PAREN else end
                    row, after_row = None, not bare
                continue
            if bare and top and kind == TokenType.SEMICOLON:
                break
            if start < 0:
                start = token.start
            depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(kind, 0)
            end = token.end
        if row is not None and bare and start >= 0:
            row.values.append((start, end))
            row.end = end
        return rows


def _start(node: exp.Expr | None) -> int | None:
    """The first offset sqlglot kept for `node` or a node under it."""
    if node is None:
        return None
    starts = [int(n.meta["start"]) for n in node.walk() if n._meta and "start" in n.meta]
    return min(starts, default=None)


def _first(*offsets: int | None) -> int | None:
    return next((o for o in offsets if o is not None), None)


def _extra(node: exp.Expr) -> list[str]:
    """The arguments of `node` that are set and that this module does not read."""
    understood = _UNDERSTOOD.get(type(node), frozenset())
    return [key for key, value in node.args.items() if key not in understood and value]


def _name(identifier: exp.Expr) -> str:
    """A normalized identifier: unquoted ones are case-insensitive (lower), quoted ones exact."""
    quoted = isinstance(identifier, exp.Identifier) and identifier.quoted
    return identifier.name if quoted else identifier.name.lower()


def _literal(node: exp.Expr) -> Any:
    """The value of a literal: None, bool, int, Decimal (exact), str, or a typed literal's value
    (`DATE '2025-01-01'`); `_Refused` for anything else."""
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Literal) and node.is_string:
        return str(node.this)
    if isinstance(node, exp.Literal):
        text = str(node.this)
        try:
            return int(text) if text.isdigit() else Decimal(text)
        except InvalidOperation:
            raise _Refused("UnsupportedSql", "is not a number ad-hoc inserts can read") from None
    if isinstance(node, exp.Paren) and not _extra(node):
        return _literal(node.this)
    if isinstance(node, exp.Neg):
        value = _literal(node.this)
        if isinstance(value, bool) or not isinstance(value, int | Decimal | None):
            raise _Refused("InvalidInsertValue", "negates a value that is not a number")
        return None if value is None else -value
    if isinstance(node, exp.Cast | exp.Date | exp.TsOrDsToDate) and not _extra(node):
        to = node.to if isinstance(node, exp.Cast) else exp.DataType.build("DATE")
        kind = column_type(to.sql(dialect=DIALECT))
        value = _literal(node.this)
        if value is None:
            return None
        if kind.converter is None:
            raise _Refused(
                "UnsupportedSql", f"is a {kind.declared} value, which ad-hoc inserts do not write"
            )
        try:
            return kind.convert(value)
        except Mismatch as mismatch:
            raise _Refused("InvalidInsertValue", mismatch.problem) from None
    raise _Refused("UnsupportedSql", "is not a literal; only literal values can be inserted ad hoc")


def _assign(value: Any, column: Column) -> Any:
    """`value` as a value of `column`, or `_Refused` saying why it cannot be one."""
    kind = column_type(column.type)
    if value is None:
        if not column.nullable:
            raise _Refused(
                "InvalidInsertValue", "is NULL, which a NOT NULL column cannot hold; give a value"
            )
        return None
    if kind.converter is None:
        raise _Refused(
            "UnsupportedSql",
            f"cannot be inserted ad hoc: `spindle local execute` writes no {kind.declared} "
            "values; insert NULL there, or load the row through an input connector",
        )
    try:
        return kind.convert(value)
    except Mismatch as mismatch:
        raise _Refused("InvalidInsertValue", mismatch.problem) from None


def _statement(source: _Source) -> exp.Insert:
    """The one INSERT of the statement, every part of it one this module reads."""
    try:  # the program's own parse, so a mistake reads as it would in a program
        statements = [s for s in parse_tokens(source.sql, list(source.tokens)) if s is not None]
    except Problem as problem:
        raise located(
            reason="InvalidInsert",
            message=f"{problem.message}; {UNQUEUED}",
            line=problem.line,
            column=problem.col,
        ) from None
    if len(statements) > 1:
        raise source.error(
            "UnsupportedSql",
            f"Execute one statement at a time: {SHAPE}; {UNQUEUED}",
            source.second_statement(),
        )
    statement = statements[0] if statements else None
    if not isinstance(statement, exp.Insert):
        raise source.error("UnsupportedSql", f"Only `{SHAPE}` can be executed ad hoc", source.start)
    for key in _extra(statement):
        value = statement.args[key]
        keyword, clause = _CLAUSES.get(key, (key.upper(), key.upper()))
        node = value if isinstance(value, exp.Expr) else None
        clause = f"{clause} {value.upper()}" if isinstance(value, str) else clause
        raise source.error(
            "UnsupportedSql",
            f"Only `{SHAPE}` can be executed ad hoc, without {clause}",
            _first(source.keyword(keyword), _start(node), source.start),
        )
    values = statement.expression
    if not isinstance(values, exp.Values):
        raise source.error(
            "UnsupportedSql",
            f"Only `{SHAPE}` can be executed ad hoc: rows of literal values, not a query",
            _first(_start(values), source.start),
        )
    return statement


def _unseparated(values: exp.Values, source: _Source) -> SpindleError:
    """The error for a name after the rows: `(4, 'Dan')` after a row with no comma is one."""
    alias = values.args["alias"]
    written = source.rows()
    index = len(values.expressions) + 1
    columns = alias.args.get("columns") or []
    if columns and not alias.args.get("this") and len(written) >= index:
        row = written[index - 1]
        text = source.sql[row.start : row.end + 1] if row.end >= 0 else alias.sql()
        return source.error(
            "InvalidInsert",
            f"Row {index} `{text}` follows row {index - 1} with no comma, so it would not be "
            f"inserted; separate rows with commas: VALUES (...), (...); {UNQUEUED}",
            row.start,
            row=index,
        )
    return source.error(
        "InvalidInsert",
        f"Unexpected `{alias.sql(dialect=DIALECT)}` after the rows: separate rows with commas "
        f"and end the statement after the last row; {UNQUEUED}",
        _first(_start(alias), source.start),
    )


def _target(statement: exp.Insert, program: Program, source: _Source) -> tuple[Table, list[Column]]:
    """The table inserted into and the columns each row gives, in order."""
    target = statement.this
    table_node = target.this if isinstance(target, exp.Schema) else target
    for node in (target, table_node):
        if not isinstance(node, exp.Schema | exp.Table) or _extra(node):
            extra = [node.args[k] for k in _extra(node)] if isinstance(node, exp.Expr) else []
            at = next((_start(e) for e in extra if isinstance(e, exp.Expr)), None)
            raise source.error(
                "UnsupportedSql",
                f"Only `{SHAPE}` can be executed ad hoc: name the table alone, as the program "
                "declares it",
                _first(at, _start(table_node), source.start),
            )
    assert isinstance(table_node, exp.Table)
    name = _name(table_node.this)
    table = program.tables.get(name)
    if table is None:
        said = (
            f"'{name}' is a view of the pipeline's program: views are computed from its "
            "tables, so insert into the tables it reads"
            if name in program.views
            else f"Table '{name}' is not declared in the pipeline's program"
            + "".join(
                f" (did you mean '{c}'?)"
                for c in difflib.get_close_matches(name, program.tables, n=1)
            )
        )
        raise source.error(
            "UnknownRelation",
            said,
            _start(table_node),
            relation=name,
        )
    if not isinstance(target, exp.Schema):
        return table, list(table.columns)
    by_name = {c.name: c for c in table.columns}
    given: list[Column] = []
    for identifier in target.expressions:
        column = by_name.get(_name(identifier)) if isinstance(identifier, exp.Identifier) else None
        written = identifier.sql(dialect=DIALECT)
        if column is None or column in given:
            problem = (
                f"Table '{name}' has no column '{written}'; its columns are {', '.join(by_name)}"
                if column is None
                else f"Column '{written}' is listed twice; list each column once"
            )
            raise source.error("InvalidInsert", problem, _start(identifier), relation=name)
        given.append(column)
    missing = [c for c in table.columns if not c.nullable and c not in given]
    if missing:
        raise source.error(
            "InvalidInsert",
            f"Column {missing[0].name} of '{name}' is NOT NULL and not in the column list; "
            "give it a value in every row",
            _start(table_node),
            relation=name,
        )
    return table, given


def parse_insert(sql: str, program: Program) -> tuple[str, list[dict[str, Any]]]:
    """The target table and its rows from `INSERT INTO t [(cols)] VALUES (...), ...`, every
    value of its column's type (all of the table's columns, NULL where not given); a
    `SpindleError` at the first row, value or part of the statement that cannot be queued."""
    try:
        tokens = DIALECT.tokenize(sql)
    except TokenError as error:
        raise SpindleError(
            reason="InvalidInsert", message=f"Cannot tokenize the statement: {error}."
        ) from None
    source = _Source(sql, tokens)
    statement = _statement(source)
    values = statement.expression
    assert isinstance(values, exp.Values)
    for key in _extra(values):
        if key == "alias":
            raise _unseparated(values, source)
        raise source.error(
            "UnsupportedSql",
            f"Only `{SHAPE}` can be executed ad hoc, without {key.upper()}",
            _first(_start(values.args[key]), source.start),
        )
    table, columns = _target(statement, program, source)
    written = source.rows()
    rows = []
    for index, node in enumerate(values.expressions, start=1):
        row = written[index - 1] if index <= len(written) else None
        items = node.expressions if isinstance(node, exp.Tuple) and not _extra(node) else [node]
        glued = next((i for i in items if isinstance(i, exp.Alias)), None)
        if glued is not None:  # `(1 Alice)`: a missing comma between values
            spans = row.values if row and len(row.values) == len(items) else []
            span = spans[items.index(glued)] if spans else None
            text = source.sql[span[0] : span[1] + 1] if span else glued.sql(dialect=DIALECT)
            raise source.error(
                "InvalidInsert",
                f"Row {index}: `{text}` reads as a value followed by the name `{glued.alias}`; "
                f"separate values with commas; {UNQUEUED}",
                _first(_start(glued.args.get("alias")), row.start if row else None, source.start),
                row=index,
            )
        if len(items) != len(columns):
            raise source.error(
                "InvalidInsert",
                f"Row {index} has {len(items)} values for {len(columns)} columns of "
                f"'{table.name}' ({', '.join(c.name for c in columns)}); {UNQUEUED}",
                _first(row.start if row else None, _start(node), source.start),
                row=index,
            )
        record: dict[str, Any] = dict.fromkeys((c.name for c in table.columns), None)
        for position, (column, item) in enumerate(zip(columns, items, strict=True)):
            span = row.values[position] if row and position < len(row.values) else None
            text = source.sql[span[0] : span[1] + 1] if span else item.sql(dialect=DIALECT)
            try:
                record[column.name] = _assign(_literal(item), column)
            except _Refused as refused:
                at = _first(
                    span[0] if span else None,
                    _start(item),
                    row.start if row else None,
                    source.start,
                )
                not_null = "" if column.nullable else " NOT NULL"
                raise source.error(
                    refused.reason,
                    f"Row {index}, column {column.name} ({column.type}{not_null}): `{text}` "
                    f"{refused.problem}; {UNQUEUED}",
                    at,
                    row=index,
                    column_name=column.name,
                    type=column.type,
                    value=text,
                ) from None
        rows.append(record)
    return table.name, rows


def _json(value: Any) -> str:
    """A value as JSON: a Decimal as an exact JSON number (the runtime reads a DECIMAL column
    from it without going through a float), dates and timestamps as ISO text."""
    if isinstance(value, Decimal):
        return format(value, "f")
    return json.dumps(value, default=str)


def write_batch(objects: ObjectStore, table: str, rows: list[dict[str, Any]]) -> str:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S%f")
    key = f"inputs/{table}/{stamp}-{uuid.uuid4().hex[:8]}.jsonl"
    data = "".join(
        "{" + ", ".join(f"{json.dumps(k)}: {_json(v)}" for k, v in row.items()) + "}\n"
        for row in rows
    ).encode()
    objects.write(key, data, if_none_match=True)
    return key
