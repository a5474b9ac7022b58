"""One statement's text to its normalized sqlglot tree, or a problem at a position in it.

The steps: tokenize, lift Feldera's LATENESS clauses out of the tokens (`spindle.program.lateness`),
parse with the stock (compiled) parser, refuse what sqlglot could only keep as an opaque
`Command`, and lower-case unquoted identifiers. Problems carry statement-relative positions;
`spindle.program.facts` locates them in the program.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokenizer_core import Token, TokenType

from spindle.program.canonical import render
from spindle.program.dialect import DIALECT
from spindle.program.lateness import CLOSING, OPENING, LatenessClause, lift_lateness
from spindle.program.limits import MAX_NAME_LENGTH, MAX_NESTING
from spindle.program.statements import block_comment

KINDS = frozenset({"TABLE", "VIEW", "FUNCTION"})
"""What a Spindle program declares: CREATE TABLE, CREATE [MATERIALIZED] VIEW, CREATE FUNCTION."""


class Problem(Exception):
    """A problem at a position relative to the statement, located later by the caller."""

    def __init__(self, *, reason: str, message: str, line: int, col: int, **details: Any):
        super().__init__(message)
        self.reason, self.message, self.line, self.col, self.details = (
            reason,
            message,
            line,
            col,
            details,
        )

    def __reduce__(self) -> tuple[Any, ...]:  # crosses process boundaries (parallel analysis)
        return (_problem, (self.reason, self.message, self.line, self.col, self.details))


def invalid(message: str, *, line: int = 1, col: int = 1) -> Problem:
    """An `InvalidProgram` problem; without a position, at the statement's start."""
    return Problem(reason="InvalidProgram", message=message, line=line, col=col)


def _problem(reason: str, message: str, line: int, col: int, details: dict[str, Any]) -> Problem:
    return Problem(reason=reason, message=message, line=line, col=col, **details)


def _normalized_identifiers(statement: exp.Expr) -> bool:
    """Lower-case unquoted identifiers (they are case-insensitive, as in sqlglot's default
    dialect; quoted ones are kept exactly). False when the statement holds an opaque `Command`
    (what sqlglot keeps of syntax it cannot parse), which is refused."""
    for node in statement.find_all(exp.Identifier, exp.Command):
        if isinstance(node, exp.Command):
            return False
        if isinstance(node, exp.Identifier) and not node.quoted:
            name = node.this
            lowered = name.lower()
            if lowered != name:
                node.set("this", lowered)
    return True


_UNIT_NAMES = "year quarter month week day dayofyear hour minute second millisecond microsecond"
UNITS = frozenset(_UNIT_NAMES.split())
"""The units of `TIMESTAMPADD(unit, n, ts)` and its kin, as Spark's grammar and Feldera read
them."""
_UNIT_CALLS = {
    exp.TimestampDiff: "TIMESTAMPDIFF",
    exp.DateDiff: "DATEDIFF",
    exp.DateAdd: "DATE_ADD",
}
"""Calls sqlglot parses from `NAME(unit, a, b)` in another argument order (this, expression,
unit): rendered for Spark, `TIMESTAMPDIFF(hour, a, b)` became `TIMESTAMPDIFF(B, a, hour)`."""


def _read_units(statement: exp.Expr) -> None:
    """Read the first argument of `TIMESTAMPADD(hour, 1, ts)`, `TIMESTAMPDIFF(day, a, b)`,
    `DATEADD`, `DATE_ADD`, `DATEDIFF` and `DATE_DIFF` with a unit as the unit, not a column
    named `hour`, keeping the arguments in their written order (Spark's and Feldera's)."""
    for call in list(statement.find_all(exp.Anonymous, *_UNIT_CALLS)):
        if isinstance(call, exp.Anonymous):
            arguments = call.expressions
        elif call.args.get("unit") is not None:
            last = call.args["unit"]  # read as a unit: the written `b` is a column
            if isinstance(last, exp.Var):
                last = exp.column(last.name.lower())
            arguments = [call.this, call.expression, last]
        else:
            continue
        first = arguments[0] if len(arguments) == 3 else None
        if not isinstance(first, exp.Column) or first.table or first.name not in UNITS:
            continue
        unit = exp.Var(this=first.name)
        if isinstance(call, exp.Anonymous):
            first.replace(unit)
        else:
            name = _UNIT_CALLS[type(call)]
            call.replace(exp.Anonymous(this=name, expressions=[unit, *arguments[1:]]))


