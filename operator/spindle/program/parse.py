"""Build a validated `Program` from SQL text: statements → objects → references → order."""

from __future__ import annotations

import difflib
import itertools
import re
from collections.abc import Iterable
from dataclasses import replace
from functools import lru_cache

from sqlglot import exp
from sqlglot.tokenizer_core import TokenType

from spindle.errors import SpindleError, located
from spindle.program.columns import unstorable_name
from spindle.program.connectors import parse_connectors
from spindle.program.facts import Facts, FunctionFacts, TableFacts, ViewFacts, analyze
from spindle.program.formats import format_problems, misread_formats
from spindle.program.limits import check_program
from spindle.program.locations import location_problems
from spindle.program.model import (
    MORE_PROBLEMS,
    Connector,
    Direction,
    Function,
    Position,
    Program,
    Table,
    Unrunnable,
    View,
)
from spindle.program.properties import (
    flag,
    property_problems,
    repeated_properties,
    unread_clauses,
)
from spindle.program.statements import Statement, split
from spindle.program.syntax import (
    Problem,
    backtick,
    never_closed,
    parsed,
    tokenize,
    unclosed_comment,
)
from spindle.program.types import type_problem

DUPLICATE = {"relation": "DuplicateRelation", "function": "DuplicateFunction"}
"""The reason of a name given twice, by its namespace."""


def _duplicate(name: str, kind: str, statement: Statement, offset: int, first: Position) -> None:
    where = statement.locate(offset)
    raise located(
        reason=DUPLICATE[kind],
        message=f"'{name}' is declared twice (first at line {first.line}); rename or remove "
        "one of the declarations",
        line=where.line,
        column=where.column,
        name=name,
    )


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@lru_cache(maxsize=4096)
def built_in(name: str, arity: int) -> bool:
    """Whether a call of `name` with `arity` arguments reads as one of the built-in functions
    the parser knows (`UPPER`, `NVL`): such a call is never the program's function, which is
    inlined only where the call is one the parser does not know (`runtime.translate`)."""
    if not _PLAIN_NAME.fullmatch(name):  # a quoted name no built-in has
        return False
    arguments = ", ".join(f"p{index}" for index in range(arity))
    try:
        query = parsed(f"create view x as select {name}({arguments}) as c").create.expression
    except (SpindleError, Problem):
        return False  # not a call of that shape at all (a built-in of another arity)
    call = query.expressions[0].this if isinstance(query, exp.Select) else None
    return isinstance(call, exp.Func) and not isinstance(call, exp.Anonymous)


def _unstorable(
    statement: Statement, typed: Iterable[tuple[int, str, str]], *, owner: str
) -> list[Unrunnable]:
    """`UnsupportedType` for each (offset, column, declared type) Spindle cannot store."""
    found: list[Unrunnable] = []
    for offset, column, declared in typed:
        problem = type_problem(declared)
        if problem is not None:
            found.append(
                Unrunnable.at(
                    statement.locate(offset),
                    reason="UnsupportedType",
                    message=f"Column '{owner}.{column}': {problem}",
                    relation=owner,
                    name=column,
                    type=declared,
                )
            )
    return found


def _repeated(
    statement: Statement, named: Iterable[tuple[int, str]], *, owner: str
) -> list[Unrunnable]:
    """`DuplicateColumn` for each (offset, column) whose name an earlier column of the table
    has (case-insensitively, as Spark compares names); `InvalidProgram` for one whose name
    Delta cannot store (`columns.UNSTORABLE`)."""
    found: list[Unrunnable] = []
    seen: dict[str, int] = {}
    for offset, column in named:
        unstorable = unstorable_name(column, owner=f"Table '{owner}'")
        if unstorable is not None:
            found.append(
                Unrunnable.at(
                    statement.locate(offset),
                    reason="InvalidProgram",
                    message=unstorable,
                    relation=owner,
                    name=column,
                )
            )
        first = seen.setdefault(column.lower(), offset)
        if first != offset:
            found.append(
                Unrunnable.at(
                    statement.locate(offset),
                    reason="DuplicateColumn",
                    message=f"Table '{owner}' declares column '{column}' twice (first at line "
                    f"{statement.locate(first).line}); rename or remove one of them",
                    relation=owner,
                    name=column,
                )
            )
    return found


