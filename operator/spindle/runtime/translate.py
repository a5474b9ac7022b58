"""Spindle SQL to Spark SQL: table schemas, view queries (UDFs inlined), and AVG semantics.

Rules, as tables rather than branches:
- `spindle.program.types.STORED_TYPES` maps declared column types to Spark types.
- `UNSUPPORTED` (read through `writable.unsupported`) lists constructs Spark cannot evaluate
  the way Spindle means them; they fail at plan time with `UnsupportedSql` and a line and
  column, never deep inside Spark.
- AVG over DECIMAL(p, s) keeps the argument's type, rounding half up to scale s (SQL standard /
  Feldera: AVG of DECIMAL(5,2) grades is 97.00, 91.50, ...). Spark would return DECIMAL(p+4,s+4).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.annotate_types import annotate_types
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import MappingSchema

from spindle.errors import SpindleError, located
from spindle.program import Program, Table, View
from spindle.program.spark_calls import as_written, cased_alias, first_select
from spindle.program.types import stored_type, type_problem
from spindle.program.udfs import inline_view
from spindle.program.writable import unsupported


def spark_type(declared: str) -> str:
    """The Spark type storing a declared column type (`spindle.program.types`); the program
    refuses the others as `UnsupportedType` before anything runs, so this is a guard."""
    stored = stored_type(declared)
    if stored is None:
        raise SpindleError(
            reason="UnsupportedType",
            message=type_problem(declared) or f"Spindle cannot store type {declared}",
            details={"type": declared},
        )
    return stored


def table_ddl_schema(table: Table) -> str:
    """The Spark DDL schema string of a table (`id BIGINT, name STRING`)."""
    return ", ".join(f"`{c.name}` {spark_type(c.type)}" for c in table.columns)


@dataclass(frozen=True)
class SparkView:
    name: str
    sql: str


def _check_supported(view: View) -> None:
    for node in view.query.walk():
        label = unsupported(node)
        if label is not None:
            meta = node.meta or {}
            line, column = int(meta.get("line", 1)), int(meta.get("col", 1))
            raise located(
                reason="UnsupportedSql",
                message=f"View '{view.name}' uses {label}, which Spindle cannot run on Spark",
                line=view.position.line + line - 1,
                column=column if line > 1 else view.position.column + column - 1,
                view=view.name,
            )


def _fix_decimal_avg(tree: exp.Expr, schema: MappingSchema) -> exp.Expr:
    """Qualify and type the query, then cast each AVG over a DECIMAL back to that DECIMAL."""
    try:
        typed = annotate_types(qualify(tree.copy(), schema=schema, dialect="spark"), schema=schema)
    except OptimizeError:
        return tree

    def keep_scale(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Avg):
            argument = node.this.type
            if argument is not None and argument.this == exp.DataType.Type.DECIMAL:
                return exp.Cast(this=node, to=argument.copy())
        return node

    return typed.transform(keep_scale)


def view_sql(view: View, program: Program, schemas: Mapping[str, Mapping[str, str]]) -> SparkView:
    """Spark SQL for a view, given the Spark schemas (column → type) of what it reads."""
    return SparkView(view.name, translated(view, program, schemas).sql(dialect="spark"))


def translated(view: View, program: Program, schemas: Mapping[str, Mapping[str, str]]) -> exp.Expr:
    """The view's query as Spark will run it: UDFs inlined, qualified (stars expanded) when the
    schemas allow, AVG over DECIMAL fixed, Spark's calls as written (`spark_calls`)."""
    _check_supported(view)
    tree = _owned(as_written(view.query), view.query)  # as parsed: positions within the view
    tree = inline_view(view, tree, program.functions)  # refused when planned: a checkpoint's
    schema = MappingSchema(
        {name: dict(columns) for name, columns in schemas.items()}, dialect="spark"
    )
    return _cased_names(_fix_decimal_avg(tree, schema), view.query, schemas)


def _cased_names(
    tree: exp.Expr, written: exp.Expr, schemas: Mapping[str, Mapping[str, str]]
) -> exp.Expr:
    """`tree` with the case of each output name as Spark's own SQL and Feldera keep it: a name
    the view double-quotes (`s AS "Name"`, `"Name"`) as written, and the columns of a select
    list of stars (`SELECT *`, `SELECT a.*, b.*`) as what it reads has them. Qualify, in
    Spark's dialect, lowers every name: the view's column, its stored state's and its output
    records' key were `name`."""
    ours, theirs = first_select(tree), first_select(written)
    if ours is None or theirs is None:
        return tree
    if len(ours.expressions) == len(theirs.expressions):  # no star expanded: item by item
        for item, original in zip(ours.expressions, theirs.expressions, strict=True):
            name = cased_alias(original)
            if name is not None and isinstance(item, exp.Alias):
                item.set("alias", exp.to_identifier(name, quoted=True))
    if not all(item.is_star for item in theirs.expressions):
        return tree  # the columns stars stand for among other items: not told apart here
    spelled = {  # each relation the SELECT reads, by its name there: its columns as spelled
        table.alias_or_name.lower(): {c.lower(): c for c in schemas.get(table.name, {})}
        for table in ours.find_all(exp.Table)
    }
    for item in ours.expressions:  # each a column a star stands for
        column = item.this if isinstance(item, exp.Alias) else None
        if not isinstance(column, exp.Column):
            continue
        name = spelled.get(column.table.lower(), {}).get(column.name.lower())
        if name is not None and name != item.alias and item.alias == column.name:
            item.set("alias", exp.to_identifier(name, quoted=True))
    return tree


def _owned(tree: exp.Expr, shared: exp.Expr) -> exp.Expr:
    """`tree`, copied if it is the parsed (shared, never mutated) `shared`."""
    return tree.copy() if tree is shared else tree
