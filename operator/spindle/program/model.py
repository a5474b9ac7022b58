"""The typed, immutable model of a Spindle SQL program: tables, views, functions, connectors.

Names are normalized identifiers: unquoted identifiers are lower-cased, quoted ones are exact.
Everything here is a frozen value; building one from SQL text is `spindle.program.parse`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property, lru_cache
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from sqlglot import exp

from spindle.errors import SpindleError, located

if TYPE_CHECKING:
    from spindle.program.statements import Statement


@dataclass(frozen=True)
class Position:
    """1-based line and column in the program text."""

    line: int
    column: int


class Direction(StrEnum):
    INPUT = "input"
    OUTPUT = "output"


@dataclass(frozen=True)
class Connector:
    """A connector attached to a table (input) or a view (output), in Feldera's JSON shape."""

    relation: str
    name: str
    direction: Direction
    transport: str
    config: Mapping[str, Any]
    comparable: str
    """Canonical JSON of `config`, without flow-control knobs for inputs: what a diff compares."""
    unnamed: bool = False

    @property
    def key(self) -> str:
        return f"{self.relation}.{self.name}"

    @property
    def transport_config(self) -> Mapping[str, Any]:
        transport = self.config.get("transport") or {}
        config = transport.get("config") if isinstance(transport, Mapping) else None
        return config if isinstance(config, Mapping) else MappingProxyType({})

    @property
    def format(self) -> Mapping[str, Any] | None:
        fmt = self.config.get("format")
        return fmt if isinstance(fmt, Mapping) else None


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    """Canonical SQL type, for example `DECIMAL(5, 2)`."""
    nullable: bool = True
    lateness: str | None = None
    """Canonical SQL of the `LATENESS` interval, when declared."""


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    materialized: bool
    append_only: bool
    connectors: tuple[Connector, ...]
    position: Position
    text: str
    """The raw statement text, as written."""

    @property
    def lateness(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if c.lateness is not None)

    def schema_signature(self) -> tuple[Any, ...]:
        """What makes a table modified (connectors excluded)."""
        return (
            tuple((c.name, c.type, c.nullable, c.lateness) for c in self.columns),
            self.primary_key,
            self.materialized,
            self.append_only,
        )


@dataclass(frozen=True)
class Reference:
    """A relation or function a statement reads, with where it is read (relative offset)."""

    name: str
    offset: int


@dataclass(frozen=True)
class View:
    name: str
    materialized: bool
    dependencies: tuple[str, ...]
    """Tables and views the query really reads (CTEs resolved), sorted."""
    functions: tuple[str, ...]
    """User-defined functions the query calls, sorted."""
    connectors: tuple[Connector, ...]
    position: Position
    text: str
    canonical: str
    """The canonical form of the query: what decides whether the query changed."""

    @property
    def where(self) -> str:
        """Where the view is defined, for a message: `line L, column C`."""
        return f"line {self.position.line}, column {self.position.column}"

    @property
    def located(self) -> dict[str, str | int]:
        """The view and where it is defined, as an error's details."""
        return {"view": self.name, "line": self.position.line, "column": self.position.column}

    @property
    def column_list(self) -> bool:
        """Whether the view names its columns in a list (`CREATE VIEW v (n, s) AS ...`)."""
        return isinstance(_tree(self.text).this, exp.Schema)

    @property
    def query(self) -> exp.Query:
        """The query AST, parsed from `text` on first use and cached, with the view's column
        list applied (`program.column_lists`). Shared: never mutate it, copy it first."""
        return _view_query(self.text, self.name)


@dataclass(frozen=True)
class Function:
    name: str
    parameters: tuple[tuple[str, str], ...]
    returns: str
    calls: tuple[str, ...]
    """Other user-defined functions this function calls, sorted."""
    position: Position
    text: str
    canonical: str

    @property
    def body(self) -> exp.Expr:
        """The body expression, parsed from `text` on first use and cached. Shared: never
        mutate it, copy it first."""
        body = _tree(self.text).expression
        assert isinstance(body, exp.Expr)
        return body


