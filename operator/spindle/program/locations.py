"""Where a program's connectors read and write, and the locations two of them must not share.

Two outputs writing one location overwrite each other's files (a file output names its files
by step, and a snapshot clears the others' away), and a table reading where a view of the same
pipeline writes ingests the pipeline's own changes again, step after step. Both used to run
without a word. Here each such connector is `LocationConflict`, at its relation's line: a
problem of the program that is to run, as the connector checks of `program.transports` are.

Locations compare as paths: equal, or one inside the other (`/out` and `/out/a`), with a
trailing `/`, `file:` and `s3a://` (for `s3://`) not making them differ. Inputs may share a
location: reading it twice loses nothing.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable

from spindle.program.model import Connector, Direction, Position, Unrunnable
from spindle.program.transports import TRANSPORTS


def location(connector: Connector) -> str | None:
    """Where `connector` reads or writes, as written (the first of its transport's location
    keys that is set), or None for a transport Spindle does not run or a connector without
    one (`program.transports` refuses that)."""
    served = TRANSPORTS.get(connector.transport)
    if served is None:
        return None
    config = connector.transport_config
    return next((v for k in served.location if isinstance(v := config.get(k), str) and v), None)


def location_problems(
    declared: Iterable[tuple[Position, Iterable[Connector]]],
) -> tuple[Unrunnable, ...]:
    """`LocationConflict` for each connector whose location an earlier connector's overlaps
    where one of the two is an output; `declared`: each relation's position and connectors,
    in the program's order."""
    earlier: list[tuple[Connector, str]] = []
    problems: list[Unrunnable] = []
    for position, connectors in declared:
        for connector in connectors:
            where = location(connector)
            if where is None:
                continue
            path = _path(where)
            other = next(
                (
                    (c, w)
                    for c, w in earlier
                    if Direction.OUTPUT in (c.direction, connector.direction)
                    and _overlap(_path(w), path)
                ),
                None,
            )
            earlier.append((connector, where))
            if other is not None:
                problems.append(_conflict(connector, where, *other, at=position))
    return tuple(problems)


def _conflict(
    connector: Connector, where: str, other: Connector, there: str, *, at: Position
) -> Unrunnable:
    theirs = "writes" if other.direction is Direction.OUTPUT else "reads"
    if connector.direction is Direction.OUTPUT and other.direction is Direction.OUTPUT:
        why = "one output would overwrite the other's files"
    else:
        why = "the pipeline would ingest its own output again, every step"
    verb = "writes" if connector.direction is Direction.OUTPUT else "reads"
    return Unrunnable.at(
        at,
        reason="LocationConflict",
        message=f"Connector {connector.key} {verb} {where}, where connector {other.key} "
        f"{theirs}{f' ({there})' if there != where else ''}: {why}. Give one of them a "
        "location of its own",
        connector=connector.key,
        other=other.key,
    )


def _path(where: str) -> str:
    """A location as a path to compare: `s3a://` as `s3://`, `file:` dropped, normalized."""
    for scheme, instead in (("s3a://", "s3://"), ("file://", ""), ("file:", "")):
        if where.startswith(scheme):
            where = instead + where[len(scheme) :]
            break
    scheme, _, path = where.rpartition("://")
    path = posixpath.normpath(path) if path else path
    return f"{scheme}://{path}" if scheme else path


def _overlap(a: str, b: str) -> bool:
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")
