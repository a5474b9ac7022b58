"""What each statement declares (its facts), analyzed once per distinct statement text.

The analysis is a pure function of the statement text, so it is memoized: two programs that share
most statements (the usual diff) parse and canonicalize the shared ones once. Facts hold no ASTs
(`View.query` is parsed again from the text when needed), so they are small and cross process
boundaries cheaply: the CLI analyzes large programs in parallel workers and `remember`s the
results.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from spindle.errors import located
from spindle.program.canonical import canonical_sql, census
from spindle.program.column_lists import width_problem
from spindle.program.dependencies import called_functions, read_relations
from spindle.program.dialect import DIALECT
from spindle.program.model import Column, Reference
from spindle.program.statements import Statement
from spindle.program.syntax import Problem, invalid, parsed

_TYPE_ALIASES = {  # Feldera's names for types sqlglot keeps under another name
    "TEXT": "VARCHAR",
    "STRING": "VARCHAR",
    "DATETIME": "TIMESTAMP",
    "FLOAT32": "FLOAT",
    "FLOAT64": "DOUBLE",
}


@dataclass(frozen=True)
class TableFacts:
    name: str
    name_offset: int
    columns: tuple[Column, ...]
    column_offsets: tuple[int, ...]
    """Where each column's name starts in the statement."""
    primary_key: tuple[str, ...]
    key_offsets: tuple[int, ...]
    """Where each name of the primary key starts in the statement."""
    misread: tuple[tuple[int, str, str], ...]
    """What of the declaration Spindle reads otherwise than written, as (where it starts in the
    statement, the reason, what to do): a name without a type (no column), a named key (no
    key), a constraint Spindle does not apply (`UNAPPLIED`). A program that ran with one ran
    so, and runs so; a program to run is refused with it."""
    properties: tuple[tuple[str, str], ...]
    """The `WITH ('key' = 'value')` properties in order, keys lower-cased (a key given twice
    is here twice)."""
    clauses: tuple[str, ...] = ()
    """Other clauses sqlglot read as properties, which Spindle does not read (`COMMENT 'x'`,
    `USING DELTA`), as Spark's SQL writes them."""
    qualifier: Qualifier | None = None


@dataclass(frozen=True)
class Qualifier:
    """The schema (and catalog) a declaration's name was written with (`s.w`), which Spindle,
    having no schemas, read past: the object is named `w`."""

    offset: int
    """Where the qualifier starts in the statement."""
    written: str
    """The name as written, qualifier included (`s.w`): what a reference to it reads."""


@dataclass(frozen=True)
class ViewFacts:
    name: str
    name_offset: int
    materialized: bool
    properties: tuple[tuple[str, str], ...]
    reads: tuple[Reference, ...]
    calls: tuple[Reference, ...]
    canonical: str
    clauses: tuple[str, ...] = ()
    qualifier: Qualifier | None = None


@dataclass(frozen=True)
class FunctionFacts:
    name: str
    name_offset: int
    parameters: tuple[tuple[str, str], ...]
    returns: str
    calls: tuple[Reference, ...]
    canonical: str
    qualifier: Qualifier | None = None


Facts = TableFacts | ViewFacts | FunctionFacts


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


READ_CLAUSES = (exp.MaterializedProperty, exp.ReturnsProperty)
"""Clauses sqlglot keeps among a declaration's properties that Spindle reads otherwise."""
_CLAUSE_LENGTH = 60
"""How much of a clause Spindle does not read a warning quotes."""


def _properties(create: exp.Create) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]]:
    """The `WITH ('key' = 'value')` properties, keys lower-cased, and the other clauses sqlglot
    read as properties, as Spark's SQL writes them: sqlglot keeps `COMMENT 'x'` as a property
    whose `this` is the comment, which was warned about as a property named 'x'."""
    props = create.args.get("properties")
    found: list[tuple[str, str]] = []
    clauses: list[str] = []
    for prop in props.expressions if props else []:
        if type(prop) is exp.Property and isinstance(prop.this, exp.Literal | exp.Var):
            value = prop.args.get("value")
            text = value.this if isinstance(value, exp.Literal) else (value.sql() if value else "")
            found.append((str(prop.this.this).lower(), str(text)))
        elif not isinstance(prop, READ_CLAUSES):
            clause = prop.sql(dialect="spark")
            if len(clause) > _CLAUSE_LENGTH:
                clause = clause[: _CLAUSE_LENGTH - 3] + "..."
            clauses.append(clause)
    return tuple(found), tuple(clauses)


