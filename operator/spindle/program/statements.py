"""Split a program into statements and analyze each one, cached by its exact text.

Each statement is parsed on its own, so every position inside its AST is relative to the
statement's start; `Statement.locate` turns such a position into the program's line and column.
The analysis is a pure function of the statement text, so it is memoized: two programs that
share most statements (the usual diff) parse and canonicalize the shared ones once.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokenizer_core import Token, TokenType

from spindle.errors import located
from spindle.program.canonical import canonical_sql, census, render
from spindle.program.dependencies import called_functions, read_relations
from spindle.program.dialect import DIALECT
from spindle.program.lateness import LatenessClause, lift_lateness
from spindle.program.model import Column, Position, Reference

_TYPE_ALIASES = {"TEXT": "VARCHAR", "STRING": "VARCHAR"}
_NONE: Mapping[int, str] = MappingProxyType({})


@dataclass(frozen=True)
class Statement:
    """One statement's text and where it starts in the program."""

    text: str
    start: int
    line: int
    column: int

    def locate(self, offset: int) -> Position:
        """The program position of a character offset within this statement."""
        newlines = self.text.count("\n", 0, offset)
        if newlines == 0:
            return Position(self.line, self.column + offset)
        return Position(self.line + newlines, offset - self.text.rfind("\n", 0, offset))

    def locate_line_col(self, line: int, col: int) -> Position:
        if line <= 1:
            return Position(self.line, self.column + col - 1)
        return Position(self.line + line - 1, col)


def _skip_space_and_comments(program: str, index: int, end: int) -> int:
    while index < end:
        if program[index].isspace():
            index += 1
        elif program.startswith("--", index):
            newline = program.find("\n", index)
            index = end if newline < 0 else newline + 1
        elif program.startswith("/*", index):
            close = program.find("*/", index + 2)
            index = end if close < 0 else close + 2
        else:
            break
    return index


_SPECIAL = re.compile(r"[;'\"`]|--|/\*")  # a character class to jump between, not a grammar


def _statement_end(program: str, index: int) -> int:
    """Offset of the `;` ending the statement at `index` (or the end), skipping quoted text
    and comments. Unterminated quotes run to the end; the tokenizer then reports them."""
    end = len(program)
    while index < end:
        found = _SPECIAL.search(program, index)
        if found is None:
            return end
        index, char = found.start(), found.group()
        if char == ";":
            return index
        if char in "'\"`":
            close = program.find(char, index + 1)
            while close >= 0 and program.startswith(char * 2, close):  # doubled quote escapes
                close = program.find(char, close + 2)
            index = end if close < 0 else close + 1
        else:
            index = _skip_space_and_comments(program, index, end)
    return end


@lru_cache(maxsize=8)
def split(program: str) -> tuple[Statement, ...]:
    """Statements in program order; comments and whitespace around them are dropped.

    Statements are found by a small scanner that knows quotes and comments, so each statement
    can be looked up in the analysis cache before it is tokenized.
    """
    statements: list[Statement] = []
    index, end = 0, len(program)
    line, counted = 1, 0
    while index < end:
        start = _skip_space_and_comments(program, index, end)
        if start >= end:
            break
        stop = _statement_end(program, start)
        text = program[start:stop].rstrip()
        if text:
            line += program.count("\n", counted, start)
            counted = start
            column = start - (program.rfind("\n", 0, start) + 1) + 1
            statements.append(Statement(text=text, start=start, line=line, column=column))
        index = stop + 1
    return tuple(statements)


# ---------------------------------------------------------------------------------------------
# Analysis of one statement (positions relative to the statement)


@dataclass(frozen=True)
class TableFacts:
    name: str
    name_offset: int
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    properties: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class ViewFacts:
    name: str
    name_offset: int
    materialized: bool
    properties: tuple[tuple[str, str], ...]
    reads: tuple[Reference, ...]
    calls: tuple[Reference, ...]
    canonical: str


@dataclass(frozen=True)
class FunctionFacts:
    name: str
    name_offset: int
    parameters: tuple[tuple[str, str], ...]
    returns: str
    calls: tuple[Reference, ...]
    canonical: str


Facts = TableFacts | ViewFacts | FunctionFacts