def _values_query(values: exp.Values, text: str) -> exp.Select:
    """`CREATE VIEW v AS VALUES (1, 'a'), (2, 'b')` as the query it means, `SELECT * FROM
    (VALUES ...) AS "values"(col1, col2)`: the rest of Spindle reads queries. The columns
    have Spark's names for a VALUES row's columns; a column list (`CREATE VIEW v (n, s)`)
    names them as for any view. Rows of different widths are refused here, at the first row
    whose width differs from the first's."""
    rows = [row.expressions if isinstance(row, exp.Tuple) else [row] for row in values.expressions]
    for row, values_of_row in zip(values.expressions, rows, strict=True):
        if len(values_of_row) != len(rows[0]):
            start = next((int(n.meta["start"]) for n in row.walk() if "start" in n.meta), None)
            where = _at_offset(text, start) if start is not None else {}
            raise invalid(
                f"The rows of VALUES differ in width: the first has {len(rows[0])} values, "
                f"this one {len(values_of_row)}. Give every row the same number of values",
                **where,
            )
    names = [exp.to_identifier(f"col{n}") for n in range(1, len(rows[0]) + 1)]
    alias = exp.TableAlias(this=exp.to_identifier("values", quoted=True), columns=names)
    values.set("alias", alias)
    return exp.Select(expressions=[exp.Star()]).from_(values)


def _at(text: str, token: Token) -> dict[str, int]:
    """The statement-relative line and column where `token` starts."""
    return _at_offset(text, token.start)


def _at_offset(text: str, offset: int) -> dict[str, int]:
    line_start = text.rfind("\n", 0, offset) + 1
    return {"line": text.count("\n", 0, offset) + 1, "col": offset - line_start + 1}


_SQLGLOT_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _sqlglot_offset(text: str, line: int, col: int) -> int:
    """The offset of a line and column as sqlglot counts them: it also breaks lines at a lone
    carriage return, which Spindle's positions (lines end at LF) do not."""
    start = 0
    for number, found in enumerate(_SQLGLOT_LINE_BREAK.finditer(text), start=2):
        if number > line:
            break
        start = found.end()
    return min(start + col - 1, len(text))


_TOKEN_REPR = re.compile(
    r"<Token token_type: TokenType\.(\w+), text: (.*?), line: \d+, col: \d+, start: .*?>"
)
"""How sqlglot's messages print a token; a user reads its text instead."""


def _token_text(match: re.Match[str]) -> str:
    return "the end of the statement" if match.group(1) == "SENTINEL" else f"'{match.group(2)}'"


_MISSING_PART = re.compile(r"Required keyword: '\w+' missing for <class '[\w.]+\.(\w+)'>")
"""How sqlglot says an expression lacks a part (`select 1 +`): a user reads what is incomplete."""
_INCOMPLETE = {
    "Add": "'+'",
    "Sub": "'-'",
    "Mul": "'*'",
    "Div": "'/'",
    "Mod": "'%'",
    "EQ": "'='",
    "NEQ": "'<>'",
    "GT": "'>'",
    "GTE": "'>='",
    "LT": "'<'",
    "LTE": "'<='",
    "DPipe": "'||'",
    "If": "CASE WHEN",
}
"""Operators by their symbol; other incomplete clauses by their keyword (`Where`: WHERE)."""


