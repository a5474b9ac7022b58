"""Fingerprints: stable hashes of canonical forms, chained through dependencies (Merkle style).

A view's *data* fingerprint covers its canonical query, the data fingerprints of everything it
reads and the fingerprints of the UDFs it calls (so a changed UDF body is detected). Its *object*
fingerprint adds the MATERIALIZED flag, which changes how the view is kept, not its data: a
toggle modifies that view only. Hashes are SHA-256 over JSON, never Python's `hash()`, so they
are identical across processes and machines.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass

from spindle.program.model import Program

FINGERPRINT_VERSION = 1


def digest(*parts: object) -> str:
    payload = json.dumps(parts, separators=(",", ":"), sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


@dataclass(frozen=True)
class Fingerprints:
    tables: Mapping[str, str]
    views: Mapping[str, str]
    """Object fingerprints of views (data plus materialization)."""
    data: Mapping[str, str]
    """Data fingerprints of tables and views: what a reader of the relation depends on."""
    functions: Mapping[str, str]
    connectors: Mapping[str, str]
    program: str


@dataclass
class _Frame:
    """A function whose fingerprint waits for those of the functions it calls."""

    name: str
    trail: tuple[str, ...]
    """The callers on the way here: a call back to one of them (recursion) is not followed."""
    calls: list[str]
    called: list[tuple[str, str]]


def _function_fingerprints(program: Program) -> dict[str, str]:
    """Each function's fingerprint covers its canonical body and the fingerprints of the
    functions it calls. Depth first with an explicit stack: call chains can be long."""
    functions: dict[str, str] = {}

    def frame(name: str, trail: tuple[str, ...]) -> _Frame:
        calls = [c for c in program.functions[name].calls if c not in trail]
        return _Frame(name, trail, calls[::-1], [])

    for root in program.functions:
        stack = [] if root in functions else [frame(root, ())]
        while stack:
            top = stack[-1]
            if top.calls:
                callee = top.calls.pop()
                if callee in functions:
                    top.called.append((callee, functions[callee]))
                else:
                    stack.append(frame(callee, (*top.trail, top.name)))
                continue
            stack.pop()
            functions[top.name] = digest(
                "function", program.functions[top.name].canonical, top.called
            )
            if stack:
                stack[-1].called.append((top.name, functions[top.name]))
    return functions


def fingerprint(program: Program) -> Fingerprints:
    functions = _function_fingerprints(program)

    data: dict[str, str] = {
        name: digest("table", table.schema_signature()) for name, table in program.tables.items()
    }
    views: dict[str, str] = {}
    for name, view in program.views.items():  # topological order
        data[name] = digest(
            "view",
            view.canonical,
            [(dep, data[dep]) for dep in view.dependencies],
            [(f, functions[f]) for f in view.functions],
        )
        views[name] = digest(data[name], view.materialized)
    connectors = {
        c.key: digest("connector", c.direction.value, c.comparable) for c in program.connectors
    }
    program_fp = digest(
        FINGERPRINT_VERSION,
        sorted(data[t] for t in program.tables),
        sorted(views.items()),
        sorted(functions.items()),
        sorted(connectors.items()),
    )
    return Fingerprints(
        tables={t: data[t] for t in program.tables},
        views=views,
        data=data,
        functions=functions,
        connectors=connectors,
        program=program_fp,
    )