class _Problem(Exception):
    """A problem at a position relative to the statement, located later by the caller."""

    def __init__(self, *, reason: str, message: str, line: int, col: int, **details: Any):
        super().__init__(message)
        self.reason, self.message, self.line, self.col, self.details = (
            reason,
            message,
            line,
            col,
            details,
        )

    def __reduce__(self) -> tuple[Any, ...]:  # crosses process boundaries (parallel analysis)
        return (_problem, (self.reason, self.message, self.line, self.col, self.details))


def _problem(reason: str, message: str, line: int, col: int, details: dict[str, Any]) -> _Problem:
    return _Problem(reason=reason, message=message, line=line, col=col, **details)


def _meta_offset(node: exp.Expr | None) -> int:
    if node is None:
        return 0
    for candidate in (node, *node.find_all(exp.Identifier)):
        meta = candidate.meta if candidate._meta else {}
        if "start" in meta:
            return int(meta["start"])
    return 0


def _type_sql(kind: exp.DataType) -> str:
    text = kind.sql(dialect=DIALECT)
    return _TYPE_ALIASES.get(text.upper(), text.upper())


def _string_properties(create: exp.Create) -> tuple[tuple[str, str], ...]:
    props = create.args.get("properties")
    found: list[tuple[str, str]] = []
    for prop in props.expressions if props else []:
        if isinstance(prop, exp.Property) and isinstance(prop.this, exp.Literal | exp.Var):
            value = prop.args.get("value")
            text = value.this if isinstance(value, exp.Literal) else (value.sql() if value else "")
            found.append((str(prop.this.this).lower(), str(text)))
    return tuple(found)


def _table_facts(create: exp.Create, *, lateness: Mapping[int, str] = _NONE) -> TableFacts:
    schema = create.this
    if not isinstance(schema, exp.Schema) or create.expression is not None:
        raise _Problem(
            reason="InvalidProgram",
            message="CREATE TABLE needs a column list and no AS query; declare the columns",
            line=1,
            col=1,
        )
    table = schema.this
    columns: list[Column] = []
    primary_key: list[str] = []
    for element, item in enumerate(schema.expressions):
        if isinstance(item, exp.ColumnDef):
            nullable = True
            for constraint in item.constraints:
                kind = constraint.kind
                if isinstance(kind, exp.NotNullColumnConstraint) and not kind.args.get(
                    "allow_null"
                ):
                    nullable = False
                elif isinstance(kind, exp.PrimaryKeyColumnConstraint):
                    primary_key.append(item.name)
                    nullable = False
            kind_node = item.args.get("kind")
            if not isinstance(kind_node, exp.DataType):
                raise _Problem(
                    reason="InvalidProgram",
                    message=f"column '{item.name}' has no type; give it one",
                    line=1,
                    col=1,
                )
            columns.append(Column(item.name, _type_sql(kind_node), nullable, lateness.get(element)))
        elif element in lateness:
            raise _Problem(
                reason="InvalidProgram",
                message="LATENESS belongs to a column definition: `col TYPE LATENESS <interval>`",
                line=1,
                col=1,
            )
        elif isinstance(item, exp.PrimaryKey):
            primary_key.extend(
                e.name for e in item.expressions if isinstance(e, exp.Identifier | exp.Column)
            )
    pk = set(primary_key)
    columns = [Column(c.name, c.type, False, c.lateness) if c.name in pk else c for c in columns]
    return TableFacts(
        name=table.name,
        name_offset=_meta_offset(table),
        columns=tuple(columns),
        primary_key=tuple(primary_key),
        properties=_string_properties(create),
    )


def _view_facts(create: exp.Create) -> ViewFacts:
    query = create.expression
    if not isinstance(query, exp.Query):
        raise _Problem(
            reason="InvalidProgram",
            message="CREATE VIEW needs AS followed by a query",
            line=1,
            col=1,
        )
    target = create.this
    table = target.this if isinstance(target, exp.Schema) else target
    props = create.args.get("properties")
    materialized = bool(props and props.find(exp.MaterializedProperty))
    nodes = census(query)
    canonical = canonical_sql(query, nodes)
    if isinstance(target, exp.Schema):
        canonical = f"({', '.join(c.name for c in target.expressions)}) {canonical}"
    return ViewFacts(
        name=table.name,
        name_offset=_meta_offset(table),
        materialized=materialized,
        properties=_string_properties(create),
        reads=read_relations(query),
        calls=called_functions(query, nodes),
        canonical=canonical,
    )


