"""The program's own functions, checked as the runtime inlines them, before anything runs.

The runtime (`runtime.translate`) replaces each call of a function the program declares with its
body, each parameter with the call's argument cast to the parameter's type, and casts the result
to the return type. What that cannot do right failed after approval, or ran wrong without a
word:
- a parameter or return type Spark has not (`x bogus`): a parse error in the driver, shown as
  Spindle's own bug; a parameter without a type (`f(x)`) was dropped;
- a call with more arguments than parameters (the rest dropped) or fewer (the parameter left as
  a name, read as a column of the calling view);
- a body that reads a name that is not a parameter: the calling view's column of that name;
- functions that call each other in a cycle (a chain of calls deeper than the runtime inlines).
Each is a problem of the program, at the line and column where it is written: `UnsupportedType`,
`WrongArgumentCount`, `UnknownColumn`, `CyclicFunction` (`NestingTooDeep` for a chain of calls
deeper than `MAX_CALL_DEPTH`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.errors import SqlglotError

from spindle.program.model import Function, Program, Unrunnable
from spindle.program.statements import text_start
from spindle.program.syntax import parsed

MAX_CALL_DEPTH = 64
"""How deep calls of the program's functions may nest, one inside another's body, at most (the
runtime inlines them recursively)."""


def function_problems(program: Program) -> tuple[Unrunnable, ...]:
    """Every problem of the program's functions and of their calls, in the program's order."""
    functions = program.functions
    found: list[Unrunnable] = []
    typed: dict[str, Function] = {}  # a function with an untyped parameter: that is its problem
    for function in functions.values():
        found.extend(_signature(program, function))
        udf = parsed(function.text).create.this
        if len(udf.expressions) == len(function.parameters):
            typed[function.name] = function
            found.extend(_outside_names(program, function))
    owners = [
        *(("View", v.name, v.text, v.query) for v in program.views.values()),
        *(("Function", f.name, f.text, f.body) for f in functions.values()),
    ]
    for kind, name, text, tree in owners:
        found.extend(_arity(program, typed, kind=kind, owner=name, text=text, tree=tree))
    found.extend(_cycles(program, functions))
    return tuple(found)


def _signature(program: Program, function: Function) -> Iterator[Unrunnable]:
    """A parameter without a type, or a parameter or return type Spark has not (as the runtime
    builds it: from the type Spindle read, `FLOAT64` as DOUBLE)."""
    create = parsed(function.text).create
    udf = create.this
    declared = dict(function.parameters)
    typed: list[tuple[exp.Expr, str, str | None]] = [
        (p, f"parameter '{p.name}'", declared.get(p.name))
        for p in (udf.expressions if isinstance(udf, exp.UserDefinedFunction) else ())
    ]
    returns = create.find(exp.ReturnsProperty)
    if returns is not None:
        typed.append((returns.this, "its result", function.returns or None))
    for node, what, type_sql in typed:
        problem = _type_problem(type_sql)
        start = text_start(node)  # a type is not located: the function's name stands for it
        where = function.position if start is None else program.locate(function.text, start)
        if problem is None or where is None:
            continue
        yield Unrunnable.at(
            where,
            reason="UnsupportedType",
            message=f"Function '{function.name}': {what} {problem}",
            function=function.name,
        )


def _type_problem(type_sql: str | None) -> str | None:
    if type_sql is None:
        return "has no type; give it one (`x INT`)"
    try:
        unknown = exp.DataType.build(type_sql).this == exp.DataType.Type.USERDEFINED
    except (SqlglotError, ValueError):
        unknown = True
    if not unknown:
        return None
    return (
        f"has type '{type_sql}', which is not a SQL type; declare one Spark has (INT, VARCHAR, "
        "DECIMAL(10, 2), ...)"
    )


def _outside_names(program: Program, function: Function) -> Iterator[Unrunnable]:
    """A name in the body that is none of the parameters (compared as the runtime replaces
    them: as written), which would read the calling view's column of that name. A parameter's
    field (`p.k`) is the parameter's; a subquery's names are its own, left to Spark."""
    parameters = {name for name, _ in function.parameters}
    for column in function.body.find_all(exp.Column):
        if (
            isinstance(column.this, exp.Star)
            or (column.name in parameters and not column.table)
            or column.find_ancestor(exp.Select) is not None
        ):
            continue
        where = program.locate(function.text, text_start(column) or 0)
        if where is None:
            continue
        listed = ", ".join(name for name, _ in function.parameters) or "none"
        of_parameter = column.parts[0].name in parameters
        problem = (
            f"reads '{column.sql()}', a field of parameter '{column.parts[0].name}', which the "
            "runtime does not replace with the argument's (it read the calling view's column "
            "of that name). Pass the field as the argument instead"
            if of_parameter
            else f"reads '{column.sql()}', which is none of its parameters ({listed}): a "
            "function reads only its parameters. Add it as one, and pass it at each call"
        )
        yield Unrunnable.at(
            where,
            reason="UnsupportedSql" if of_parameter else "UnknownColumn",
            message=f"Function '{function.name}' {problem}",
            function=function.name,
            reference=column.name,
        )


def _calls(tree: exp.Expr, functions: Mapping[str, Function]) -> Iterator[exp.Anonymous]:
    """The calls of the program's functions in `tree`: every call of that name, as the runtime
    writes them out (`f(a).k`, `t.f(a)` too)."""
    for call in tree.find_all(exp.Anonymous):
        if call.name.lower() in functions:
            yield call


def _arity(
    program: Program,
    functions: Mapping[str, Function],
    *,
    kind: str,
    owner: str,
    text: str,
    tree: exp.Expr,
) -> Iterator[Unrunnable]:
    """A call of one of the program's functions with another number of arguments."""
    for call in _calls(tree, functions):
        function = functions[call.name.lower()]
        wanted, given = len(function.parameters), len(call.expressions)
        where = program.locate(text, text_start(call) or 0)
        if wanted == given or where is None:
            continue
        yield Unrunnable.at(
            where,
            reason="WrongArgumentCount",
            message=f"{kind} '{owner}' calls '{function.name}' with {given} argument"
            f"{'' if given == 1 else 's'}, and it takes {wanted} "
            f"({', '.join(f'{n} {t}' for n, t in function.parameters)}); pass one per parameter",
            **{kind.lower(): owner, "call": function.name},
        )


