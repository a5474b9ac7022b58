"""Two real runtimes (`spindle.versions.RUNTIME_SETTINGS`) through the local CLI, on Spark.

v1 gives NULL for a division by zero (and wraps an integer overflow); v2 (ANSI SQL) stops the
step or the bootstrap with `SqlRuntimeError`. A
checkpoint records the runtime that wrote it. Pinned to that runtime, the same program plans
no change; under the other one, every view is modified with reason `runtime` (tables are not),
exactly as docs/operations.md says; an unknown pin is `InvalidSpec`. A refused bootstrap
leaves the checkpoint as it was.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spindle.cli.main import main
from spindle.local.home import LocalPipeline
from spindle.runtime import semantics
from spindle.versions import RUNTIME_VERSION
from tests.integration.test_grades import Cli
from tests.integration.test_review import manifest

SQL = """create table t (id int, a int, b int) with ('materialized' = 'true');
create materialized view ratio as select id, a / b as r from t;
create materialized view big as select id, r from ratio where r > 1;
create materialized view scaled as select id, a * 100000 as s from t;
"""
GUARDED = SQL.replace("a / b", "a / nullif(b, 0)")
VIEWS = {"ratio", "big", "scaled"}


def program(root: Path, *, sql: str = SQL, runtime: str | None = None) -> str:
    spec = {} if runtime is None else {"runtimeVersion": runtime}
    return manifest(root, sql, None, **spec)


def refused(cli: Cli, *args: str) -> str:
    """Run a command that must fail; what it said on stderr."""
    cli.capsys.readouterr()
    assert main([*args, "--home", str(cli.home)]) == 1
    return cli.capsys.readouterr().err


def runtime_reasons(status: dict[str, Any]) -> set[str]:
    changes = status["pendingChange"]["changes"]
    return {name for name, change in changes.items() if "runtime" in change["reasons"]}


@pytest.fixture
def session(spark: Any) -> Iterator[Any]:
    """The suite's one session, given back with the default runtime's semantics."""
    yield spark
    semantics.apply(spark, version=RUNTIME_VERSION)


def test_a_pin_plans_nothing_another_runtime_modifies_every_view_and_they_differ(
    tmp_path: Path, session: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    cli = Cli(tmp_path / "home", capsys)
    cli("local", "apply", "-f", program(tmp_path))
    cli("local", "execute", "scope", "insert into t values (1, 10, 2), (2, 1, 0), (3, 9, 3)")
    cli("local", "run", "scope", "--until-idle")
    store = LocalPipeline(tmp_path / "home", "scope").store()
    written = store.latest()
    assert written is not None and written.runtime_version == "v1"  # the default
    query = "SELECT * FROM ratio ORDER BY id"
    assert cli.json("query", "scope", query) == [
        {"id": 1, "r": 5.0},
        {"id": 2, "r": None},  # v1: a division by zero is NULL
        {"id": 3, "r": 3.0},
    ]

    pinned = cli.json("local", "apply", "-f", program(tmp_path, runtime="v1"))
    assert "pendingChange" not in pinned and pinned["phase"] != "AwaitingApproval"

    other = cli.json("local", "apply", "-f", program(tmp_path, runtime="v2"))
    assert other["phase"] == "AwaitingApproval"
    assert runtime_reasons(other) == VIEWS  # every view, no table
    assert set(other["pendingChange"]["diff"]["program_diff"]["modified_views"]) == VIEWS
    assert other["pendingChange"]["diff"]["program_diff"]["modified_tables"] == []
    cli("local", "approve", "scope", other["pendingChange"]["id"])
    err = refused(cli, "local", "run", "scope", "--until-idle")
    assert "SqlRuntimeError" in err and "View 'ratio' (line 2, column" in err
    assert "[DIVIDE_BY_ZERO] Division by zero." in err and "pin spec.runtimeVersion: v1" in err
    assert "spark.sql.ansi.enabled" not in err.split("error SqlRuntimeError")[1]
    assert store.latest() == written  # nothing committed

    guarded = cli.json("local", "apply", "-f", program(tmp_path, sql=GUARDED, runtime="v2"))
    cli("local", "approve", "scope", guarded["pendingChange"]["id"])
    cli("local", "run", "scope", "--until-idle")
    under_v2 = store.latest()
    assert under_v2 is not None and under_v2.runtime_version == "v2"
    assert under_v2.bootstrap is not None and set(under_v2.bootstrap.views_evaluated) == VIEWS
    assert cli.json("query", "scope", query) == [
        {"id": 1, "r": 5.0},
        {"id": 2, "r": None},
        {"id": 3, "r": 3.0},
    ]
    cli("local", "execute", "scope", "insert into t values (4, 100000, 1)")
    err = refused(cli, "local", "run", "scope", "--until-idle")  # a step under v2 stops too
    assert "SqlRuntimeError" in err and "View 'scaled'" in err and "ARITHMETIC_OVERFLOW" in err
    assert store.latest() == under_v2

    unpinned = cli.json("local", "apply", "-f", program(tmp_path, sql=GUARDED))
    assert runtime_reasons(unpinned) == VIEWS  # written by v2, planned under v1
    unknown = json.loads(
        cli(
            "local", "apply", "-f", program(tmp_path, sql=GUARDED, runtime="v0"), "--json", expect=1
        )
    )
    assert unknown["conditions"][0]["reason"] == "InvalidSpec"
    assert "v1, v2" in unknown["conditions"][0]["message"]


HOURLY = """create table e (id int, ts timestamp) with ('materialized' = 'true');
create materialized view hourly as select date_trunc('hour', ts) as hour, count(*) as n
  from e group by date_trunc('hour', ts);
