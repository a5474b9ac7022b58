"""Versions that are recorded in checkpoints and that decide whether a program changed.

`RUNTIME_VERSION` names the translation of SQL to Spark plans. A change that can alter any
view's results bumps it; every view of a pipeline whose checkpoint names an older runtime is then
reported modified with reason `runtime` (Feldera's Caveat 1), unless `spec.runtimeVersion` pins
the old one.
"""

RUNTIME_VERSION = "v1"
PARSER_VERSION = "sqlglot-30.30.0/spindle-1"
PLAN_FORMAT_VERSION = 1
SUPPORTED_RUNTIME_VERSIONS = ("v1",)
"""What `spec.runtimeVersion` may pin; anything else is `InvalidSpec`."""