def _cycles(program: Program, functions: Mapping[str, Function]) -> Iterator[Unrunnable]:
    """Functions that call each other in a cycle, once per cycle, at its first function in
    name order; without one, a view whose calls nest deeper than `MAX_CALL_DEPTH`, or add more
    than `MAX_WRITTEN_NODES` expressions, once written out (`written_out`)."""
    graph = {
        name: sorted({c.name.lower() for c in _calls(f.body, functions)})
        for name, f in functions.items()
    }
    cycles = _walk(graph)
    for cycle in cycles:
        yield Unrunnable.at(
            functions[cycle[0]].position,
            reason="CyclicFunction",
            message=f"Functions call each other in a cycle ({' -> '.join(cycle)}); the runtime "
            "writes each call out as the function's body, so a cycle never ends. Break it",
            cycle=cycle,
        )
    if cycles:
        return
    for view in program.views.values():
        if not any(True for _ in _calls(view.query, functions)):
            continue
        written = written_out(view.query, functions)
        problem = (
            f"makes calls of the program's functions more than {MAX_CALL_DEPTH} deep, one "
            "inside another's body or argument; the runtime writes out at most that many. Merge "
            "some of them"
            if written is None
            else f"grows by {written.added:,} expressions once the runtime writes out its calls "
            "of the program's functions (each call is the function's body, each use of a "
            f"parameter a copy of its argument); it adds at most {MAX_WRITTEN_NODES:,}. Compute "
            "the repeated parts once, in a view"
            if written.added > MAX_WRITTEN_NODES
            else None
        )
        if problem is not None:
            yield Unrunnable.at(
                view.position,
                reason="NestingTooDeep" if written is None else "ProgramTooLarge",
                message=f"View '{view.name}' {problem}",
                view=view.name,
            )


MAX_WRITTEN_NODES = 50_000
"""How many expressions a view's calls of the program's functions may add to its query, once
the runtime writes them out."""