def _qualifier(named: exp.Expr) -> Qualifier | None:
    """The qualifier of a declaration's name (`s.w`, `c.s.w`), or None for a plain one."""
    if not isinstance(named, exp.Table):
        return None
    first = named.args.get("catalog") or named.args.get("db")
    if first is None:
        return None
    written = ".".join(part.name for part in named.parts)
    return Qualifier(offset=_meta_offset(first), written=written)


def _keyword_column(item: exp.Expr) -> bool:
    """A column named with a keyword that sqlglot reads as a clause of the table: `unique int`
    as a UNIQUE constraint on a column `int`, `like int` as CREATE TABLE ... LIKE. The column
    left the table without a word, and every input record's field with it."""
    if isinstance(item, exp.UniqueColumnConstraint):
        return not isinstance(item.this, exp.Schema)  # `UNIQUE (a, b)` is the table's own
    return isinstance(item, exp.LikeProperty)


def _start_col(meta: Mapping[str, Any]) -> int:
    """The column where a name sqlglot located starts (its meta gives where it ends)."""
    return max(int(meta.get("col", 1)) - int(meta.get("end", 0)) + int(meta.get("start", 0)), 1)


def _keyword_problem(item: exp.Expr) -> Problem:
    word = "unique" if isinstance(item, exp.UniqueColumnConstraint) else "like"
    named = item.find(exp.Identifier)
    meta = named.meta if named is not None else {}
    line = int(meta.get("line", 1))
    col = max(int(meta.get("col", 1)) - len(named.name if named is not None else "") + 1, 1)
    return invalid(
        f"Syntax error: '{word} {named.name if named is not None else ''}' reads as a "
        f"{word.upper()} clause of the table, not a column: {word} is a keyword. Name the "
        f'column "{word}" (in double quotes), or otherwise',
        line=line,
        col=col,
    )


UNAPPLIED: dict[type[exp.Expr], str] = {
    exp.DefaultColumnConstraint: "Spindle does not fill a default in: a record without the "
    "column reads as NULL. Remove it, or write COALESCE(column, value) in the views that read "
    "the column",
    exp.CheckColumnConstraint: "Spindle does not enforce it: a row that fails it is "
    "ingested. Remove it, and keep such rows out in a view (WHERE ...)",
    exp.UniqueColumnConstraint: "Spindle does not enforce it: rows with the same value are "
    "all ingested. Remove it, or make it the table's PRIMARY KEY (an insert with the key of "
    "a stored row replaces it)",
    exp.AutoIncrementColumnConstraint: "Spindle does not number rows: a record without the "
    "column reads as NULL. Remove it, and give the column in each record",
    exp.GeneratedAsIdentityColumnConstraint: "Spindle does not number rows: a record "
    "without the column reads as NULL. Remove it, and give the column in each record",
    exp.CollateColumnConstraint: "Spindle compares text as Spark does, byte by byte. "
    "Remove it, and compare LOWER(column) where case should not matter",
}
"""Constraints sqlglot reads that Spindle does not apply, and what to do instead: each was
ignored without a word (a DEFAULT read as NULL, a CHECK let every row in). Other constraints a
column may carry are refused alike, unless `APPLIED`."""

COMPUTED = "Spindle does not compute columns of tables. Remove it, and compute the value in a view"
"""`GENERATED ALWAYS AS (expression)`, which sqlglot reads as an identity with an expression."""

APPLIED = (
    exp.NotNullColumnConstraint,
    exp.PrimaryKeyColumnConstraint,
    exp.CommentColumnConstraint,
    exp.Reference,  # a foreign key: not enforced, as Feldera does not enforce one
    exp.ForeignKey,
)
"""Column constraints Spindle reads (NOT NULL, PRIMARY KEY), or that change no row it ingests."""


def _unapplied(node: exp.Expr, *, column: str | None) -> str | None:
    """What to do about a constraint Spindle does not apply; None for one it does."""
    if isinstance(node, APPLIED):
        return None
    if isinstance(node, exp.DefaultColumnConstraint) and isinstance(node.this, exp.Null):
        return None  # `DEFAULT NULL`: what a record without the column reads as
    what = node.sql(dialect=DIALECT)
    advice = UNAPPLIED.get(type(node), "Spindle does not apply it. Remove it")
    if isinstance(node, exp.GeneratedAsIdentityColumnConstraint) and node.args.get("expression"):
        advice = COMPUTED
    where = f"column '{column}' has" if column is not None else "the table has"
    return f"{where} `{what}`. {advice}"


