"""Runtime behaviour a user relies on beyond the grades example: Delta table inputs resume from
their version, and `spindle local stop` stops a running pipeline gracefully (commit, exit 0)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from spindle.local.home import LocalPipeline
from tests.integration.test_grades import Cli


def manifest(tmp_path: Path, sql: str, name: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "spindle.dev/v1alpha1",
                "kind": "Pipeline",
                "metadata": {"name": name},
                "spec": {"sql": sql},
            }
        )
    )
    return path


def test_delta_table_input_ingests_each_new_version_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spark: Any
) -> None:
    source = tmp_path / "source"
    spark.createDataFrame([(1, 10), (2, 20)], "id long, v int").write.format("delta").save(
        str(source)
    )
    connectors = json.dumps(
        [
            {
                "name": "lake",
                "transport": {"name": "delta_table_input", "config": {"uri": str(source)}},
            }
        ]
    )
    sql = (
        f"create table t (id bigint, v int) with ('materialized' = 'true', "
        f"'connectors' = '{connectors}');\n"
        "create materialized view s as select count(*) as n, sum(v) as total from t;"
    )
    cli = Cli(tmp_path / "home", capsys)
    cli("local", "apply", "-f", str(manifest(tmp_path, sql, "lake")))
    cli("local", "run", "lake", "--until-idle")
    assert cli.json("query", "lake", "SELECT n, total FROM s") == [{"n": 2, "total": 30}]
    spark.createDataFrame([(3, 30)], "id long, v int").write.format("delta").mode("append").save(
        str(source)
    )
    cli("local", "run", "lake", "--until-idle")
    assert cli.json("query", "lake", "SELECT n, total FROM s") == [{"n": 3, "total": 60}]
    latest = LocalPipeline(tmp_path / "home", "lake").store().latest()
    assert latest is not None and latest.connectors["t.lake"].offset == 1


def test_stop_finishes_the_step_commits_and_exits_zero(tmp_path: Path, spark: Any) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    connectors = json.dumps(
        [
            {
                "name": "src",
                "transport": {"name": "file_input", "config": {"path": str(inputs)}},
                "format": {"name": "json"},
            }
        ]
    )
    sql = (
        f"create table t (id bigint) with ('materialized' = 'true', "
        f"'connectors' = '{connectors}');\n"
        "create materialized view c as select count(*) as n from t;"
    )
    home = tmp_path / "home"
    env = {**os.environ, "PYTHONPATH": str(Path.cwd())}
    command = [sys.executable, "-m", "spindle.cli.main"]
    subprocess.run(
        [
            *command,
            "local",
            "apply",
            "-f",
            str(manifest(tmp_path, sql, "loop")),
            "--home",
            str(home),
        ],
        check=True,
        capture_output=True,
        env=env,
    )
    runner = subprocess.Popen(
        [*command, "local", "run", "loop", "--home", str(home)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    pipeline = LocalPipeline(home, "loop")
    deadline = time.monotonic() + 180
    while pipeline.store().latest() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    (inputs / "1.json").write_text('{"id": 1}\n{"id": 2}\n')
    while time.monotonic() < deadline:
        latest = pipeline.store().latest()
        if latest is not None and latest.state["t"].rows == 2:
            break
        time.sleep(0.5)
    stopped = subprocess.run(
        [*command, "local", "stop", "loop", "--home", str(home)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert stopped.returncode == 0, stopped.stderr
    out, err = runner.communicate(timeout=300)
    assert runner.returncode == 0, err
    assert "Stopped at checkpoint" in err
    assert pipeline.running_pid() is None
    latest = pipeline.store().latest()
    assert latest is not None and latest.state["t"].rows == 2
