"""Column references checked against what each view reads, before anything runs.

A misspelt column used to pass `spindle diff`, `plan` and `apply`, reach approval, and fail in
the driver with Spark's message at the view's first line. Here each view's query is qualified
(sqlglot) against the columns of the tables and views it reads, in dependency order, and every
column reference that names no column of its sources is `UnknownColumn`, and one that names a
column of two sources is `AmbiguousColumn`, at the reference's own line and column. A view's
output column named as an earlier one is (`SELECT s.id, t.id`) is `DuplicateColumn`: Spark
evaluates such a query, but a view's columns are stored and read by name; so is a column
named `weight` of a view with outputs, the column each change reaches them with. A UNION,
INTERSECT or EXCEPT whose inputs select different numbers of columns is `ColumnCountMismatch`.

The check only refuses what Spark would refuse too. Where it cannot know a scope's columns (a
table function, a source whose columns it could not work out, a query sqlglot cannot qualify)
it checks nothing there. An `UNNEST(a) AS x(e)` has the columns its alias names, and its
arguments are checked with the scope's other columns. Names compare case-insensitively, as
Spark's analyzer does by default; a select alias is a name too (Spark resolves lateral, GROUP
BY and ORDER BY aliases).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope
from sqlglot.schema import MappingSchema

from spindle.program.column_lists import mismatch
from spindle.program.dialect import DIALECT
from spindle.program.formats import writes_weight
from spindle.program.grouping import grouping_problem
from spindle.program.model import Program, Unrunnable, View
from spindle.program.ordinals import ordinal_problem
from spindle.program.spark_calls import first_select
from spindle.program.statements import text_start
from spindle.program.units import unit_name
from spindle.program.writable import UNSUPPORTED
from spindle.wording import counted

_Columns = tuple[str, ...] | None
"""A relation's column names, or None when they cannot be known here."""


@dataclass(frozen=True)
class _Source:
    """One name a scope can qualify a column with, and that source's columns."""

    name: str
    relation: str
    columns: _Columns
    semi: bool = False
    """Of a semi or anti join: its columns are the join condition's only."""

    def has(self, column: str) -> bool:
        return self.columns is not None and column.lower() in (c.lower() for c in self.columns)


def column_problems(program: Program) -> tuple[Unrunnable, ...]:
    """Each view's first problem, in view order: an unknown or ambiguous column reference (a
    `JOIN ... USING` column too), else a problem of grouping (`spindle.program.grouping`), else
    an output column named as an earlier one is, else set-operation inputs of unequal widths."""
    known: dict[str, _Columns] = {  # by lower-case name: Spark compares names so
        name.lower(): tuple(c.name for c in table.columns) for name, table in program.tables.items()
    }
    declared = frozenset(program.functions)
    problems: list[Unrunnable] = []
    for view in program.views.values():
        if view.query.find(*UNSUPPORTED):  # refused as it is (`writable`); its columns unknown
            known[view.name.lower()] = None
            continue
        qualified = _qualified(view, known)
        known[view.name.lower()] = None if qualified is None else _outputs(qualified)
        # positions first, in the query as written: qualify reads them as Python indexes;
        # without a qualified query (sqlglot refuses a USING column a side does not have), USING
        problem = _at_start(ordinal_problem(view.name, view.query)) or (
            _using(view, known)
            if qualified is None
            else next(_problems(view, qualified, known), None)
            or _grouping(view, qualified, declared)
            or _repeated(view, qualified)
            or _unstorable(view, qualified)
            or _weighed(view, qualified)
            or _mismatched(view, qualified)
            or _misnamed(view, qualified)
        )
        if problem is None:
            continue
        offset, reason, message, details = problem
        where = program.locate(view.text, offset) if offset >= 0 else view.position
        if where is not None:
            problems.append(Unrunnable.at(where, reason=reason, message=message, **details))
    return tuple(problems)


