"""Declared types through Spark and Delta: a row of every spelling `program.types` accepts is
ingested from JSON, stored, and read back by a view with its value intact (Feldera's INT8 is a
BIGINT: 3,000,000,000 survives; DATETIME is a TIMESTAMP; DECIMAL(p) has scale 0)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_grades import Cli
from tests.integration.test_runtime_io import manifest

COLUMNS: list[tuple[str, str, Any, Any]] = [  # name, declared, JSON value, value read back
    ("i8", "int8", 3_000_000_000, 3_000_000_000),
    ("i2", "int2", -32768, -32768),
    ("i4", "int4", 2_147_483_647, 2_147_483_647),
    ("at", "datetime", "2025-01-02 03:04:05", "2025-01-02T03:04:05"),
    ("at3", "timestamp(3)", "2025-01-02 03:04:05.123", "2025-01-02T03:04:05.123000"),
    ("f32", "float32", 1.5, 1.5),
    ("f64", "float64", 2.25, 2.25),
    ("whole", "dec(12)", 123456789012, 123456789012),
    ("frac", "number(5, 5)", 0.12345, 0.12345),
    ("s", "character varying(5)", "abc", "abc"),
    ("c", "char(3)", "xyz", "xyz"),
    ("flag", "bool", True, True),
    ("day", "date", "2025-02-03", "2025-02-03"),
]


def test_every_accepted_type_stores_its_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "1.json").write_text(json.dumps({n: v for n, _, v, _ in COLUMNS}) + "\n")
    connectors = json.dumps(
        [
            {
                "name": "src",
                "transport": {"name": "file_input", "config": {"path": str(inputs)}},
                "format": {"name": "json"},
            }
        ]
    )
    declared = ", ".join(f"{n} {t}" for n, t, _, _ in COLUMNS)
    sql = (
        f"create table t ({declared}) with ('connectors' = '{connectors}');\n"
        "create materialized view v as select * from t;"
    )
    cli = Cli(tmp_path / "home", capsys)
    cli("local", "apply", "-f", str(manifest(tmp_path, sql, "kinds")))
    cli("local", "run", "kinds", "--until-idle")
    [row] = cli.json("query", "kinds", "SELECT * FROM v")
    read = {name: (float(v) if name in ("whole", "frac") else v) for name, v in row.items()}
    assert read == {n: (float(r) if n in ("whole", "frac") else r) for n, _, _, r in COLUMNS}
    # PySpark gives a timestamp in the querying process's zone: it is shown as stored (UTC)
    with monkeypatch.context() as zone:
        zone.setenv("TZ", "America/New_York")
        time.tzset()
        try:
            [again] = cli.json("query", "kinds", "SELECT at, array(at3) AS at3s FROM v")
        finally:
            zone.undo()
            time.tzset()
    assert again == {"at": "2025-01-02T03:04:05", "at3s": ["2025-01-02T03:04:05.123000"]}