def _described(description: str, highlight: str) -> str:
    described = _TOKEN_REPR.sub(_token_text, description)
    missing = _MISSING_PART.fullmatch(described)
    if missing is None:
        return described
    part = _INCOMPLETE.get(missing.group(1), missing.group(1).upper())
    if not highlight.strip() or part.strip("'").lower() == highlight.strip().lower():
        return f"{part} is incomplete: something is missing after it"
    return f"{part} is incomplete: something is missing before '{highlight}'"


def tokenize(text: str) -> list[Token]:
    """One statement's tokens, or an `InvalidProgram` problem (`Cannot tokenize: ...`), or one
    of the limits' (`NestingTooDeep`, `NameTooLong`): the parser recurses with the nesting."""
    try:
        tokens = DIALECT.tokenize(text)
    except TokenError as error:
        raise _untokenized(text, error) from None
    _within_limits(text, tokens)
    _calls_of_keywords(tokens)
    _minus_as_except(tokens)
    _substr_from(tokens)
    _like_bodies(tokens)
    _typed_numbers(text, tokens)
    _wider_calls(tokens)
    return tokens


WIDER_IN_SPARK: Mapping[str, int] = MappingProxyType(
    {"MAP": 2, "FIRST_VALUE": 1, "LAST_VALUE": 1, "ANY_VALUE": 1}
)
"""Calls Spark takes with more arguments than sqlglot reads them with, by that number:
`MAP(k1, v1, k2, v2)`, `FIRST_VALUE(x, true)` (ignore NULLs) were syntax errors ("The number of
provided arguments (4) is greater than the maximum number of supported arguments (2)")."""
_AS_WRITTEN = "sqlglot.anonymous"
"""sqlglot's own mark, a comment after a call: read the call as written (an `Anonymous`)."""


def _wider_calls(tokens: list[Token]) -> None:
    """Each call of `WIDER_IN_SPARK` with more arguments than sqlglot reads, marked to be read
    as written; Spark's SQL then has it as written (`MAP(1, 'a', 2, 'b')`)."""
    for at in range(len(tokens) - 1):
        most = WIDER_IN_SPARK.get(tokens[at].text.upper())
        if most is None or tokens[at + 1].token_type is not TokenType.L_PAREN:
            continue
        if at and tokens[at - 1].token_type is TokenType.DOT:
            continue  # `s.map(...)`: not the call
        arguments, closing = call_arguments(tokens, at + 1)
        if closing is not None and len(arguments) > most:
            tokens[closing].comments.append(_AS_WRITTEN)


def call_arguments(tokens: list[Token], opening: int) -> tuple[list[list[Token]], int | None]:
    """The arguments of the call whose `(` is `tokens[opening]`, each as its tokens (split at
    the commas between them; `f()` has one, empty), and the index of its `)`: None when the
    tokens end first."""
    arguments: list[list[Token]] = [[]]
    depth = 0
    for at in range(opening, len(tokens)):
        kind = tokens[at].token_type
        depth += (kind is TokenType.L_PAREN) - (kind is TokenType.R_PAREN)
        if depth == 0:
            return arguments, at
        if at == opening:
            continue
        if depth == 1 and kind is TokenType.COMMA:
            arguments.append([])
        else:
            arguments[-1].append(tokens[at])
    return arguments, None


def _unmarked(trees: list[exp.Expr | None]) -> None:
    """The mark `_wider_calls` left, taken off the calls it made anonymous (or whatever took
    their comments: an alias around one)."""
    for tree in trees:
        for node in tree.walk() if tree is not None else ():
            if node.comments and _AS_WRITTEN in node.comments:
                node.comments = [c for c in node.comments if c != _AS_WRITTEN] or None


SPARK_SUFFIXES = {"L": "BIGINT", "S": "SMALLINT", "Y": "TINYINT", "D": "DOUBLE", "F": "FLOAT"}
SPARK_SUFFIXES |= {"BD": "DECIMAL(p, s)"}
"""Spark's typed number literals (`5L`), by suffix: Spindle's SQL read `SELECT k, 5L` as
`5 AS l`, a column named `l`."""


