"""Connector declarations: Feldera's JSON shape (`name`, `transport` {`name`, `config`}, `format`).

Connectors live in the `'connectors'` property of a table (inputs) or a view (outputs). An
anonymous connector is named `unnamed-<i>` by its position within its relation, with a warning:
such names shift when connectors are reordered. Input configs are compared without their
flow-control knobs, which change throughput, never data.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from spindle.errors import SpindleError, located
from spindle.program.formats import compared_format
from spindle.program.model import Connector, Direction, Position, Unrunnable
from spindle.program.transports import FLOW_CONTROL_KNOBS, entry_problems


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


def canonical_json(value: Any) -> str:
    return json.dumps(_thaw(value), sort_keys=True, separators=(",", ":"))


class Declared(NamedTuple):
    """A relation's connectors as read from its `'connectors'` property."""

    connectors: tuple[Connector, ...]
    warnings: tuple[str, ...]
    refused: tuple[Unrunnable, ...]
    """What the runtime would refuse (`program.transports`)."""
    misread: tuple[Unrunnable, ...]
    """What Spindle reads otherwise than written (a key given twice, a name a connector's key
    cannot tell from another's): a program that ran with one ran so, and runs so; a program
    to run is refused with it."""


UNNAMEABLE = "."
"""What a connector's name cannot have: its key is `<relation>.<name>`, and a relation's name
may have dots, so table `w.a`'s connector `b` and table `w`'s connector `a.b` were one input
(`w.a.b`), of which the runtime read one. Without a dot in the connector's name, the key's
last dot tells the two apart. (A `/` is a character like any other: the runtime reads a
writer's name of a Delta output with a `/` in the key.)"""


def parse_connectors(
    *, relation: str, direction: Direction, raw: str | None, at: Position
) -> Declared:
    """Parse a relation's `'connectors'` JSON into connectors, warnings, the problems the
    runtime would refuse (`program.transports`) and what Spindle reads otherwise than written;
    errors and problems are located `at` the relation's declaration."""

    def invalid(problem: str, *, shape: bool = True, **details: Any) -> SpindleError:
        said = (
            "Fix the 'connectors' property: it must be a JSON list of objects with a "
            "'transport' object that has a 'name'"
            if shape
            else "Fix it in the 'connectors' property"
        )
        return located(
            reason="InvalidConnectors",
            message=f"Connectors of '{relation}': {problem}. {said}",
            line=at.line,
            column=at.column,
            relation=relation,
            **details,
        )

    if raw is None:
        return Declared((), (), (), ())
    repeated: list[str] = []
    try:
        declared = json.loads(raw, object_pairs_hook=lambda pairs: _object(pairs, repeated))
        read = _connectors(declared, relation=relation, direction=direction, invalid=invalid)
    except json.JSONDecodeError as error:
        raise invalid(f"invalid JSON: {error.msg} at character {error.pos}") from None
    except ValueError:  # the only other ValueError: a number longer than Python converts
        raise invalid("invalid JSON: a number has more digits than can be read") from None
    except RecursionError:
        raise invalid("the JSON nests too deeply") from None
    twice = tuple(
        Unrunnable.of(
            invalid(
                f"the key '{key}' is given twice in one object, and only the last value was "
                "read; keep one",
                shape=False,
                key=key,
            )
        )
        for key in dict.fromkeys(repeated)
    )
    return read._replace(misread=twice + read.misread)


def _object(pairs: list[tuple[str, Any]], repeated: list[str]) -> dict[str, Any]:
    """A JSON object as `json.loads` makes it (the last value of a key given twice), noting
    each key given again in `repeated`."""
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            repeated.append(key)
        found[key] = value
    return found


def _unnameable(name: str, *, relation: str, invalid: Callable[..., SpindleError]) -> Unrunnable:
    """`InvalidConnectors` for a connector whose name has an `UNNAMEABLE` character."""
    instead = name.replace(UNNAMEABLE, "_")
    return Unrunnable.of(
        invalid(
            f"connector '{name}' has a '{UNNAMEABLE}' in its name, so its key "
            f"'{relation}.{name}' could be another relation's connector's. A connector's name "
            f"may have any character but '{UNNAMEABLE}': rename it, for example '{instead}'",
            shape=False,
            connector=name,
        )
    )


def _connectors(
    declared: Any,
    *,
    relation: str,
    direction: Direction,
    invalid: Callable[..., SpindleError],
) -> Declared:
    if not isinstance(declared, list):
        raise invalid("expected a JSON list")
    connectors: list[Connector] = []
    warnings: list[str] = []
    problems: list[Unrunnable] = []
    misread: list[Unrunnable] = []
    seen: set[str] = set()
    for index, entry in enumerate(declared):
        if not isinstance(entry, dict):
            raise invalid(f"entry {index} is not an object", index=index)
        transport = entry.get("transport")
        if not isinstance(transport, dict) or not isinstance(transport.get("name"), str):
            raise invalid(f"entry {index} has no transport name", index=index)
        name = entry.get("name")
        unnamed = name is None
        if unnamed:
            name = f"unnamed-{index}"
            warnings.append(
                f"connector {index} of '{relation}' has no name and is called '{name}'; "
                "name it explicitly so that reordering connectors does not look like a change"
            )
        if not isinstance(name, str) or not name:
            raise invalid(f"entry {index} has an invalid name", index=index)
        if name in seen:
            raise invalid(f"duplicate connector name '{name}'", connector=name)
        seen.add(name)
        if UNNAMEABLE in name:
            misread.append(_unnameable(name, relation=relation, invalid=invalid))
        problem, notes = entry_problems(entry, label=f"connector '{name}'", direction=direction)
        if problem is not None:
            refused = invalid(problem, shape=False, connector=name)
            problems.append(Unrunnable.of(refused))
        warnings.extend(f"'{relation}': {note}" for note in notes)
        compared = {
            k: v
            for k, v in entry.items()
            if k != "name" and not (direction is Direction.INPUT and k in FLOW_CONTROL_KNOBS)
        }
        if direction is Direction.INPUT and "format" in compared:
            compared["format"] = compared_format(compared["format"])
        connectors.append(
            Connector(
                relation=relation,
                name=name,
                direction=direction,
                transport=transport["name"],
                config=_freeze(entry),
                comparable=canonical_json(compared),
                unnamed=unnamed,
            )
        )
    return Declared(tuple(connectors), tuple(warnings), tuple(problems), tuple(misread))
