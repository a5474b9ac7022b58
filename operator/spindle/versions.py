"""Versions that are recorded in checkpoints and that decide whether a program changed.

`RUNTIME_VERSION` names the translation of SQL to Spark plans. A change that can alter any
view's results bumps it; every view of a pipeline whose checkpoint names an older runtime is then
reported modified with reason `runtime` (Feldera's Caveat 1), unless `spec.runtimeVersion` pins
the old one.
"""

RUNTIME_VERSION = "v1"
PARSER_VERSION = "sqlglot-30.30.0/spindle-1"
PLAN_FORMAT_VERSION = 1

RUNTIME_SETTINGS: dict[str, dict[str, str]] = {
    "v1": {"spark.sql.ansi.enabled": "false"},
    "v2": {"spark.sql.ansi.enabled": "true"},
}
"""The Spark SQL settings that make each runtime's semantics, applied before every step,
bootstrap, preview and query. v1 (the default): Spark's legacy semantics, where a division by
zero, an overflow or a cast that fails gives NULL. v2: ANSI SQL (Spark 4's own default, and
closer to Feldera), where the same expression stops the step with `SqlRuntimeError`. The two
can give different rows for the same SQL, so they are different runtimes: moving a pipeline
from one to the other modifies every view (reason `runtime`)."""

SUPPORTED_RUNTIME_VERSIONS = tuple(RUNTIME_SETTINGS)
"""What `spec.runtimeVersion` may pin; anything else is `InvalidSpec`."""
