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
from spindle.program.syntax import NAME_TOKENS, call_arguments


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
    offset = int(call.meta["end"]) + 1
    try:
        tokens = DIALECT.tokenize(text[offset:])
    except TokenError:  # the statement tokenized, and the rest starts between two tokens
        return None
    if not tokens or tokens[0].token_type is not TokenType.L_PAREN:
        return None
    arguments, _ = call_arguments(tokens, 0)
    units = [a for a in arguments if a and all(offset + t.start != subject for t in a)]
    if len(arguments) != 2 or len(units) != 1 or len(units[0]) != 1:
        return None
    [token] = units[0]
    return (
        WrittenName(token.text, offset + token.start) if token.token_type in NAME_TOKENS else None
    )
