"""How a DATE_TRUNC call's unit was written: a quoted string, or a name.

sqlglot reads a name as `DATE_TRUNC`'s unit (`DATE_TRUNC(hour, ts)`) as the unit word, and so
does Spindle. Spark reads it as a column. Where the name is also a column of what the query
reads (`DATE_TRUNC(mm, ts)` over a table with a column `mm`), the two disagree and the view
would compute other values than the same query in Spark, without a word: the column check
(`spindle.program.columns`) refuses that call, and this module finds the name in the text.
The parsed call keeps no trace of it: sqlglot replaces the name with the unit's string.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import TokenType, exp
from sqlglot.errors import TokenError

from spindle.program.dialect import DIALECT
from spindle.program.statements import text_start

_NAMES = (TokenType.VAR, TokenType.IDENTIFIER)
"""A name, unquoted or double-quoted; any other token is a string, number or keyword."""


@dataclass(frozen=True)
class WrittenName:
    """A call argument written as one name, and where it starts in its statement."""

    name: str
    start: int


def unit_name(call: exp.Expr, text: str) -> WrittenName | None:
    """The name a DATE_TRUNC call's unit was written as, in `text` (the call's statement), or
    None for a unit written otherwise or a call the text does not place."""
    if not isinstance(call, exp.DateTrunc) or "end" not in call.meta:
        return None
    subject = text_start(call.this)
    if subject is None:
        return None
    try:
        tokens = DIALECT.tokenize(text[int(call.meta["end"]) + 1 :])
    except TokenError:  # the statement tokenized, and the rest starts between two tokens
        return None
    offset = int(call.meta["end"]) + 1
    if not tokens or tokens[0].token_type != TokenType.L_PAREN:
        return None
    arguments: list[list[tuple[TokenType, str, int]]] = [[]]
    depth = 0
    for token in tokens[1:]:
        kind = token.token_type
        if depth == 0 and kind in (TokenType.COMMA, TokenType.R_PAREN):
            if kind == TokenType.R_PAREN:
                break
            arguments.append([])
            continue
        depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(kind, 0)
        arguments[-1].append((kind, token.text, offset + token.start))
    units = [a for a in arguments if a and not any(start == subject for _, _, start in a)]
    if len(arguments) != 2 or len(units) != 1 or len(units[0]) != 1:
        return None
    kind, name, start = units[0][0]
    return WrittenName(name, start) if kind in _NAMES else None