def _function_facts(create: exp.Create) -> FunctionFacts:
    udf = create.this
    body = create.expression
    props = create.args.get("properties")
    returns = props.find(exp.ReturnsProperty) if props else None
    if not isinstance(udf, exp.UserDefinedFunction) or body is None or returns is None:
        raise _Problem(
            reason="InvalidProgram",
            message="CREATE FUNCTION needs (parameters) RETURNS <type> AS <expression>",
            line=1,
            col=1,
        )
    parameters = tuple(
        (p.name, _type_sql(p.args["kind"]))
        for p in udf.expressions
        if isinstance(p, exp.ColumnDef) and isinstance(p.args.get("kind"), exp.DataType)
    )
    return_type = returns.this
    return FunctionFacts(
        name=udf.this.name,
        name_offset=_meta_offset(udf.this),
        parameters=parameters,
        returns=_type_sql(return_type) if isinstance(return_type, exp.DataType) else "",
        calls=called_functions(body),
        canonical=canonical_sql(create),
    )


_ANALYZERS: dict[str, Callable[[exp.Create], Facts]] = {
    "TABLE": _table_facts,
    "VIEW": _view_facts,
    "FUNCTION": _function_facts,
}


def _normalized_identifiers(statement: exp.Expr) -> bool:
    """Lower-case unquoted identifiers (they are case-insensitive, as in sqlglot's default
    dialect; quoted ones are kept exactly). False when the statement holds an opaque `Command`
    (what sqlglot keeps of syntax it cannot parse), which is refused."""
    for node in statement.find_all(exp.Identifier, exp.Command):
        if isinstance(node, exp.Command):
            return False
        if isinstance(node, exp.Identifier) and not node.quoted:
            name = node.this
            lowered = name.lower()
            if lowered != name:
                node.set("this", lowered)
    return True


def _at(text: str, token: Token) -> dict[str, int]:
    """The statement-relative line and column where `token` starts."""
    line_start = text.rfind("\n", 0, token.start) + 1
    return {"line": text.count("\n", 0, token.start) + 1, "col": token.start - line_start + 1}


def _parse(text: str, tokens: list[Token]) -> list[exp.Expr | None]:
    try:
        return DIALECT.parser().parse(tokens, text)
    except ParseError as error:
        first = error.errors[0] if error.errors else {}
        description = first.get("description") or str(error)
        raise _Problem(
            reason="InvalidProgram",
            message=f"Syntax error: {description}",
            line=int(first.get("line") or 1),
            col=max(int(first.get("col") or 1) - len(first.get("highlight") or " ") + 1, 1),
        ) from None


def _lateness(text: str, create: exp.Create, clauses: tuple[LatenessClause, ...]) -> dict[int, str]:
    """Each LATENESS interval (canonical SQL) by the index of its column definition."""
    schema = create.this
    items = schema.expressions if isinstance(schema, exp.Schema) else []
    found: dict[int, str] = {}
    for clause in clauses:
        if not clause.interval:
            raise _Problem(
                reason="InvalidProgram",
                message="Expecting an interval after LATENESS, for example INTERVAL 1 HOUR",
                **_at(text, clause.following or clause.keyword),
            )
        if clause.element >= len(items) or not isinstance(items[clause.element], exp.ColumnDef):
            raise _Problem(
                reason="InvalidProgram",
                message="LATENESS belongs to a column definition: `col TYPE LATENESS <interval>`",
                **_at(text, clause.keyword),
            )
        parsed = _parse(text, list(clause.interval))
        interval = parsed[0] if len(parsed) == 1 else None
        if interval is None or isinstance(interval, exp.Alias):
            raise _Problem(
                reason="InvalidProgram",
                message="LATENESS takes one expression, for example INTERVAL 1 HOUR",
                **_at(text, clause.interval[0]),
            )
        if interval.find(exp.Column, exp.Query) is not None:
            raise _Problem(
                reason="InvalidProgram",
                message="LATENESS takes a constant, for example INTERVAL 1 HOUR (or 10 for a "
                "numeric column)",
                **_at(text, clause.interval[0]),
            )
        found[clause.element] = render(interval)
    return found


_SCAN_LIMIT = 4096


def _parses_cleanly(text: str, tokens: list[Token]) -> bool:
    try:
        parsed = DIALECT.parser().parse(tokens, text)
    except ParseError:
        return False
    return len(parsed) == 1 and parsed[0] is not None and not parsed[0].find(exp.Command)