@dataclass(frozen=True)
class Written:
    """What writing out an expression's calls makes of it (`written_out`)."""

    added: int
    """Expressions the calls add (the bodies, the copies of arguments, the casts)."""
    levels: int
    """Calls inside calls, as the runtime writes them out (`MAX_CALL_DEPTH` at most)."""


@dataclass
class _Form:
    """An expression's size and call levels, in terms of the parameters of the function whose
    body holds it (a constant, plus per parameter: the copies of its argument, and how many
    calls deep the deepest copy sits)."""

    size: int = 0
    levels: int = 0
    copies: dict[str, int] = field(default_factory=dict)
    depths: dict[str, int] = field(default_factory=dict)


class _Unending(Exception):
    """Calls that never end (a cycle), or nest deeper than `MAX_CALL_DEPTH`."""


def written_out(tree: exp.Expr, functions: Mapping[str, Function]) -> Written | None:
    """What the runtime makes of `tree` when it writes out its calls of `functions`
    (`runtime.translate._inline_udfs`: a call is its function's body in a cast, each use of a
    parameter a cast copy of its argument, and the calls in both are written out in turn),
    worked out without writing them out. None when the calls never end (a cycle) or nest
    deeper than `MAX_CALL_DEPTH`."""
    forms: dict[str, _Form] = {}
    visiting: list[str] = []

    def form(name: str) -> _Form:
        if name not in forms:
            if name in visiting or len(visiting) > MAX_CALL_DEPTH:
                raise _Unending
            visiting.append(name)
            function = functions[name]
            forms[name] = measure(function.body, {p for p, _ in function.parameters})
            visiting.pop()
        return forms[name]

    def measure(node: exp.Expr, parameters: set[str]) -> _Form:
        found = _Form()
        called = {id(c) for c in _calls(node, functions)}
        for each in node.walk(prune=lambda n: id(n) in called):
            if isinstance(each, exp.Column) and not each.table and each.name in parameters:
                found.size += 2
                found.copies[each.name] = found.copies.get(each.name, 0) + 1
                found.depths.setdefault(each.name, 0)
            elif id(each) in called:
                callee = functions[each.name.lower()]
                body = form(callee.name)
                found.size += 3 + body.size
                found.levels = max(found.levels, 1 + body.levels)
                arguments = zip(callee.parameters, each.expressions, strict=False)
                for (parameter, _), argument in arguments:
                    times = body.copies.get(parameter, 0)
                    if times == 0:
                        continue  # a parameter the body never uses: its argument is dropped
                    inner, deeper = measure(argument, parameters), 1 + body.depths[parameter]
                    found.size += times * inner.size
                    found.levels = max(found.levels, deeper + inner.levels)
                    for name, count in inner.copies.items():
                        found.copies[name] = found.copies.get(name, 0) + times * count
                        depth = deeper + inner.depths[name]
                        found.depths[name] = max(found.depths.get(name, 0), depth)
            else:
                found.size += 1
        return found

    try:
        written = measure(tree, set())
    except _Unending:
        return None
    if written.levels > MAX_CALL_DEPTH:
        return None
    own = sum(1 for _ in tree.walk())
    return Written(added=written.size - own, levels=written.levels)


def _walk(graph: Mapping[str, list[str]]) -> list[list[str]]:
    """The cycles of a call graph, each once, from its least name, closed: `[f, g, f]`. Depth
    first without recursion."""
    cycles: set[tuple[str, ...]] = set()
    done: set[str] = set()
    for root in graph:
        if root in done:
            continue
        path: list[str] = [root]
        pending: list[list[str]] = [list(reversed(graph[root]))]
        while path:
            if not pending[-1]:
                done.add(path.pop())
                pending.pop()
                continue
            callee = pending[-1].pop()
            if callee in path:
                loop = path[path.index(callee) :]
                least = loop.index(min(loop))
                cycles.add(tuple(loop[least:] + loop[:least]))
            elif callee not in done:
                path.append(callee)
                pending.append(list(reversed(graph[callee])))
    return [[*cycle, cycle[0]] for cycle in sorted(cycles)]
