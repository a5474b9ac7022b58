"""What Spindle's runtime reads of a connector entry, checked when the program is parsed.

A mistake the runtime would refuse at the first step (a transport Spindle does not run, such
as Feldera's `kafka_input` or a typo, `file_inptu`; no `path`/`uri`; a `file_output` path with a
':' in a segment, `/out/2025-01-02T10:00`, which Hadoop reads as a URI scheme (its glob of the
directory failed the first step, an internal error); an output transport on a table or an input
one on a view; a `late_arrival_seconds` that is not a whole number; a Feldera
config key that would choose what is read or written otherwise than Spindle does) is a problem
of the program: the spec's program is refused with it (`InvalidConnectors`, at its relation's
line) at `diff`, `plan` and `apply`, while a checkpointed program that has it still reads, so a
Feldera program still diffs as the old side. A key the runtime would ignore (a knob inside the
transport's config, a key a typo away from one Spindle reads,
a `max_files_per_step` that is not a whole number above 0, a file input's key on another
transport: `max_files_per_step` or `late_arrival_seconds` beside an output's or a Delta input's
transport, a `format` on a Delta connector, an input's `format.config` key such as `header`,
`delimiter` or `weight_column` on a file output) is a warning, saying what the connector does
instead: such programs ran.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spindle.program.formats import CONFIG_KEYS as FORMAT_KEYS
from spindle.program.formats import INPUT_ONLY_KEYS, OUTPUT_CONFIG_KEYS
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
FILE_INPUT_KNOBS: Mapping[str, str] = {
    "max_files_per_step": "limits how many new files a file input reads in a step",
    "late_arrival_seconds": "says how late a file input's file may arrive and still be read",
}
"""The entry keys only `file_input` reads, and what each does there (`Transport.each_step`)."""

READ_KEYS = frozenset({"name", "transport", "format", "max_files_per_step", "late_arrival_seconds"})
"""The entry keys Spindle's runtime reads: a key a typo away from one of them warns."""
ENTRY_KEYS = (
    READ_KEYS
    | FLOW_CONTROL_KNOBS
    | {
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
    unlike: Mapping[str, str] = field(default_factory=dict)
    """Feldera's config keys that choose what is read or written, which Spindle would not do
    (a row filter, a starting version): each refused, saying what Spindle does instead."""
    unheeded: Mapping[str, str] = field(default_factory=dict)
    """Feldera's config keys that ask for what Spindle does not do but whose inputs it reads
    alike as long as they are used as usual (following appends to files that are never
    appended to): warned of when set, saying what Spindle does."""
    modes: tuple[frozenset[str], str] | None = None
    """The values of Feldera's `mode` key that are what Spindle does, and what it does: any
    other is refused (None: the transport has no `mode`)."""
    accepted: frozenset[str] = frozenset()
    """Feldera's config keys that say how, not what (parsers, retries, buffers): accepted
    silently. Any other key Spindle does not read warns."""
    each_step: str | None = None
    """What the transport does in a step, said when it has a `FILE_INPUT_KNOBS` key, which it
    does not read (None: `file_input`, which reads them)."""
    unformatted: str | None = None
    """By what transport a `format` is not read, and what it reads or writes instead (None: a
    file transport, whose `format` says how its files are read or written)."""
    colons: str | None = None
    """What the transport cannot do with a location that has a ':' in a segment of its path
    (`colon_segment`), refused saying so; None: it can (a Delta table's URI, an input's
    directory: the runtime refuses an input's file named with one, which it lists)."""

    @property
    def known(self) -> frozenset[str]:
        """Every config key this table says something of."""
        mode = {"mode"} if self.modes is not None else set()
        return frozenset(self.location) | self.accepted | frozenset(self.unlike) | mode


_DELTA_READ = (
    "Spindle reads a Delta table's latest version, then each commit after it (Feldera's "
    "snapshot_and_follow)"
)
_WHOLE_TABLE = f"would choose the rows read, and {_DELTA_READ}, every row"
_STARTS = f"would choose where reading starts, and {_DELTA_READ}"
_CDC = f"belongs to Feldera's cdc mode, and {_DELTA_READ}"
_OUTPUT_STEP = "an output writes all of each step's changes in that step"
TRANSPORTS: Mapping[str, Transport] = {
    "file_input": Transport(
        Direction.INPUT,
        ("path", "uri"),
        unheeded={
            "follow": "would read what is appended to a file: Spindle reads each new file of "
            "the location once, whole, and never again (write new data to new files)",
        },
        accepted=frozenset({"buffer_size_bytes", "follow"}),
    ),
    "delta_table_input": Transport(
        Direction.INPUT,
        ("uri", "path"),
        unlike={
            "filter": f"{_WHOLE_TABLE}: filter in a view instead (CREATE VIEW ... WHERE ...)",
            "snapshot_filter": f"{_WHOLE_TABLE}: filter in a view instead",
            "version": _STARTS,
            "start_version": _STARTS,
            "datetime": _STARTS,
            "start_datetime": _STARTS,
            "end_version": f"would end reading, and {_DELTA_READ}, for as long as it runs",
            "cdc_delete_filter": _CDC,
            "cdc_order_by": _CDC,
        },
        modes=(frozenset({"snapshot_and_follow"}), _DELTA_READ),
        accepted=frozenset(
            {
                "transaction_mode",
                "timestamp_column",
                "skip_unused_columns",
                "change_feed",
                "num_parsers",
                "max_concurrent_readers",
                "verbose",
                "max_retries",
            }
        ),
        each_step="a Delta input reads, in a step, every commit since the version it last read",
        unformatted="by a Delta input, which reads the Delta table's rows",
    ),
    "file_output": Transport(
        Direction.OUTPUT,
        ("path", "uri"),
        each_step=_OUTPUT_STEP,
        colons="Spark's file systems cannot write such a path (Hadoop reads what comes before a "
        "':' as a URI scheme)",
    ),
    "delta_table_output": Transport(
        Direction.OUTPUT,
        ("uri", "path"),
        modes=(
            frozenset({"append"}),
            "Spindle appends each step's changes to the table (Feldera's append)",
        ),
        accepted=frozenset(
            {
                "checkpoint_interval",
                "log_retention_duration",
                "enable_expired_log_cleanup",
                "max_retries",
                "threads",
            }
        ),
        each_step=_OUTPUT_STEP,
        unformatted="by a Delta output, which writes the view's columns and a `weight` column "
        "(+1, -1) to the Delta table",
    ),
}

_SERVES = {
    Direction.INPUT: "a table's connectors are inputs",
    Direction.OUTPUT: "a view's connectors are outputs",
}


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:(?=/)(//[^/]*)?")
"""A location's URI scheme and authority (`s3a://bucket`, `file:`, `hdfs://host:8020`), which
are not of its path."""


def colon_segment(where: str) -> str | None:
    """The first segment of a location's path that has a ':' (`2025-01-02T10:00` of
    `s3a://b/out/2025-01-02T10:00`), or None. Hadoop's `Path` reads a segment's text before a
    ':' as a URI scheme where it makes one path of a segment (a glob does, segment by segment:
    `URISyntaxException: Relative path in absolute URI`)."""
    scheme = _SCHEME.match(where)
    path = where[scheme.end() :] if scheme else where
    return next((segment for segment in path.split("/") if ":" in segment), None)


def _near(key: str, known: frozenset[str] | tuple[str, ...], *, cutoff: float = 0.85) -> str | None:
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=cutoff)
    return close[0] if close else None


def entry_problems(
    entry: Mapping[str, Any], *, label: str, direction: Direction
) -> tuple[str | None, tuple[str, ...]]:
    """The problem of a connector entry (`label` names it) that the runtime would refuse, or
    None, and its warnings: what the runtime would ignore."""
    transport = entry["transport"]
    name = transport["name"]
    served = TRANSPORTS.get(name)
    if served is None:  # Feldera's others (`kafka_input`) would fail the driver's first step
        typo = _near(str(name), tuple(TRANSPORTS), cutoff=0.8)
        runs = ", ".join(n for n, t in TRANSPORTS.items() if t.direction is direction)
        hint = f"did you mean '{typo}'?" if typo else f"use {runs}"
        return f"{label} uses transport '{name}', which Spindle does not run ({hint})", ()
    if served.direction is not direction:
        runs = ", ".join(n for n, t in TRANSPORTS.items() if t.direction is direction)
        return f"{label} uses '{name}', but {_SERVES[direction]}: use {runs}", ()
    config = transport.get("config")
    config = config if isinstance(config, Mapping) else {}
    where = next((v for k in served.location if isinstance(v := config.get(k), str) and v), None)
    if where is None:
        wanted = served.location[0]
        typo = next(
            (k for k in config if k not in served.location and _near(k, served.location)), None
        )
        found = f" (it has '{typo}': did you mean '{wanted}'?)" if typo else ""
        return f"{label}: transport '{name}' needs a non-empty '{wanted}' in its config{found}", ()
    colon = None if served.colons is None else colon_segment(where)
    if colon is not None:
        return (
            f"{label}: its location {where} has a ':' in '{colon}', and {served.colons}: use "
            f"'-' or '_' instead of ':' ('{colon.replace(':', '-')}')",
            (),
        )
    unlike = next((k for k in served.unlike if config.get(k) is not None), None)
    if unlike is not None:
        return f"{label}: '{unlike}' in its transport config {served.unlike[unlike]}", ()
    mode = config.get("mode")
    if served.modes is not None and mode is not None and str(mode) not in served.modes[0]:
        return f"{label}: mode {mode!r} is not what Spindle does: {served.modes[1]}", ()
    late = entry.get("late_arrival_seconds")
    if name == "file_input" and "late_arrival_seconds" in entry and not whole_number(late, 0):
        return f"{label}: late_arrival_seconds must be a whole number, 0 or more (got {late!r})", ()
    warnings = [f"{label}: {said}; it is ignored" for said in _ignored(entry, config, served)]
    return None, tuple(warnings)


def whole_number(value: Any, least: int) -> bool:
    """Whether a knob's value is a whole number (not a boolean), `least` or more."""
    return type(value) is int and value >= least


def _ignored(entry: Mapping[str, Any], config: Mapping[str, Any], served: Transport) -> list[str]:
    """What of a connector entry of a transport Spindle runs its runtime does not read."""
    said = [
        _knob(key, served)
        if key in FILE_INPUT_KNOBS and served.each_step is not None
        else f"'{key}' is in its transport config, where Spindle does not read it: move it "
        "into the connector entry, beside 'transport'"
        for key in config
        if key in FLOW_CONTROL_KNOBS
    ]
    said += [
        f"'{key}': true in its transport config {what}"
        for key, what in served.unheeded.items()
        if config.get(key) not in (None, False)
    ]
    if served.each_step is not None:
        said += [_knob(key, served) for key in entry if key in FILE_INPUT_KNOBS]
    elif "max_files_per_step" in entry and not whole_number(entry["max_files_per_step"], 1):
        limit = entry["max_files_per_step"]
        said.append(f"max_files_per_step is not a whole number above 0 (got {limit!r})")
    said += _unread(entry, accepted=ENTRY_KEYS, read=READ_KEYS, where="", cutoff=0.85)
    settings = {k: v for k, v in config.items() if k not in FLOW_CONTROL_KNOBS}
    known, where = served.known, " of its transport config"
    said += _unread(settings, accepted=known, read=known, where=where, cutoff=0.8)
    return said + _unformatted(entry.get("format"), served)


def _knob(key: str, served: Transport) -> str:
    """A file input's knob (`FILE_INPUT_KNOBS`) on a transport that does not read it."""
    return f"'{key}' {FILE_INPUT_KNOBS[key]}: {served.each_step}"


def _unformatted(fmt: Any, served: Transport) -> list[str]:
    """What of a connector's `format` its transport does not read: all of it (a Delta
    transport's), an input's key on an output, a key Spindle does not read."""
    if fmt is not None and served.unformatted is not None:
        return [f"'format' is not read {served.unformatted}"]
    options = fmt.get("config") if isinstance(fmt, Mapping) else None
    if not isinstance(options, Mapping):
        return []
    where, read = " of its format config", FORMAT_KEYS
    said = []
    if served.direction is Direction.OUTPUT:
        read = OUTPUT_CONFIG_KEYS  # a typo of an input's key is not one to suggest
        said = [
            f"'{key}'{where} is read by file inputs only: {INPUT_ONLY_KEYS[key]}"
            for key in options
            if key in INPUT_ONLY_KEYS
        ]
    # hedaer: header (0.83 alike)
    return said + _unread(options, accepted=FORMAT_KEYS, read=read, where=where, cutoff=0.8)


def _unread(
    keys: Mapping[str, Any],
    *,
    accepted: frozenset[str],
    read: frozenset[str],
    where: str,
    cutoff: float,
) -> list[str]:
    """A warning for each key not `accepted`, naming the key of `read` it is a typo of."""
    said = []
    for key in keys:
        if key not in accepted:
            typo = _near(key, read, cutoff=cutoff)
            hint = f" (did you mean '{typo}'?)" if typo else ""
            said.append(f"Spindle does not read '{key}'{where}{hint}")
    return said