def _stopping_token(text: str, tokens: list[Token]) -> Token | None:
    """Where sqlglot gave up on a CREATE it could only keep as an opaque `Command`: the token
    after the longest prefix that parses on its own. (The compiled parser cannot be hooked to
    report it, so the error path re-parses; valid programs never pay for this.)"""
    if not tokens or tokens[0].token_type != TokenType.CREATE or len(tokens) > _SCAN_LIMIT:
        return None
    for end in range(len(tokens) - 1, 1, -1):
        if _parses_cleanly(text, tokens[:end]):
            return tokens[end]
    return None


@dataclass(frozen=True)
class Parsed:
    """One statement's normalized AST, and the LATENESS clauses lifted out before parsing."""

    create: exp.Create
    lateness: tuple[LatenessClause, ...]


@lru_cache(maxsize=65536)
def parsed(text: str) -> Parsed:
    """Tokenize, parse and normalize one statement; cached by its exact text. The tree is
    shared: never mutate it (copy it first)."""
    try:
        tokens, lateness = lift_lateness(DIALECT.tokenize(text))
    except TokenError as error:
        raise _Problem(
            reason="InvalidProgram", message=f"Cannot tokenize: {error}", line=1, col=1
        ) from None
    trees = _parse(text, tokens)
    statement = trees[0] if trees else None
    if statement is None:
        raise _Problem(reason="InvalidProgram", message="Empty statement", line=1, col=1)
    if not _normalized_identifiers(statement):
        stop = _stopping_token(text, tokens)
        if stop is not None:
            raise _Problem(
                reason="InvalidProgram",
                message=f"Syntax error: Unexpected '{stop.text}'",
                **_at(text, stop),
            )
        raise _Problem(
            reason="InvalidProgram",
            message=f"Unsupported statement '{text.split()[0].upper()} ...': Spindle programs "
            "contain only CREATE TABLE, CREATE [MATERIALIZED] VIEW and CREATE FUNCTION",
            line=1,
            col=1,
        )
    kind = (
        str(statement.args.get("kind") or "").upper() if isinstance(statement, exp.Create) else ""
    )
    if kind not in _ANALYZERS:
        raise _Problem(
            reason="InvalidProgram",
            message=f"Unsupported statement '{statement.key.upper()}': Spindle programs contain "
            "only CREATE TABLE, CREATE [MATERIALIZED] VIEW and CREATE FUNCTION",
            line=1,
            col=1,
        )
    assert isinstance(statement, exp.Create)
    return Parsed(statement, lateness)


def _analyze(text: str) -> Facts:
    tree = parsed(text)
    create = tree.create
    kind = str(create.args.get("kind") or "").upper()
    if kind == "TABLE":  # only a CREATE TABLE's column list has LATENESS clauses
        return _table_facts(create, lateness=_lateness(text, create, tree.lateness))
    return _ANALYZERS[kind](create)


# Facts by statement text. Filled by `analyze`, or ahead of it by `remember` (the CLI analyzes
# large programs in parallel processes); evicted oldest first. Facts hold no ASTs, so they are
# small and cross process boundaries cheaply.
_FACTS: dict[str, Facts] = {}
_FACTS_LIMIT = 65536
_FACTS_LOCK = threading.Lock()


def remember(text: str, facts: Facts) -> None:
    with _FACTS_LOCK:
        _FACTS[text] = facts
        while len(_FACTS) > _FACTS_LIMIT:
            del _FACTS[next(iter(_FACTS))]


def known(text: str) -> bool:
    return text in _FACTS


def forget_all() -> None:
    """Empty the caches (benchmarks measure cold analysis)."""
    with _FACTS_LOCK:
        _FACTS.clear()
    parsed.cache_clear()


def analyze_texts(texts: Sequence[str]) -> list[Facts | _Problem]:
    """Facts (or the problem) of each statement text; what a parallel worker computes."""
    results: list[Facts | _Problem] = []
    for text in texts:
        try:
            results.append(_analyze(text))
        except _Problem as problem:
            results.append(problem)
    return results


def analyze(statement: Statement) -> Facts:
    """Parse and analyze one statement; errors carry program line and column."""
    facts = _FACTS.get(statement.text)
    if facts is not None:
        return facts
    try:
        facts = _analyze(statement.text)
    except _Problem as problem:
        where = statement.locate_line_col(problem.line, problem.col)
        raise located(
            reason=problem.reason,
            message=problem.message,
            line=where.line,
            column=where.column,
            **problem.details,
        ) from None
    remember(statement.text, facts)
    return facts