_PATHLESS = re.compile(r"[/\\\x00-\x1f\x7f]")
"""What a relation's name cannot hold: it names its folders (`state/tables/<name>@<seq>`,
`inputs/<name>/`), where a separator would reach into others' (`../x`)."""


def _pathless(statement: Statement, facts: TableFacts | ViewFacts) -> list[Unrunnable]:
    """`InvalidProgram` for a relation whose name cannot name its folders (`_PATHLESS`), or
    is only dots (`..` would reach out of the pipeline's own)."""
    name = facts.name
    found = _PATHLESS.search(name)
    if found is None and name.strip("."):
        return []
    what = f"has the character {found.group()!r}" if found else "has no character but dots"
    if not name:
        what = "is empty"
    return [
        Unrunnable.at(
            statement.locate(facts.name_offset),
            reason="InvalidProgram",
            message=f"The name {name!r} {what}: a table's or view's name names its folders "
            "in storage, and cannot have a / or \\ or a control character, or be empty or "
            "only dots. Rename it",
            relation=name,
        )
    ]


def _qualified(statement: Statement, facts: Facts) -> Unrunnable:
    """`InvalidProgram` at the qualifier of a declaration's name (`s.w`), which Spindle read
    past: the object was named `w`, and a view reading `s.w` read nothing declared."""
    assert facts.qualifier is not None
    return Unrunnable.at(
        statement.locate(facts.qualifier.offset),
        reason="InvalidProgram",
        message=f"The name '{facts.qualifier.written}' has a qualifier: Spindle has no schemas "
        f"or catalogs; write {facts.name}",
        name=facts.name,
    )


def _backticked(statement: Statement) -> list[Unrunnable]:
    """`InvalidProgram` at a backtick the statement parsed with all the same (`syntax.backtick`)."""
    try:
        backtick(statement.text, tokenize(statement.text))
    except Problem as problem:
        return [
            Unrunnable.at(
                statement.locate_line_col(problem.line, problem.col),
                reason=problem.reason,
                message=problem.message,
            )
        ]
    return []


_DOUBLED_COMMA = re.compile(r",\s*(?:,|/\*|--)")
"""Text that may be two commas with nothing but space or a comment between: a statement that
has it is tokenized to know (`_doubled_commas`)."""


def _doubled_commas(statement: Statement) -> list[Unrunnable]:
    """`InvalidProgram` at a comma right after another (`SELECT id,, x`): sqlglot reads the
    empty item between as none at all, so a column left out of a list read as never written."""
    if not _DOUBLED_COMMA.search(statement.text):
        return []
    tokens = tokenize(statement.text)
    return [
        Unrunnable.at(
            statement.locate(second.start),
            reason="InvalidProgram",
            message="Syntax error: a comma right after another, with nothing between them; "
            "remove one, or write what is missing between them",
        )
        for first, second in itertools.pairwise(tokens)
        if first.token_type is second.token_type is TokenType.COMMA
    ]


def _misdeclared(statement: Statement, facts: TableFacts) -> list[Unrunnable]:
    """What of the table's declaration Spindle reads otherwise than written (`misread`, or no
    column at all: `InvalidProgram`), a name of its primary key that is none of its columns
    (`UnknownColumn`), or that the key names twice (`DuplicateColumn`); names compare
    case-insensitively, as Spark's do."""
    declared = {column.name.lower(): column.name for column in facts.columns}
    found = [
        Unrunnable.at(
            statement.locate(offset),
            reason=reason,
            message=f"Table '{facts.name}': {problem}",
            relation=facts.name,
        )
        for offset, reason, problem in facts.misread
    ]
    if not declared:
        found.append(
            Unrunnable.at(
                statement.locate(facts.name_offset),
                reason="InvalidProgram",
                message=f"Table '{facts.name}' declares no columns; declare at least one",
                relation=facts.name,
            )
        )
    seen: set[str] = set()
    for offset, name in zip(facts.key_offsets, facts.primary_key, strict=True):
        if name.lower() not in declared:
            reason = "UnknownColumn"
            problem = f"names column '{name}', which the table does not declare; name one of "
            problem += f"its columns ({', '.join(declared.values())})"
        elif name.lower() in seen:
            reason, problem = "DuplicateColumn", f"names column '{name}' twice; name it once"
        else:
            seen.add(name.lower())
            continue
        found.append(
            Unrunnable.at(
                statement.locate(offset),
                reason=reason,
                message=f"The primary key of table '{facts.name}' {problem}",
                relation=facts.name,
                name=name,
            )
        )
    return found