def _table_constraint(item: exp.Expr) -> str | None:
    """What to do about a table's own constraint Spindle does not apply (`CHECK (...)`,
    `UNIQUE (a, b)`, named or not); None for another element."""
    inner = item.expressions[0] if isinstance(item, exp.Constraint) and item.expressions else item
    if isinstance(inner, exp.CheckColumnConstraint | exp.UniqueColumnConstraint):
        return _unapplied(inner, column=None)
    return None


def _table_facts(create: exp.Create, *, lateness: Mapping[int, str]) -> TableFacts:
    schema = create.this
    if not isinstance(schema, exp.Schema) or create.expression is not None:
        raise invalid("CREATE TABLE needs a column list and no AS query; declare the columns")
    table = schema.this
    columns: list[Column] = []
    offsets: list[int] = []
    primary_key: list[str] = []
    key_offsets: list[int] = []
    keys: list[list[str]] = []  # each PRIMARY KEY written: a table has one
    misread: list[tuple[int, str, str]] = []
    for element, item in enumerate(schema.expressions):
        if isinstance(item, exp.ColumnDef):
            nullable = True
            for constraint in item.args.get("constraints") or ():
                if not isinstance(constraint, exp.ColumnConstraint):  # e.g. `x IN t`
                    raise invalid(
                        f"column '{item.name}' has '{constraint.sql(dialect=DIALECT)}', which "
                        "a table column cannot have; write `name TYPE [NOT NULL] [PRIMARY KEY]`"
                    )
                # args, not the typed `kind` property: the compiled build raises a TypeError
                # when sqlglot made a table's PRIMARY KEY (...) a column constraint
                kind = constraint.args.get("kind")
                if isinstance(kind, exp.NotNullColumnConstraint) and not kind.args.get(
                    "allow_null"
                ):
                    nullable = False
                elif isinstance(kind, exp.PrimaryKeyColumnConstraint):
                    keys.append([item.name])
                    misread.extend(_another_key(keys, _meta_offset(item.this)))
                    primary_key.append(item.name)
                    key_offsets.append(_meta_offset(item.this))
                    nullable = False
                elif kind is not None and (problem := _unapplied(kind, column=item.name)):
                    misread.append((_meta_offset(item.this), "UnsupportedSql", problem))
            kind_node = item.args.get("kind")
            if not isinstance(kind_node, exp.DataType):
                raise invalid(f"column '{item.name}' has no type; give it one")
            columns.append(Column(item.name, _type_sql(kind_node), nullable, lateness.get(element)))
            offsets.append(_meta_offset(item.this))
        elif isinstance(item, exp.PrimaryKey):
            named = [e for e in item.expressions if isinstance(e, exp.Identifier | exp.Column)]
            keys.append([e.name for e in named])
            misread.extend(_another_key(keys, _meta_offset(named[0] if named else item)))
            primary_key.extend(e.name for e in named)
            key_offsets.extend(_meta_offset(e) for e in named)
        elif isinstance(item, exp.Constraint) and item.find(exp.PrimaryKey):
            misread.append(
                (
                    _meta_offset(item),
                    "InvalidProgram",
                    f"the key `CONSTRAINT {item.name} PRIMARY KEY (...)` is not read as the "
                    "table's key (only one written without a constraint name is); write "
                    "`PRIMARY KEY (...)`",
                )
            )
        elif isinstance(item, exp.Identifier):  # `name` alone, where a column was meant
            misread.append(
                (
                    _meta_offset(item),
                    "InvalidProgram",
                    f"'{item.name}' has no type, so it is no column; give it one "
                    f"(`{item.name} VARCHAR`)",
                )
            )
        elif _keyword_column(item):
            raise _keyword_problem(item)
        elif (problem := _table_constraint(item)) is not None:
            misread.append((_meta_offset(item), "UnsupportedSql", problem))
    spelled: dict[str, str] = {}  # names compare regardless of case, as Spark's do
    for column in columns:
        spelled.setdefault(column.name.lower(), column.name)
    primary_key = [spelled.get(name.lower(), name) for name in primary_key]  # as its column's
    pk = set(primary_key)
    columns = [Column(c.name, c.type, False, c.lateness) if c.name in pk else c for c in columns]
    properties, clauses = _properties(create)
    return TableFacts(
        name=table.name,
        name_offset=_meta_offset(table),
        columns=tuple(columns),
        column_offsets=tuple(offsets),
        primary_key=tuple(primary_key),
        key_offsets=tuple(key_offsets),
        misread=tuple(misread),
        properties=properties,
        clauses=clauses,
        qualifier=_qualifier(table),
    )


