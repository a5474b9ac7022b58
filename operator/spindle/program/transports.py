"""What Spindle's runtime reads of a connector entry, checked when the program is parsed.

A mistake in a connector Spindle runs (a missing or misspelt `path`, an output transport on a
table, a knob inside the transport's config, where it would be ignored) is an error at
`spindle diff`, `plan` and `apply`, located at its relation, instead of at the first step or
never. Connectors of transports Spindle does not run (Feldera's `kafka_input`, ...) and keys
it does not read are left as they are, so a Feldera program still diffs: an unknown key only
warns, unless it is one letter or two from a key Spindle reads (a typo that would be ignored).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spindle.program.model import Direction

FLOW_CONTROL_KNOBS = frozenset(
    {
        "max_batch_size",
        "max_queued_records",
        "paused",
        "max_worker_batch_size",
        "max_files_per_step",
        "late_arrival_seconds",
    }
)
"""Connector entry keys that change how fast input arrives, never what it is."""

WHOLE_NUMBERS = {"max_files_per_step": 1, "late_arrival_seconds": 0}
"""The knobs Spindle's runtime reads, each a whole number at least this."""

ENTRY_KEYS = frozenset(
    {
        "name",
        "transport",
        "format",
        *FLOW_CONTROL_KNOBS,
        # Feldera's, which Spindle accepts and does not use
        "index",
        "labels",
        "start_after",
        "enable_output_buffer",
        "max_output_buffer_time_millis",
        "max_output_buffer_size_records",
        "output_buffer_config",
    }
)


@dataclass(frozen=True)
class Transport:
    """A transport Spindle runs: which relations it serves and the config key naming its
    location (the first; the others are accepted in its place)."""

    direction: Direction
    location: tuple[str, ...]


TRANSPORTS: Mapping[str, Transport] = {
    "file_input": Transport(Direction.INPUT, ("path", "uri")),
    "delta_table_input": Transport(Direction.INPUT, ("uri", "path")),
    "file_output": Transport(Direction.OUTPUT, ("path", "uri")),
    "delta_table_output": Transport(Direction.OUTPUT, ("uri", "path")),
}

_SERVES = {
    Direction.INPUT: "a table's connectors are inputs",
    Direction.OUTPUT: "a view's connectors are outputs",
}


def _near(key: str, known: frozenset[str] | tuple[str, ...]) -> str | None:
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.8)
    return close[0] if close else None


def entry_problems(
    entry: Mapping[str, Any], *, label: str, direction: Direction
) -> tuple[str | None, tuple[str, ...]]:
    """The first problem of a connector entry (`label` names it), or None, and its warnings."""
    warnings: list[str] = []
    for key in entry:
        if key in ENTRY_KEYS:
            continue
        typo = _near(key, ENTRY_KEYS)
        if typo is not None:
            return f"{label} has '{key}', which Spindle does not read (did you mean '{typo}'?)", ()
        warnings.append(f"{label}: Spindle does not read '{key}'; it is ignored")
    for knob, least in WHOLE_NUMBERS.items():
        value = entry.get(knob)
        if knob in entry and (type(value) is not int or value < least):
            return f"{label}: {knob} must be a whole number, {least} or more (got {value!r})", ()
    transport = entry["transport"]
    name = transport["name"]
    served = TRANSPORTS.get(name)
    if served is None:
        return None, tuple(warnings)
    if served.direction is not direction:
        runs = ", ".join(n for n, t in TRANSPORTS.items() if t.direction is direction)
        return f"{label} uses '{name}', but {_SERVES[direction]}: use {runs}", ()
    config = transport.get("config")
    config = config if isinstance(config, Mapping) else {}
    for key in config:
        if key in FLOW_CONTROL_KNOBS:
            return (
                f"{label} has '{key}' in its transport config, where it is not read: move it "
                "into the connector entry, beside 'transport'",
                (),
            )
    if not any(isinstance(config.get(k), str) and config.get(k) for k in served.location):
        wanted = served.location[0]
        typo = next((k for k in config if _near(k, served.location)), None)
        found = f" (it has '{typo}': did you mean '{wanted}'?)" if typo else ""
        return f"{label}: transport '{name}' needs '{wanted}' in its config{found}", ()
    return None, tuple(warnings)
