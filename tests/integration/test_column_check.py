"""The column check (`program.columns`) against Spark's analyzer: it refuses a program only
where Spark would fail it too, and each refusal is Spark's kind of failure.

Every case of `tests/unit/column_cases.py` is analyzed by Spark as the runtime would run it
(translated by `runtime.translate`, over empty relations of the declared types), and so is every
program of the fingerprint corpus (the examples, the golden plan cases and generated programs of
every statement form): a program Spark analyzes cleanly must pass the check.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spindle.errors import SpindleError
from spindle.program import Program, parse_program
from spindle.program.ordinals import ordinal_problem
from spindle.runtime.maintain import spark_types, table_schema
from spindle.runtime.translate import view_sql
from tests.unit.column_cases import CASES, Case
from tests.unit.test_columns import program_of

CORPUS = Path(__file__).parents[1] / "golden" / "fingerprints" / "programs"
DUPLICATE = "DUPLICATE_COLUMN_NAMES"
"""Not an error class of Spark's analyzer: it evaluates a query whose columns share a name
(case-insensitively), whose result no view can store (its columns are stored, and read, by
name); `spark_failure` says this of such a view."""
SPARK_CLASSES = {
    "UnknownColumn": ("UNRESOLVED_COLUMN", "UNRESOLVED_USING_COLUMN_FOR_JOIN"),
    "AmbiguousColumn": ("AMBIGUOUS_REFERENCE",),
    "UnknownFunction": ("UNRESOLVED_ROUTINE",),
    "UngroupedColumn": (
        "MISSING_AGGREGATION",
        "MISSING_GROUP_BY",
        "UNRESOLVED_COLUMN",
        "SCALAR_SUBQUERY_IS_IN_GROUP_BY_OR_AGGREGATE_FUNCTION",
        "MISSING_ATTRIBUTES",  # a correlated subquery in a HAVING reading an ungrouped column
    ),
    "MisplacedAggregate": ("INVALID_WHERE_CONDITION", "GROUP_BY_AGGREGATE"),
    "MisplacedWindow": ("WINDOW_FUNCTION_NOT_ALLOWED_IN_CLAUSE",),
    "UnorderedWindow": ("WINDOW_FUNCTION_FRAME_NOT_ORDERED",),
    "OrdinalOutOfRange": ("GROUP_BY_POS_OUT_OF_RANGE", "ORDER_BY_POS_OUT_OF_RANGE"),
    "NestedAggregate": ("NESTED_AGGREGATE_FUNCTION", "INVALID_AGGREGATE_FILTER"),
    "DuplicateColumn": (DUPLICATE,),
    "ColumnCountMismatch": ("NUM_COLUMNS_MISMATCH",),
}
"""The error class of Spark's analyzer for each reason of the check."""


def spark_failure(spark: Any, program: Program) -> str | None:
    """The error class of the first view Spark cannot analyze, or None when all analyze. The
    relations are empty temporary views in a session of their own."""
    from pyspark.errors import AnalysisException

    session = spark.newSession()
    schemas: dict[str, dict[str, str]] = {}
    for table in program.tables.values():
        frame = session.createDataFrame([], table_schema(table))
        frame.createOrReplaceTempView(f"`{table.name}`")
        schemas[table.name] = spark_types(frame)
    for view in program.views.values():
        # a position outside the select list never reaches the translation (the plan refuses
        # it), whose qualify reads it as a Python index: Spark is asked about it as written
        positional = ordinal_problem(view.name, view.query) is not None
        sql = (
            view.query.sql(dialect="spark") if positional else view_sql(view, program, schemas).sql
        )
        try:
            frame = session.sql(sql)
        except AnalysisException as error:
            return str(error.getCondition() or error)
        names = [c.lower() for c in frame.columns]
        if len(set(names)) < len(names):
            return DUPLICATE
        frame.createOrReplaceTempView(f"`{view.name}`")
        schemas[view.name] = spark_types(frame)
    return None


def refusal(program: Program) -> SpindleError | None:
    """What the program is refused with, or None."""
    try:
        program.refuse_unrunnable()
    except SpindleError as error:
        return error
    return None


def check(program: Program) -> str | None:
    error = refusal(program)
    return None if error is None else error.reason


@pytest.mark.parametrize("case", CASES, ids=[c.query for c in CASES])
def test_each_verdict_is_sparks(spark: Any, case: Case) -> None:
    program = parse_program(program_of(case.query))
    failure = spark_failure(spark, program)
    if case.reason is None:
        assert failure is None
    else:
        assert failure is not None and failure.startswith(SPARK_CLASSES[case.reason])
    assert check(program) == case.reason


def test_no_program_spark_analyzes_is_refused(spark: Any) -> None:
    analyzed = refused = 0
    for path in sorted(CORPUS.glob("*.sql")):
        try:
            program = parse_program(path.read_text())
            failure = spark_failure(spark, program)
        except SpindleError:  # types or constructs the runtime refuses: not this check's
            continue
        if any(u.reason == "InvalidConnectors" for u in program.unrunnable):
            continue  # a Feldera connector key Spindle refuses: not what Spark analyzes
        if failure is None:
            analyzed += 1
            error = refusal(program)
            if error is not None and "cannot be stored" in error.message:
                continue  # a column name Spark analyzes and Delta refuses: the first step failed
            assert check(program) is None, path.name
        elif check(program) is not None:
            refused += 1
    assert analyzed >= 150  # the corpus is what Spindle runs: nearly all of it analyzes
    print(f"corpus: {analyzed} programs analyzed by Spark and passed; {refused} refused by both")