def _grouping(
    view: View, query: exp.Query, declared: frozenset[str]
) -> tuple[int, str, str, dict[str, object]] | None:
    return _at_start(grouping_problem(view.name, query, declared=declared))


def _at_start(
    found: tuple[exp.Expr, str, str, dict[str, object]] | None,
) -> tuple[int, str, str, dict[str, object]] | None:
    """A problem at a node, as one at the node's offset in its statement."""
    if found is None:
        return None
    node, reason, message, details = found
    return _start(node), reason, message, details


def _using(
    view: View, known: Mapping[str, _Columns]
) -> tuple[int, str, str, dict[str, object]] | None:
    """The first `JOIN ... USING (c)` column that one side of its join does not have, where
    that side's columns are all known (tables and views only; no subquery)."""
    for select in view.query.find_all(exp.Select):
        joined = [select.args.get("from_"), *select.args.get("joins", ())]
        sides = [j.this if j is not None else None for j in joined]
        for index, join in enumerate(joined[1:], start=1):
            for column in join.args.get("using") or ():
                for side, relations in (("left", sides[:index]), ("right", [sides[index]])):
                    columns = [_columns_of(r, known) for r in relations]
                    if any(c is None for c in columns) or any(
                        column.name.lower() in (n.lower() for n in c or ()) for c in columns
                    ):
                        continue
                    named = [r.name for r in relations if r is not None]
                    return _missing_using(view, column, side, named)
    return None


def _missing_using(
    view: View, column: exp.Expr, side: str, relations: list[str]
) -> tuple[int, str, str, dict[str, object]]:
    name = column.name
    named = " and ".join(repr(r) for r in relations)
    has = "has" if len(relations) == 1 else "have"
    return (
        _start(column),
        "UnknownColumn",
        f"View '{view.name}' joins USING ({name}), but {named} {has} no column '{name}' (the "
        f"{side} side of the join). Fix the name, or join ON the columns that match",
        {"view": view.name, "reference": name},
    )


def _columns_of(node: exp.Expr | None, known: Mapping[str, _Columns]) -> _Columns:
    """The columns of a FROM or JOIN source that is a table or view, or None."""
    if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
        return None
    return known.get(node.name.lower())


def _repeated(view: View, query: exp.Query) -> tuple[int, str, str, dict[str, object]] | None:
    """The view's second output column of a name an earlier one has (as Spark compares names:
    case-insensitively): a view's columns are stored, and read, by name."""
    first = _first(query)
    if first is None:
        return None
    seen: dict[str, int] = {}
    for index, select in enumerate(first.selects):
        name = _named(select, index)
        if name is None:
            continue  # named by Spark, or not known here
        if name.lower() not in seen:
            seen[name.lower()] = index
            continue
        return (
            _start(select),
            "DuplicateColumn",
            f"View '{view.name}' has two columns named '{name}' (its columns "
            f"{seen[name.lower()] + 1} and {index + 1}); a view's columns are stored and read "
            f"by name. Give one another name (... AS {name}_2)",
            {"view": view.name, "name": name},
        )
    return None


UNSTORABLE = re.compile(r"[ ,;{}()\n\t=]+")
"""What a column's name cannot have: each table's and view's state is a Delta table, and Delta
refuses these in a name (`DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES`, an internal error of the
first step before)."""


def unstorable_name(name: str, *, owner: str) -> str | None:
    """Why column `name` of `owner` ("Table 't'", "View 'v'") cannot be stored, or None."""
    if UNSTORABLE.search(name) is None:
        return None
    return (
        f"{owner}: column {name!r} cannot be stored: each table and view is stored as a Delta "
        "table, whose column names cannot have a space, a tab, a newline or any of , ; { } ( ) "
        f'=. Rename it ("{UNSTORABLE.sub("_", name).strip("_") or "c"}")'
    )


