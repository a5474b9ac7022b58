"""One mutant through the program layer, and whether its outcome keeps the contract.

The contract: `parse_program` + `make_plan` end in a plan (whose JSON can be printed) or in a
`SpindleError` with a known reason; a SQL reason carries a line and column inside the text, and
every message is readable. Anything else (another exception, an unknown reason, a position
outside the text) is a violation to fix.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from functools import cache

from spindle.errors import SpindleError
from spindle.plan import make_plan
from spindle.program import Program, parse_program
from spindle.program.source import program_text
from tests.fuzz.mutations import Mutant
from tests.fuzz.seeds import seeds

LOCATED_REASONS = frozenset(
    {
        "InvalidProgram",
        "DuplicateRelation",
        "DuplicateFunction",
        "CyclicView",
        "UnknownRelation",
        "InvalidConnectors",
        "NestingTooDeep",
        "NameTooLong",
    }
)
"""Reasons about SQL text: each carries the line and column of the problem."""
UNLOCATED_REASONS = frozenset({"ProgramTooLarge"})
"""Reasons about the program as a whole."""
PLAN = "plan"


@dataclass(frozen=True)
class Outcome:
    kind: str
    """`plan`, a reason code, or `internal:<exception type>`."""
    seconds: float
    violation: str | None = None
    """How the outcome breaks the contract; None when it keeps it."""


@cache
def seed_program(name: str) -> Program:
    return parse_program(dict((n, t) for n, t in seeds())[name])


def _readable(data: str | bytes) -> str:
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


def _violation(error: SpindleError, data: str | bytes) -> str | None:
    if error.reason not in LOCATED_REASONS | UNLOCATED_REASONS:
        return f"unknown reason {error.reason}"
    if len(error.message) < 20 or "<Token" in error.message or "Traceback" in error.message:
        return f"unreadable message: {error.message[:200]!r}"
    try:
        json.dumps(error.body())
    except (TypeError, ValueError) as problem:
        return f"error body is not JSON: {problem}"
    if error.reason in UNLOCATED_REASONS:
        return None
    line, column = error.details.get("line"), error.details.get("column")
    lines = _readable(data).split("\n")
    if not isinstance(line, int) or not isinstance(column, int):
        return f"{error.reason} without line and column"
    if not (1 <= line <= len(lines) and 1 <= column <= len(lines[line - 1]) + 1):
        return f"{error.reason} at line {line}, column {column}: outside the text"
    return None


def run(mutant: Mutant) -> Outcome:
    """The mutant's outcome against the program it was made from, in both directions."""
    old = seed_program(mutant.seed)
    start = time.perf_counter()
    try:
        text = program_text(mutant.data) if isinstance(mutant.data, bytes) else mutant.data
        new = parse_program(text)
        for plan in (make_plan(old=old, new=new), make_plan(old=new, new=old)):
            json.dumps(plan.to_json())
    except SpindleError as error:
        return Outcome(error.reason, time.perf_counter() - start, _violation(error, mutant.data))
    except Exception as error:  # what the fuzzer is for: a crash is a violation, not a stop
        kind = f"internal:{type(error).__name__}"
        return Outcome(kind, time.perf_counter() - start, f"{kind}: {str(error)[:300]}")
    return Outcome(PLAN, time.perf_counter() - start)
