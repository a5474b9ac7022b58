"""Feldera's column `LATENESS <interval>`, lifted out of a CREATE TABLE's tokens.

sqlglot has no LATENESS constraint, and its compiled parser (sqlglotc) cannot be subclassed to
add one. So this pass works on sqlglot's own tokens, not on text: in the column list of a CREATE
TABLE, a `LATENESS` keyword that is not a column name starts a clause that runs to the end of
that column definition, or to the next constraint keyword (`NOT NULL`, `PRIMARY KEY`, ...). The
clause's tokens are removed from the statement and parsed on their own as an expression; what
remains is ordinary DDL for the stock parser. Token offsets are kept, so errors in either part
point at the user's text.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot.tokenizer_core import Token, TokenType

from spindle.program.dialect import DIALECT

OPENING = frozenset({TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE})
CLOSING = frozenset({TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE})
KEYWORD = "LATENESS"
_CONSTRAINTS = frozenset(DIALECT.parser_class.CONSTRAINT_PARSERS) | {"CONSTRAINT"}
"""Keywords that start another column constraint, which ends a LATENESS clause."""


@dataclass(frozen=True)
class LatenessClause:
    """One `LATENESS` clause: the column definition it belongs to and its interval tokens."""

    element: int
    """Index of the column definition within the table's column list."""
    keyword: Token
    interval: tuple[Token, ...]
    following: Token | None
    """The token after the clause (where a missing interval is reported)."""


def _column_list(tokens: list[Token]) -> int | None:
    """Index of the `(` opening a CREATE TABLE's column list, or None for other statements."""
    if not tokens or tokens[0].token_type != TokenType.CREATE:
        return None
    seen_table = False
    for index, token in enumerate(tokens[1:], start=1):
        if token.token_type == TokenType.TABLE:
            seen_table = True
        elif token.token_type == TokenType.L_PAREN:
            return index if seen_table else None
        elif token.token_type == TokenType.ALIAS:  # CREATE ... AS: no column list
            return None
    return None


def lift_lateness(tokens: list[Token]) -> tuple[list[Token], tuple[LatenessClause, ...]]:
    """The statement's tokens without its LATENESS clauses, and the clauses."""
    opening = _column_list(tokens)
    if opening is None:
        return tokens, ()
    kept: list[Token] = tokens[: opening + 1]
    clauses: list[LatenessClause] = []
    depth, element, starts_element = 1, 0, True
    index = opening + 1
    while index < len(tokens):
        token = tokens[index]
        kind = token.token_type
        if depth == 1 and not starts_element and token.text.upper() == KEYWORD:
            end = index + 1
            nested = 0
            while end < len(tokens):
                inner = tokens[end].token_type
                if nested == 0 and (
                    inner == TokenType.COMMA
                    or inner in CLOSING
                    or tokens[end].text.upper() in _CONSTRAINTS
                ):
                    break
                nested += (inner in OPENING) - (inner in CLOSING)
                end += 1
            following = tokens[end] if end < len(tokens) else None
            clauses.append(
                LatenessClause(element, token, tuple(tokens[index + 1 : end]), following)
            )
            index = end
            continue
        starts_element = False
        if kind in OPENING:
            depth += 1
        elif kind in CLOSING:
            depth -= 1
        elif kind == TokenType.COMMA and depth == 1:
            element += 1
            starts_element = True
        kept.append(token)
        index += 1
        if depth == 0:
            kept.extend(tokens[index:])
            break
    return kept, tuple(clauses)