def _unstorable(view: View, query: exp.Query) -> tuple[int, str, str, dict[str, object]] | None:
    """The view's first output column whose name Delta cannot store (`UNSTORABLE`)."""
    first = _first(query)
    for index, select in enumerate(first.selects if first is not None else ()):
        name = _named(select, index)
        problem = None if name is None else unstorable_name(name, owner=f"View '{view.name}'")
        if problem is not None:
            return (_start(select), "InvalidProgram", problem, {"view": view.name, "name": name})
    return None


OUTPUT_WEIGHT = "weight"
"""The column an output connector adds to each row it writes (+1 inserted, -1 deleted), and
the runtime to each change it hands an output: an `insert_delete` file output writes none, but
reads it to put the row under `insert` or `delete`."""


def _weighed(view: View, query: exp.Query) -> tuple[int, str, str, dict[str, object]] | None:
    """A column named as the one the view's outputs receive with each change: a writer of the
    column would fail on it (COLUMN_ALREADY_EXISTS, retried as if the location were
    unwritable), and every output, an `insert_delete` one too, would take the weights for the
    view's values, or find the name ambiguous. The message names an output that writes the
    column, if one does."""
    first = _first(query)
    if first is None or not view.connectors:
        return None
    writer = next((c for c in view.connectors if writes_weight(c)), None)
    output = (writer or view.connectors[0]).name
    for index, select in enumerate(first.selects):
        name = _named(select, index)
        if name is None or name.lower() != OUTPUT_WEIGHT:
            continue
        why = (
            f"the column its output connector '{output}' adds to each row it writes (+1 for a "
            "row inserted, -1 for one deleted)"
            if writer is not None
            else f"the column each change reaches its output connector '{output}' with (+1 "
            'for a row inserted, -1 for one deleted), which it writes as {"insert": row} or '
            '{"delete": row}: the view\'s own column would be lost from the rows, or the '
            "write fail"
        )
        return (
            _start(select),
            "DuplicateColumn",
            f"View '{view.name}' has a column named '{name}', {why}. Give the view's column "
            f"another name (... AS {name}_1)",
            {"view": view.name, "name": name, "connector": output},
        )
    return None


def _mismatched(view: View, query: exp.Query) -> tuple[int, str, str, dict[str, object]] | None:
    """The first UNION, INTERSECT or EXCEPT whose inputs select different numbers of columns
    (where both are known: no star is left that sqlglot could not expand)."""
    for operation in query.find_all(exp.SetOperation):
        if operation.args.get("by_name"):
            continue  # UNION BY NAME: Spark matches the inputs' columns by name
        first, second = _input(operation.this), _input(operation.expression)
        if first is None or second is None or len(first.selects) == len(second.selects):
            continue
        left, right = len(first.selects), len(second.selects)
        kind = operation.key.upper() + ("" if operation.args.get("distinct") else " ALL")
        return (
            _start(second.selects[left] if right > left else second),
            "ColumnCountMismatch",
            f"View '{view.name}': the {kind}'s first input has {counted(left, 'column')} and "
            f"its second {counted(right, 'column')}. Each input must select as many columns as "
            "the first, in the same order",
            {"view": view.name, "first": left, "second": right},
        )
    return None


def _misnamed(view: View, query: exp.Query) -> tuple[int, str, str, dict[str, object]] | None:
    """The first derived table whose alias names other than as many columns as its query
    gives (`(SELECT * FROM t) AS d(a)` over two columns), where the width is known; the view's
    own column list over a star is one (`program.column_lists`). Qualifying consumes such an
    alias (renaming the query's first columns), so the names are read in the query as
    written, its derived tables in the same order as the qualified query's."""
    written = list(view.query.find_all(exp.Subquery))
    qualified = list(query.find_all(exp.Subquery))
    if len(written) != len(qualified):
        return None
    for before, after in zip(written, qualified, strict=True):
        alias = before.args.get("alias")
        inner = _input(after.this)
        if not isinstance(alias, exp.TableAlias) or not alias.columns or inner is None:
            continue
        names = alias.columns
        if len(inner.selects) == len(names):
            continue
        subject = (
            f"View '{view.name}' lists"
            if text_start(alias.this) is None  # made from the view's column list, not written
            else f"View '{view.name}': the derived table '{alias.name}' names"
        )
        return (
            _start(alias),
            "ColumnCountMismatch",
            mismatch(subject, names, len(inner.selects)),
            {"view": view.name, "names": len(names), "columns": len(inner.selects)},
        )
    return None


