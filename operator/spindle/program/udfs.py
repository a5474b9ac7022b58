"""The program's own functions: written out in place of their calls, and checked as that is
done, before anything runs.

The runtime (`runtime.translate`) writes each call of a function the program declares out as
its body (`inline_calls`), each parameter replaced by the call's argument cast to the
parameter's type, the result cast to the return type. The plan runs the same code for each view
that calls a function, so the two never disagree. What that cannot do right failed after
approval, or ran wrong without a word, and is a problem of the program, at the line and column
where it is written:
- a parameter or return type Spark has not, or none, and a type the body casts to that Spark
  has not (`UnsupportedType`, as a table's column would be: `DECIMAL(50, 2)`, `INT UNSIGNED`,
  TIME, which the runtime wrote as a TIMESTAMP);
- a call with more arguments than parameters, or fewer (`WrongArgumentCount`), or in a form its
  written-out body cannot take (`f(a) OVER`, `f(DISTINCT a)`, `t.f(a)`, `f(a).k`: `UnsupportedSql`);
- a body that reads a name that is not a parameter (`UnknownColumn`), a parameter's field or a
  query (`UnsupportedSql`), two parameters of one name (`DuplicateColumn`);
- functions that call each other in a cycle (`CyclicFunction`), calls nested more than
  `MAX_CALL_DEPTH` deep (`NestingTooDeep`), or more than `MAX_WRITTEN_NODES` expressions built to
  write them out (`ProgramTooLarge`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from sqlglot import exp
from sqlglot.errors import SqlglotError

from spindle.errors import SpindleError, located
from spindle.program.model import Function, Program, Unrunnable, View
from spindle.program.spark_calls import as_written
from spindle.program.statements import text_start
from spindle.program.syntax import parsed
from spindle.program.types import written_type_problem
from spindle.program.writable import type_problems

MAX_CALL_DEPTH = 64
"""How deep calls of the program's functions may nest, one inside another's body, at most (the
runtime inlines them recursively)."""


def function_problems(program: Program) -> tuple[Unrunnable, ...]:
    """Every problem of the program's functions and of their calls, in the program's order."""
    functions = program.functions
    found: list[Unrunnable] = []
    typed: dict[str, Function] = {}  # a function with an untyped parameter: that is its problem
    sound: set[str] = set()  # a function of known types (else that is its problem, once)
    for function in functions.values():
        signature = list(_signature(program, function))
        found.extend(signature)
        if not signature:
            sound.add(function.name)
        udf = parsed(function.text).create.this
        if len(udf.expressions) == len(function.parameters):
            typed[function.name] = function
            found.extend(_body_problems(program, function))
        for problem in type_problems(function.body, function.text, said="uses the"):
            where = program.locate(function.text, problem.start) or function.position
            found.append(problem.at(where, "Function", function.name))
    owners = [
        *(("View", v.name, v.text, v.query) for v in program.views.values()),
        *(("Function", f.name, f.text, f.body) for f in functions.values()),
    ]
    for kind, name, text, tree in owners:
        found.extend(_arity(program, typed, kind=kind, owner=name, text=text, tree=tree))
    found.extend(_cycles(program, functions, sound=sound))
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
        # a type is not located (nor a RETURNS without one): the function's name stands for it
        start = None if node is None else text_start(node)
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
    """Why a parameter's or the result's declared type (canonical: FLOAT64 is DOUBLE) is none
    Spindle runs on Spark: none, not a SQL type, or one Spark has not (`types`: DECIMAL(50, 2),
    INT UNSIGNED, TIME, which the runtime wrote as a TIMESTAMP)."""
    if type_sql is None:
        return "has no type; give it one (`x INT`)"
    built = _built(type_sql)
    if built is None or built.this == exp.DataType.Type.USERDEFINED:
        return _not_a_type(type_sql)
    problem = written_type_problem(built, verb="declare")
    return None if problem is None else f"has the {problem}"


def _built(type_sql: str) -> exp.DataType | None:
    """The type as the runtime builds it (`_type`), or None when sqlglot cannot."""
    try:
        return exp.DataType.build(type_sql)
    except (SqlglotError, ValueError, TypeError):  # TypeError: it parses as another node
        return None


def _not_a_type(type_sql: str) -> str:
    return (
        f"has type '{type_sql}', which is not a SQL type; declare one Spark has (INT, VARCHAR, "
        "DECIMAL(10, 2), ...)"
    )


def _body_problems(program: Program, function: Function) -> Iterator[Unrunnable]:
    """What in the body the runtime cannot write out as written: a query (its columns named as
    parameters would be replaced too), two parameters of one name, a name that is none of the
    parameters (compared as the runtime replaces them: as written), which would read the
    calling view's column of that name, and a parameter's field (`p.k`), which the runtime
    leaves as the view's `p`."""
    parameters = {name for name, _ in function.parameters}
    query = function.body.find(exp.Query)
    if query is not None:
        at = program.locate(function.text, text_start(query) or 0) or function.position
        yield Unrunnable.at(
            at,
            reason="UnsupportedSql",
            message=f"Function '{function.name}' has a query in its body: a function reads "
            "only its parameters. Read the table in a view, and pass what the function needs",
            function=function.name,
        )
        return
    repeated = _repeated_parameter(function)
    if repeated is not None:
        yield Unrunnable.at(
            function.position,
            reason="DuplicateColumn",
            message=f"Function '{function.name}' has two parameters named '{repeated}'; rename one",
            function=function.name,
        )
    for column in function.body.find_all(exp.Column):
        if isinstance(column.this, exp.Star) or (column.name in parameters and not column.table):
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


