"""kill -9 the runtime at seeded random points during run and bootstrap; after restarts, the
final tables, views and outputs equal those of an uninterrupted run: no loss, no duplicates."""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from spindle.local.home import LocalPipeline
from tests import soak

FILES, ROWS = 8, 25


def sql(root: Path, *, version: int) -> str:
    source = [
        {
            "name": "src",
            "max_files_per_step": 1,
            "format": {"name": "json"},
            "transport": {"name": "file_input", "config": {"path": str(root / "in")}},
        }
    ]
    sink = [
        {
            "name": "out",
            "format": {"name": "json"},
            "transport": {"name": "file_output", "config": {"path": str(root / "out")}},
        }
    ]
    threshold = 0 if version == 1 else 50
    extra = (
        ""
        if version == 1
        else (
            "create materialized view top as "
            "select k, max(amount) as best from events group by k;\n"
        )
    )
    return (
        f"create table events (id bigint, k int, amount int) with ('materialized' = 'true', "
        f"'connectors' = '{json.dumps(source)}');\n"
        f"create materialized view totals with ('connectors' = '{json.dumps(sink)}') as "
        f"select k, sum(amount) as total, count(*) as n from events where amount > {threshold} "
        f"group by k;\n{extra}"
    )


def prepare(root: Path, version: int, storage: dict[str, Any] | None = None) -> Path:
    (root / "in").mkdir(parents=True, exist_ok=True)
    for i in range(FILES):
        rows = [
            {"id": i * ROWS + j, "k": j % 4, "amount": (i * 31 + j * 17) % 100} for j in range(ROWS)
        ]
        (root / "in" / f"{i:03d}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    manifest = root / f"v{version}.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "spindle.dev/v1alpha1",
                "kind": "Pipeline",
                "metadata": {"name": "crash"},
                "spec": {
                    "sql": sql(root, version=version),
                    "bootstrapPolicy": "allow",
                    **({"storage": storage} if storage else {}),
                },
            }
        )
    )
    return manifest


def spindle(home: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        # --no-server: the process killed is the one running the step (the warm server's own
        # kill test is in test_warm_server.py)
        [sys.executable, "-m", "spindle.cli.main", *args, "--home", str(home), "--no-server"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path.cwd()), "PYTHONUNBUFFERED": "1"},
    )


def settle(home: Path, *args: str) -> None:
    """A command that is not under test (an apply, the uninterrupted reference), run in this
    process on the session's Spark: no JVM of its own to start."""
    from spindle.cli.main import main

    assert main([*args, "--home", str(home), "--no-server"]) == 0


def finish(home: Path, *args: str) -> None:
    process = spindle(home, *args)
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, out + err


