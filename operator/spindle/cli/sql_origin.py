"""Where a manifest's `spec.sql` is in its file, so an error's position can be found there.

A problem of the program is located in `spec.sql` (`line 22, column 7`): that is what the
operator's status says, and what a checkpoint's text holds. In a manifest the program starts
lower and indented, so the user's editor shows the same place at another line and column. When
`spec.sql` is a literal block (`sql: |`), whose lines are the file's lines unchanged but for
their indentation, the CLI gives both positions; other scalar styles fold or escape lines, and
only the `spec.sql` position is said, labelled as such.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

from spindle.errors import SpindleError

_POSITION = re.compile(r"\(line (\d+), column (\d+)\)")
_INDICATOR = re.compile(r"\|[+-]?(?P<digit>[1-9])?")


@dataclass(frozen=True)
class SqlOrigin:
    path: str
    line: int
    """The file's line (1-based) that holds `spec.sql`'s first line."""
    indent: int
    """The block's indentation: columns before the SQL on each of its lines."""
    in_file: bool = True
    """False for a folded or quoted `spec.sql`: its positions are said as `spec.sql`'s only,
    so that no one reads them as the file's."""

    def said(self, message: str) -> str:
        """`message` with its `(line L, column C)` in `spec.sql` given in the file too."""

        def both(match: re.Match[str]) -> str:
            line, column = int(match[1]), int(match[2])
            if not self.in_file:
                return f"(spec.sql line {line}, column {column})"
            return (
                f"({self.path} line {line + self.line - 1}, column {column + self.indent}; "
                f"spec.sql line {line}, column {column})"
            )

        return _POSITION.sub(both, message)


def in_file(error: SpindleError, origin: SqlOrigin | None) -> SpindleError:
    """`error` (and the other problems it lists) with positions in the manifest's file too."""
    if origin is None:
        return error
    details = dict(error.details)
    if "more" in details:
        details["more"] = [origin.said(str(m)) for m in details["more"]]
    return SpindleError(reason=error.reason, message=origin.said(error.message), details=details)


def sql_origin(data: bytes, *, path: str) -> SqlOrigin | None:
    """Where `spec.sql` starts in a manifest's bytes, when it is a literal block (another style
    only labels its positions as `spec.sql`'s); None without one.
    The manifest was already loaded (`files.load_yaml`): this reads only its node tree."""
    try:
        root = yaml.SafeLoader(data).get_single_node()
    except yaml.YAMLError:
        return None
    sql = _value(_value(root, "spec"), "sql")
    if not isinstance(sql, yaml.ScalarNode) or not sql.value:
        return None
    if sql.style != "|":
        return SqlOrigin(path=path, line=1, indent=0, in_file=False)
    lines = data.decode("utf-8", errors="replace").splitlines()
    first = sql.start_mark.line + 1  # 0-based: the line after the `|` indicator
    while first < len(lines) and not lines[first].strip():
        first += 1  # blank lines before the SQL are kept in it, as empty lines
    if first >= len(lines):
        return None
    indent = len(lines[first]) - len(lines[first].lstrip(" "))
    header = lines[sql.start_mark.line]
    explicit = _INDICATOR.match(header, sql.start_mark.column)
    if explicit is not None and explicit["digit"]:  # `|2`: the key's indentation, then 2
        key = len(header) - len(header.lstrip(" "))
        indent = key + int(explicit["digit"])
    leading = len(sql.value) - len(sql.value.lstrip("\n"))
    return SqlOrigin(path=path, line=first + 1 - leading, indent=indent)


def _value(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    for name, value in reversed(node.value):  # a key given twice: YAML keeps the last
        if isinstance(name, yaml.ScalarNode) and name.value == key and isinstance(value, yaml.Node):
            return value
    return None
