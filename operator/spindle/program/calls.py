"""Function calls checked against Spark's built-ins and the program's own functions.

A misspelt function (`avgg(grade)`) used to pass `spindle diff`, `plan` and `apply`, reach
approval, and fail in the driver with Spark's message at the view's first line. Here every call
sqlglot does not know as a function of its own (an `Anonymous` call, rendered to Spark by its
name) must name a Spark built-in (`spindle.program.spark_functions`) or a function the program
declares; any other is `UnknownFunction`, at the call's line and column, with the closest name.

Only what Spark refuses too: a call sqlglot knows (`AVG`, `LEVENSHTEIN`) is left to Spark, and
so are qualified names (`catalog.fn(...)`) and table functions in FROM.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator

from sqlglot import exp

from spindle.program.model import Program, Unrunnable
from spindle.program.spark_functions import SPARK_FUNCTIONS


def call_problems(program: Program) -> tuple[Unrunnable, ...]:
    """Each view's and function's first call of a function that does not exist, in order."""
    declared = frozenset(program.functions)
    problems: list[Unrunnable] = []
    owners = [
        *(("View", v.name, v.text, v.query) for v in program.views.values()),
        *(("Function", f.name, f.text, f.body) for f in program.functions.values()),
    ]
    for kind, name, text, tree in owners:
        call = min(_unknown_calls(tree, declared), key=_start, default=None)
        where = None if call is None else program.locate(text, _start(call))
        if call is None or where is None:
            continue
        called = call.name.lower()
        close = difflib.get_close_matches(called, sorted(SPARK_FUNCTIONS | declared), n=1)
        hint = f" Did you mean '{close[0]}'? {WHAT_TO_DO}" if close else f" {WHAT_TO_DO}"
        if called in FELDERA_INSTEAD:  # a name a closest spelling would mislead about
            hint = f" Write it as Spark's SQL has it: {FELDERA_INSTEAD[called]}."
        problem = Unrunnable.at(
            where,
            reason="UnknownFunction",
            message=f"{kind} '{name}' calls '{called}', which is neither a Spark function nor one "
            f"the program declares.{hint}",
            **{kind.lower(): name, "call": called},
        )
        problems.append(problem)
    return tuple(problems)


WHAT_TO_DO = "Fix the name, or declare it with CREATE FUNCTION."


def _start(call: exp.Expr) -> int:
    return int(call.meta.get("start", 0))


def _unknown_calls(tree: exp.Expr, declared: frozenset[str]) -> Iterator[exp.Anonymous]:
    for call in tree.find_all(exp.Anonymous):
        if isinstance(call.parent, exp.Dot | exp.Table) or call.meta.get("start") is None:
            continue  # a qualified name, or a table function: Spark's to resolve
        if call.find_ancestor(exp.Hint) is not None:
            continue  # `/*+ BROADCAST(u) */`: a hint, not a call
        if unknown_call(call, declared):
            yield call


def unknown_call(node: exp.Expr, declared: frozenset[str]) -> bool:
    """Whether `node` calls, by name, a function neither Spark nor the program has."""
    if not isinstance(node, exp.Anonymous):
        return False
    name = node.name.lower()
    return name not in SPARK_FUNCTIONS and name not in SYNTAX and name not in declared


def call_name(call: exp.Expr) -> str:
    """A call's name as Spark writes it, in upper case (`ROW_NUMBER`, an unknown `AVGG`)."""
    if isinstance(call, exp.Anonymous):
        return call.name.upper()
    return call.sql_name() if isinstance(call, exp.Func) else call.key.upper()


FELDERA_INSTEAD = {
    "row": "STRUCT(1, 'a'), or NAMED_STRUCT('n', 1, 's', 'a') to name the fields",
    "parse_date": "TO_DATE(s, 'yyyy-MM-dd') (Spark's pattern letters, the text first)",
    "parse_timestamp": "TO_TIMESTAMP(s, 'yyyy-MM-dd HH:mm:ss') (the text first)",
    "format_date": "DATE_FORMAT(d, 'yyyy-MM-dd') (the date first)",
    "tumble": "a group by WINDOW(ts, '1 hour') (its .start and .end are the window's bounds)",
    "hop": "a group by WINDOW(ts, '1 hour', '15 minutes') (a window, then its slide)",
}
"""Feldera's functions that Spark has under another name or form, and how to write them."""

SYNTAX = frozenset({"timestampadd", "timestampdiff"})
"""Calls Spark's grammar reads itself (their first argument is a unit, `HOUR`), so that they
are not in its function registry."""
