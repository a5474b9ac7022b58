"""The Spindle SQL dialect: sqlglot's default dialect, case-insensitive unquoted identifiers.

The dialect adds no parser or generator classes, so sqlglot's compiled build (sqlglotc) parses
Spindle programs at full speed; its tokenizer only reads Feldera's INT8 as BIGINT (sqlglot's
default reads it as an 8-bit TINYINT, which cannot hold a value above 127), `x'0A'` as a
BINARY literal (sqlglot's default read it as the name `x` and a string: a syntax error), and
Feldera's type `ROW(a INT)` as the STRUCT it is (`_row_types`). Feldera's column `LATENESS` is
lifted out of the tokens first (`spindle.program.lateness`), and statements sqlglot can only
keep as an opaque `Command` are refused by the analysis, so sqlglot's fallback warning about
them is only noise here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

from sqlglot import TokenType, tokens
from sqlglot.dialects.dialect import Dialect
from sqlglot.tokenizer_core import Token


class Spindle(Dialect):
    """Feldera-compatible DDL; unquoted identifiers are case-insensitive (normalized to lower)."""

    class Tokenizer(tokens.Tokenizer):
        KEYWORDS = {**tokens.Tokenizer.KEYWORDS, "INT8": TokenType.BIGINT}
        HEX_STRINGS = [("x'", "'"), ("X'", "'")]  # x'0A': a BINARY literal, Feldera's and Spark's

        def tokenize(self, sql: str) -> list[Token]:
            found: list[Token] = super().tokenize(sql)
            _row_types(found)
            return found


CAST_CALLS = frozenset({"CAST", "TRY_CAST", "SAFE_CAST"})
"""Calls whose `AS` introduces a type (sqlglot's tokens name them, as any call)."""


def in_casts(found: Sequence[Token]) -> Iterator[tuple[Token | None, Token, Token, bool]]:
    """Each token but the last, with the one before it (None for the first) and the one after
    it, and whether it is directly within a CAST's parentheses (where `AS` introduces a type)."""
    casts: list[bool] = []  # for each open parenthesis, whether it is a CAST's
    for before, token, following in zip([None, *found], found, found[1:], strict=False):
        if token.token_type is TokenType.L_PAREN:
            casts.append(before is not None and before.text.upper() in CAST_CALLS)
        elif token.token_type is TokenType.R_PAREN and casts:
            casts.pop()
        yield before, token, following, bool(casts) and casts[-1]


_NAMES = frozenset({TokenType.VAR, TokenType.IDENTIFIER, TokenType.DCOLON})
"""What a type follows: a column's or a parameter's name, RETURNS (a name to the tokenizer),
`::`; and `AS` within a CAST."""


def _row_types(found: list[Token]) -> None:
    """Each ROW a type's place has, with its fields (`x ROW(a INT)`, `CAST(s AS ROW(a INT))`),
    read as STRUCT, which sqlglot reads as that type (a column of it is refused as any nested
    type is: `program.types`). ROW was a syntax error there (`Expecting )`); the call `ROW(1,
    'a')`, which follows no name, is left alone."""
    for before, token, following, in_cast in in_casts(found):
        if (
            token.token_type is TokenType.ROW
            and following.token_type is TokenType.L_PAREN
            and before is not None
            and (before.token_type in _NAMES or (before.token_type is TokenType.ALIAS and in_cast))
        ):
            token.token_type = TokenType.STRUCT


DIALECT = Spindle()

logging.getLogger("sqlglot").addFilter(
    lambda record: "Falling back to parsing as a 'Command'" not in record.getMessage()
)