create materialized view busiest as select max(n) as n from hourly;
create materialized view ids as select id from e;
"""


def test_state_of_an_older_translation_waits_for_approval_and_is_recomputed(
    tmp_path: Path, session: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A checkpoint whose state was computed before DATE_TRUNC was written for Spark as
    written (revision 0: `TRUNC(ts, 'HOUR')`, NULL) plans its view, and what reads it, as
    modified for the runtime; approved, the bootstrap recomputes exactly those."""
    from spindle.checkpoint.manifest import new_checkpoint_id
    from spindle.program.spark_calls import TRANSLATION_REVISION

    cli = Cli(tmp_path / "home", capsys)
    cli("local", "apply", "-f", program(tmp_path, sql=HOURLY))
    rows = "(1, timestamp'2024-05-06 13:45:12'), (2, timestamp'2024-05-06 13:05:00')"
    cli("local", "execute", "scope", f"insert into e values {rows}")
    cli("local", "run", "scope", "--until-idle")
    store = LocalPipeline(tmp_path / "home", "scope").store()
    current = store.latest()
    assert current is not None and current.translation_revision == TRANSLATION_REVISION
    assert cli.json("query", "scope", "SELECT n FROM hourly") == [{"n": 2}]
    older = current.model_copy(  # as an older Spindle's step would have left it
        update={
            "id": new_checkpoint_id(current.sequence + 1),
            "parent": current.id,
            "sequence": current.sequence + 1,
            "translation_revision": 0,
        }
    )
    store.commit(older)

    status = cli.json("local", "apply", "-f", program(tmp_path, sql=HOURLY))
    assert status["phase"] == "AwaitingApproval"
    changes = status["pendingChange"]["changes"]
    assert {n: c["reasons"] for n, c in changes.items()} == {
        "hourly": ["runtime"],
        "busiest": ["upstream:hourly"],
    }
    cli("local", "approve", "scope", status["pendingChange"]["id"])
    cli("local", "run", "scope", "--until-idle")
    recomputed = store.latest()
    assert recomputed is not None and recomputed.bootstrap is not None
    assert set(recomputed.bootstrap.views_evaluated) == {"hourly", "busiest"}
    assert recomputed.translation_revision == TRANSLATION_REVISION
    assert cli.json("query", "scope", "SELECT CAST(hour AS STRING) AS h, n FROM hourly") == [
        {"h": "2024-05-06 13:00:00", "n": 2}
    ]
    again = cli.json("local", "apply", "-f", program(tmp_path, sql=HOURLY))
    assert again["phase"] != "AwaitingApproval" and "pendingChange" not in again