def _repeated_parameter(function: Function) -> str | None:
    """The first parameter name an earlier parameter has (case-insensitively), or None."""
    seen: set[str] = set()
    for name, _ in function.parameters:
        if name.lower() in seen:
            return name
        seen.add(name.lower())
    return None


def _calls(tree: exp.Expr, functions: Mapping[str, Function]) -> Iterator[exp.Anonymous]:
    """The calls of the program's functions in `tree`: every call of that name, as the runtime
    writes them out (`f(a).k`, `t.f(a)` too)."""
    for call in tree.find_all(exp.Anonymous):
        if call.name.lower() in functions:
            yield call


_SHAPES: tuple[tuple[str, Callable[[exp.Anonymous], bool]], ...] = (
    (
        "as a window function (OVER)",
        lambda c: isinstance(c.parent, exp.Window) and c.arg_key == "this",
    ),
    ("with DISTINCT", lambda c: any(isinstance(a, exp.Distinct) for a in c.expressions)),
    ("with a qualifier", lambda c: isinstance(c.parent, exp.Dot) and c.arg_key == "expression"),
    ("for a field of its result", lambda c: isinstance(c.parent, exp.Dot) and c.arg_key == "this"),
)
"""How a call of the program's function can be written that its written-out body cannot take
the place of (`CAST(...) OVER (...)`, `CAST(DISTINCT a ...)`, `t.CAST(...)`, a field of an INT)."""


def _unwritable(call: exp.Anonymous) -> str | None:
    return next((shape for shape, found in _SHAPES if found(call)), None)


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
        if where is None:
            continue
        shape = _unwritable(call)
        if shape is not None:
            yield Unrunnable.at(
                where,
                reason="UnsupportedSql",
                message=f"{kind} '{owner}' calls '{function.name}' {shape}, which its body, "
                "written out in its place, cannot be; call it plainly (`f(a)`)",
                **{kind.lower(): owner, "call": function.name},
            )
            continue
        if wanted == given:
            continue
        yield Unrunnable.at(
            where,
            reason="WrongArgumentCount",
            message=f"{kind} '{owner}' calls '{function.name}' with {given} argument"
            f"{'' if given == 1 else 's'}, and it takes {wanted} "
            f"({', '.join(f'{n} {t}' for n, t in function.parameters)}); pass one per parameter",
            **{kind.lower(): owner, "call": function.name},
        )


