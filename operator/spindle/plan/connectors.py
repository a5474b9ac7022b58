"""Connector changes: added, removed and modified, keyed `<relation>.<connector>`.

Connectors of a removed relation are not listed as removed (the relation's removal says it);
connectors of an added relation are listed as added. A connector whose comparable config (for
inputs, without flow-control knobs) changed is modified. Renaming one is a removal plus an
addition.
"""

from __future__ import annotations

from spindle.program import Connector, Direction, Program


def _by_key(program: Program, direction: Direction) -> dict[str, Connector]:
    return {c.key: c for c in program.connectors if c.direction is direction}


def connector_changes(*, old: Program, new: Program) -> dict[str, tuple[str, ...]]:
    """The six Feldera connector lists, each sorted."""
    lists: dict[str, tuple[str, ...]] = {}
    for direction in (Direction.INPUT, Direction.OUTPUT):
        before, after = _by_key(old, direction), _by_key(new, direction)
        survivors = new.tables if direction is Direction.INPUT else new.views
        lists[f"added_{direction.value}_connectors"] = tuple(sorted(after.keys() - before.keys()))
        lists[f"removed_{direction.value}_connectors"] = tuple(
            sorted(k for k in before.keys() - after.keys() if before[k].relation in survivors)
        )
        lists[f"modified_{direction.value}_connectors"] = tuple(
            sorted(
                k
                for k in before.keys() & after.keys()
                if before[k].comparable != after[k].comparable
            )
        )
    return lists
