"""What a file connector's `format` means: how an input's files are read, how a record says
whether it inserts or deletes a row, and how an output writes its changes. Pure: decided from
the connector's JSON and its table's columns, before any file is opened (`runtime.connectors`
reads and writes accordingly).

| format | `format.config` | a record is |
|---|---|---|
| `json` | none, or `"update_format": "raw"` | a row, inserted |
| `json` | `"update_format": "insert_delete"` | `{"insert": row}` or `{"delete": row}` |
| `csv`, `parquet` | `"weight_column": name` | a row and an integer weight (+n, -n, 0) |
| `csv`, `parquet` | `"op_column": name` | a row and `insert` or `delete` |

A weight of +n inserts the row n times, -n deletes it n times, 0 does nothing.

The weight or operation column is consumed: it is not one of the table's columns (in CSV it is
the last column of a line, after the table's).

CSV files start with a header line unless `header` (or Feldera's `headers`) is false. Left
unset, the header must name the table's columns in order (case-insensitively), and a file
whose first line does not (a file without a header, columns in another order) fails the step
rather than lose its first row; set explicitly to true, the first line is skipped whatever it
holds, as Feldera skips it.

A file output writes each change as the view's row and its `weight` (+1, -1); a JSON output
with `"update_format": "insert_delete"` writes Feldera's `{"insert": row}` / `{"delete": row}`.
A CSV output's files start with a header line and separate fields with ','. An input's keys
on an output (`header`, `headers`, `delimiter`, `weight_column`, `op_column`: `INPUT_ONLY_KEYS`)
are ignored, with a warning (`program.transports`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spindle.errors import SpindleError
from spindle.program.model import Connector, Table, Unrunnable, View

FORMATS = ("json", "csv", "parquet")
UPDATE_FORMATS = ("raw", "insert_delete")
"""JSON update formats Spindle reads (Feldera also has `weighted`, `debezium`, `snowflake`)."""
OPERATIONS: Mapping[str, int] = {"insert": 1, "delete": -1}
"""Values of an `op_column`, and the weight each one means."""
OUTPUT_UPDATE_FORMATS = ("insert_delete",)
"""JSON update formats a file output writes besides its default (rows with a `weight`)."""
CHANGE_COLUMNS = ("weight_column", "op_column")
"""Config keys naming the column that says insert or delete (CSV and Parquet)."""
HEADER_KEYS = ("header", "headers")
"""CSV config keys saying whether files start with a header line: Spindle's, Feldera's."""
CONFIG_KEYS = frozenset({"update_format", *CHANGE_COLUMNS, *HEADER_KEYS, "delimiter"})
"""The `format.config` keys Spindle reads: a key a typo away from one of them warns."""
_HEADER = "a file output's CSV files start with a header line"
_CHANGES = (
    "an output writes each change as the view's row and a `weight` column (+1, -1), or, "
    'with update_format insert_delete (JSON), as {"insert": row} / {"delete": row}'
)
INPUT_ONLY_KEYS: Mapping[str, str] = {
    "header": _HEADER,
    "headers": _HEADER,
    "delimiter": "a file output's CSV files separate fields with ','",
    "weight_column": _CHANGES,
    "op_column": _CHANGES,
}
"""The `format.config` keys of `CONFIG_KEYS` only a file input reads, and what a file output
does instead: one on an output warns, saying so."""
OUTPUT_CONFIG_KEYS = CONFIG_KEYS - INPUT_ONLY_KEYS.keys()
"""The `format.config` keys a file output reads (`output_update_format`)."""


@dataclass(frozen=True)
class InputFormat:
    """An input connector's format, validated."""

    name: str
    """`json`, `csv` or `parquet`."""
    update_format: str = "raw"
    """JSON only: `raw` (rows) or `insert_delete` (`{"insert": row}` / `{"delete": row}`)."""
    weight_column: str | None = None
    op_column: str | None = None
    header: bool = True
    """CSV only: each file's first line is a header (and is skipped)."""
    delimiter: str = ","
    """CSV only: the field delimiter (Feldera's `delimiter`), one ASCII character."""
    header_checked: bool = True
    """CSV only: whether the header must name the table's columns, in order (Spindle's default,
    when the config says nothing: a file without a header line fails instead of silently
    losing its first row). A header set explicitly (`header`, or Feldera's `headers`) is
    skipped whatever it holds, as Feldera skips it."""

    @property
    def change_column(self) -> str | None:
        """The consumed column that carries a record's weight or operation, if any."""
        return self.weight_column or self.op_column

    @property
    def carries_deletes(self) -> bool:
        return self.update_format == "insert_delete" or self.change_column is not None


