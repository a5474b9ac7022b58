"""One mutant through the program layer, and whether its outcome keeps the contract.

The contract: `parse_program` (and `refuse_unrunnable`, as for a spec's program) + `make_plan`
end in a plan (whose JSON can be printed) or in a `SpindleError` with a known reason; a SQL
reason carries a line and column inside the text, and every message is readable. Anything else
(another exception, an unknown reason, a position outside the text) is a violation to fix.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from spindle.cli.main import main
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
        "InvalidProperty",
        "UnsupportedSql",
        "UnknownColumn",
        "AmbiguousColumn",
        "UnsupportedType",
        "UnknownFunction",
        "UngroupedColumn",
        "UnorderedWindow",
        "OrdinalOutOfRange",
        "DuplicateColumn",
        "ColumnCountMismatch",
        "LocationConflict",
        "MisplacedAggregate",
        "MisplacedWindow",
        "NestedAggregate",
        "NestingTooDeep",
        "NameTooLong",
        "WrongArgumentCount",
        "CyclicFunction",
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
        new.refuse_unrunnable()  # what the spec's program meets besides parsing
        for plan in (make_plan(old=old, new=new), make_plan(old=new, new=old)):
            json.dumps(plan.to_json())
    except SpindleError as error:
        return Outcome(error.reason, time.perf_counter() - start, _violation(error, mutant.data))
    except Exception as error:  # what the fuzzer is for: a crash is a violation, not a stop
        kind = f"internal:{type(error).__name__}"
        return Outcome(kind, time.perf_counter() - start, f"{kind}: {str(error)[:300]}")
    return Outcome(PLAN, time.perf_counter() - start)


CAMEL_CASE = re.compile(r"^[A-Z][a-z]+(?:[A-Z][a-z0-9]*)*$")
MANIFEST_REASONS = frozenset(
    {
        "FileUnreadable",
        "InvalidManifest",
        "InvalidSpec",
        "InvalidStorageUri",
        "StorageUnavailable",
        "StorageRequestRejected",
        "StorageBucketNotFound",
        "InvalidStorageOptions",
        "StorageNotConfigured",
        "SecretNotFound",
        "ProgramTooLarge",
        "UnsupportedSql",
        "UnsupportedConnector",
        *LOCATED_REASONS,
    }
)
"""What a command that reads a manifest may answer besides a plan: the manifest's own problems,
its storage's and its program's."""


def cli(argv: Sequence[str]) -> Outcome:
    """`spindle ARGV --json` in this process: a status or a plan (kind: its reason, e.g.
    `Stopped`), or an error body whose reason must be one of `MANIFEST_REASONS`."""
    out = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(list(argv))
    seconds = time.perf_counter() - start
    try:
        body = json.loads(out.getvalue())
    except ValueError:
        return Outcome("internal:NoJson", seconds, f"not one JSON object: {out.getvalue()[:300]}")
    if code == 0 or (code == 1 and "phase" in body):  # `local apply` of a Failed pipeline: 1
        conditions = body.get("conditions") or [{}]
        kind = str(body.get("reason") or conditions[0].get("reason") or PLAN)
        violation = None if CAMEL_CASE.match(kind) else f"reason {kind!r} is not CamelCase"
        return Outcome(kind, seconds, violation)
    reason, message = str(body.get("error_code")), str(body.get("message"))
    if reason == "InternalError":
        return Outcome(f"internal:{message.split(':')[0]}", seconds, message[:400])
    known = reason in MANIFEST_REASONS and len(message) >= 20
    return Outcome(reason, seconds, None if known else f"{reason}: {message[:300]}")