def _typed_numbers(text: str, tokens: list[Token]) -> None:
    """A number a name follows with no space between (`5L`, `1.5D`, `10days`) is a syntax
    error at the number: it read as the number and an alias."""
    for number, name in itertools.pairwise(tokens):
        if not (
            number.token_type is TokenType.NUMBER
            and name.token_type is TokenType.VAR
            and name.start == number.end + 1
        ):
            continue
        written = text[number.start : name.end + 1]
        cast = SPARK_SUFFIXES.get(name.text.upper())
        instead = (
            f"Spark's {cast} literal is CAST({number.text} AS {cast}) here"
            if cast is not None
            else "separate the name from the number"
        )
        raise invalid(
            f"Syntax error: {written!r} is a number a name follows with no space between; "
            f"{instead} (an alias needs a space: {number.text} AS {name.text.lower()})",
            **_at(text, number),
        )


CALLED_KEYWORDS = frozenset({TokenType.WINDOW})
"""Keywords that are also Spark functions: `WINDOW(ts, '1 hour')`, Spark's time window, which
sqlglot read as the start of a WINDOW clause (`Syntax error: Expecting )`)."""


_OPERAND_STARTS = frozenset(
    {TokenType.L_PAREN, TokenType.COMMA, TokenType.SELECT, TokenType.DISTINCT, TokenType.WHERE}
    | {TokenType.HAVING, TokenType.AND, TokenType.OR, TokenType.NOT, TokenType.CASE}
    | {TokenType.WHEN, TokenType.THEN, TokenType.ELSE, TokenType.ON, TokenType.GROUP_BY}
    | {TokenType.ORDER_BY}
    | {TokenType.PLUS, TokenType.DASH, TokenType.STAR, TokenType.SLASH, TokenType.MOD}
    | {TokenType.EQ, TokenType.NEQ, TokenType.LT, TokenType.LTE, TokenType.GT, TokenType.GTE}
    | {TokenType.DPIPE, TokenType.NULLSAFE_EQ, TokenType.DIV}
)
"""Tokens an operand follows, never an operator: after one, `DIV(` is Spark's call `div(a, b)`,
not the operator of `a DIV (b)`."""


_QUERY_STARTS = frozenset({TokenType.SELECT, TokenType.L_PAREN, TokenType.ALL, TokenType.DISTINCT})


def _minus_as_except(tokens: list[Token]) -> None:
    """`SELECT ... MINUS SELECT ...`, Spark's (and Oracle's) name for EXCEPT, read as EXCEPT:
    sqlglot read MINUS as an alias of the relation before it (`Unexpected 'select'`)."""
    for before, token, following in zip(tokens, tokens[1:], tokens[2:], strict=False):
        if (  # after a query's end, not `SELECT minus(x)`
            token.token_type is TokenType.VAR
            and token.text.upper() == "MINUS"
            and following.token_type in _QUERY_STARTS
            and before.token_type not in _OPERAND_STARTS
        ):
            token.token_type = TokenType.EXCEPT


def _calls_of_keywords(tokens: list[Token]) -> None:
    """Each keyword of `CALLED_KEYWORDS` that an opening parenthesis follows, read as a name:
    a call (`WINDOW w AS (...)`, the clause, has a name between); and so is `DIV` where an
    operand starts (`SELECT div(7, 2)`, Spark's call of its integer division, was a syntax
    error)."""
    for before, token, following in zip([None, *tokens], tokens, tokens[1:], strict=False):
        if following.token_type is not TokenType.L_PAREN:
            continue
        if token.token_type in CALLED_KEYWORDS or (
            token.token_type is TokenType.DIV
            and before is not None
            and before.token_type in _OPERAND_STARTS
        ):
            token.token_type = TokenType.VAR


