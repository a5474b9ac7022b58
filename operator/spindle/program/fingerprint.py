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


def fingerprint(program: Program) -> Fingerprints:
    functions: dict[str, str] = {}

    def function_fp(name: str, trail: tuple[str, ...] = ()) -> str:
        if name not in functions:
            function = program.functions[name]
            called = [(c, function_fp(c, (*trail, name))) for c in function.calls if c not in trail]
            functions[name] = digest("function", function.canonical, called)
        return functions[name]

    for name in program.functions:
        function_fp(name)

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