def _input(node: exp.Expr) -> exp.Select | None:
    """The SELECT whose columns a set operation's input has, or None when their number is not
    known here (a star sqlglot could not expand)."""
    first = first_select(node)
    if first is None or any(isinstance(s, exp.Star) or s.is_star for s in first.selects):
        return None
    return first


def _first(query: exp.Expr) -> exp.Select | None:
    """The SELECT that names a view's columns, not through its parentheses."""
    return first_select(query, through=(exp.SetOperation,))


def _start(node: exp.Expr) -> int:
    """Where the text of `node` starts in its statement, or -1 (a column a star stands for)."""
    start = text_start(node)
    return -1 if start is None else start


def _qualified(view: View, known: Mapping[str, _Columns]) -> exp.Query | None:
    """The view's query with columns qualified and stars expanded, or None when sqlglot cannot
    qualify it (then nothing is checked, and its readers see unknown columns). Every name is
    read in lower case, as Spark's analyzer compares names (`Mixed`, `mixed` and `"MIXED"` are
    one column to it)."""
    reads = {name.lower(): known.get(name.lower()) for name in view.dependencies}
    if any(columns is None for columns in reads.values()):
        return None
    schema = MappingSchema(
        {name: {c.lower(): "UNKNOWN" for c in columns or ()} for name, columns in reads.items()},
        dialect=DIALECT,
        normalize=False,
    )
    lowered = view.query.copy()
    for identifier in lowered.find_all(exp.Identifier):
        identifier.set("this", identifier.this.lower())
    try:
        tree = qualify(
            lowered,
            schema=schema,
            dialect=DIALECT,
            validate_qualify_columns=False,
            allow_partial_qualification=True,
            quote_identifiers=False,
            identify=False,
        )
    except (SqlglotError, KeyError, ValueError, TypeError, AttributeError, IndexError):
        return None
    return tree if isinstance(tree, exp.Query) else None


def _outputs(query: exp.Expr) -> _Columns:
    """The names of a qualified query's columns, or None when one has no name or is a star."""
    first = _first(query)
    if first is None:
        return None
    names = [_named(select, index) for index, select in enumerate(first.selects)]
    return None if None in names else tuple(n for n in names if n is not None)


def _named(select: exp.Expr, index: int) -> str | None:
    """The name of a qualified query's `index`th column, or None for a star or a column Spark
    names itself (qualify names an unnamed expression `_col_<i>`; Spark names it else)."""
    name = select.alias_or_name
    if isinstance(select, exp.Star) or select.is_star or name in ("", f"_col_{index}"):
        return None
    return name


def _sources(scope: Scope, known: Mapping[str, _Columns]) -> list[_Source] | None:
    """What the scope's columns can come from (a semi or anti join's table too: its columns
    are visible in the join condition), or None when one of them is opaque here."""
    select = scope.expression
    found: list[_Source] = []
    if select.args.get("laterals"):
        return None  # LATERAL VIEW explode(...): its columns are not known here
    for joined in (select.args.get("from_"), *select.args.get("joins", ())):
        if joined is None:
            continue
        node = joined.this
        if isinstance(node, exp.Unnest):
            named = _unnested(node)
            if named is None:
                return None
            found.append(named)
            continue
        if not isinstance(node, exp.Table | exp.Subquery):
            return None  # a table function, VALUES, LATERAL: columns not known here
        name = node.alias_or_name
        source = scope.sources.get(name)
        if isinstance(source, Scope):
            columns = _outputs(source.expression)
        elif isinstance(source, exp.Table) and isinstance(node, exp.Table):
            renamed = node.args.get("alias")
            if renamed is not None and renamed.columns:  # `t AS x(a, b)` renames the columns
                columns = tuple(c.name for c in renamed.columns)
            else:
                columns = known.get(node.name.lower())
        else:
            return None
        if columns is None:
            return None
        semi = isinstance(joined, exp.Join) and joined.kind.upper() in ("SEMI", "ANTI")
        found.append(
            _Source(name, node.name if isinstance(node, exp.Table) else name, columns, semi)
        )
    return found