def _substr_from(tokens: list[Token]) -> None:
    """`SUBSTR(s FROM 2 FOR 3)`, Spark's (and standard SQL's) form of a call sqlglot only
    reads as `SUBSTRING(s FROM ...)`, read as that: it was a syntax error (`Expecting )`)."""
    for at, (call, following) in enumerate(itertools.pairwise(tokens), start=1):
        if call.text.upper() != "SUBSTR" or following.token_type is not TokenType.L_PAREN:
            continue
        depth = 0
        for token in tokens[at:]:
            kind = token.token_type
            depth += (kind is TokenType.L_PAREN) - (kind is TokenType.R_PAREN)
            if depth == 0:
                break
            if depth == 1 and kind is TokenType.FROM:
                call.text = "SUBSTRING"
                break


def _like_bodies(tokens: list[Token]) -> None:
    """`CREATE FUNCTION f(x) RETURNS BOOLEAN AS like(x, 'a%')`, a body that starts with
    Spark's call `like(s, pattern)`, read with the body in parentheses: sqlglot read `AS LIKE`
    as a `CREATE TABLE ... LIKE` clause, and the function was refused as malformed."""
    if not tokens or tokens[0].token_type is not TokenType.CREATE:
        return
    kinds = [t.token_type for t in tokens[:4]]
    if TokenType.FUNCTION not in kinds:
        return
    for at, (alias, like) in enumerate(itertools.pairwise(tokens), start=1):
        if alias.token_type is TokenType.ALIAS and like.token_type is TokenType.LIKE:
            first, last = like, tokens[-1]
            tokens.insert(at, Token(TokenType.L_PAREN, "(", first.line, first.col, first.start))
            tokens.append(Token(TokenType.R_PAREN, ")", last.line, last.col, last.end, last.end))
            return


_CLOSINGS = {"'": ("'", "string"), '"': ('"', "quoted name"), "`": ("`", "quoted name")}

NEVER_CLOSED = {
    "string": "Close it with ' (a ' inside a string is written '')",
    "quoted name": 'Close it with " (a " inside a name is written "")',
    "comment": "Close it with */ (comments nest: each /* needs a */ of its own)",
    "nested comment": "Comments nest: the /* inside it opens a comment of its own, which needs "
    "a */ too. Close each with */",
    "template comment": "{# opens a comment (a template's, to the parser) that ends at #}. "
    "Close it with #}, or write the text in a string",
}
"""What to do about text that opens and never closes, by what it is."""
_BACKTICK = (
    'Syntax error: a backtick. Names are quoted with double quotes here: write "id", not `id`'
)


def never_closed(kind: str, *, then: str = "") -> str:
    """The message for text of `kind` (`NEVER_CLOSED`) that starts at the error's position and
    never closes; `then` says what became of the text after it."""
    what = "comment" if kind.endswith("comment") else kind
    return f"Syntax error: the {what} that starts here is never closed{then}. {NEVER_CLOSED[kind]}"


_TOKEN_ERROR = re.compile(
    r"(Missing (.+)|Numeric string contains invalid characters) from \d+:(\d+)"
)
"""How sqlglot's tokenizer says what it could not read, and where (the offset after the `:`)."""


