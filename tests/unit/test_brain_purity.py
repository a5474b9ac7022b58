"""The brain is pure: importing the lifecycle (and with it plan and program) loads no I/O code.

Run in a fresh interpreter, so modules other tests imported do not hide a regression.
"""

from __future__ import annotations

import json
import subprocess
import sys

IO_MODULES = (
    "spindle.checkpoint.store",
    "spindle.checkpoint.objects",
    "spindle.checkpoint.blobs",
    "spindle.checkpoint.file_store",
    "spindle.checkpoint.s3_store",
    "spindle.checkpoint.retry",
    "spindle.checkpoint.origin",
    "boto3",
    "botocore",
    "kubernetes",
    "kopf",
    "pyspark",
)


def loaded_after_import(module: str) -> set[str]:
    code = f"import json, sys; import {module}; print(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return set(json.loads(result.stdout))


def test_importing_the_lifecycle_loads_no_io_module() -> None:
    loaded = loaded_after_import("spindle.lifecycle")
    assert "spindle.plan" in loaded and "spindle.checkpoint.manifest" in loaded
    assert sorted(loaded & set(IO_MODULES)) == []


def test_importing_the_api_and_plan_loads_no_io_module() -> None:
    loaded = loaded_after_import("spindle.api.status, spindle.plan, spindle.program")
    assert sorted(loaded & set(IO_MODULES)) == []
