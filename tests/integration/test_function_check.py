"""The program layer's lists of Spark functions and of its aggregates (`program.spark_functions`)
are the running Spark's: a PySpark upgrade that adds or drops one fails here until the lists are
regenerated with `python -m tests.integration.test_function_check` (it rewrites the module).
The verdicts of the checks themselves are held against Spark's analyzer with the column cases
(`test_column_check.py`)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from spindle.program import spark_functions
from spindle.program.spark_functions import SPARK_AGGREGATES, SPARK_FUNCTIONS


def spark_names(spark: Any) -> frozenset[str]:
    """The names of Spark's built-in functions that are called by name (not `+` or `<=>`)."""
    rows = spark.sql("SHOW SYSTEM FUNCTIONS").collect()
    return frozenset(r[0] for r in rows if r[0].replace("_", "").isalnum())


def spark_aggregates(spark: Any) -> frozenset[str]:
    """The names of Spark's aggregate functions: its documentation's group `agg_funcs`, and
    every other function whose expression is an aggregate, except those only windows call
    (`rank`)."""
    jvm = spark._jvm
    catalog = spark._jsparkSession.sessionState().catalog()
    aggregate = jvm.java.lang.Class.forName(
        "org.apache.spark.sql.catalyst.expressions.aggregate.AggregateFunction"
    )
    found = set()
    for name in spark_names(spark):
        identifier = jvm.org.apache.spark.sql.catalyst.FunctionIdentifier.apply(name)
        info = catalog.lookupFunctionInfo(identifier)
        group, expression = info.getGroup(), info.getClassName()
        if group == "agg_funcs" or (
            group != "window_funcs"
            and expression
            and aggregate.isAssignableFrom(jvm.java.lang.Class.forName(expression))
        ):
            found.add(name)
    return frozenset(found)


def test_the_list_is_the_running_sparks(spark: Any) -> None:
    running = spark_names(spark)
    assert not running - SPARK_FUNCTIONS, "functions Spark has that the list lacks"
    assert not SPARK_FUNCTIONS - running, "functions the list has that Spark lacks"


def test_the_aggregates_are_the_running_sparks(spark: Any) -> None:
    running = spark_aggregates(spark)
    assert not running - SPARK_AGGREGATES, "aggregates Spark has that the list lacks"
    assert not SPARK_AGGREGATES - running, "aggregates the list has that Spark lacks"


def regenerate(spark: Any) -> None:
    module = Path(spark_functions.__file__)
    text = module.read_text()
    for marker, names in (("_NAMES", spark_names(spark)), ("_AGGREGATES", spark_aggregates(spark))):
        start = text.index(f'{marker} = """') + len(f'{marker} = """')
        end = text.index('"""', start)
        filled = textwrap.fill(" ".join(sorted(names)), width=96, break_long_words=False)
        text = f"{text[:start]}\n{textwrap.indent(filled, '    ')}\n{text[end:]}"
    module.write_text(text)


if __name__ == "__main__":
    import tempfile

    from pyspark.sql import SparkSession

    with tempfile.TemporaryDirectory() as scratch:  # Spark's warehouse, not in the checkout
        builder = SparkSession.builder.master("local[1]")
        regenerate(builder.config("spark.sql.warehouse.dir", scratch).getOrCreate())
