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
            or column.table in parameters
            or column.find_ancestor(exp.Select) is not None
        ):
            continue
        where = program.locate(function.text, text_start(column) or 0)
        if where is None:
            continue
        listed = ", ".join(name for name, _ in function.parameters) or "none"
        yield Unrunnable.at(
            where,
            reason="UnknownColumn",
            message=f"Function '{function.name}' reads '{column.sql()}', which is none of its "
            f"parameters ({listed}): a function reads only its parameters. Add it as one, and "
            "pass it at each call",
            function=function.name,
            reference=column.name,
        )


def _calls(tree: exp.Expr, functions: Mapping[str, Function]) -> Iterator[exp.Anonymous]:
    """The calls of the program's functions in `tree`, as the runtime writes them out (`f(a).k`
    too; not a qualified name's, `db.f(a)`)."""
    for call in tree.find_all(exp.Anonymous):
        qualified = isinstance(call.parent, exp.Dot) and call.arg_key == "expression"
        if (
            call.name.lower() in functions
            and not qualified
            and not isinstance(call.parent, exp.Table)
        ):
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
    name order; without one, a view's call that makes a chain of calls deeper than
    `MAX_CALL_DEPTH`."""
    graph = {
        name: sorted({c.name.lower() for c in _calls(f.body, functions)})
        for name, f in functions.items()
    }
    cycles, order = _walk(graph)
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
    depth: dict[str, int] = {}  # the longest chain of calls a call of each function makes
    for name in order:  # callees first
        depth[name] = 1 + max((depth[c] for c in graph[name]), default=0)
    for view in program.views.values():
        size = written_size(view.query, functions)
        if size is not None and size > MAX_WRITTEN_NODES:
            yield Unrunnable.at(
                view.position,
                reason="ProgramTooLarge",
                message=f"View '{view.name}' grows to {size:,} expressions once the runtime "
                "writes out its calls of the program's functions (each call is the function's "
                "body, each use of a parameter a copy of its argument); it writes out at most "
                f"{MAX_WRITTEN_NODES:,}. Compute the repeated parts once, in a view",
                view=view.name,
            )
    for view in program.views.values():  # a function no view calls is never written out
        deepest = max(
            _calls(view.query, functions), key=lambda c: depth[c.name.lower()], default=None
        )
        where = None if deepest is None else program.locate(view.text, text_start(deepest) or 0)
        if deepest is None or where is None or depth[deepest.name.lower()] <= MAX_CALL_DEPTH:
            continue
        yield Unrunnable.at(
            where,
            reason="NestingTooDeep",
            message=f"View '{view.name}' calls '{deepest.name.lower()}', which makes a chain of "
            f"{depth[deepest.name.lower()]} calls of the program's functions, one inside "
            f"another's body; the runtime writes out at most {MAX_CALL_DEPTH}. Merge some of them",
            view=view.name,
        )


MAX_WRITTEN_NODES = 50_000
"""How many expressions a view's query may have once its calls are written out."""


def written_size(tree: exp.Expr, functions: Mapping[str, Function]) -> int | None:
    """How many expressions `tree` has once the runtime writes out its calls of `functions`
    (`runtime.translate`: a call is its function's body in a cast, each use of a parameter a
    cast copy of its argument), without writing them out: each function's size is a constant
    plus a multiple of each argument's. None when functions call each other in a cycle."""
    forms: dict[str, tuple[int, dict[str, int]] | None] = {}
    visiting: set[str] = set()

    def form(name: str) -> tuple[int, dict[str, int]] | None:
        if name not in forms:
            if name in visiting:
                return None
            visiting.add(name)
            function = functions[name]
            forms[name] = size(function.body, {p for p, _ in function.parameters})
            visiting.discard(name)
        return forms[name]

    def size(node: exp.Expr, parameters: set[str]) -> tuple[int, dict[str, int]] | None:
        constant, per = 0, dict[str, int]()
        called = {id(c): c for c in _calls(node, functions)}
        for each in node.walk(prune=lambda n: id(n) in called):
            if isinstance(each, exp.Column) and not each.table and each.name in parameters:
                constant, per[each.name] = constant + 2, per.get(each.name, 0) + 1
            elif id(each) in called:
                callee = functions[each.name.lower()]
                body = form(callee.name)
                if body is None:
                    return None
                constant += 3 + body[0]
                arguments = zip(callee.parameters, each.expressions, strict=False)
                for (parameter, _), argument in arguments:
                    inner = size(argument, parameters)
                    if inner is None:
                        return None
                    times = body[1].get(parameter, 0)
                    constant += times * inner[0]
                    for name, count in inner[1].items():
                        per[name] = per.get(name, 0) + times * count
            else:
                constant += 1
        return constant, per

    written = size(tree, set())
    return None if written is None else written[0]


def _walk(graph: Mapping[str, list[str]]) -> tuple[list[list[str]], list[str]]:
    """The cycles of a call graph (each once, from its least name, closed: `[f, g, f]`), and
    its names in post-order (callees first). Depth first without recursion."""
    cycles: set[tuple[str, ...]] = set()
    order: list[str] = []
    done: set[str] = set()
    for root in graph:
        if root in done:
            continue
        path: list[str] = [root]
        pending: list[list[str]] = [list(reversed(graph[root]))]
        while path:
            if not pending[-1]:
                done.add(path[-1])
                order.append(path.pop())
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
    return [[*cycle, cycle[0]] for cycle in sorted(cycles)], order
