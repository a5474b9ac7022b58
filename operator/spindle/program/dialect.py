"""The Spindle SQL dialect: sqlglot's default dialect, case-insensitive unquoted identifiers.

The dialect adds no parser or generator classes, so sqlglot's compiled build (sqlglotc) parses
Spindle programs at full speed; its tokenizer only reads Feldera's INT8 as BIGINT (sqlglot's
default reads it as an 8-bit TINYINT, which cannot hold a value above 127) and `x'0A'` as a
BINARY literal (sqlglot's default read it as the name `x` and a string: a syntax error).
Feldera's column `LATENESS` is lifted out of the tokens first (`spindle.program.lateness`), and
statements sqlglot can only keep as an opaque `Command` are refused by the analysis, so
sqlglot's fallback warning about them is only noise here.
"""

from __future__ import annotations

import logging

from sqlglot import TokenType, tokens
from sqlglot.dialects.dialect import Dialect


class Spindle(Dialect):
    """Feldera-compatible DDL; unquoted identifiers are case-insensitive (normalized to lower)."""

    class Tokenizer(tokens.Tokenizer):
        KEYWORDS = {**tokens.Tokenizer.KEYWORDS, "INT8": TokenType.BIGINT}
        HEX_STRINGS = [("x'", "'"), ("X'", "'")]  # x'0A': a BINARY literal, Feldera's and Spark's


DIALECT = Spindle()

logging.getLogger("sqlglot").addFilter(
    lambda record: "Falling back to parsing as a 'Command'" not in record.getMessage()
)
