"""JSON records whose keys spell a column otherwise than the table: `{"Name": "x"}` for `name`.

Feldera matches a JSON key with a column case-insensitively, unless the column's name was
declared in double quotes. Spark's JSON parser matches exactly, so `{"Name": "x"}` was ingested
as a row whose `name` is NULL, without a word. `respelled` gives a record's text with each key
that spells an unquoted column in other capitals (`Name`, `NAME`) written as the column; the
rest of the record, and every record whose keys have no capital letter, is left as it is.

A column whose name has a capital letter was declared quoted (unquoted names are lower-cased),
and matches only exactly; a key that two spellings in one record share (`"Name"` and `"NAME"`)
is left alone, as it was.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

CAPITAL_KEY = r'"[^"\\]*[A-Z][^"\\]*"\s*:'
"""A key with a capital letter (or a string with one just before a colon): only records that
have one are read twice."""

_ANY = "map<string, variant>"
"""A record as its keys and their JSON values, kept exactly (a number, a string, an object)."""


def respelled(value: Column, columns: Sequence[str], *, nested: bool = False) -> Column:
    """The JSON text `value` with its keys spelled as the table's `columns` (`nested`: of each
    object the record holds, `{"insert": {...}}`)."""
    unquoted = sorted({c for c in columns if c == c.lower()})
    if not unquoted:
        return value
    exact = sorted(set(columns))

    def keys(record: Column) -> Column:
        def spelled(key: Column, _: Column) -> Column:
            alone = F.size(F.filter(F.map_keys(record), lambda k: F.lower(k) == F.lower(key)))
            other = ~key.isin(exact) & F.lower(key).isin(unquoted) & (alone == 1)
            return F.when(other, F.lower(key)).otherwise(key)

        return F.transform_keys(record, spelled)

    if nested:
        parsed = F.from_json(value, f"map<string, {_ANY}>")
        records = F.transform_values(parsed, lambda _, row: keys(row))
    else:  # through a lambda's variable: the record is parsed once, not once per key
        records = F.transform(F.array(F.from_json(value, _ANY)), keys)[0]
    return F.when(value.rlike(CAPITAL_KEY), F.coalesce(F.to_json(records), value)).otherwise(value)
