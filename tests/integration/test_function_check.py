"""The program layer's list of Spark functions (`program.spark_functions`) is the running Spark's:
a PySpark upgrade that adds or drops a function fails here until the list is regenerated with
`python -m tests.integration.test_function_check` (it rewrites the module). The verdicts of the
check itself are held against Spark's analyzer with the column cases (`test_column_check.py`)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

from spindle.program import spark_functions
from spindle.program.spark_functions import SPARK_FUNCTIONS


def spark_names(spark: Any) -> frozenset[str]:
    """The names of Spark's built-in functions that are called by name (not `+` or `<=>`)."""
    rows = spark.sql("SHOW SYSTEM FUNCTIONS").collect()
    return frozenset(r[0] for r in rows if r[0].replace("_", "").isalnum())


def test_the_list_is_the_running_sparks(spark: Any) -> None:
    running = spark_names(spark)
    assert not running - SPARK_FUNCTIONS, "functions Spark has that the list lacks"
    assert not SPARK_FUNCTIONS - running, "functions the list has that Spark lacks"


def regenerate(spark: Any) -> None:
    module = Path(spark_functions.__file__)
    text = module.read_text()
    start, end = text.index('_NAMES = """') + len('_NAMES = """'), text.index('"""\n\nSPARK_')
    names = textwrap.fill(" ".join(sorted(spark_names(spark))), width=96, break_long_words=False)
    module.write_text(f"{text[:start]}\n{textwrap.indent(names, '    ')}\n{text[end:]}")


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    regenerate(SparkSession.builder.master("local[1]").getOrCreate())