def _untokenized(text: str, error: TokenError) -> Problem:
    """What a user reads when sqlglot cannot tokenize a statement, at the position of the
    cause: text that opens and never closes (`_unclosed`, at where it opens), a backtick
    (Spark's quote of names, not this SQL's), a hex string of other characters than hex
    digits; else where the tokenizer stopped."""
    opened = _unclosed(text)
    if opened is not None and text[opened[0]] != "`":
        return invalid(never_closed(opened[1]), **_at_offset(text, opened[0]))
    cause = _TOKEN_ERROR.search(str(error.__context__ or ""))
    if cause is not None:
        offset = min(int(cause.group(3)), len(text))
    else:  # sqlglot quotes 50 characters either side of where it stopped
        start, end = error.start or 0, error.end or 0
        offset = start + 50 if start else max(end - 50, 0) if end < len(text) - 1 else 0
    tick = text.find("`", 0, offset + 1)
    if opened is not None or tick >= 0:  # sqlglot reads no quote in a backtick
        return invalid(_BACKTICK, **_at_offset(text, opened[0] if opened else tick))
    if cause is not None and cause.group(2):
        kind = {"'": "string", '"': "quoted name"}.get(cause.group(2).strip())
        if kind is not None:
            return invalid(never_closed(kind), **_at_offset(text, offset))
    if cause is not None:
        return invalid(
            "Syntax error: a binary literal (x'0A') of other characters than hexadecimal "
            "digits. Write its bytes in hex (0-9, A-F), or drop the x for a string",
            **_at_offset(text, offset),
        )
    return invalid(
        "Syntax error: Spindle cannot read the text here as SQL's words and symbols. Look for "
        "a stray character or brace, or one that belongs inside a string ('...')",
        **_at_offset(text, min(offset, len(text))),
    )


_SPECIAL = re.compile(r"--|/\*|\{#|['\"`]")


def unclosed_comment(text: str) -> tuple[int, str] | None:
    """Where a block comment that is never closed opens in a program, and what it is
    (`NEVER_CLOSED`: a "nested comment" when one nested in it is what leaves it open), or
    None. The statement splitter read the rest of the text as the comment, silently: a view
    after it was dropped from the program (one left open by a nested comment ends at its
    first `*/` there, as before comments were read nested)."""
    if "/*" not in text:
        return None
    opened = _unclosed(text)
    return opened if opened is not None and opened[1] in ("comment", "nested comment") else None


def _unclosed(text: str) -> tuple[int, str] | None:
    """Where a string, quoted name or block comment that never closes opens, and what it is
    (the tokenizer's own error quotes the text before the end, not the opening)."""
    at = 0
    while at < len(text):
        special = _SPECIAL.search(text, at)
        if special is None:
            return None
        at = special.start()
        char = text[at]
        if text.startswith("--", at):
            end = text.find("\n", at)
            at = len(text) if end < 0 else end + 1
        elif text.startswith("/*", at) or text.startswith("{#", at):
            comment = block_comment(text, at, opening=text[at : at + 2])
            if comment.end < 0:
                kind = "comment" if comment.inner < 0 else "nested comment"
                return at, kind if char == "/" else "template comment"
            at = comment.end
        elif char in _CLOSINGS:
            closing, kind = _CLOSINGS[char]
            end = at + 1
            while True:
                end = text.find(closing, end)
                if end < 0:
                    return at, kind
                if text.startswith(closing * 2, end):  # '' inside a string is a quote
                    end += 2
                    continue
                break
            at = end + 1
        else:
            at += 1
    return None


def parse_tokens(text: str, tokens: list[Token]) -> list[exp.Expr | None]:
    """The trees of one statement's tokens, or an `InvalidProgram` problem worded for a user
    (`Syntax error: ...`, tokens by their text) at a statement-relative position. Programs
    and ad-hoc queries (`spindle.program.queries`) share it."""
    try:
        trees = DIALECT.parser().parse(tokens, text)
        if any(_AS_WRITTEN in token.comments for token in tokens if token.comments):
            _unmarked(trees)
        return trees
    except TokenError as error:  # a quoted name read as a type is tokenized again
        raise invalid(f"Syntax error: {error}") from None
    except ParseError as error:
        backtick(text, tokens)  # the likely cause, said as such
        first = error.errors[0] if error.errors else {}
        description = _described(
            first.get("description") or str(error), first.get("highlight") or ""
        )
        line = int(first.get("line") or 1)
        col = max(int(first.get("col") or 1) - len(first.get("highlight") or " ") + 1, 1)
        hint = _keyword_hint(tokens, first.get("highlight") or "", line, int(first.get("col") or 0))
        raise invalid(
            f"Syntax error: {description}{hint}",
            **_at_offset(text, _sqlglot_offset(text, line, col)),
        ) from None


