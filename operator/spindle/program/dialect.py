"""The Spindle SQL dialect: sqlglot's default dialect plus Feldera's column `LATENESS`.

Feldera DDL declares `ts TIMESTAMP LATENESS INTERVAL 1 HOUR` on a column. sqlglot has no such
constraint, so the dialect registers one (a parser entry and its generator), which keeps the
lateness interval a real expression in the AST instead of text matched by a pattern.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.generator import Generator
from sqlglot.parser import Parser


class LatenessColumnConstraint(exp.Expression, exp.ColumnConstraintKind):
    """`LATENESS <interval>` on a column: how late a row may arrive before state is discarded."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True}


def _parse_lateness(parser: Any) -> LatenessColumnConstraint:
    interval = parser._parse_bitwise()
    if interval is None:
        parser.raise_error("Expecting an interval after LATENESS")
    node: LatenessColumnConstraint = parser.expression(LatenessColumnConstraint(this=interval))
    return node


class SpindleParser(Parser):
    CONSTRAINT_PARSERS: ClassVar[dict[str, Any]] = {
        **Parser.CONSTRAINT_PARSERS,
        "LATENESS": _parse_lateness,
    }

    def _parse_as_command(self, start: Any) -> exp.Command:
        """sqlglot falls back to an opaque `Command` on syntax it cannot parse; Spindle refuses
        such statements, reporting the token where parsing stopped."""
        token = self._curr or self._prev or start
        what = f"Unexpected '{token.text}'" if self._curr else "Unsupported statement"
        self.raise_error(what, token)
        return exp.Command(this=start.text)


class SpindleGenerator(Generator):
    TRANSFORMS: ClassVar[dict[Any, Any]] = {
        **Generator.TRANSFORMS,
        LatenessColumnConstraint: lambda self, e: f"LATENESS {self.sql(e, 'this')}",
    }


class Spindle(Dialect):
    """Feldera-compatible DDL; unquoted identifiers are case-insensitive (normalized to lower)."""

    Parser = SpindleParser
    Generator = SpindleGenerator


DIALECT = Spindle()
