"""The documented limits of a program, checked before any parsing (see docs/limits.md).

A program is refused up front when it is larger than `MAX_PROGRAM_BYTES`, `MAX_TOKENS` or
`MAX_STATEMENTS` (`ProgramTooLarge`; bytes are counted first, so a huge input is never scanned),
or holds text that no SQL can contain: a NUL character or a lone UTF-16 surrogate (`InvalidProgram`,
with line and column). Nesting deeper than `MAX_NESTING` and declared names longer than
`MAX_NAME_LENGTH` are refused by the statement analysis, which knows where they are. The limits
keep every input's planning time and memory bounded, and far from Python's recursion limit.
"""

from __future__ import annotations

import re
from functools import lru_cache

from spindle.errors import SpindleError, located
from spindle.program.model import Position
from spindle.program.statements import split

MAX_PROGRAM_BYTES = 2 * 1024 * 1024
"""2 MiB of UTF-8: above a 10,000-view program (1.4 MB), and above what a Kubernetes object can
hold anyway (about 1.5 MiB)."""

MAX_TOKENS = 520_000
"""Words and symbols: what parsing time and memory grow with. A 10,000-view program has 510,000;
the costliest shapes at the limit take about 8 s of one CPU to plan (docs/limits.md)."""

MAX_STATEMENTS = 15_000
"""Statements: each also costs a fixed amount, so many tiny ones are bounded too."""

MAX_NESTING = 100
"""Parentheses, brackets and braces open at once within one statement."""

MAX_NAME_LENGTH = 128
"""Characters in a name (any identifier): table and view names become storage paths."""

_FORBIDDEN = {"\x00": "a NUL character (U+0000)"}


def position(text: str, offset: int) -> Position:
    """The 1-based line and column of a character offset in `text`."""
    line_start = text.rfind("\n", 0, offset) + 1
    return Position(text.count("\n", 0, offset) + 1, offset - line_start + 1)


def too_large(size: int, *, unit: str = "bytes", limit: int = MAX_PROGRAM_BYTES) -> SpindleError:
    return SpindleError(
        reason="ProgramTooLarge",
        message=f"The program has {size:,} {unit}; Spindle plans programs of at most "
        f"{limit:,} {unit}. Split it into several pipelines, or remove unused statements.",
        details={unit: size, "limit": limit},
    )


_TOKEN = re.compile(
    r"--[^\n]*|/\*.*?(?:\*/|\Z)|'(?:[^']|'')*(?:'|\Z)|\"(?:[^\"]|\"\")*(?:\"|\Z)|\w+|[^\w\s]",
    re.DOTALL,
)
"""What sqlglot's tokenizer counts as a token, closely enough to bound the work: a comment or a
quoted string or name is one, as it is for sqlglot. An unterminated one runs to the end, so the
count stays linear in the length of the text."""


@lru_cache(maxsize=8)
def _tokens(text: str) -> int:
    return sum(1 for _ in _TOKEN.finditer(text))


def check_program(text: str) -> None:
    """Refuse a program over any size limit, or holding characters no SQL text can hold,
    before any statement is parsed."""
    check_text(text)
    count = len(split(text))
    if count > MAX_STATEMENTS:
        raise too_large(count, unit="statements", limit=MAX_STATEMENTS)


def _invalid_character(text: str, offset: int, what: str) -> SpindleError:
    where = position(text, offset)
    return located(
        reason="InvalidProgram",
        message=f"The program contains {what}, which SQL text cannot hold; remove it (is "
        "the file binary, or saved in another encoding than UTF-8?)",
        line=where.line,
        column=where.column,
    )


def check_text(text: str) -> None:
    """Refuse a program over the size limit, or holding characters no SQL text can hold."""
    if len(text) > MAX_PROGRAM_BYTES:  # a character is at least one byte: no need to encode
        raise too_large(len(text))
    if not text.isascii():
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError as error:
            raise _invalid_character(
                text, error.start, f"a lone surrogate (U+{ord(text[error.start]):04X})"
            ) from None
        if size > MAX_PROGRAM_BYTES:
            raise too_large(size)
    for character, what in _FORBIDDEN.items():
        offset = text.find(character)
        if offset >= 0:
            raise _invalid_character(text, offset, what)
    tokens = _tokens(text)
    if tokens > MAX_TOKENS:
        raise too_large(tokens, unit="tokens", limit=MAX_TOKENS)