def _another_key(keys: Sequence[Sequence[str]], offset: int) -> list[tuple[int, str, str]]:
    """`InvalidProgram` at a PRIMARY KEY after the table's first: the keys were merged into
    one of all their columns without a word (a table that ran with them ran so)."""
    if len(keys) < 2:
        return []
    every: dict[str, str] = {}  # once each, as names compare regardless of case
    for name in (name for key in keys for name in key):
        every.setdefault(name.lower(), name)
    return [
        (
            offset,
            "InvalidProgram",
            f"another PRIMARY KEY ({', '.join(keys[-1])}): a table has one primary key; "
            f"list all its columns in one PRIMARY KEY ({', '.join(every.values())})",
        )
    ]


def _view_facts(create: exp.Create) -> ViewFacts:
    query = create.expression
    if not isinstance(query, exp.Query):
        raise invalid("CREATE VIEW needs AS followed by a query")
    target = create.this
    table = target.this if isinstance(target, exp.Schema) else target
    if isinstance(target, exp.Schema):
        problem = width_problem(query, target.expressions, view=table.name)
        if problem is not None:
            first = target.expressions[0].meta if target.expressions else {}
            line, col = int(first.get("line", 1)), _start_col(first)
            raise Problem(reason="ColumnCountMismatch", message=problem, line=line, col=col)
    props = create.args.get("properties")
    materialized = bool(props and props.find(exp.MaterializedProperty))
    nodes = census(query)
    canonical = canonical_sql(query, nodes)
    if isinstance(target, exp.Schema):
        canonical = f"({', '.join(c.name for c in target.expressions)}) {canonical}"
    properties, clauses = _properties(create)
    return ViewFacts(
        name=table.name,
        name_offset=_meta_offset(table),
        materialized=materialized,
        properties=properties,
        reads=read_relations(query),
        calls=called_functions(query, nodes),
        canonical=canonical,
        clauses=clauses,
        qualifier=_qualifier(table),
    )


def _function_facts(create: exp.Create) -> FunctionFacts:
    udf = create.this
    body = create.expression
    props = create.args.get("properties")
    returns = props.find(exp.ReturnsProperty) if props else None
    if not isinstance(udf, exp.UserDefinedFunction) or body is None or returns is None:
        raise invalid("CREATE FUNCTION needs (parameters) RETURNS <type> AS <expression>")
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
        qualifier=_qualifier(udf.this),
    )


_ANALYZERS: dict[str, Callable[[exp.Create], Facts]] = {  # TABLE: `_analyze`, with LATENESS
    "VIEW": _view_facts,
    "FUNCTION": _function_facts,
}


def _analyze(text: str) -> Facts:
    try:
        tree = parsed(text)
        create = tree.create
        kind = str(create.args.get("kind") or "").upper()
        if kind == "TABLE":  # only a CREATE TABLE's column list has LATENESS clauses
            return _table_facts(create, lateness=tree.lateness)
        return _ANALYZERS[kind](create)
    except RecursionError:  # deep nesting without parentheses (NOT NOT ..., CASE in CASE)
        raise Problem(
            reason="NestingTooDeep",
            message="The statement nests expressions too deeply for Spindle to analyze; "
            "move inner expressions into views, CTEs or functions",
            line=1,
            col=1,
        ) from None


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


def analyze_texts(texts: Sequence[str]) -> list[Facts | Problem]:
    """Facts (or the problem) of each statement text; what a parallel worker computes."""
    results: list[Facts | Problem] = []
    for text in texts:
        try:
            results.append(_analyze(text))
        except Problem as problem:
            results.append(problem)
    return results


def analyze(statement: Statement) -> Facts:
    """Parse and analyze one statement; errors carry program line and column."""
    facts = _FACTS.get(statement.text)
    if facts is not None:
        return facts
    try:
        facts = _analyze(statement.text)
    except Problem as problem:
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
