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
from typing import Any

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


def parse_connectors(
    *, relation: str, direction: Direction, raw: str | None, at: Position
) -> tuple[tuple[Connector, ...], tuple[str, ...], tuple[Unrunnable, ...]]:
    """Parse a relation's `'connectors'` JSON into connectors, warnings and the problems the
    runtime would refuse (`program.transports`); errors and problems are located `at` the
    relation's declaration."""

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
        return (), (), ()
    try:
        declared = json.loads(raw)
        return _connectors(declared, relation=relation, direction=direction, invalid=invalid)
    except json.JSONDecodeError as error:
        raise invalid(f"invalid JSON: {error.msg} at character {error.pos}") from None
    except ValueError:  # the only other ValueError: a number longer than Python converts
        raise invalid("invalid JSON: a number has more digits than can be read") from None
    except RecursionError:
        raise invalid("the JSON nests too deeply") from None


def _connectors(
    declared: Any,
    *,
    relation: str,
    direction: Direction,
    invalid: Callable[..., SpindleError],
) -> tuple[tuple[Connector, ...], tuple[str, ...], tuple[Unrunnable, ...]]:
    if not isinstance(declared, list):
        raise invalid("expected a JSON list")
    connectors: list[Connector] = []
    warnings: list[str] = []
    problems: list[Unrunnable] = []
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
    return tuple(connectors), tuple(warnings), tuple(problems)