def _unnested(node: exp.Unnest) -> _Source | None:
    """An UNNEST's columns, as its alias names them (`UNNEST(a) AS x(e)`), or None for one
    that names none (refused: `program.writable`)."""
    alias = node.args.get("alias")
    offset = node.args.get("offset")  # WITH ORDINALITY's name, where sqlglot keeps it apart
    if not isinstance(alias, exp.TableAlias) or not alias.columns:
        return None
    names = (*alias.columns, *([offset] if isinstance(offset, exp.Identifier) else []))
    return _Source(alias.name, alias.name, tuple(n.name for n in names))


def _aliases(selects: Sequence[exp.Expr], column: exp.Column) -> set[str]:
    """The select aliases a column may name: not the one it is part of (qualify aliases every
    select item, `scroe AS scroe` too)."""
    own = column.find_ancestor(exp.Alias)
    return {s.alias.lower() for s in selects if isinstance(s, exp.Alias) and s is not own}


def _problems(
    view: View, query: exp.Query, known: Mapping[str, _Columns]
) -> Iterator[tuple[int, str, str, dict[str, object]]]:
    for scope in traverse_scope(query):
        if not isinstance(scope.expression, exp.Select):
            continue
        chain = [scope, *_outer(scope)]
        levels: list[list[_Source]] = []
        for each in chain:
            level = _sources(each, known)
            if not level:  # opaque (None), or no sources (`SELECT 1`)
                break
            levels.append(level)
        if len(levels) < len(chain):
            continue
        selects = [
            s
            for each in chain
            if isinstance(each.expression, exp.Query)
            for s in each.expression.selects
        ]
        inner = {  # a subquery's unresolved columns: its own pass checks them, down the chain
            id(c)  # (an UNNEST's have no pass of their own: they are checked here)
            for child in (*scope.subquery_scopes, *scope.udtf_scopes, *scope.derived_table_scopes)
            if not isinstance(child.expression, exp.Unnest)
            for c in child.external_columns
        }
        for column in (*scope.columns, *_having_columns(scope)):
            if id(column) in inner:
                continue
            problem = _problem(view, column, levels, _aliases(selects, column))
            if problem is not None:
                yield problem
        for call in scope.find_all(exp.DateTrunc):
            problem = _unit_column(view, call, levels)
            if problem is not None:
                yield problem


def _having_columns(scope: Scope) -> Iterator[exp.Column]:
    """The unqualified columns of the scope's own HAVING, which sqlglot leaves out of
    `scope.columns` (they may name an output column: `_problem` allows those)."""
    having = scope.expression.args.get("having")
    listed = {id(c) for c in scope.columns}
    for column in having.find_all(exp.Column) if having is not None else ():
        if id(column) not in listed and column.find_ancestor(exp.Select) is scope.expression:
            yield column


def _outer(scope: Scope) -> Iterator[Scope]:
    """The scopes a subquery's columns may also come from (a correlated subquery's)."""
    while scope.is_subquery and scope.parent is not None:
        scope = scope.parent
        yield scope