_STRUCTURE = frozenset(
    {"SELECT", "FROM", "WHERE", "GROUP", "ORDER", "BY", "HAVING", "JOIN", "ON", "USING"}
    | {"UNION", "EXCEPT", "INTERSECT", "AND", "OR", "NOT", "CASE", "WHEN", "THEN", "ELSE"}
    | {"END", "AS", "WITH", "CREATE", "VIEW", "TABLE", "FUNCTION", "RETURNS", "MATERIALIZED"}
    | {"NULL", "IS", "IN", "BETWEEN", "DISTINCT", "ALL", "TRUE", "FALSE", "LIKE"}
)
"""Keywords no one means as a name: an error at one of them gets no hint to quote it."""


def _keyword_hint(tokens: list[Token], highlight: str, line: int, col: int) -> str:
    """When the error is at a keyword that may have been meant as a name (a view `glob`, a
    column `window`): how to write it as one."""
    word = highlight.strip()
    token = next((t for t in tokens if t.line == line and t.col == col and t.text == word), None)
    if token is None or token.token_type in NAME_TOKENS or not word.isidentifier():
        return ""
    if word.upper() in _STRUCTURE or token.token_type in (TokenType.STRING, TokenType.NUMBER):
        return ""
    return (
        f' (if {word} is meant as a name: it is a keyword, so write it in double quotes, "{word}")'
    )


def _lateness(text: str, create: exp.Create, clauses: tuple[LatenessClause, ...]) -> dict[int, str]:
    """Each LATENESS interval (canonical SQL) by the index of its column definition."""
    schema = create.this
    items = schema.expressions if isinstance(schema, exp.Schema) else []
    found: dict[int, str] = {}
    for clause in clauses:
        if not clause.interval:
            raise invalid(
                "Expecting an interval after LATENESS, for example INTERVAL 1 HOUR",
                **_at(text, clause.following or clause.keyword),
            )
        if clause.element >= len(items) or not isinstance(items[clause.element], exp.ColumnDef):
            raise invalid(
                "LATENESS belongs to a column definition: `col TYPE LATENESS <interval>`",
                **_at(text, clause.keyword),
            )
        trees = parse_tokens(text, list(clause.interval))
        interval = trees[0] if len(trees) == 1 else None
        if interval is None or isinstance(interval, exp.Alias):
            raise invalid(
                "LATENESS takes one expression, for example INTERVAL 1 HOUR",
                **_at(text, clause.interval[0]),
            )
        if interval.find(exp.Column, exp.Query) is not None:
            raise invalid(
                "LATENESS takes a constant, for example INTERVAL 1 HOUR (or 10 for a "
                "numeric column)",
                **_at(text, clause.interval[0]),
            )
        found[clause.element] = render(interval)
    return found


_SCAN_BUDGET = 100_000
"""Tokens re-parsed at most while looking for where sqlglot gave up (each try parses a prefix,
so an unbounded scan is quadratic: a statement of 7,500 string literals took 90 s)."""


def _parses_cleanly(text: str, tokens: list[Token]) -> bool:
    try:
        parsed = DIALECT.parser().parse(tokens, text)
    except ParseError:
        return False
    return len(parsed) == 1 and parsed[0] is not None and not parsed[0].find(exp.Command)


def _stopping_token(text: str, tokens: list[Token]) -> Token | None:
    """Where sqlglot gave up on a CREATE it could only keep as an opaque `Command`: the token
    after the longest prefix that parses on its own. (The compiled parser cannot be hooked to
    report it, so the error path re-parses; valid programs never pay for this.)"""
    if not tokens or tokens[0].token_type != TokenType.CREATE:
        return None
    budget = _SCAN_BUDGET
    for end in range(len(tokens) - 1, 1, -1):
        budget -= end
        if budget < 0:
            return None  # the statement is refused all the same, at its start
        if _parses_cleanly(text, tokens[:end]):
            return tokens[end]
    return None


