"""Ad-hoc inserts (`spindle local execute NAME "INSERT INTO t VALUES ..."`): a batch of literal
rows written, create-only, as one JSON-lines file into the table's ad-hoc input, where the next
step ingests it exactly once (its offset is the set of files already ingested)."""

from __future__ import annotations

import datetime
import json
import uuid
from decimal import Decimal
from typing import Any

from sqlglot import exp
from sqlglot.errors import ParseError

from spindle.checkpoint.objects import ObjectStore
from spindle.errors import SpindleError
from spindle.program import Program
from spindle.program.dialect import DIALECT


def _literal(node: exp.Expr, where: str) -> Any:
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Neg):
        value = _literal(node.this, where)
        return -value if isinstance(value, int | float | Decimal) else value
    if isinstance(node, exp.Cast | exp.TsOrDsToDate | exp.Paren):
        return _literal(node.this, where)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = str(node.this)
        return int(text) if text.lstrip("-").isdigit() else float(Decimal(text))
    raise SpindleError(
        reason="UnsupportedSql",
        message=f"{where}: only literal values can be inserted ad hoc, not `{node.sql()}`.",
    )


def parse_insert(sql: str, program: Program) -> tuple[str, list[dict[str, Any]]]:
    """The target table and its rows from `INSERT INTO t [(cols)] VALUES (...), ...`."""
    try:
        statement = DIALECT.parse(sql)[0]
    except ParseError as error:
        first = error.errors[0] if error.errors else {}
        raise SpindleError(
            reason="InvalidProgram",
            message=f"Syntax error in the statement: {first.get('description', error)} "
            f"(line {first.get('line')}, column {first.get('col')})",
            details={"line": first.get("line"), "column": first.get("col")},
        ) from None
    if not isinstance(statement, exp.Insert) or not isinstance(statement.expression, exp.Values):
        raise SpindleError(
            reason="UnsupportedSql",
            message="Only `INSERT INTO <table> [(columns)] VALUES (...)` can be executed ad hoc.",
        )
    target = statement.this
    columns_given = [c.name for c in target.expressions] if isinstance(target, exp.Schema) else []
    table_node = target.this if isinstance(target, exp.Schema) else target
    name = (
        table_node.name if table_node.this and table_node.this.quoted else table_node.name.lower()
    )
    table = program.tables.get(name)
    if table is None:
        raise SpindleError(
            reason="UnknownRelation",
            message=f"Table '{name}' is not declared in the pipeline's program.",
            details={"relation": name},
        )
    columns = [c.lower() for c in columns_given] or [c.name for c in table.columns]
    rows = []
    for index, row in enumerate(statement.expression.expressions, start=1):
        values = row.expressions if isinstance(row, exp.Tuple) else [row]
        if len(values) != len(columns):
            raise SpindleError(
                reason="InvalidInsert",
                message=f"Row {index} has {len(values)} values for {len(columns)} columns of "
                f"'{name}' ({', '.join(columns)}).",
                details={"row": index},
            )
        rows.append(
            {
                c: _literal(v, f"row {index}, column {c}")
                for c, v in zip(columns, values, strict=True)
            }
        )
    return name, rows


def write_batch(objects: ObjectStore, table: str, rows: list[dict[str, Any]]) -> str:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S%f")
    key = f"inputs/{table}/{stamp}-{uuid.uuid4().hex[:8]}.jsonl"
    data = "".join(json.dumps(row, default=str) + "\n" for row in rows).encode()
    objects.write(key, data, if_none_match=True)
    return key