def _invalid(connector: Connector, problem: str, **details: Any) -> SpindleError:
    return SpindleError(
        reason="InvalidConnectors",
        message=f"Connector {connector.key}: {problem}",
        details={"connector": connector.key, **details},
    )


def format_name(connector: Connector) -> tuple[str, Mapping[str, Any]]:
    """The format's name (json when absent, or not an object: `misread_formats`) and its
    config; unknown names are refused."""
    fmt = connector.format or {"name": "json"}
    name = str(fmt.get("name", "json")).lower()
    if name not in FORMATS:
        raise _invalid(connector, f"format '{name}' is not supported; use json, csv or parquet.")
    config = fmt.get("config") or {}
    return name, config if isinstance(config, Mapping) else {}


def input_format(connector: Connector, *, columns: Sequence[str]) -> InputFormat:
    """The validated format of an input connector of a table with `columns`."""
    name, config = format_name(connector)
    update = config.get("update_format", "raw")
    if name != "json" and "update_format" in config:
        raise _invalid(
            connector,
            f"update_format applies to json only; a {name} input says insert or delete with "
            "weight_column or op_column.",
        )
    if update not in UPDATE_FORMATS:
        raise _invalid(
            connector,
            f"update_format {update!r} is not supported; use 'raw' (rows, inserted) or "
            '\'insert_delete\' ({"insert": row} / {"delete": row} per line).',
        )
    named = {key: config[key] for key in CHANGE_COLUMNS if config.get(key) is not None}
    if named and name == "json":
        raise _invalid(
            connector,
            f"{', '.join(named)} applies to csv and parquet; a json input says insert or "
            "delete with update_format 'insert_delete'.",
        )
    if len(named) > 1:
        raise _invalid(connector, "set weight_column or op_column, not both.")
    for key, value in named.items():
        if not isinstance(value, str) or not value:
            raise _invalid(connector, f"{key} must be a column name (got {value!r}).")
        if value.lower() in {c.lower() for c in columns}:
            raise _invalid(
                connector,
                f"{key} '{value}' is a column of the table; the {key.split('_')[0]} column is "
                "consumed by the input, so give it a name the table does not use.",
            )
    given = {key: str(config[key]).lower() for key in HEADER_KEYS if key in config}
    for key, value in given.items():
        if value not in ("true", "false"):
            raise _invalid(connector, f"{key} must be true or false (got {config[key]!r}).")
    if len(set(given.values())) > 1:
        raise _invalid(connector, "header and headers (Feldera's name for it) disagree; set one.")
    delimiter = config.get("delimiter", ",")
    if not (isinstance(delimiter, str) and len(delimiter) == 1 and delimiter.isascii()):
        raise _invalid(connector, f"delimiter must be one ASCII character (got {delimiter!r}).")
    if delimiter in ('"', "\n", "\r"):
        raise _invalid(connector, f"delimiter cannot be {delimiter!r}: CSV uses it already.")
    return InputFormat(
        name=name,
        update_format=str(update),
        weight_column=named.get("weight_column"),
        op_column=named.get("op_column"),
        header=next(iter(given.values()), "true") == "true",
        delimiter=delimiter,
        header_checked=not given,
    )