NAME_TOKENS = frozenset({TokenType.VAR, TokenType.IDENTIFIER})
"""A name, unquoted or double-quoted; any other token is a string, number or keyword."""


def backtick(text: str, tokens: list[Token]) -> None:
    """Refuse a backtick, Spark's and MySQL's quote of names, which this SQL (Feldera's) does
    not have: sqlglot reads it as a token of its own, and the error said only 'Unexpected'. A
    statement that parses with one (an alias of a backtick) is a clash (`program.parse`)."""
    quote = next((t for t in tokens if t.token_type is TokenType.UNKNOWN and t.text == "`"), None)
    if quote is not None:
        raise invalid(_BACKTICK, **_at(text, quote))


def _within_limits(text: str, tokens: list[Token]) -> None:
    """Refuse nesting deeper than `MAX_NESTING` (before the recursive parser sees it) and
    names longer than `MAX_NAME_LENGTH`, at the token that crosses the limit."""
    depth = 0
    for token in tokens:
        kind = token.token_type
        if kind in OPENING:
            depth += 1
            if depth > MAX_NESTING:
                raise Problem(
                    reason="NestingTooDeep",
                    message=f"More than {MAX_NESTING} parentheses are open here; Spindle "
                    "plans at most that depth. Move inner subqueries into views or CTEs",
                    **_at(text, token),
                )
        elif kind in CLOSING:
            depth = max(depth - 1, 0)
        elif kind in NAME_TOKENS and len(token.text) > MAX_NAME_LENGTH:
            raise Problem(
                reason="NameTooLong",
                message=f"A name of {len(token.text):,} characters; names have at most "
                f"{MAX_NAME_LENGTH} characters. Shorten it",
                **_at(text, token),
            )


@dataclass(frozen=True)
class Parsed:
    """One statement's normalized AST, and the LATENESS intervals lifted out before parsing."""

    create: exp.Create
    lateness: Mapping[int, str]
    """Canonical SQL of each LATENESS interval, by the index of its column definition."""


@lru_cache(maxsize=65536)
def parsed(text: str) -> Parsed:
    """Tokenize, parse and normalize one statement; cached by its exact text. The tree is
    shared: never mutate it (copy it first)."""
    tokens = tokenize(text)
    tokens, lateness = lift_lateness(tokens)
    trees = parse_tokens(text, tokens)
    statement = trees[0] if trees else None
    if statement is None:
        raise invalid("Empty statement")
    if not _normalized_identifiers(statement):
        stop = _stopping_token(text, tokens)
        if stop is not None:
            backtick(text, tokens)  # the likely cause, said as such
            said = f"Syntax error: Unexpected '{stop.text}'"
            if stop.text.upper() == "CREATE":  # the next statement, run into this one
                said += " (each statement ends with ';': is one missing before it?)"
            raise invalid(said, **_at(text, stop))
        raise invalid(
            f"Unsupported statement '{text.split()[0].upper()} ...': Spindle programs "
            "contain only CREATE TABLE, CREATE [MATERIALIZED] VIEW and CREATE FUNCTION"
        )
    kind = (
        str(statement.args.get("kind") or "").upper() if isinstance(statement, exp.Create) else ""
    )
    if kind not in KINDS:
        raise invalid(
            f"Unsupported statement '{statement.key.upper()}': Spindle programs contain "
            "only CREATE TABLE, CREATE [MATERIALIZED] VIEW and CREATE FUNCTION"
        )
    assert isinstance(statement, exp.Create)
    _read_units(statement)
    if isinstance(statement.expression, exp.Values) and kind == "VIEW":
        statement.set("expression", _values_query(statement.expression, text))
    return Parsed(statement, MappingProxyType(_lateness(text, statement, lateness)))