def _topological(views: dict[str, View]) -> dict[str, View]:
    """Views ordered so that every view follows the views it reads; cycles are errors. Depth
    first without recursion: a chain of thousands of views is an ordinary program."""
    ordered: dict[str, View] = {}
    for root in views:
        path: dict[str, None] = {}  # the views being visited (in order), each waiting for its
        # dependencies: a dict, so that a chain of thousands is checked for cycles in O(1)
        pending: list[list[str]] = []  # per entry of `path`, the dependencies left to visit
        step = root
        while True:
            if step not in ordered:
                if step in path:
                    visiting = list(path)
                    cycle = [*visiting[visiting.index(step) :], step]
                    view = views[step]
                    raise located(
                        reason="CyclicView",
                        message=f"Views read each other in a cycle ({' -> '.join(cycle)}); "
                        "break the cycle",
                        line=view.position.line,
                        column=view.position.column,
                        cycle=cycle,
                    )
                path[step] = None
                pending.append([d for d in reversed(views[step].dependencies) if d in views])
            while pending and not pending[-1]:
                pending.pop()
                done, _ = path.popitem()
                ordered[done] = views[done]
            if not pending:
                break
            step = pending[-1].pop()
    return ordered


def parse_program(text: str) -> Program:
    """Parse and validate a Spindle program. Raises `SpindleError` with line and column."""
    check_program(text)
    tables: dict[str, Table] = {}
    views: dict[str, View] = {}
    functions: dict[str, Function] = {}
    view_reads: dict[str, tuple[Statement, ViewFacts]] = {}
    warnings: list[str] = []
    unrunnable: list[Unrunnable] = []
    clashes: list[Unrunnable] = []
    positions: dict[str, Position] = {}
    spellings: dict[str, tuple[str, Position]] = {}  # by lower-cased name, as Spark sees it
    connected: list[tuple[Position, tuple[Connector, ...]]] = []  # in the program's order
    qualified: dict[str, Unrunnable] = {}  # by the name as written (`s.w`)

    for statement in split(text):
        facts = analyze(statement)
        position = statement.locate(facts.name_offset)
        if "`" in statement.text:  # parsed all the same (`x\`` as an alias): a program that ran
            clashes.extend(_backticked(statement))
        clashes.extend(_doubled_commas(statement))  # read as one: a program that ran so
        namespace = "function" if isinstance(facts, FunctionFacts) else "relation"
        key = f"{namespace}:{facts.name}"
        if key in positions:
            _duplicate(facts.name, namespace, statement, facts.name_offset, positions[key])
        positions[key] = position
        # problems of a program to run that Spark has not (`Program.clashes`): one that ran
        # with them runs as it did, and a checkpointed one must still be read to plan the fix
        folded = f"{namespace}:{facts.name.lower()}"
        if folded in spellings and spellings[folded][0] != facts.name:
            earlier, at = spellings[folded]
            clashes.append(
                Unrunnable.at(
                    position,
                    reason=DUPLICATE[namespace],
                    message=f"'{facts.name}' and '{earlier}' (line {at.line}) differ only in "
                    "case, and Spark reads names regardless of case; rename one of them",
                    name=facts.name,
                )
            )
        spellings.setdefault(folded, (facts.name, position))
        if isinstance(facts, FunctionFacts) and built_in(facts.name, len(facts.parameters)):
            clashes.append(
                Unrunnable.at(
                    position,
                    reason="DuplicateFunction",
                    message=f"'{facts.name}' is a Spark function: a call would run Spark's, not "
                    "this one. Give the function another name",
                    name=facts.name,
                )
            )
        if facts.qualifier is not None:
            qualified[facts.qualifier.written] = _qualified(statement, facts)
            clashes.append(qualified[facts.qualifier.written])
        props = dict(facts.properties) if not isinstance(facts, FunctionFacts) else {}
        if not isinstance(facts, FunctionFacts):
            clashes.extend(_pathless(statement, facts))
            kind = "table" if isinstance(facts, TableFacts) else "view"
            flawed, noted = property_problems(props, relation=facts.name, kind=kind, at=position)
            unrunnable.extend(flawed)
            warnings.extend(noted)
            warnings.extend(unread_clauses(facts.clauses, relation=facts.name))
            clashes.extend(repeated_properties(facts.properties, relation=facts.name, at=position))
            declared = parse_connectors(
                relation=facts.name,
                direction=Direction.INPUT if kind == "table" else Direction.OUTPUT,
                raw=props.get("connectors"),
                at=position,
            )
            connectors = declared.connectors
            warnings.extend(declared.warnings)
            unrunnable.extend(declared.refused)
            clashes.extend(declared.misread)
        if isinstance(facts, TableFacts):
            typed = [
                (offset, column.name, column.type)
                for offset, column in zip(facts.column_offsets, facts.columns, strict=True)
            ]
            unrunnable.extend(_unstorable(statement, typed, owner=facts.name))
            named = [(offset, name) for offset, name, _ in typed]
            unrunnable.extend(_repeated(statement, named, owner=facts.name))
            clashes.extend(_misdeclared(statement, facts))
            tables[facts.name] = Table(
                name=facts.name,
                columns=facts.columns,
                primary_key=facts.primary_key,
                materialized=flag(props, "materialized"),
                append_only=flag(props, "append_only"),
                connectors=connectors,
                position=position,
                text=statement.text,
            )
            unrunnable.extend(format_problems(tables[facts.name]))
            clashes.extend(misread_formats(tables[facts.name]))
            connected.append((position, connectors))
        elif isinstance(facts, ViewFacts):
            view_reads[facts.name] = (statement, facts)
            views[facts.name] = View(
                name=facts.name,
                materialized=facts.materialized,
                dependencies=tuple(sorted({r.name for r in facts.reads})),
                functions=(),
                connectors=connectors,
                position=position,
                text=statement.text,
                canonical=facts.canonical,
            )
            unrunnable.extend(format_problems(views[facts.name]))
            clashes.extend(misread_formats(views[facts.name]))
            connected.append((position, connectors))
        else:
            functions[facts.name] = Function(
                name=facts.name,
                parameters=facts.parameters,
                returns=facts.returns,
                calls=tuple(sorted({c.name for c in facts.calls} - {facts.name})),
                position=position,
                text=statement.text,
                canonical=facts.canonical,
            )

    for function in list(functions.values()):
        calls = tuple(c for c in function.calls if c in functions)
        functions[function.name] = replace(function, calls=calls)

    unknown: list[SpindleError] = []  # every view's, listed as one error: one round of fixes
    for name, (statement, facts) in view_reads.items():
        for reference in facts.reads:
            if reference.name not in tables and reference.name in qualified:
                unknown.append(qualified[reference.name].error())  # the declaration's problem
            elif reference.name not in tables and reference.name not in views:
                where = statement.locate(reference.offset)
                close = difflib.get_close_matches(reference.name, [*tables, *views], n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                unknown.append(
                    located(
                        reason="UnknownRelation",
                        message=f"View '{name}' reads '{reference.name}', which is not declared"
                        f"{hint}; declare it as a table or view, or fix the name",
                        line=where.line,
                        column=where.column,
                        view=name,
                        relation=reference.name,
                    )
                )
        udfs = tuple(sorted({c.name for c in facts.calls if c.name in functions}))
        views[name] = replace(views[name], functions=udfs)
    if unknown:
        unknown = list({e.message: e for e in unknown}.values())  # a qualifier once
        unknown.sort(key=lambda e: (e.details["line"], e.details["column"]))
        first = unknown[0]
        if len(unknown) > 1:
            first.details["problems"] = len(unknown)
            first.details["more"] = [e.message for e in unknown[1 : MORE_PROBLEMS + 1]]
        raise first

    unrunnable.extend(location_problems(connected))
    opened = unclosed_comment(text)
    if opened is not None:  # a problem of the program to run: a checkpointed one ran so
        offset, kind = opened
        then = "; everything after it was read as a comment" if kind == "comment" else ""
        unrunnable.append(
            Unrunnable.at(
                Statement(text=text, start=0, line=1, column=1).locate(offset),
                reason="InvalidProgram",
                message=never_closed(kind, then=then),
            )
        )
    return Program(
        text=text,
        tables=tables,
        views=_topological(views),
        functions=functions,
        warnings=tuple(warnings),
        has_lateness=any(t.lateness for t in tables.values()),
        unrunnable=tuple(unrunnable),
        clashes=tuple(clashes),
    )


__all__ = ["SpindleError", "parse_program"]