def _problem(
    view: View, column: exp.Column, levels: Sequence[Sequence[_Source]], aliases: set[str]
) -> tuple[int, str, str, dict[str, object]] | None:
    """What is wrong with one reference, given its scope's sources and then those of each
    scope around it (a subquery's column resolves in the nearest scope that has it)."""
    if column.args.get("db") is not None or isinstance(column.this, exp.Star):
        return None  # `a.b.c` may be a struct's field: Spark decides
    name, qualifier, offset = column.name, column.table, _start(column)
    sources = [s for level in levels for s in level]
    if qualifier:
        matching = [s for s in sources if s.name.lower() == qualifier.lower()]
        if not matching:
            if qualifier.lower() in aliases or any(s.has(qualifier) for s in sources):
                return None  # `s.field` of a struct column `s`: Spark decides
            named = ", ".join(sorted(s.name for s in sources))
            return (
                offset,
                "UnknownColumn",
                f"View '{view.name}' reads {qualifier}.{name}, but nothing it reads is named "
                f"'{qualifier}' (it reads {named}). Fix the name, or give the relation that "
                "alias",
                {"view": view.name, "reference": name, "relation": qualifier},
            )
        source = matching[0]
        if source.has(name):
            return None
        return (
            offset,
            "UnknownColumn",
            f"View '{view.name}' reads {qualifier}.{name}, but {_described(source)} has no "
            f"column '{name}'.{_suggestion(name, source.columns or ())} Fix the name, or add "
            f"the column to '{source.relation}'",
            {"view": view.name, "reference": name, "relation": source.relation},
        )
    if name.lower() in aliases:
        return None
    for level in levels:
        having = [s for s in level if s.has(name)]
        if not having:
            continue
        selected = [s for s in having if not s.semi]
        if len(selected) < 2:
            return None
        return (
            offset,
            "AmbiguousColumn",
            f"View '{view.name}' reads column '{name}', which "
            f"{' and '.join(_described(s) for s in selected)} "
            f"{'both' if len(selected) == 2 else 'all'} have. Qualify it, for "
            f"example {selected[0].name}.{name}",
            {"view": view.name, "reference": name},
        )
    candidates = [c for s in sources for c in s.columns or ()]
    readable = ", ".join(sorted({_described(s) for s in sources}))
    quoted = isinstance(column.this, exp.Identifier) and column.this.quoted
    string = (
        f" Double quotes name a column; a string is in single quotes: '{name}'." if quoted else ""
    )
    if name.lower() == "map" and isinstance(column.parent, exp.Bracket) and not quoted:
        string = " MAP['a', 1] is Feldera's map; Spark's SQL writes it MAP('a', 1)."
    return (
        offset,
        "UnknownColumn",
        f"View '{view.name}' reads column '{name}', which none of what it reads has "
        f"({readable}).{_suggestion(name, candidates)}{string} Fix the name, or add the column",
        {"view": view.name, "reference": name},
    )


def _unit_column(
    view: View, call: exp.Expr, levels: Sequence[Sequence[_Source]]
) -> tuple[int, str, str, dict[str, object]] | None:
    """A DATE_TRUNC unit written as a name that a source has as a column (`spindle.program.
    units`): Spark would read the column, Spindle reads the unit word."""
    written = unit_name(call, view.text)
    if written is None:
        return None
    name = written.name
    having = next((s for level in levels for s in level if s.has(name)), None)
    if having is None:
        return None
    return (
        written.start,
        "AmbiguousColumn",
        f"View '{view.name}' calls DATE_TRUNC with the name '{name}' as its unit: Spindle "
        f"reads it as the unit '{call.text('unit')}', Spark as the column '{name}' of "
        f"{_described(having)}. Write DATE_TRUNC('{name.lower()}', ...) for the unit, or "
        f"DATE_TRUNC({having.name}.{name}, ...) to truncate by the column's values",
        {"view": view.name, "reference": name},
    )


def _described(source: _Source) -> str:
    if source.name.lower() == source.relation.lower():
        return f"'{source.relation}'"
    return f"'{source.relation}' (as {source.name})"


def _suggestion(name: str, candidates: Sequence[str]) -> str:
    close = difflib.get_close_matches(name.lower(), [c.lower() for c in candidates], n=1)
    if not close:
        return ""
    spelled = next(c for c in candidates if c.lower() == close[0])
    return f" Did you mean '{spelled}'?"