@dataclass(frozen=True)
class Program:
    """A parsed, validated program. `views` is in dependency (topological) order."""

    text: str
    tables: Mapping[str, Table]
    views: Mapping[str, View]
    functions: Mapping[str, Function]
    warnings: tuple[str, ...] = ()
    has_lateness: bool = field(default=False)
    unrunnable: tuple[Unrunnable, ...] = field(default=(), compare=False)
    """What Spindle's runtime would refuse of the program's connectors
    (`program.transports`): the spec's program is refused with the first, at its line and
    column; a checkpointed program that has one still reads."""
    clashes: tuple[Unrunnable, ...] = field(default=(), compare=False)
    """Names Spark would read as another's (two that differ only in case, a function named
    as a built-in the parser knows): refused as the references are, in a program Spark has
    not run; one that ran is left to run as it did until a change fixes it."""

    def relation(self, name: str) -> Table | View | None:
        return self.tables.get(name) or self.views.get(name)

    def refuse_unrunnable(self, *, references: bool = True) -> None:
        """Raise the first problem the runtime would meet: one of `unrunnable` (connectors,
        column types), then, with `references`, the first in the text of the column
        references (`spindle.program.columns`) and function calls (`spindle.program.calls`)
        Spark could not resolve, worked out on first use. The error's `details.more` lists
        the messages of the others (up to `MORE_PROBLEMS`), `details.problems` counts them
        all. For the program that is to run, not one read back; `references=False` for one
        Spark has already run (the checkpoint's): Spark's verdict stands."""
        checked = (*self.clashes, *self._reference_problems) if references else ()
        found = (*self.unrunnable, *checked)
        if not found:
            return
        error = found[0].error()
        if len(found) > 1:  # the others too, as a compiler lists them: one fix, not one per run
            error.details["problems"] = len(found)
            error.details["more"] = [u.message for u in found[1 : MORE_PROBLEMS + 1]]
        raise error

    def locate(self, text: str, offset: int) -> Position | None:
        """Where `offset` in the statement whose text is `text` (a view's or a function's) is
        in the program, or None for a text the program does not hold."""
        statement = self._statements.get(text)
        return None if statement is None else statement.locate(offset)

    @cached_property
    def _statements(self) -> Mapping[str, Statement]:
        # Imported here: the statements module reads `Position` from this one.
        from spindle.program.statements import split

        return {s.text: s for s in split(self.text)}

    @cached_property
    def _reference_problems(self) -> tuple[Unrunnable, ...]:
        # Imported here: the checks read these values, so they import this module.
        from spindle.program.calls import call_problems
        from spindle.program.columns import column_problems
        from spindle.program.udfs import function_problems
        from spindle.program.writable import writing_problems

        found = (
            *column_problems(self),
            *call_problems(self),
            *function_problems(self),
            *writing_problems(self),
        )
        return tuple(sorted(found, key=lambda u: (u.details["line"], u.details["column"])))

    @property
    def connectors(self) -> tuple[Connector, ...]:
        found: list[Connector] = []
        for table in self.tables.values():
            found.extend(table.connectors)
        for view in self.views.values():
            found.extend(view.connectors)
        return tuple(found)


MORE_PROBLEMS = 20
"""How many problems after the first a refusal lists (`details.more`)."""


@dataclass(frozen=True)
class Unrunnable:
    """A located problem of a program that does not stop it from parsing."""

    reason: str
    message: str
    details: Mapping[str, Any]

    def error(self) -> SpindleError:
        return SpindleError(reason=self.reason, message=self.message, details=dict(self.details))

    @classmethod
    def of(cls, error: SpindleError) -> Unrunnable:
        """The problem `error` says (built with `errors.located` for one in SQL text)."""
        return cls(error.reason, error.message, error.details)

    @classmethod
    def at(cls, where: Position, *, reason: str, message: str, **details: Any) -> Unrunnable:
        """A problem of the SQL text at `where`: its message and details carry the position."""
        return cls.of(
            located(reason=reason, message=message, line=where.line, column=where.column, **details)
        )


@lru_cache(maxsize=65536)
def _view_query(text: str, name: str) -> exp.Query:
    """A view statement's query, its column list (if any) applied (`program.column_lists`)."""
    from spindle.program.column_lists import listed

    create = _tree(text)
    query = create.expression
    assert isinstance(query, exp.Query)
    if isinstance(create.this, exp.Schema):
        return listed(query, create.this.expressions, view=name)
    return query


def _tree(text: str) -> exp.Create:
    # Imported here: parsing builds these values, so it imports this module.
    from spindle.program.syntax import parsed

    return parsed(text).create