def _cycles(
    program: Program, functions: Mapping[str, Function], *, sound: set[str]
) -> Iterator[Unrunnable]:
    """Functions that call each other in a cycle, once per cycle, at its first function in
    name order; without one, a view whose calls cannot be written out (`inline_calls`)."""
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
        called = {c.name.lower() for c in _calls(view.query, functions)}
        if not called or not called <= sound:  # none; or a type that is already a problem
            continue
        try:
            inline_view(view, view.query.copy(), functions)
        except SpindleError as error:
            yield Unrunnable.of(error)


MAX_WRITTEN_NODES = 200_000
"""How many expressions writing out a view's calls may build, all told."""


def inline_calls(tree: exp.Expr, functions: Mapping[str, Function]) -> exp.Expr:
    """`tree` (owned: it is changed) with each call of one of `functions` written out as the
    function's body, in a cast to its result type, each use of a parameter a cast copy of the
    call's argument; the calls in both are written out in turn. What Spark runs (a SQL function
    of Spark's would be a catalog object). Calls nested more than `MAX_CALL_DEPTH` deep are
    `NestingTooDeep`; building more than `MAX_WRITTEN_NODES` expressions, all told, is
    `ProgramTooLarge` (a body that calls the next function twice doubles at each level)."""
    built = [0]
    return _inline(tree, functions, depth=0, built=built)


def inline_view(view: View, tree: exp.Expr, functions: Mapping[str, Function]) -> exp.Expr:
    """`inline_calls` of view `view`'s query `tree`, its problems located at the view."""
    try:
        return inline_calls(tree, functions)
    except SpindleError as error:
        raise located(
            reason=error.reason,
            message=f"View '{view.name}': {error.message.rstrip('.')}",
            line=view.position.line,
            column=view.position.column,
            view=view.name,
        ) from None


def _inline(
    tree: exp.Expr, functions: Mapping[str, Function], *, depth: int, built: list[int]
) -> exp.Expr:
    if depth > MAX_CALL_DEPTH:
        raise SpindleError(
            reason="NestingTooDeep",
            message=f"The program's functions call each other more than {MAX_CALL_DEPTH} "
            "deep, in their bodies or arguments (or in a cycle); break the cycle, or merge some "
            "of them.",
        )

    def replace(node: exp.Expr) -> exp.Expr:
        name = node.name.lower() if isinstance(node, exp.Anonymous) else None
        if name is None or name not in functions:
            return node
        function = functions[name]
        arguments = {  # each as its parameter's type, as Spark's SQL functions take them; a
            # cast is a call, so `dbl(x + 1)` stays `(x + 1) * 2`, never `x + 1 * 2`
            parameter: exp.Cast(this=argument.copy(), to=_type(function, declared))
            for (parameter, declared), argument in zip(
                function.parameters, node.expressions, strict=False
            )
        }
        body = as_written(function.body)
        body = body.copy() if body is function.body else body
        body = body.transform(
            lambda n: (
                arguments[n.name].copy()
                if isinstance(n, exp.Column) and not n.table and n.name in arguments
                else n
            )
        )
        built[0] += sum(1 for _ in body.walk())
        if built[0] > MAX_WRITTEN_NODES:
            raise SpindleError(
                reason="ProgramTooLarge",
                message="Writing out the calls of the program's functions builds more than "
                f"{MAX_WRITTEN_NODES:,} expressions (each call is the function's body, each use "
                "of a parameter a copy of its argument). Compute the repeated parts once, in a "
                "view.",
            )
        inlined = _inline(body, functions, depth=depth + 1, built=built)
        return exp.Cast(this=exp.Paren(this=inlined), to=_type(function, function.returns))

    return tree.transform(replace)


def _type(function: Function, declared: str) -> exp.DataType:
    built = _built(declared)
    if built is None:  # refused when planned (`_signature`); a checkpoint's
        raise SpindleError(
            reason="UnsupportedType",
            message=f"Function '{function.name}': a parameter or its result "
            f"{_not_a_type(declared)}.",
        )
    return built


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
