"""Which declared column types Spindle can store, and as what Spark type.

A table column of a type Spark or Delta cannot hold (TIME, an INTERVAL, a UUID, an unsigned
integer, an ARRAY, DECIMAL without a precision) used to pass `spindle diff`, `plan` and `apply`,
reach approval, and fail in the driver without a line or column. The table below is the one list
of what is stored: the program refuses anything else as `UnsupportedType`, at the column, before
anything runs, with what to declare instead; the runtime reads the same table.

Types are the canonical SQL `spindle.program.facts` gives columns (`DECIMAL(5, 2)`,
`VARCHAR(20)`, `INTERVAL DAY`, `MAP<INT, INT>`), so aliases arrive already resolved (NUMERIC is
DECIMAL, INT8 is BIGINT, TEXT is VARCHAR).

A type a view or a function writes (`CAST(d AS DECIMAL(40, 2))`, a parameter's) is checked by
the same table (`written_type_problem`): `DECIMAL(40, 2)`, `MONEY`, `INT UNSIGNED` (sqlglot's
UINT) and TIME passed planning and failed in Spark after approval, or were written as another
type (TIME and TIMESTAMP WITH TIME ZONE as TIMESTAMP). ARRAY, MAP and STRUCT are Spark's types
to compute with, though no column stores them: there only their elements are checked.
"""

from __future__ import annotations

import re

from sqlglot import exp

from spindle.program.dialect import DIALECT

STORED_TYPES: dict[str, str] = {
    "TINYINT": "TINYINT",
    "SMALLINT": "SMALLINT",
    "INT": "INT",
    "BIGINT": "BIGINT",
    "BOOLEAN": "BOOLEAN",
    "FLOAT": "DOUBLE",  # REAL and FLOAT4 too: sqlglot reads them as FLOAT (Calcite's FLOAT)
    "DOUBLE": "DOUBLE",
    "VARCHAR": "STRING",
    "CHAR": "STRING",
    "DATE": "DATE",
    "TIMESTAMP": "TIMESTAMP",
    "VARBINARY": "BINARY",
    "BINARY": "BINARY",
}
"""A canonical declared type's name (without its length or precision) and the Spark type
storing it. DECIMAL(p, s) is stored as itself, DECIMAL(p) as DECIMAL(p, 0)."""

INSTEAD: dict[str, str] = {
    "DECIMAL": "give it a precision, and a scale for digits after the point: DECIMAL(10, 2)",
    "TIMESTAMPTZ": "declare TIMESTAMP and store instants in UTC",
    "TIMESTAMPLTZ": "declare TIMESTAMP and store instants in UTC",
    "TIME": "declare TIMESTAMP (a time on a fixed date) or VARCHAR",
    "INTERVAL": "declare BIGINT and store a count of seconds (or months)",
    "UUID": "declare VARCHAR, or BINARY (16 bytes)",
    "JSON": "declare VARCHAR and read fields with get_json_object",
    "VARIANT": "declare VARCHAR and read fields with get_json_object",
    "UTINYINT": "declare SMALLINT, which holds every TINYINT UNSIGNED value",
    "USMALLINT": "declare INT, which holds every SMALLINT UNSIGNED value",
    "UINT": "declare BIGINT, which holds every INT UNSIGNED value",
    "UBIGINT": "declare DECIMAL(20, 0), which holds every BIGINT UNSIGNED value",
    "UNSIGNED": "declare BIGINT, which holds every INT UNSIGNED value",
    "ARRAY": "nested types are not stored yet; use one row per element, or a VARCHAR",
    "MAP": "nested types are not stored yet; use one row per entry, or a VARCHAR",
    "STRUCT": "nested types are not stored yet; use one column per field",
    "ROW": "nested types are not stored yet; use one column per field",
    "BIT": "declare BOOLEAN or BINARY",
    "FLOAT32": "declare REAL, its other name (sqlglot writes FLOAT32 for Spark as it is)",
    "FLOAT64": "declare DOUBLE, its other name (sqlglot writes FLOAT64 for Spark as it is)",
}
"""What to declare instead of a type Spindle cannot store, by the type's name."""

MAX_DECIMAL_PRECISION = 38
"""Spark's, and Feldera's."""

_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*")
_DECIMAL = re.compile(r"^DECIMAL\((\d+)(?:,\s*(\d+))?\)$")  # a canonical type, not SQL text


def _upper(declared: str) -> str:
    """The type in capitals, NUMERIC read as DECIMAL (a caller may pass either)."""
    return declared.upper().replace("NUMERIC", "DECIMAL")


def _name(upper: str) -> str:
    match = _NAME.match(upper)
    return match.group(0) if match else upper


