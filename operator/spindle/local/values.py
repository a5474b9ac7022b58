"""A literal of an ad-hoc insert as a value of its column's type, or why it is not one.

`CONVERTERS` maps a declared column type (its name, as `Column.type` holds it canonically) to a
function that takes a literal's value (None excluded: NULL is the caller's business) and returns
the value to queue, in the form the runtime's JSON reader takes for that type, or raises
`Mismatch` saying what is wrong with it. The conversions are SQL's assignment casts, refused
where they would lose or invent something: a number into an integer column must be whole and
in range, into a DECIMAL(p, s) it must fit p digits with at most s after the point, a string
into a DATE must be a real date. A type not in the table (TIME, VARBINARY, arrays, ...) cannot
be inserted ad hoc; `column_type(...).converter` is None for it.

Literal values are None, bool, int, Decimal (a number with a point or an exponent, exact),
str, and what a converter returns (float, datetime.date, datetime.datetime).
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Context, Decimal, InvalidOperation
from typing import Any


class Mismatch(Exception):
    """Why a value does not fit its type: a phrase following the value (`is not a number`)."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


@dataclass(frozen=True)
class ColumnType:
    declared: str
    """As declared, canonical: `DECIMAL(5, 2)`."""
    base: str
    """The type's name: `DECIMAL`."""
    params: tuple[int, ...]
    """Its numeric parameters: (5, 2)."""

    @property
    def converter(self) -> Converter | None:
        return CONVERTERS.get(self.base)

    def convert(self, value: Any) -> Any:
        converter = self.converter
        assert converter is not None
        return converter(value, self)


Converter = Callable[[Any, ColumnType], Any]

_TYPE = re.compile(r"^([A-Z][A-Z0-9_ ]*?)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?$")
_INTEGER = re.compile(r"^[+-]?\d+$")
_NUMBER = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
_DATE = r"(\d{4})-(\d{1,2})-(\d{1,2})"
_DATE_TEXT = re.compile(rf"^{_DATE}$")
_TIME = r"(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?"
_TIMESTAMP_TEXT = re.compile(rf"^{_DATE}(?:[ T]{_TIME})?$")


def column_type(declared: str) -> ColumnType:
    """`DECIMAL(5, 2)` as (DECIMAL, (5, 2)); a type this cannot read keeps its whole text as its
    name, so no converter matches it."""
    upper = declared.strip().upper()
    match = _TYPE.match(upper)
    if match is None:
        return ColumnType(declared, upper, ())
    params = tuple(int(p) for p in match.group(2, 3) if p is not None)
    return ColumnType(declared, match.group(1), params)


def _number(value: Any) -> Decimal:
    """A numeric value (or numeric text) as an exact Decimal; `Mismatch` for anything else."""
    if isinstance(value, bool):
        raise Mismatch("is a boolean, not a number")
    if isinstance(value, int | Decimal):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, str) and _NUMBER.match(value.strip()):
        return Decimal(value.strip())
    raise Mismatch("is not a number")


def _integer(low: int, high: int) -> Converter:
    def convert(value: Any, kind: ColumnType) -> int:
        number = _number(value)
        out_of_range = Mismatch(f"is out of range for {kind.declared} ({low} to {high})")
        if number != 0 and number.adjusted() > len(str(high)):  # before int() of 1e999999
            raise out_of_range
        if number != number.to_integral_value():
            raise Mismatch(f"is not a whole number, which {kind.declared} needs")
        whole = int(number)
        if not low <= whole <= high:
            raise out_of_range
        return whole

    return convert


def _double(value: Any, kind: ColumnType) -> float:
    number = float(_number(value))
    if math.isinf(number):
        raise Mismatch(f"is out of range for {kind.declared}")
    return number


def _decimal(value: Any, kind: ColumnType) -> Decimal:
    if not kind.params:
        raise Mismatch(f"cannot be checked: {kind.declared} needs a precision: DECIMAL(p, s)")
    precision, scale = (*kind.params, 0)[:2]
    number = _number(value)
    whole_digits = precision - scale
    if number != 0 and number.adjusted() >= whole_digits:
        raise Mismatch(
            f"is out of range for {kind.declared} (at most {whole_digits} digits before the "
            "decimal point)"
        )
    try:
        exact = number.quantize(Decimal(1).scaleb(-scale), context=Context(prec=precision + 2))
    except InvalidOperation:
        exact = None
    if exact is None or exact != number:
        raise Mismatch(
            f"has more than {scale} digits after the decimal point, which {kind.declared} keeps; "
            f"round it to {scale}"
        )
    return exact


def _text(value: Any, kind: ColumnType) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, datetime.datetime):
        return value.isoformat(sep=" ")
    return str(value)  # text, a number as written, a date as YYYY-MM-DD


def _boolean(value: Any, kind: ColumnType) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise Mismatch("is not a boolean (TRUE or FALSE)")


def _date(value: Any, kind: ColumnType) -> datetime.date:
    if isinstance(value, datetime.datetime):
        raise Mismatch("is a timestamp, not a date")
    if isinstance(value, datetime.date):
        return value
    match = _DATE_TEXT.match(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise Mismatch("is not a date; write 'YYYY-MM-DD'")
    try:
        return datetime.date(*(int(part) for part in match.groups()))
    except ValueError as error:
        raise Mismatch(f"is not a date: {error}") from None


def _timestamp(value: Any, kind: ColumnType) -> datetime.datetime:
    if isinstance(value, datetime.datetime):
        return value
    if isinstance(value, datetime.date):
        return datetime.datetime(value.year, value.month, value.day)
    match = _TIMESTAMP_TEXT.match(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise Mismatch("is not a timestamp; write 'YYYY-MM-DD HH:MM:SS[.ffffff]' (no time zone)")
    year, month, day, hour, minute, second, fraction = match.groups()
    try:
        return datetime.datetime(
            int(year),
            int(month),
            int(day),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            int((fraction or "0").ljust(6, "0")),
        )
    except ValueError as error:
        raise Mismatch(f"is not a timestamp: {error}") from None


CONVERTERS: Mapping[str, Converter] = {
    "BOOLEAN": _boolean,
    "TINYINT": _integer(-(2**7), 2**7 - 1),
    "SMALLINT": _integer(-(2**15), 2**15 - 1),
    "INT": _integer(-(2**31), 2**31 - 1),
    "INTEGER": _integer(-(2**31), 2**31 - 1),
    "BIGINT": _integer(-(2**63), 2**63 - 1),
    "DECIMAL": _decimal,
    "NUMERIC": _decimal,
    "REAL": _double,
    "FLOAT": _double,
    "DOUBLE": _double,
    "VARCHAR": _text,
    "CHAR": _text,
    "TEXT": _text,
    "STRING": _text,
    "DATE": _date,
    "TIMESTAMP": _timestamp,
}
"""Declared type name -> converter. REAL is FLOAT in a parsed program and both are read as
DOUBLE by the runtime; VARCHAR(n) and CHAR(n) are read as unbounded strings, so their length is
not checked here either. TIME, VARBINARY and BINARY are absent: the runtime cannot run TIME
columns, and there is no binary literal to insert."""
