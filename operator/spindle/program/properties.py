"""The `WITH ('key' = 'value')` properties of a table or view, checked where a mistake would be
silent.

A table's `materialized` and `append_only` decide what Spindle stores: a value it cannot read
as a boolean (`'ture'`), or a key a typo away from one of them (`'materialised'`), used to read
as "false", and a table that was materialized became one whose rows the approved change empties.
Both are problems of the program to run (`InvalidProperty`, at the relation's line): refused at
`diff`, `plan` and `apply`, while a checkpointed program that has one still reads, as it ran.
Any other key Spindle does not read is a warning, as Feldera ignores keys it does not know.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

from spindle.program.model import Position, Unrunnable

TRUE = frozenset({"true", "1", "yes", "on"})
FALSE = frozenset({"false", "0", "no", "off"})

FLAGS: Mapping[str, frozenset[str]] = {
    "table": frozenset({"materialized", "append_only"}),
    "view": frozenset(),
}
"""The boolean properties of each kind of relation."""
READ: Mapping[str, frozenset[str]] = {kind: flags | {"connectors"} for kind, flags in FLAGS.items()}
"""Every property Spindle reads, by kind of relation."""


def flag(properties: Mapping[str, str], key: str) -> bool:
    """A boolean property, false when absent (`property_problems` refuses any other value)."""
    return properties.get(key, "false").strip().lower() in TRUE


def property_problems(
    properties: Mapping[str, str], *, relation: str, kind: str, at: Position
) -> tuple[list[Unrunnable], list[str]]:
    """The problems of a relation's properties, and warnings for the keys no one reads."""
    problems: list[Unrunnable] = []
    warnings: list[str] = []
    flags, read = FLAGS[kind], READ[kind]
    for key, value in properties.items():
        if key in flags and value.strip().lower() not in TRUE | FALSE:
            said = (
                f"property '{key}' is {value!r}, which is neither true nor false. Write "
                f"'{key}' = 'true' or 'false'"
            )
        elif key in read:
            continue
        elif near := difflib.get_close_matches(key, sorted(read), n=1, cutoff=0.8):
            said = (
                f"Spindle does not read property '{key}'; did you mean '{near[0]}'? Fix the key "
                f"(as written it would be ignored, and '{near[0]}' taken as unset)"
            )
        else:
            warnings.append(f"'{relation}': Spindle does not read property '{key}'; it is ignored")
            continue
        problems.append(
            Unrunnable.at(
                at,
                reason="InvalidProperty",
                message=f"'{relation}': {said}",
                relation=relation,
                property=key,
            )
        )
    return problems, warnings


def repeated_properties(
    properties: Iterable[tuple[str, str]], *, relation: str, at: Position
) -> list[Unrunnable]:
    """`InvalidProperty` for each key given again (keys compare regardless of case): the last
    value was read without a word, and a `'connectors'` list given twice lost the first. A
    program that ran with one ran with the last value: a problem of a program to run."""
    seen: set[str] = set()
    found: list[Unrunnable] = []
    for key, _ in properties:
        if key in seen:
            found.append(
                Unrunnable.at(
                    at,
                    reason="InvalidProperty",
                    message=f"'{relation}': property '{key}' is given twice (keys are read "
                    "regardless of case), and only the last value was read; keep one",
                    relation=relation,
                    property=key,
                )
            )
        seen.add(key)
    return found


def unread_clauses(clauses: Iterable[str], *, relation: str) -> list[str]:
    """A warning for each clause of a declaration Spindle does not read (`COMMENT 'x'`,
    `LOCATION '/x'`, `USING DELTA`), as Feldera ignores what it does not know."""
    return [f"'{relation}': Spindle does not read the clause `{c}`; it is ignored" for c in clauses]
