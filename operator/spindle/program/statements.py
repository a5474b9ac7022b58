"""Split a program into statements, each with the position where it starts.

Statements are found by a small scanner that knows quotes and comments, so each one can be looked
up in the analysis cache (`spindle.program.facts`) before it is tokenized. Positions inside a
statement's AST are relative to its start; `Statement.locate` turns them into the program's line
and column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from sqlglot import exp

from spindle.program.model import Position


@dataclass(frozen=True)
class Statement:
    """One statement's text and where it starts in the program."""

    text: str
    start: int
    line: int
    column: int

    def locate(self, offset: int) -> Position:
        """The program position of a character offset within this statement."""
        newlines = self.text.count("\n", 0, offset)
        if newlines == 0:
            return Position(self.line, self.column + offset)
        return Position(self.line + newlines, offset - self.text.rfind("\n", 0, offset))

    def locate_line_col(self, line: int, col: int) -> Position:
        if line <= 1:
            return Position(self.line, self.column + col - 1)
        return Position(self.line + line - 1, col)


BLOCK_COMMENTS = {"/*": "*/", "{#": "#}"}
"""What opens a block comment for sqlglot's tokenizer, and what closes it: `{# ... #}` is a
template's comment to it, which Spindle's statement splitter does not read as one."""


@dataclass(frozen=True)
class BlockComment:
    """A block comment as sqlglot's tokenizer reads it: comments nest, so `/* a /* b */ c */`
    is one comment, and `/* a /* b */` never closes."""

    end: int
    """The offset after its closing `*/`; -1 when it never closes."""
    inner: int
    """Where the first comment nested in it opens; -1 for none."""


def block_comment(text: str, start: int, *, opening: str = "/*") -> BlockComment:
    """The block comment whose `/*` (or other `opening`: `{#`, a template's, to sqlglot) is at
    `start`, read as sqlglot's tokenizer reads it (`Tokenizer._scan_comment`, nested comments
    on): at each character a `*/` closes one level; after stepping past a character, a `/*`
    opens another. So the `/` of a `*/` can also open the next level (`*/*`), and a `/*` right
    after the opening one does not nest (`/*/* */` closes)."""
    closing = BLOCK_COMMENTS[opening]
    depth, at, last, inner = 1, start + 2, len(text) - 1, -1
    while at < last:
        if text.startswith(closing, at):
            depth -= 1
            if not depth:
                return BlockComment(at + 2, inner)
        at += 1
        if at < last and text.startswith(opening, at):
            inner = at if inner < 0 else inner
            at += 2
            depth += 1
    return BlockComment(-1, inner)


def _comment_end(program: str, index: int, end: int) -> int:
    """Where the block comment at `index` ends for the splitter: where sqlglot closes it; one
    that never closes there (`/* a /* b */`) at its first `*/`, where Spindle closed every
    comment before it read them nested (statements after it ran; the tokenizer, or
    `syntax.unclosed_comment`, refuses it for a program to run), or else at the end."""
    comment = block_comment(program, index)
    if comment.end >= 0:
        return comment.end
    close = program.find("*/", index + 2)
    return end if close < 0 else close + 2


def _skip_space_and_comments(program: str, index: int, end: int) -> int:
    while index < end:
        if program[index].isspace() or program[index] == "\ufeff":  # a BOM reads as space
            index += 1
        elif program.startswith("--", index):
            newline = program.find("\n", index)
            index = end if newline < 0 else newline + 1
        elif program.startswith("/*", index):
            index = _comment_end(program, index, end)
        else:
            break
    return index


_SPECIAL = re.compile(r"[;'\"`]|--|/\*")  # a character class to jump between, not a grammar


def _statement_end(program: str, index: int) -> int:
    """Offset of the `;` ending the statement at `index` (or the end), skipping quoted text
    and comments. Unterminated quotes run to the end; the tokenizer then reports them."""
    end = len(program)
    while index < end:
        found = _SPECIAL.search(program, index)
        if found is None:
            return end
        index, char = found.start(), found.group()
        if char == ";":
            return index
        if char in "'\"`":
            close = program.find(char, index + 1)
            while close >= 0 and program.startswith(char * 2, close):  # doubled quote escapes
                close = program.find(char, close + 2)
            index = end if close < 0 else close + 1
        else:
            index = _skip_space_and_comments(program, index, end)
    return end


@lru_cache(maxsize=8)
def split(program: str) -> tuple[Statement, ...]:
    """Statements in program order; comments and whitespace around them are dropped."""
    statements: list[Statement] = []
    index, end = 0, len(program)
    line, counted = 1, 0
    while index < end:
        start = _skip_space_and_comments(program, index, end)
        if start >= end:
            break
        stop = _statement_end(program, start)
        text = program[start:stop].rstrip()
        if text:
            line += program.count("\n", counted, start)
            counted = start
            column = start - (program.rfind("\n", 0, start) + 1) + 1
            statements.append(Statement(text=text, start=start, line=line, column=column))
        index = stop + 1
    return tuple(statements)


def text_start(node: exp.Expr) -> int | None:
    """Where `node`'s text starts in its statement: the first of its tokens that sqlglot
    located, or None for a node made after the parse (nodes without positions keep no meta)."""
    starts = (int(n.meta["start"]) for n in node.walk() if n._meta and "start" in n.meta)
    return min(starts, default=None)