def _bounded(digits: str) -> int:
    """A whole number of at most a few digits, or one past any precision for a longer one."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= 3 else MAX_DECIMAL_PRECISION + 1


def stored_type(declared: str) -> str | None:
    """The Spark type that stores a declared column type, or None when none can."""
    upper = _upper(declared)
    decimal = _DECIMAL.match(upper)
    if decimal:
        # digits, not int(): a fuzzed precision of 5,000 digits is too long for int()
        precision, scale = (_bounded(decimal.group(1)), _bounded(decimal.group(2) or "0"))
        if 1 <= precision <= MAX_DECIMAL_PRECISION and scale <= precision:
            return f"DECIMAL({precision}, {scale})"
        return None
    if "<" in upper or " " in upper.split("(", 1)[0].strip():  # MAP<...>, INTERVAL DAY
        return None
    return STORED_TYPES.get(_name(upper))


def type_problem(declared: str) -> str | None:
    """Why a declared type cannot be stored and what to declare instead; None when it can."""
    if stored_type(declared) is not None:
        return None
    return f"Spindle cannot store type {_shown(declared)}; {_instead(declared)}"


def _instead(declared: str) -> str:
    """What to declare instead of a type no column stores."""
    upper = _upper(declared)
    if _DECIMAL.match(upper):
        return (
            f"DECIMAL(p, s) needs a precision p from 1 to {MAX_DECIMAL_PRECISION} and a scale s "
            "from 0 to p, for example DECIMAL(10, 2)"
        )
    return INSTEAD.get(
        _name(upper), f"declare one of {', '.join(sorted(STORED_TYPES))} or DECIMAL(p, s)"
    )


_ARRAY_OF = re.compile(r"^(.*)\[ARRAY\]$")
"""Feldera's `INT ARRAY ARRAY`, as sqlglot renders it (`ARRAY<INT>[ARRAY]`: the second ARRAY
read as a size)."""


def _shown(declared: str) -> str:
    """A type as a message shows it: `ARRAY<ARRAY<INT>>` for `INT ARRAY ARRAY`, at most 60
    characters."""
    while (nested := _ARRAY_OF.match(declared)) is not None:
        declared = f"ARRAY<{nested.group(1)}>"
    return declared if len(declared) <= 60 else f"{declared[:57]}..."


COMPUTED_TYPES = frozenset({exp.DType.ARRAY, exp.DType.MAP, exp.DType.STRUCT})
"""Types a view or function may compute with (`CAST(s AS ARRAY<INT>)`), though no column
stores them: their elements are checked."""

COMPUTED_SCALARS = frozenset({exp.DType.INTERVAL, exp.DType.TIMESTAMPNTZ, exp.DType.TIMESTAMPLTZ})
"""Scalar types Spark computes with (`ts + CAST(n AS INTERVAL DAY)`) that no column stores."""


def _computed_scalar(node: exp.DataType) -> bool:
    """A scalar type a view or function may cast to though no column stores it: an interval,
    Spark's TIMESTAMP_NTZ/LTZ, a DECIMAL without a precision (Spark's DECIMAL(10, 0))."""
    return (
        node.this in COMPUTED_SCALARS
        or isinstance(node.this, exp.Interval)
        or (node.this == exp.DType.DECIMAL and not node.expressions)
    )


WRITTEN_ALIASES: dict[str, str] = {"TEXT": "VARCHAR", "DATETIME": "TIMESTAMP"}
"""Names sqlglot renders a type a view writes by (STRING and CLOB are TEXT), and writes for
Spark as the type the table above has (a column's type arrives resolved, FLOAT64 as DOUBLE,
by `spindle.program.facts`; in a CAST, FLOAT64 is written for Spark as it is: `INSTEAD`)."""


def written_type_problem(node: exp.DataType, *, verb: str = "use") -> str | None:
    """Why a type a view or function writes (a CAST's, a parameter's) is not one Spindle runs
    on Spark, and what to `verb` instead (`the type MONEY, which ...: use one of ...`); None
    when it is one. A scalar type is checked as a table column's is (`type_problem`); ARRAY,
    MAP and STRUCT by their elements (a STRUCT's fields are column definitions)."""
    if node.this in COMPUTED_TYPES:
        elements = (
            e.args.get("kind") if isinstance(e, exp.ColumnDef) else e for e in node.expressions
        )
        found = (
            written_type_problem(e, verb=verb) for e in elements if isinstance(e, exp.DataType)
        )
        return next((problem for problem in found if problem is not None), None)
    if _computed_scalar(node):
        return None
    written = node.sql(dialect=DIALECT).upper()
    name = _name(written)
    declared = WRITTEN_ALIASES.get(name, name) + written[len(name) :]
    if stored_type(declared) is None:
        instead = _instead(declared).replace("declare ", f"{verb} ")
    elif (
        "(" in written
        and "(" in (spark := node.sql(dialect="spark").upper())
        and _name(spark) not in SIZED
    ):
        instead = f"{verb} {_name(spark)}, without a size: Spark's SQL gives it none"
    else:
        return None
    return f"type {_shown(written)}, which Spindle cannot run on Spark: {instead}"


SIZED = frozenset({"DECIMAL", "CHAR", "VARCHAR"})
"""The types Spark's SQL takes with a size: another one with a size, as sqlglot writes it for
Spark (`BINARY(16)`, `DOUBLE(10, 2)`, `INT(11)`; not `FLOAT(10)` or `TIMESTAMP(3)`, which it
writes without), Spark refuses."""


DECLARED_FOR: dict[str, str] = {
    "tinyint": "TINYINT",
    "smallint": "SMALLINT",
    "int": "INT",
    "bigint": "BIGINT",
    "boolean": "BOOLEAN",
    "float": "REAL",
    "double": "DOUBLE",
    "string": "VARCHAR",
    "date": "DATE",
    "timestamp": "TIMESTAMP",
    "timestamp_ntz": "TIMESTAMP",
    "binary": "VARBINARY",
}
"""The type to declare for a column Spark reads as each of its types (by `simpleString`); a
decimal is declared as itself."""

_SPARK_DECIMAL = re.compile(r"^decimal\((\d+),(\d+)\)$")


def declared_for(spark_type: str) -> str | None:
    """The SQL type to declare for values Spark reads as `spark_type` (a `simpleString`:
    `bigint`, `decimal(6,3)`), as a message tells a user to write it; None for one Spindle
    cannot store (a struct, an array)."""
    decimal = _SPARK_DECIMAL.match(spark_type)
    if decimal:
        return f"DECIMAL({decimal.group(1)}, {decimal.group(2)})"
    return DECLARED_FOR.get(spark_type)
