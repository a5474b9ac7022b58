"""Only what the plan says is recomputed: unaffected views keep their Delta versions and output
files, modified tables are truncated and their connectors reset, unmodified connectors resume
without re-reading or skipping a record, and appended nullable columns keep the rows."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from spindle.local.home import LocalPipeline
from tests.integration.test_grades import Cli


def connectors(*entries: dict[str, Any]) -> str:
    return json.dumps(list(entries))


def program(root: Path, *, b_type: str = "int", extra_a: str = "") -> str:
    def file_in(directory: str) -> dict[str, Any]:
        return {
            "name": "src",
            "transport": {"name": "file_input", "config": {"path": str(root / directory)}},
            "format": {"name": "json"},
        }

    va_out = {
        "name": "out",
        "transport": {"name": "file_output", "config": {"path": str(root / "out_va")}},
        "format": {"name": "json"},
    }
    vb_out = {
        "name": "out",
        "transport": {"name": "delta_table_output", "config": {"uri": str(root / "out_vb")}},
    }
    return f"""
create table a (id bigint, v int{extra_a}) with ('materialized' = 'true',
  'connectors' = '{connectors(file_in("in_a"))}');
create table b (id bigint, w {b_type}) with ('materialized' = 'true',
  'connectors' = '{connectors(file_in("in_b"))}');
create materialized view va with ('connectors' = '{connectors(va_out)}') as
  select id, v from a where v > 0;
create materialized view vb with ('connectors' = '{connectors(vb_out)}') as
  select count(*) as n, sum(w) as total from b;
"""


def write_rows(directory: Path, name: str, rows: list[dict[str, Any]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


def checksums(directory: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.iterdir())
        if p.is_file() and not p.name.startswith((".", "_"))
    }


def output_rows(directory: Path) -> list[dict[str, Any]]:
    rows = []
    for path in sorted(directory.glob("*.jsonl")):
        rows.extend(json.loads(line) for line in path.read_text().splitlines() if line)
    return rows


def apply(tmp_path: Path, sql: str, storage: dict[str, str] | None) -> Path:
    spec: dict[str, Any] = {"sql": sql, "bootstrapPolicy": "allow"}
    if storage:
        spec["storage"] = storage
    path = tmp_path / "pipeline.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "spindle.dev/v1alpha1",
                "kind": "Pipeline",
                "metadata": {"name": "scope"},
                "spec": spec,
            }
        )
    )
    return path


@pytest.fixture(params=["file", "s3"])
def storage(
    request: pytest.FixtureRequest, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str] | None:
    if request.param == "file":
        return None
    s3 = request.getfixturevalue("s3")
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    return {"uri": f"s3://{s3.bucket('scope')}/p", "endpoint": s3.endpoint, "region": s3.region}


def test_bootstrap_touches_only_what_the_plan_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], storage: dict[str, str] | None
) -> None:
    cli = Cli(tmp_path / "home", capsys)
    write_rows(
        tmp_path / "in_a", "1.json", [{"id": 1, "v": 5}, {"id": 2, "v": -1}, {"id": 3, "v": 7}]
    )
    write_rows(tmp_path / "in_b", "1.json", [{"id": 1, "w": 10}, {"id": 2, "w": 20}])
    cli("local", "apply", "-f", str(apply(tmp_path, program(tmp_path), storage)))
    cli("local", "run", "scope", "--until-idle")
    store = LocalPipeline(tmp_path / "home", "scope").store()
    first = store.latest()
    assert first is not None
    assert sorted((r["id"], r["v"], r["weight"]) for r in output_rows(tmp_path / "out_va")) == [
        (1, 5, 1),
        (3, 7, 1),
    ]
    va_files = checksums(tmp_path / "out_va")

    # b.w changes type: b is truncated, its connector reset; vb is recomputed; va is untouched
    status = cli.json(
        "local", "apply", "-f", str(apply(tmp_path, program(tmp_path, b_type="bigint"), storage))
    )
    assert status["pendingChange"]["diff"]["program_diff"]["modified_tables"] == ["b"]
    assert status["pendingChange"]["diff"]["program_diff"]["modified_views"] == ["vb"]
    cli("local", "run", "scope", "--until-idle")
    history = store.history()
    second = next(m for m in history if m.bootstrap is not None)
    assert second.bootstrap is not None and second.bootstrap.views_evaluated == ["vb"]
    assert second.state["va"] == first.state["va"]
    assert second.state["a"] == first.state["a"]
    assert checksums(tmp_path / "out_va") == va_files
    assert second.state["b"].rows == 0  # truncated by the bootstrap ...
    assert history[0].state["b"].rows == 2  # ... then re-ingested from its start, once
    assert history[0].state["va"] == first.state["va"]
    assert cli.json("query", "scope", "SELECT n, total FROM vb") == [{"n": 2, "total": 30}]
    from delta.tables import DeltaTable

    from spindle.runtime.session import spark_session

    vb_output = DeltaTable.forPath(spark_session(), str(tmp_path / "out_vb")).toDF().collect()
    net: dict[tuple[Any, Any], int] = {}
    for row in vb_output:
        net[(row["n"], row["total"])] = net.get((row["n"], row["total"]), 0) + row["weight"]
    # replaced at bootstrap (v1's rows are gone), evaluated on the truncated b (0, NULL), then
    # updated incrementally as b was re-ingested: the net contents equal the view
    assert {k: w for k, w in net.items() if w} == {(2, 30): 1}

    # a's connector was not modified: it resumes from its offset, no record twice or skipped
    write_rows(tmp_path / "in_a", "2.json", [{"id": 4, "v": 9}, {"id": 5, "v": 0}])
    cli("local", "run", "scope", "--until-idle")
    assert cli.json("query", "scope", "SELECT count(*) AS n, count(DISTINCT id) AS ids FROM a") == [
        {"n": 5, "ids": 5}
    ]
    new_files = set(checksums(tmp_path / "out_va")) - set(va_files)
    assert len(new_files) == 1
    changes = [
        json.loads(line)
        for f in new_files
        for line in (tmp_path / "out_va" / f).read_text().splitlines()
    ]
    assert changes == [{"id": 4, "v": 9, "weight": 1}]

    # an appended nullable column keeps a's rows and its connector's offset
    before = store.latest()
    assert before is not None
    cli(
        "local",
        "apply",
        "-f",
        str(apply(tmp_path, program(tmp_path, b_type="bigint", extra_a=", note varchar"), storage)),
    )
    cli("local", "run", "scope", "--until-idle")
    evolved = next(m for m in store.history() if m.bootstrap is not None)
    assert evolved.connectors["a.src"] == before.connectors["a.src"]
    assert cli.json("query", "scope", "SELECT count(*) AS n, count(note) AS notes FROM a") == [
        {"n": 5, "notes": 0}
    ]