def progress(process: subprocess.Popen[str]) -> queue.Queue[str | None]:
    """The lines the run prints on stderr as it goes (None once it closes)."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def kill_point(
    lines: queue.Queue[str | None], *, markers: tuple[str, ...], after: int, delay: float
) -> bool:
    """Wait for the `after`-th progress line containing one of `markers`, then `delay` seconds;
    False if the run ended first."""
    seen = 0
    while seen < after:
        line = lines.get(timeout=600)
        if line is None:
            return False
        seen += any(marker in line for marker in markers)
    time.sleep(delay)
    return True


def run_with_kills(
    home: Path,
    rng: random.Random,
    kills: int,
    *,
    markers: tuple[str, ...],
    after: tuple[int, int],
    delay: float,
) -> int:
    """SIGKILL `kills` runs mid-flight, at seeded points measured in the run's own progress (a
    number of lines containing one of `markers`, in the range `after`, then up to `delay`
    seconds), so the points land alike on a fast or a slow machine. A run that ends before its
    point does not count, and the next one is tried (at most three times as many runs as
    kills)."""
    landed = attempts = 0
    while landed < kills and attempts < 3 * kills:
        attempts += 1
        process = spindle(home, "local", "run", "crash", "--until-idle")
        lines = progress(process)
        point = rng.randint(*after), rng.uniform(0.0, delay)
        if (
            kill_point(lines, markers=markers, after=point[0], delay=point[1])
            and process.poll() is None
        ):
            process.send_signal(signal.SIGKILL)
            landed += 1
        process.wait(timeout=600)
    finish(home, "local", "run", "crash", "--until-idle")
    return landed


def outcome(spark: Any, root: Path, home: Path) -> dict[str, Any]:
    from spindle.runtime.storage import spark_uri

    store = LocalPipeline(home, "crash").store()
    latest = store.latest()
    assert latest is not None

    def rows(name: str) -> list[tuple[Any, ...]]:
        record = latest.state[name]
        frame = (
            spark.read.format("delta")
            .option("versionAsOf", record.version)
            .load(spark_uri(f"{store.uri}/{record.path}"))
        )
        return sorted(tuple(r) for r in frame.collect())

    outputs = {
        p.name: sorted(p.read_text().splitlines()) for p in sorted((root / "out").glob("*.jsonl"))
    }
    return {
        "events": rows("events"),
        "totals": rows("totals"),
        "top": rows("top") if "top" in latest.state else None,
        "outputs": outputs,
        "sequence": latest.sequence,
    }


# the crashed pipeline keeps two checkpoints, so vacuum deletes checkpoints and state files
# while kills land (the reference keeps the default ten)
KEPT = 2


@pytest.fixture(params=["file", "s3"])
def crashed_storage(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> dict[str, Any]:
    """Where the crashed pipeline keeps its state: a local directory, or the real S3 server
    (the uninterrupted reference always uses its home's directory)."""
    retention = {"retention": {"checkpoints": KEPT, "minAge": "0"}}
    if request.param == "file":
        return {"uri": (tmp_path / "crashed-state").as_uri(), **retention}
    s3 = request.getfixturevalue("s3")
    for key, value in s3.env().items():
        monkeypatch.setenv(key, value)
    return {
        "uri": f"s3://{s3.bucket('crash')}/pipelines",
        "endpoint": s3.endpoint,
        "region": s3.region,
        **retention,
    }


@pytest.mark.slow
def test_kill_9_during_run_and_bootstrap_loses_and_duplicates_nothing(
    tmp_path: Path, spark: Any, crashed_storage: dict[str, Any]
) -> None:
    reference, crashed = tmp_path / "reference", tmp_path / "crashed"
    storages: tuple[dict[str, Any] | None, ...] = (None, crashed_storage)
    for root, storage in zip((reference, crashed), storages, strict=True):
        prepare(root, 2, storage)
        settle(root / "home", "local", "apply", "-f", str(prepare(root, 1, storage)))
    settle(reference / "home", "local", "run", "crash", "--until-idle")
    settle(reference / "home", "local", "apply", "-f", str(reference / "v2.yaml"))
    settle(reference / "home", "local", "run", "crash", "--until-idle")

    rng = random.Random(1122)
    started = time.monotonic()
    during_run, during_bootstrap = soak.count(ci=3, soak=14), soak.count(ci=2, soak=6)
    landed = run_with_kills(
        crashed / "home", rng, kills=during_run, markers=("step ",), after=(0, 1), delay=3.0
    )
    settle(crashed / "home", "local", "apply", "-f", str(crashed / "v2.yaml"))
    # a bootstrap prints its start, then a line per view: kill after the start or the first view
    landed += run_with_kills(
        crashed / "home",
        rng,
        kills=during_bootstrap,
        markers=("Bootstrapping change", "rows written"),
        after=(1, 2),
        delay=1.5,
    )
    wanted = during_run + during_bootstrap
    assert landed >= wanted, f"only {landed} kills landed in {time.monotonic() - started:.0f}s"
    print(f"{landed} kills landed in {time.monotonic() - started:.0f}s")

    expected = outcome(spark, reference, reference / "home")
    actual = outcome(spark, crashed, crashed / "home")
    assert len(actual["events"]) == FILES * ROWS
    assert len({row[0] for row in actual["events"]}) == FILES * ROWS  # no duplicate ingest
    assert actual["events"] == expected["events"]
    assert actual["totals"] == expected["totals"]
    assert actual["top"] == expected["top"]
    assert actual["outputs"] == expected["outputs"]  # same files, same records: none twice
    # vacuum ran between the kills: only the newest checkpoints are left, and they still read
    assert actual["sequence"] > 2 * KEPT
    assert len(LocalPipeline(crashed / "home", "crash").store().history()) == KEPT