def compared_format(fmt: Any) -> Any:
    """An input's `format` as connector changes compare it: a header declared true, under
    either key, is the default (both skip each file's first line; only the default checks it
    first), so declaring it is no change, and restarts no input."""
    config = fmt.get("config") if isinstance(fmt, Mapping) else None
    if not isinstance(config, Mapping) or not any(k in config for k in HEADER_KEYS):
        return fmt
    kept = {k: v for k, v in config.items() if k not in HEADER_KEYS}
    values = sorted({str(config[k]).lower() for k in HEADER_KEYS if k in config})
    if values != ["true"]:
        kept["header"] = values[0] if len(values) == 1 else values
    compared = {k: v for k, v in fmt.items() if k != "config"}
    return {**compared, "config": kept} if kept else compared


def output_update_format(connector: Connector) -> str | None:
    """The validated update format of a file output: None (each line a row and its `weight`,
    +1 or -1) or `insert_delete` (Feldera's: `{"insert": row}` / `{"delete": row}`)."""
    name, config = format_name(connector)
    update = config.get("update_format")
    if update is None:
        return None
    if name != "json":
        raise _invalid(
            connector,
            f"update_format applies to json only; a {name} output's rows carry a weight column.",
        )
    if update not in OUTPUT_UPDATE_FORMATS:
        raise _invalid(
            connector,
            f"update_format {update!r} is not supported for an output; use 'insert_delete' "
            '({"insert": row} / {"delete": row} per line), or leave it out for rows with a '
            "weight column.",
        )
    return str(update)


def writes_weight(connector: Connector) -> bool:
    """Whether an output connector writes a `weight` column: every one but a JSON file output
    with `"update_format": "insert_delete"` (a refused format: as it would be fixed, alike)."""
    if connector.transport != "file_output":
        return True
    try:
        return output_update_format(connector) is None
    except SpindleError:
        return True


def format_problems(relation: Table | View) -> list[Unrunnable]:
    """The format problems of a table's file inputs and a view's file outputs, located at the
    relation's declaration, so a wrong config fails `spindle plan`, not the first step. Not a
    parse error: a checkpoint's program that has one (it ran, its config ignored, before Spindle
    read that key) still reads."""
    columns = [c.name for c in relation.columns] if isinstance(relation, Table) else []
    found: list[Unrunnable] = []
    for connector in relation.connectors:
        try:
            if connector.transport == "file_input":
                input_format(connector, columns=columns)
            elif connector.transport == "file_output":
                output_update_format(connector)
        except SpindleError as error:
            found.append(
                Unrunnable.at(
                    relation.position,
                    reason=error.reason,
                    message=error.message.rstrip("."),
                    **error.details,
                )
            )
    return found


def misread_formats(relation: Table | View) -> list[Unrunnable]:
    """A file connector's `format` that is not an object: read as JSON, whatever it says
    (`"format": "csv"`), so a program that ran with one ran so, and runs so; one that is to run
    is refused with it, unless it says json."""
    found: list[Unrunnable] = []
    for connector in relation.connectors:
        given = connector.config.get("format")
        if connector.transport not in ("file_input", "file_output") or connector.format is not None:
            continue
        if given is None or str(given).lower() == "json":
            continue
        found.append(
            Unrunnable.at(
                relation.position,
                reason="InvalidConnectors",
                message=f"Connector {connector.key}: format is "
                f"{json.dumps(given, default=str)}, which is "
                'read as JSON; write an object, like {"name": "csv", "config": {...}}',
                connector=connector.key,
            )
        )
    return found


def invalid_record(
    *, connector: str, file: str, problem: str, unit: str = "record", number: int | None = None
) -> SpindleError:
    """A record of an input file that cannot be ingested (`unit` `number`: "line 3", "row 7";
    without a number, "a record": its problem quotes it); nothing of the step is applied."""
    which = f"{unit} {number}" if number is not None else f"a {unit}"
    return SpindleError(
        reason="InvalidInputRecord",
        message=f"Connector {connector}: {which} of {file} {problem}. Nothing of this "
        "step was ingested; fix or remove the file (inputs are read again from the same "
        "offset).",
        details={
            "connector": connector,
            "file": file,
            **({unit: number} if number is not None else {}),
        },
    )
