"""Counts in the words a user reads: `1 row`, `2 rows`, `1,234 views`."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """`count` and `noun`, in the plural (`plural`, else `noun` + "s") unless it is one."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"
